// Buffers at their own offsets within a 4 KiB page. A DP loop reads and writes
// several (m+1)(n+1) arrays at the same index; where their addresses agree in
// their low 12 bits (which heap layout decides: measured, arrays placed at one
// page offset made P of 100-node trees 1.3-1.4x slower, and processes fell into
// that mode at random), loads wait on stores to other arrays (4K aliasing).
// Each workspace array gets its own slot, slot * 64 bytes past a page boundary.
// Arrays of 4 MiB and more sit on 2 MiB pages where the kernel allows them
// (madvise): a call's fresh buffers otherwise take a page fault per 4 KiB,
// which cost more than P of a 1000 x 1000 pair itself (measured).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bedl {

template <class T, int Slot>
struct Staggered {
  using value_type = T;
  static constexpr size_t kPage = 4096;
  static constexpr size_t kOffset = static_cast<size_t>(Slot % 64) * 64;

  Staggered() = default;
  template <class U>
  Staggered(const Staggered<U, Slot>&) {}
  template <class U>
  struct rebind {
    using other = Staggered<U, Slot>;
  };

  static constexpr size_t kHugePage = size_t{2} << 20;

  T* allocate(size_t n) {
    const size_t wanted = n * sizeof(T) + kOffset;
    const size_t page = wanted >= 2 * kHugePage ? kHugePage : kPage;
    const size_t bytes = (wanted + page - 1) / page * page;
    void* base = std::aligned_alloc(page, bytes);
    if (base == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (page == kHugePage) madvise(base, bytes, MADV_HUGEPAGE);  // (a hint: no error if refused)
#endif
    return reinterpret_cast<T*>(static_cast<char*>(base) + kOffset);
  }
  void deallocate(T* p, size_t) { std::free(reinterpret_cast<char*>(p) - kOffset); }
  template <class U>
  bool operator==(const Staggered<U, Slot>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const Staggered<U, Slot>&) const {
    return false;
  }
};

// A workspace array in slot Slot.
template <class T, int Slot>
using staggered_vector = std::vector<T, Staggered<T, Slot>>;

}  // namespace bedl
