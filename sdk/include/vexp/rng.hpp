// Deterministic randomness for plugins: a pure function of its key, the same on
// every platform and thread. Training-time draws are keyed so that a resumed run
// draws what an uninterrupted one would and GPU g of an emulated world draws what
// rank g of a real one does: clip transforms get an Rng keyed by (run.seed,
// epoch, clip), batch transforms one keyed by (run.seed, step, GPU).
// Header-only, torch-free.
#pragma once

#include <cstdint>

namespace vexp {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  Rng(uint64_t seed, uint64_t index, uint64_t purpose) {
    state_ = seed;
    uint64_t k = splitmix64(state_);
    state_ = k ^ (index * 0xD1B54A32D192ED03ull);
    k = splitmix64(state_);
    state_ = k ^ (purpose * 0x8CB92BA72F3D8DD7ull);
  }
  uint64_t next() { return splitmix64(state_); }
  // Uniform integer in [0, n) (n >= 1).
  int64_t below(int64_t n) { return n <= 1 ? 0 : static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  uint64_t state_;
};

}  // namespace vexp
