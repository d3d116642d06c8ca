// The one seed mixing function of the runtime: the sampler's shuffle of an epoch
// (loader.cpp), the loader seed of an epoch and the per-step, per-GPU seed of
// dropout and other randomness (trainer). Changing it changes every run's draws.
#pragma once

#include <cstdint>

namespace vexp {

// A well-spread 64-bit seed from two numbers (a seed and an epoch, step or GPU).
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  return x;
}

}  // namespace vexp
