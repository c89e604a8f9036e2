// Group, Work and the helpers every Communicator implementation shares.
#include "hpref/communicator.hpp"

#include <algorithm>
#include <cstring>

namespace hpref {

std::string_view reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

const char* accelerator_device_type(std::string_view backend) {
  std::string lower(backend);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return lower.find("nccl") != std::string::npos   ? "cuda"
         : lower.find("hccl") != std::string::npos ? "npu"
                                                   : nullptr;
}

bool is_accelerator_backend_name(std::string_view backend) {
  return accelerator_device_type(backend) != nullptr;
}

Group::Group(int id, std::vector<int> ranks, std::string backend, int world_rank)
    : id_(id), ranks_(std::move(ranks)), backend_(std::move(backend)) {
  index_ = index_of(world_rank);
  memory_ = is_accelerator_backend_name(backend_) ? MemorySpace::accelerator : MemorySpace::host;
}

int Group::index_of(int world_rank) const noexcept {
  auto it = std::find(ranks_.begin(), ranks_.end(), world_rank);
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
}

void Work::wait() {
  if (!state_) throw Error(Errc::comm_usage, "wait() on an empty Work");
  state_->wait();
}

namespace {

template <class T>
void reduce_typed(ReduceOp op, void* dst, const void* src, std::size_t count) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (std::size_t i = 0; i < count; ++i) {
    T a, b;
    std::memcpy(&a, d + i * sizeof(T), sizeof(T));
    std::memcpy(&b, s + i * sizeof(T), sizeof(T));
    T r;
    switch (op) {
      case ReduceOp::sum:
        if constexpr (std::is_integral_v<T>) {
          r = static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                             static_cast<std::make_unsigned_t<T>>(b));
        } else {
          r = a + b;
        }
        break;
      case ReduceOp::min:
        r = b < a ? b : a;
        break;
      default:
        r = b > a ? b : a;
        break;
    }
    std::memcpy(d + i * sizeof(T), &r, sizeof(T));
  }
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* dst, const void* src, std::size_t count) {
  switch (dtype) {
    case DType::int32:
      return reduce_typed<std::int32_t>(op, dst, src, count);
    case DType::int64:
      return reduce_typed<std::int64_t>(op, dst, src, count);
    case DType::float32:
      return reduce_typed<float>(op, dst, src, count);
    case DType::float64:
      return reduce_typed<double>(op, dst, src, count);
    default:
      throw Error(Errc::comm_usage, "all_reduce takes int32, int64, float32 or float64, not " +
                                        std::string(dtype_name(dtype)));
  }
}

std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t h) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace hpref
