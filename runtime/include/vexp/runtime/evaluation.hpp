// `vexp eval`'s engine: a model evaluated on every video of the validation split
// by its dataset's test protocol (Dataset::views: temporal clips x spatial crops;
// the kinetics dataset's sampling, test_clips, test_crops, twice_sample and
// test_full_res), the views' logits averaged per video (before softmax, as the
// official TSM test_models.py does), on any number of ranks: every video is
// evaluated once, by one rank, and the per-video logits are gathered on rank 0.
//
// Exactness: the videos are cut into chunks by their index alone (as many videos as
// fill `batch` views), chunks are dealt to ranks in contiguous runs, and a chunk's
// forward passes depend only on its videos, so each video's logits are the same bits
// on 1 rank or N. A video whose file is missing or broken is never replaced by
// another: it is recorded as failed (its index, file and the error) and left out of
// the figures' denominator, which eval_figures states, with the figures that count
// it as wrong beside them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/precision.hpp"

namespace vexp {

// The test protocol a recipe's dataset parameters choose, for eval.json and the
// eval folder's name.
struct EvalProtocol {
  std::string dataset;
  std::string sampling;          // tsn | dense; "" when the dataset has no `sampling`
  int64_t frames = 0;            // frames per clip (the plan's clip shape)
  int64_t frame_interval = 0;    // dense sampling: frames between sampled frames (0: not dense)
  int64_t clips = 1, crops = 1;  // test_clips, test_crops (1 when the dataset has none)
  bool twice_sample = false;     // tsn: the segment starts as a second set of clips
  bool full_res = false;         // test_full_res: crops of scale_size
  int64_t input_size = 0, scale_size = 0, crop_size = 0;  // 0: the dataset has no such parameter
  int64_t views = 1;             // Dataset::views(Val): clips (x2 twice) x crops

  // "tsn-1x1", "dense-10x3-fullres", "tsn-2x3-twice": sampling, clips x crops and the
  // options on; used in the eval folder's default name.
  std::string name() const;
  nlohmann::json to_json() const;
};

// The protocol of the recipe's (validated) dataset parameters; `views` is the
// dataset's own count (Dataset::views(Split::Val)).
EvalProtocol eval_protocol(const dsl::RecipePlan& plan, int64_t views);

struct EvalOptions {
  int64_t batch = 8;    // views (clips) per forward pass; a chunk holds max(1, batch / views) videos
  int64_t workers = 2;  // decode threads (0: the calling thread); the next chunk decodes during this one's forward
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32;
  // Called after each chunk with this rank's videos done and its share.
  std::function<void(int64_t done, int64_t total)> progress;
};

// A video that could not be evaluated.
struct VideoFailure {
  int64_t index = 0;   // in the split
  int64_t label = -1;  // from the dataset's list (-1: not known)
  std::string item;    // its file or folder (Dataset::inspect), "" when the dataset does not say
  std::string error;   // why (the first failing view's error)
};

struct EvalOutput {
  int64_t videos = 0;   // listed in the split
  int64_t views = 1;
  int64_t classes = 0;
  // Rank 0 (complete): [videos, classes] float32, each video's views' logits averaged;
  // rows of failed videos are NaN. Other ranks: undefined.
  at::Tensor logits;
  at::Tensor labels;                   // [videos] int64 (a failed video: its listed label, or -1)
  std::vector<VideoFailure> failures;  // by index (rank 0)
  int64_t rank_videos = 0;             // this rank's share
  double seconds = 0;                  // wall time of the evaluation (this rank)
};

// Which videos rank `rank` of `ranks` evaluates, [first, end): chunks of
// max(1, batch / views) consecutive videos, dealt in contiguous runs (every video
// once, no padding; a rank may get none).
std::pair<int64_t, int64_t> eval_shard(int64_t videos, int64_t views, int64_t batch, int rank, int ranks);

// Evaluates the model (put in eval mode) on the validation split. A collective: every
// rank of `comm` calls it; the results are gathered on rank 0. Errors that are not a
// video's (the model cannot run, a collective fails) are thrown.
EvalOutput evaluate_videos(ModelGraph& model, const Dataset& data, Comm& comm, const EvalOptions& options);

struct ClassFigures {
  int64_t videos = 0;     // listed with this label
  int64_t evaluated = 0;  // of them, evaluated
  int64_t correct = 0;    // of them, top-1 right
};

// The figures of a complete EvalOutput (rank 0's): over the evaluated videos (the
// denominator), and "_all" over every listed video with each failed one counted wrong.
struct EvalFigures {
  int64_t videos = 0, evaluated = 0, failed = 0, classes = 0;
  int64_t k = 5;  // top-k's k: min(5, classes)
  int64_t correct1 = 0, correctk = 0;
  double top1 = 0, top5 = 0, mean_class = 0;              // over `evaluated` (0 when none)
  double top1_all = 0, top5_all = 0, mean_class_all = 0;  // over `videos`, failures wrong
  int64_t classes_evaluated = 0, classes_listed = 0;      // the classes each mean averages over
  std::vector<ClassFigures> per_class;
  std::vector<std::vector<int64_t>> confusion;  // [true class][top-1 class], evaluated videos
  std::vector<int64_t> predicted;               // each video's top-1 class (-1: failed)
};
EvalFigures eval_figures(const EvalOutput& out);

}  // namespace vexp
