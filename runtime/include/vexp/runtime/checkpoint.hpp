// Checkpoints: a pickled dict that Python's torch.load reads too:
// {"format": "vexp-checkpoint-1", "model": {name: tensor}, "optimizer": {name: tensor}, "meta": json}.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/runtime/torch_save.hpp"

namespace vexp {

struct Checkpoint {
  std::map<std::string, at::Tensor> model;
  std::map<std::string, at::Tensor> optimizer;
  std::string meta_json;
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

// The file name of the checkpoint after `epoch` epochs and `epoch_step` steps of
// the next one: epoch_NNNN.pt, or epoch_NNNN_step_SSSSSS.pt (an interrupted run).
std::string checkpoint_file_name(int64_t epoch, int64_t epoch_step = 0);
// The checkpoint files (named as above) in `dir`, newest (most epochs, then steps)
// first; other files, NAME.corrupt among them, are not checkpoints.
std::vector<std::string> checkpoints_newest_first(const std::string& dir);
// The newest of them ("" when there is none).
std::string latest_checkpoint(const std::string& dir);
// Deletes the checkpoints of `dir` older than its newest `keep` (keep >= 1) and
// returns their paths; `written` (the one just saved, which a resume starts from)
// is never deleted, even where a newer-named one exists. NAME.corrupt files and
// anything else that is not a checkpoint are left alone.
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep, const std::string& written);

}  // namespace vexp
