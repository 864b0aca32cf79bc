// Buffers at their own offsets within a 4 KiB page. A DP loop reads and writes
// several (m+1)(n+1) arrays at the same index; where their addresses agree in
// their low 12 bits (which heap layout decides: measured, arrays placed at one
// page offset made P of 100-node trees 1.3-1.4x slower, and processes fell into
// that mode at random), loads wait on stores to other arrays (4K aliasing).
// Each workspace array gets its own slot, slot * 64 bytes past a page boundary.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

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

  T* allocate(size_t n) {
    const size_t bytes = (n * sizeof(T) + kOffset + kPage - 1) / kPage * kPage;
    void* base = std::aligned_alloc(kPage, bytes);
    if (base == nullptr) throw std::bad_alloc();
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
