// Slabs for a large decode's nodes (see hpref/detail/node_arena.hpp).
#include "hpref/detail/node_arena.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace hpref::detail {
namespace {

// A slab starts with its count of references: one per live allocation, and kBias while an
// arena fills it, less one per allocation it made (so taking costs no atomic operation; the
// arena gives back what is left of its kBias when it moves on). The allocations follow, 16-byte
// aligned. Slabs are kSlabBytes-aligned, so an allocation finds its slab by rounding its address
// down.
struct SlabHeader {
  std::atomic<std::uint32_t> live{0};
};
constexpr std::size_t kHeaderBytes = 64;
constexpr std::uint32_t kBias = std::uint32_t{1} << 30;  // > allocations a slab can hold
static_assert(sizeof(SlabHeader) <= kHeaderBytes);
static_assert(kArenaMaxBytes + kArenaSlack <= kSlabBytes - kHeaderBytes);

SlabHeader* header(unsigned char* slab) noexcept { return reinterpret_cast<SlabHeader*>(slab); }

struct Cache {
  std::mutex mutex;
  std::vector<unsigned char*> free;  // at most kCachedSlabs
  std::atomic<std::size_t> live{0};  // slabs allocated and not given back to the system
};

Cache& cache() noexcept {
  static Cache* c = new Cache;  // never destroyed: nodes may be freed during static destruction
  return *c;
}

unsigned char* new_slab() {
  Cache& c = cache();
  unsigned char* slab = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.free.empty()) {
      slab = c.free.back();
      c.free.pop_back();
    }
  }
  if (slab == nullptr) {
    slab = static_cast<unsigned char*>(std::aligned_alloc(kSlabBytes, kSlabBytes));
    if (slab == nullptr) throw std::bad_alloc();
    new (slab) SlabHeader;
    c.live.fetch_add(1, std::memory_order_relaxed);
  }
  header(slab)->live.store(kBias, std::memory_order_relaxed);  // the arena's references
  return slab;
}

// Drops `n` references; the last one gives the slab back.
void unref(unsigned char* slab, std::uint32_t n) noexcept {
  if (header(slab)->live.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.free.size() < kCachedSlabs) {
      // The vector never holds more than kCachedSlabs, so this may allocate only while the
      // cache first grows; a failure then frees the slab instead.
      try {
        c.free.push_back(slab);
        return;
      } catch (...) {
      }
    }
  }
  c.live.fetch_sub(1, std::memory_order_relaxed);
  std::free(slab);
}

thread_local NodeArena* current = nullptr;

}  // namespace

NodeArena::NodeArena() noexcept : previous_(current) { current = this; }

NodeArena::~NodeArena() {
  current = previous_;
  if (slab_ != nullptr) unref(slab_, kBias - taken_);
}

bool NodeArena::active() noexcept { return current != nullptr; }

void* NodeArena::take(std::size_t bytes) {
  NodeArena* a = current;
  bytes = (bytes + 15) & ~std::size_t{15};
  if (a->slab_ == nullptr || a->used_ + bytes > kSlabBytes) {
    unsigned char* slab = new_slab();
    if (a->slab_ != nullptr) unref(a->slab_, kBias - a->taken_);
    a->slab_ = slab;
    a->used_ = kHeaderBytes;
    a->taken_ = 0;
  }
  ++a->taken_;  // one of the arena's references is now this allocation's
  void* p = a->slab_ + a->used_;
  a->used_ += bytes;
  return p;
}

void NodeArena::release(void* p) noexcept {
  auto at = reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t{kSlabBytes} - 1);
  unref(reinterpret_cast<unsigned char*>(at), 1);
}

std::size_t NodeArena::slabs_in_use() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.live.load(std::memory_order_relaxed) - c.free.size();
}

std::size_t NodeArena::cached_slabs() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.free.size();
}

}  // namespace hpref::detail
