// Datasets produce labelled clips [T, C, H, W] (float32, normalised).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

enum class Split { Train, Val };
inline const char* split_name(Split s) { return s == Split::Train ? "train" : "val"; }

struct Sample {
  at::Tensor clip;  // [T, C, H, W]
  int64_t label = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size(Split split) const = 0;
  // Deterministic for a given (split, index, seed); safe to call from many threads.
  // `seed` changes per epoch for training-time randomness (augmentation).
  virtual Sample get(Split split, int64_t index, uint64_t seed) const = 0;
  virtual int64_t num_classes() const = 0;
  virtual std::vector<std::string> class_names() const { return {}; }
};

}  // namespace vexp
