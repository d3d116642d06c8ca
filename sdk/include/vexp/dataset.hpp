// Datasets produce labelled clips [T, C, H, W] (float32, normalised).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/transform.hpp"

namespace vexp {

enum class Split { Train, Val };
inline const char* split_name(Split s) { return s == Split::Train ? "train" : "val"; }

struct Sample {
  at::Tensor clip;  // [T, C, H, W]
  int64_t label = 0;
};

// What `vexp data check` learns about one item of a split.
struct ItemReport {
  std::string path;          // the file or folder (empty for procedural data)
  int64_t label = 0;
  int64_t listed_frames = -1;  // frame count the list file gives (-1: none)
  int64_t frames = -1;         // frames found in the file (-1: unknown)
  std::string error;         // empty: the item decodes
};

// What `vexp predict` asks of a dataset for one media file (Dataset::file_views).
struct FileViewRequest {
  std::string path;             // the file (a video, or what else the dataset reads), absolute
  std::vector<int64_t> clip;    // [T, C, H, W] to make: the recipe's clip, or `vexp predict --clip`
  int64_t short_side = 0;       // > 0: resize the shorter side to this before cropping (--short-side);
                                // 0: the dataset's own resize
};

// The views of one file: [views, T, C, H, W] float32, and one line saying how they
// were made (sampling, resize, crop, normalisation), which `vexp predict` prints.
struct FileViews {
  at::Tensor clips;  // undefined: the dataset reads no files
  std::string how;
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

  // ---- optional (added with the kinetics pipeline) ----
  // Defaults let older plugin *source* compile unchanged; a built plugin must be
  // rebuilt whenever a virtual is added, since that changes the vtable (the host
  // refuses a library built for another VEXP_PLUGIN_ABI_VERSION).

  // Test-time views of every sample of `split` (temporal clips x spatial crops).
  // Evaluation runs the model on each view and averages its scores (logits).
  virtual int64_t views(Split /*split*/) const { return 1; }
  // View `view` in [0, views(split)) of a sample; view 0 of a one-view split is get().
  virtual Sample get_view(Split split, int64_t index, int64_t /*view*/, uint64_t seed) const {
    return get(split, index, seed);
  }
  // Skip events since construction: how many times a sample was replaced by another
  // one because its file was bad (a bad file drawn every epoch counts every time).
  // Thread-safe.
  virtual int64_t skipped_samples() const { return 0; }
  // Checks one item without replacing it when bad (`vexp data check`).
  virtual ItemReport inspect(Split split, int64_t index) const {
    ItemReport r;
    try {
      r.label = get(split, index, 0).label;
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    return r;
  }

  // ---- optional (since plugin ABI 2) ----

  // Stable identifiers (file paths; for items without a file, e.g. "train:123") of
  // the distinct bad items met since construction, in any order. The trainer keeps
  // them in checkpoints and reports how many distinct ones a run met, across
  // resumes, as `skipped_samples` in summary.json. Thread-safe.
  virtual std::vector<std::string> bad_items() const { return {}; }

  // ---- optional (since plugin ABI 5): clip transform pipelines (vexp/transform.hpp) ----

  // Runs `pipeline` for `split` from now on in place of the dataset's own (the
  // recipe's [[data.train_transforms]] / [[data.test_transforms]], made by the
  // host before any sample is read; never called while loaders run). The list
  // replaces the whole pipeline of the split, its normalisation included; for
  // Split::Val its views are the test crops (views() is then clips x
  // pipeline_views). Returns false when the dataset takes no pipeline (the host
  // refuses the recipe at the list); throws std::invalid_argument when its own
  // parameters contradict the list (the host reports it at the list).
  virtual bool set_transforms(Split /*split*/, ClipPipeline /*pipeline*/) { return false; }
  // The dataset's own pipeline of `split` (with no list in the recipe) as transform
  // plugin uses that compute it bit for bit (the same draws from the same Rng in
  // the same order): what `vexp bench data --pipelines` times against the built-in
  // one, and what the tests compare. Empty: not expressible (or no pipeline).
  virtual std::vector<TransformSpec> default_transforms(Split /*split*/) const { return {}; }

  // ---- optional (since plugin ABI 6): one file outside the lists (`vexp predict`) ----

  // The test views of the media file `request.path`, made as the dataset makes the
  // views of a Split::Val item: its sampling, resize, crops and normalisation, or
  // the recipe's test pipeline when set_transforms gave one. `vexp predict` averages
  // the model's scores over them. The default reads no files (clips undefined).
  // Throws std::runtime_error naming the file when it cannot read it, and
  // std::invalid_argument when the request's clip is not one the dataset makes.
  virtual FileViews file_views(const FileViewRequest& /*request*/) const { return {}; }
};

}  // namespace vexp
