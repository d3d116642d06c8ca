// Allocator settings applied when vexp starts (before main).
//
// glibc serves every allocation above its mmap threshold (at most 32 MB) with a
// fresh mmap and unmaps it on free, so each new activation tensor of a video
// model (tens of MB) is page-faulted and zeroed by the kernel on first touch,
// every step: on the project's VM a new 51 MB tensor costs 17 ms against 3.7 ms
// for a reused one (docs/benchmarks.md). With mmap disabled for malloc and the
// heap never trimmed, freed blocks are reused by the next step's tensors.
// VEXP_MALLOC_TUNING=0 keeps glibc's defaults (for measuring the difference).
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {
struct AllocTuning {
  AllocTuning() {
#if defined(__GLIBC__)
    const char* v = std::getenv("VEXP_MALLOC_TUNING");
    if (v && std::strcmp(v, "0") == 0) return;
    mallopt(M_MMAP_MAX, 0);                   // large blocks come from the heap...
    mallopt(M_TRIM_THRESHOLD, 1 << 30);  // ...which keeps freed memory (up to 1 GiB at its top)
    mallopt(M_TOP_PAD, 64 << 20);             // and grows in 64 MiB steps
#endif
  }
} tuning;
}  // namespace
