// Internal: where a large decode's container nodes and tensor headers live (issue 15). Not
// for users.
//
// A decode of many small items makes two or three small nodes per item; taken from malloc
// one by one, they cost an allocation and a free each, and when the decoded items are freed
// glibc returns the emptied top of its heap to the kernel, so the next decode faults every
// page back in (~2000 faults, half the time of a 10,000-item decode here). While a NodeArena
// is alive on a thread, the node allocations made on that thread through ArenaAllocator come
// from 64 KiB slabs filled in order. A slab is freed as a whole when the last node in it is
// freed (from any thread), and goes to a process-wide cache of up to kCachedSlabs slabs that
// the next arena fills again: warm pages, no page faults, no free lists.
//
// The price: a node kept alive keeps its slab (up to 64 KiB) alive, as a tensor view keeps
// its whole segment alive already.
//
// fork() is safe from any thread: handlers registered when the library loads hold the cache's
// lock across the fork, so a child never inherits it held by a thread it does not have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace hpref::detail {

inline constexpr std::size_t kSlabBytes = std::size_t{64} << 10;
inline constexpr std::size_t kCachedSlabs = 256;  // 16 MiB kept for the next decodes
// Larger allocations (a node's control block, the node and its tail) go to operator new.
inline constexpr std::size_t kArenaMaxBytes = 4096;

class NodeArena {
 public:
  NodeArena() noexcept;  // this thread's arena until destroyed (arenas nest)
  ~NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // Whether this thread has an arena.
  static bool active() noexcept;
  // `bytes` (<= kArenaMaxBytes + kArenaSlack, 16-byte aligned) from this thread's arena, which
  // must be active; freed by release().
  static void* take(std::size_t bytes);
  static void release(void* p) noexcept;

  // Slabs holding live nodes or filled by an arena now, and slabs in the cache: for tests.
  static std::size_t slabs_in_use() noexcept;
  static std::size_t cached_slabs() noexcept;

  // For tests only (tests/unit/node_arena_test.cpp), to hold the cache's lock on a thread while
  // another forks: takes it if free, as taking or giving back a slab does (false if it is held),
  // and gives it back; and the count of fork()s whose handler has begun to take it.
  static bool try_lock_cache_for_tests() noexcept;
  static void unlock_cache_for_tests() noexcept;
  static std::uint64_t forks_begun_for_tests() noexcept;

 private:
  NodeArena* previous_;
  unsigned char* slab_ = nullptr;  // the slab being filled, or null
  std::size_t used_ = 0;           // its bytes handed out (its header included)
  std::uint32_t taken_ = 0;        // its allocations made by this arena
};

// What a control block may add to the size its caller estimates (the vtable, the counts and
// the allocator itself).
inline constexpr std::size_t kArenaSlack = 64;

// Where the tail of this thread's last ArenaAllocator allocation starts.
inline void*& arena_tail_start() noexcept {
  thread_local void* at = nullptr;
  return at;
}

// A std allocator for std::allocate_shared: one block holding the control block, the object
// and `tail` more bytes after them (where the tail starts: arena_tail_start() right after
// the allocation). The block comes from this thread's arena when one is active and the whole fits
// kArenaMaxBytes, else from operator new. The choice is made when the allocator is made
// (allocate_shared stores a copy of the original, not of the copy that allocates), and its
// one word keeps the control block small.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  std::size_t tail_and_slab;  // tail bytes (a multiple of 8) | 1 if from the arena

  // `object_bytes`: the object's size, to which the control block adds at most kArenaSlack.
  ArenaAllocator(std::size_t tail, std::size_t object_bytes) noexcept
      : tail_and_slab(tail |
                      (NodeArena::active() && object_bytes + tail <= kArenaMaxBytes ? 1 : 0)) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept  // NOLINT: rebinding
      : tail_and_slab(other.tail_and_slab) {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16);
    std::size_t head = (n * sizeof(T) + 15) & ~std::size_t{15};
    std::size_t bytes = head + (tail_and_slab & ~std::size_t{1});
    auto* p = static_cast<unsigned char*>((tail_and_slab & 1) ? NodeArena::take(bytes)
                                                              : ::operator new(bytes));
    arena_tail_start() = p + head;
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept {
    if (tail_and_slab & 1) {
      NodeArena::release(p);
    } else {
      ::operator delete(p);
    }
  }
  template <class U>
  bool operator==(const ArenaAllocator<U>& other) const noexcept {
    return tail_and_slab == other.tail_and_slab;
  }
};

}  // namespace hpref::detail
