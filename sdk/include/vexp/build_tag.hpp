// The build tag: what must agree between the host and a plugin for C++ objects
// (tensors, modules) to cross the library boundary safely.
#pragma once

#include <string>

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#define VEXP_STR_(x) #x
#define VEXP_STR(x) VEXP_STR_(x)

#if defined(TORCH_VERSION_MAJOR)
#define VEXP_TAG_TORCH VEXP_STR(TORCH_VERSION_MAJOR) "." VEXP_STR(TORCH_VERSION_MINOR)
#else
#define VEXP_TAG_TORCH "none"
#endif

#if defined(__clang__)
#define VEXP_TAG_COMPILER "clang"
#elif defined(__GNUC__)
#define VEXP_TAG_COMPILER "gcc"
#else
#define VEXP_TAG_COMPILER "other"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define VEXP_TAG_CXXABI VEXP_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define VEXP_TAG_CXXABI "na"
#endif

// vexp::sdk defines VEXP_WITH_CUDA (0 or 1) for everything that links it, so
// that the tag says what the build is; a missing definition would silently
// read "off".
#if !defined(VEXP_WITH_CUDA)
#error "VEXP_WITH_CUDA is not defined: link the target against vexp::sdk (it defines it as 0 or 1)"
#elif VEXP_WITH_CUDA
#define VEXP_TAG_CUDA "on"
#else
#define VEXP_TAG_CUDA "off"
#endif

// Compiler is informative (libstdc++ is what matters, and gcc/clang share it);
// torch, cxx11abi and cuda must match.
#define VEXP_BUILD_TAG                                                              \
  "torch=" VEXP_TAG_TORCH ";cxx11abi=" VEXP_TAG_CXXABI ";compiler=" VEXP_TAG_COMPILER \
  ";cuda=" VEXP_TAG_CUDA

namespace vexp {
// The host's own tag (compiled into libvexp_sdk).
const char* host_build_tag();
// Empty when compatible, else a sentence naming both sides of the first mismatch.
std::string compare_build_tags(const std::string& host, const std::string& plugin);
}  // namespace vexp
