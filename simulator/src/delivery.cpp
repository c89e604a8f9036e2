// Buffers, refcounts and what a wait delivers (see delivery.hpp).
#include "delivery.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace hpref::sim::detail {

void respond_error(Slot& s, const CommError& e) {
  std::string shown = e.what();
  if (shown.size() >= kMessageBytes) {
    shown = shown.substr(0, kMessageBytes - 40) + " ... (message shortened)";
  }
  s.status = static_cast<std::int32_t>(e.code());
  std::memcpy(s.message, shown.c_str(), shown.size() + 1);
  s.err_group = e.group();
  s.err_seq = e.seq();
  s.err_nranks = static_cast<std::int32_t>(std::min<std::size_t>(e.ranks().size(), kMaxRanks));
  std::copy(e.ranks().begin(), e.ranks().begin() + s.err_nranks, s.err_ranks);
  s.npieces = 0;
}

Delivery::Delivery(boost::interprocess::managed_shared_memory& segment, std::size_t segment_bytes,
                   Matcher& matcher, const Groups& groups, Control* control, int ranks)
    : segment_(segment),
      base_(static_cast<char*>(segment.get_address())),
      segment_bytes_(segment_bytes),
      matcher_(matcher),
      groups_(groups),
      control_(control),
      stage_(static_cast<std::size_t>(ranks), 0),
      spare_(static_cast<std::size_t>(ranks), 0),
      spare_bytes_(static_cast<std::size_t>(ranks), 0),
      pool_(static_cast<std::size_t>(ranks)),
      gone_(static_cast<std::size_t>(ranks), false),
      held_(static_cast<std::size_t>(ranks)) {}

// nullptr when there is no room. A size past the segment's is refused before Boost sees
// it: its rounding up wrapped sizes near 2^64 to a small block, which the rank was then
// told to fill with 2^64 bytes (the segment's allocator overwritten; the parent crashed).
void* Delivery::raw_allocate(std::uint64_t bytes) {
  if (bytes > segment_bytes_) return nullptr;
  return segment_.allocate_aligned(bytes, kAlign, std::nothrow);
}

std::uint64_t Delivery::allocate(std::uint64_t bytes) {
  if (bytes == 0) return 0;
  void* p = raw_allocate(bytes);
  if (p == nullptr && bytes <= segment_bytes_) {
    // The spares and pools are only a speed-up: room for data comes first.
    for (std::size_t r = 0; r < spare_.size(); ++r) set_spare(static_cast<int>(r), 0, 0);
    drop_pools();
    p = raw_allocate(bytes);
  }
  if (p == nullptr) {
    throw CommError(Errc::comm_resource, "the simulator segment has no room for " +
                                             std::to_string(bytes) +
                                             " more bytes; raise Options::segment_bytes (now " +
                                             std::to_string(segment_bytes_) + ")");
  }
  return static_cast<std::uint64_t>(static_cast<char*>(p) - base_);
}

void Delivery::deallocate(std::uint64_t& handle) {
  if (handle != 0) {
    segment_.deallocate(base_ + handle);
    areas_.erase(handle);
  }
  handle = 0;
}

// Fits: large enough, and not so large that a bigger launch would have to allocate anew.
Delivery::Area Delivery::from_pool(int owner, int r, std::uint64_t bytes, bool written) {
  std::vector<Area>& pool = pool_[static_cast<std::size_t>(owner)];
  const std::uint64_t bit = std::uint64_t{1} << r;
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->bytes >= bytes && it->bytes <= 2 * bytes + 65536 &&
        (!written || (areas_.at(it->handle).writers & bit) != 0) &&
        (best == pool.end() || it->bytes < best->bytes)) {
      best = it;
    }
  }
  if (best == pool.end()) return {0, 0};
  Area a = *best;
  pool.erase(best);
  return a;
}

// A new area costs ~3.5 us a page in r once; one from a peer's pool ~1.5 us a page in r, and
// leaves that peer short, so that it takes one from another peer next (see delivery.hpp).
Delivery::Area Delivery::acquire(int r, std::uint64_t bytes, bool must) {
  auto n = static_cast<int>(pool_.size());
  Area a = from_pool(r, r, bytes, false);
  for (int k = 1; a.handle == 0 && k < n; ++k) a = from_pool((r + k) % n, r, bytes, true);
  if (a.handle == 0) {
    void* p = raw_allocate(bytes);
    if (p != nullptr) {
      a = {static_cast<std::uint64_t>(static_cast<char*>(p) - base_), bytes};
      areas_[a.handle] = {bytes, 0};
    }
  }
  for (int k = 1; a.handle == 0 && k < n; ++k) a = from_pool((r + k) % n, r, bytes, false);
  if (a.handle == 0) {
    if (!must) return a;
    a = {allocate(bytes), bytes};
    areas_[a.handle] = {bytes, 0};
  }
  areas_.at(a.handle).writers |= std::uint64_t{1} << r;
  return a;
}

void Delivery::to_pool(int r, std::uint64_t& handle) {
  auto i = static_cast<std::size_t>(r);
  auto known = areas_.find(handle);
  if (handle == 0 || gone_[i] || known == areas_.end()) {
    deallocate(handle);
    return;
  }
  std::vector<Area>& pool = pool_[i];
  pool.push_back({handle, known->second.bytes});
  handle = 0;
  if (pool.size() > kPoolAreas) {
    auto smallest = std::min_element(
        pool.begin(), pool.end(), [](const Area& a, const Area& b) { return a.bytes < b.bytes; });
    std::uint64_t h = smallest->handle;
    pool.erase(smallest);
    deallocate(h);
  }
}

void Delivery::drop_pools() {
  for (std::vector<Area>& pool : pool_) {
    for (Area& a : pool) deallocate(a.handle);
    pool.clear();
  }
}

std::uint64_t Delivery::stage(int r, std::uint64_t bytes) {
  if (bytes == 0) return stage_[static_cast<std::size_t>(r)] = 0;
  return stage_[static_cast<std::size_t>(r)] = acquire(r, bytes, true).handle;
}

std::uint64_t Delivery::take_stage(int r) {
  return std::exchange(stage_[static_cast<std::size_t>(r)], 0);
}

void Delivery::drop_stage(int r) {
  auto i = static_cast<std::size_t>(r);
  gone_[i] = true;
  deallocate(stage_[i]);
  set_spare(r, 0, 0);
  for (Area& a : pool_[i]) deallocate(a.handle);
  pool_[i].clear();
}

// Frees r's spare (unless it is `handle`, now in use elsewhere) and records the new one.
void Delivery::set_spare(int r, std::uint64_t handle, std::uint64_t bytes) {
  auto i = static_cast<std::size_t>(r);
  if (spare_[i] != handle) deallocate(spare_[i]);
  spare_[i] = handle;
  spare_bytes_[i] = bytes;
  control_->slots[r].spare = handle;
  control_->slots[r].spare_bytes = bytes;
}

bool Delivery::use_spare(int r, std::uint64_t bytes) {
  auto i = static_cast<std::size_t>(r);
  if (spare_[i] == 0 || bytes > spare_bytes_[i]) return false;
  deallocate(stage_[i]);
  stage_[i] = spare_[i];
  spare_[i] = 0;  // now the staging area: not freed below
  set_spare(r, 0, 0);
  return true;
}

// The spare comes from r's pool when an area there fits (pages r has written before), else
// from the segment; the one it replaces goes to the pool.
void Delivery::refill_spare(int r, std::uint64_t bytes) {
  auto i = static_cast<std::size_t>(r);
  if (spare_[i] != 0 && spare_bytes_[i] >= bytes && spare_bytes_[i] <= 2 * bytes + 65536) return;
  std::uint64_t old = std::exchange(spare_[i], 0);
  set_spare(r, 0, 0);
  Area a = acquire(r, bytes, false);
  to_pool(r, old);
  if (a.handle != 0) set_spare(r, a.handle, a.bytes);
}

std::string Delivery::take_text(int r, std::uint64_t bytes) {
  std::uint64_t handle = take_stage(r);
  std::string text = handle ? std::string(base_ + handle, bytes) : std::string();
  deallocate(handle);
  return text;
}

void Delivery::reduce(Op& op) {
  const OpSignature& sig = op.sig();
  if (sig.kind != OpKind::all_reduce || sig.bytes == 0) return;
  op.result = allocate(sig.bytes);
  std::memcpy(base_ + op.result, base_ + op.members[0].handle, sig.bytes);
  for (std::size_t i = 1; i < op.members.size(); ++i) {
    reduce_into(sig.dtype, sig.op, base_ + op.result, base_ + op.members[i].handle,
                sig.bytes / element_size(sig.dtype));
  }
}

std::uint64_t Delivery::pieces(Slot& s, const Op& op, const WorkRef& w) const {
  const OpSignature& sig = op.sig();
  s.npieces = 0;
  auto add = [&](std::uint64_t handle, std::uint64_t offset, std::uint64_t bytes,
                 std::uint64_t dst) {
    s.pieces[s.npieces++] = {handle, offset, bytes, dst};
  };
  auto m = static_cast<std::size_t>(w.member);
  switch (sig.kind) {
    case OpKind::all_gather:
      for (std::size_t i = 0; i < op.members.size(); ++i) {
        add(op.members[i].handle, 0, sig.bytes, i * sig.bytes);
      }
      return sig.bytes * op.members.size();
    case OpKind::broadcast: {
      if (sig.root == w.rank) return 0;
      int root = groups_[w.key.group].group.index_of(sig.root);
      add(op.members[static_cast<std::size_t>(root)].handle, 0, sig.bytes, 0);
      return sig.bytes;
    }
    case OpKind::all_reduce:
      add(op.result, 0, sig.bytes, 0);
      return sig.bytes;
    case OpKind::all_to_all_v: {
      // What a rank sends itself is not staged: it copies it from its own send buffer,
      // once its wait has found that buffer unchanged (handle 0).
      std::uint64_t dst = 0;
      for (std::size_t i = 0; i < op.members.size(); ++i) {
        const std::vector<std::uint64_t>& counts = op.sigs[i].counts_in;
        std::uint64_t offset = 0;
        for (std::size_t j = 0; j < m; ++j) offset += counts[j];
        add(i == m ? 0 : op.members[i].handle, offset, counts[m], dst);
        dst += counts[m];
      }
      return dst;
    }
    case OpKind::barrier:
      return 0;
  }
  return 0;
}

void Delivery::release(int r) {
  std::vector<WorkRef>& held = held_[static_cast<std::size_t>(r)];
  for (const WorkRef& w : held) consume(w.key, w.member);
  held.clear();
}

void Delivery::consume_all(int r) {
  std::vector<OpKey> keys;
  for (auto& [key, op] : matcher_.ops()) keys.push_back(key);
  for (const OpKey& key : keys) {
    int m = groups_[key.group].group.index_of(r);
    if (m >= 0) consume(key, m);
  }
}

void Delivery::consume(const OpKey& key, int member) {
  auto it = matcher_.ops().find(key);
  if (it == matcher_.ops().end()) return;
  Op& op = it->second;
  Member& me = op.members[static_cast<std::size_t>(member)];
  if (me.consumed) return;
  me.consumed = true;
  if (--op.unconsumed > 0) return;
  const std::vector<int>& ranks = groups_[key.group].group.ranks();
  for (std::size_t m = 0; m < op.members.size(); ++m) to_pool(ranks[m], op.members[m].handle);
  deallocate(op.result);
  matcher_.ops().erase(it);
}

}  // namespace hpref::sim::detail
