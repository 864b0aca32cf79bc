// The kernels' input checks: TORCH_CHECK with the message built here as one
// std::string. Numbers are formatted with std::to_string and snprintf, never
// through a std::ostream in this library: on one CUDA image (torch 2.11.0+cu130
// built with GCC 13.3) a number streamed by c10::str from an extension crashed
// the process, so every bad-input error was a segfault there; a whole string
// passes through c10::str safely. The text is what streaming would print.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <string>
#include <type_traits>

namespace bedl {
namespace message {

inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, char v) { s += v; }
inline void append(std::string& s, bool v) { s += v ? '1' : '0'; }

template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>,
                                       int> = 0>
inline void append(std::string& s, T v) {
  s += std::to_string(v);
}

// As a default std::ostream prints a double: %g, 6 significant digits.
inline void append(std::string& s, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  s += buf;
}
inline void append(std::string& s, float v) { append(s, static_cast<double>(v)); }

inline void append(std::string& s, c10::ScalarType v) { s += c10::toString(v); }
inline void append(std::string& s, const c10::Device& v) { s += v.str(); }

inline void append(std::string& s, c10::Layout v) {
  switch (v) {
    case c10::kStrided: s += "Strided"; return;
    case c10::kSparse: s += "Sparse"; return;
    case c10::kSparseCsr: s += "SparseCsr"; return;
    case c10::kSparseCsc: s += "SparseCsc"; return;
    case c10::kSparseBsr: s += "SparseBsr"; return;
    case c10::kSparseBsc: s += "SparseBsc"; return;
    case c10::kMkldnn: s += "Mkldnn"; return;
    case c10::kJagged: s += "Jagged"; return;
    default: s += "layout " + std::to_string(static_cast<int>(v)); return;
  }
}

// A shape, as [2, 3].
inline void append(std::string& s, c10::IntArrayRef v) {
  s += '[';
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(v[k]);
  }
  s += ']';
}

template <typename... Args>
std::string text(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

}  // namespace message
}  // namespace bedl

// TORCH_CHECK and its ValueError / TypeError forms; the message is built only
// when the check fails.
#define BEDL_CHECK(cond, ...) TORCH_CHECK(cond, ::bedl::message::text(__VA_ARGS__))
#define BEDL_CHECK_VALUE(cond, ...) TORCH_CHECK_VALUE(cond, ::bedl::message::text(__VA_ARGS__))
#define BEDL_CHECK_TYPE(cond, ...) TORCH_CHECK_TYPE(cond, ::bedl::message::text(__VA_ARGS__))
