// Checkpoints: a pickled dict that Python's torch.load reads too:
// {"format": "vexp-checkpoint-1", "model": {name: tensor}, "optimizer": {name: tensor}, "meta": json},
// and "hooks": {"I.TYPE/NAME": tensor} when the recipe's [[hooks]] keep a state
// (hook I of the recipe, of plugin TYPE; absent otherwise, and in older files).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/rundir/files.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp {

struct Checkpoint {
  std::map<std::string, at::Tensor> model;
  std::map<std::string, at::Tensor> optimizer;
  std::string meta_json;
  std::map<std::string, at::Tensor> hooks;  // the hooks' state() (saved only when not empty)
};

// Writes to a temporary name in the same folder, then renames: a crash leaves
// either the old file or the new one, never a torn one.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);
// Throws std::runtime_error, one line naming the file and the reason, when it is
// missing, not a checkpoint (a state dict is said to be one), or does not read
// (load_torch_file's reason: the byte, opcode, record or limit at fault).
Checkpoint load_checkpoint(const std::string& path);
// load_torch_file with load_checkpoint's errors: the file read once, to be given to
// checkpoint_from, or to look at what it is when it is not a checkpoint.
PyRef load_checkpoint_file(const std::string& path);
// Whether `root` (load_torch_file's) is a vexp checkpoint, and the checkpoint in it
// (throws as load_checkpoint does when it is not one).
bool is_checkpoint(const PyRef& root);
Checkpoint checkpoint_from(const PyRef& root, const std::string& path);

// Checkpoint file names (epoch_NNNN.pt, epoch_NNNN_step_SSSSSS.pt), their order,
// the newest one and pruning belong to the run directory: vexp/rundir/files.hpp.
using rundir::checkpoint_file_name;
using rundir::checkpoints_newest_first;
using rundir::latest_checkpoint;
using rundir::prune_checkpoints;

}  // namespace vexp
