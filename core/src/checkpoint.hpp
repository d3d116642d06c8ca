// Checkpoints: a pickled dict that Python's torch.load reads too:
// {"format": "vexp-checkpoint-1", "model": {name: tensor}, "optimizer": {name: tensor}, "meta": json}.
#pragma once

#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace vexp {

struct Checkpoint {
  std::map<std::string, at::Tensor> model;
  std::map<std::string, at::Tensor> optimizer;
  std::string meta_json;
};

// Writes to a temporary name in the same folder, then renames: a crash leaves
// either the old file or the new one, never a torn one.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
// Throws std::runtime_error naming the file when it is missing or not a checkpoint.
Checkpoint load_checkpoint(const std::string& path);

// Writes `content` to `path` atomically (temporary file + fsync + rename).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace vexp
