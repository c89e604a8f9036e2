// Slabs for a large decode's nodes (see hpref/detail/node_arena.hpp).
#include "hpref/detail/node_arena.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <type_traits>

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

// The free slabs, last given back on top. Constant-initialized and trivially destructible: no
// constructor to order against other files' initializers (a decode made from one finds it ready),
// and never destroyed (nodes may be freed during static destruction). Nothing allocates while
// holding `mutex`.
struct Cache {
  std::mutex mutex;
  unsigned char* free[kCachedSlabs] = {};
  std::size_t free_count = 0;
  std::atomic<std::size_t> live{0};           // slabs allocated and not given back to the system
  std::atomic<std::uint64_t> forks_begun{0};  // fork()s whose prepare handler ran (for tests)
};
static_assert(std::is_trivially_destructible_v<Cache>);
constinit Cache the_cache;

// fork() safety. A fork copies only the thread that calls it: were `mutex` held by another thread
// at that moment (taking or giving back a slab), the child would inherit it locked and its first
// slab would wait forever. So fork()'s prepare handler takes `mutex` (waiting for such a thread to
// finish its few instructions), and the parent and child handlers give it back: the child's cache
// is the parent's, whole, and its slabs are the child's copy-on-write pages, fine to fill again.
// Counts are atomic words or written under `mutex`, so none is torn. A slab that another thread's
// arena was filling keeps that arena's references in the child, where the arena's thread does not
// exist: it is never given back there (one slab per such thread, not reused, so never freed
// under a node that points into it).
void lock_for_fork() noexcept {
  the_cache.forks_begun.fetch_add(1, std::memory_order_relaxed);
  the_cache.mutex.lock();
}
void unlock_after_fork() noexcept { the_cache.mutex.unlock(); }

// Whether slabs are cached: once the handlers are registered, or never if they cannot be (no
// memory for them), since then a fork could copy `mutex` locked; uncached slabs never take it.
constinit std::atomic<bool> caching{false};

// Registers the handlers once, while the library loads: it reads only `the_cache`, ready before
// any initializer runs, so its order among other files' initializers does not matter (a decode
// made before it just does not cache its slabs).
struct ForkHandlers {
  ForkHandlers() noexcept {
    if (pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork) == 0) {
      caching.store(true, std::memory_order_release);
    }
  }
};
const ForkHandlers fork_handlers;

unsigned char* new_slab() {
  Cache& c = the_cache;
  unsigned char* slab = nullptr;
  if (caching.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.free_count != 0) slab = c.free[--c.free_count];
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
  Cache& c = the_cache;
  if (caching.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.free_count < kCachedSlabs) {
      c.free[c.free_count++] = slab;
      return;
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
  std::lock_guard<std::mutex> lock(the_cache.mutex);
  return the_cache.live.load(std::memory_order_relaxed) - the_cache.free_count;
}

std::size_t NodeArena::cached_slabs() noexcept {
  std::lock_guard<std::mutex> lock(the_cache.mutex);
  return the_cache.free_count;
}

bool NodeArena::try_lock_cache_for_tests() noexcept { return the_cache.mutex.try_lock(); }

void NodeArena::unlock_cache_for_tests() noexcept { the_cache.mutex.unlock(); }

std::uint64_t NodeArena::forks_begun_for_tests() noexcept {
  return the_cache.forks_begun.load(std::memory_order_relaxed);
}

}  // namespace hpref::detail
