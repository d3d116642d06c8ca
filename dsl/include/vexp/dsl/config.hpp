// The built-in sections [run], [data], [dist], [optim] and [schedule] as typed
// values. Validation reads each of their keys once (dsl/src/config.cpp) and
// everything downstream (runtime, tools) reads these fields, never the keys.
// Names, types, defaults and limits are the schemas' (dsl/src/sections.cpp,
// docs/recipes.md); a field's comment names its key. Torch-free.
//
// The plugin tables ([data] dataset/params, [dist] backend/params) stay in
// RecipePlan (dataset, dataset_params, comm, comm_params): plugins read those.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/schema/value.hpp"

namespace vexp::dsl {

struct RunConfig {
  std::string name;              // run.name; "": the recipe file's stem
  int64_t seed = 0;              // run.seed
  int64_t epochs = 0;            // run.epochs
  int64_t eval_every = 0;        // run.eval_every; 0: only after the last epoch
  int64_t log_every = 0;         // run.log_every (steps)
  int64_t threads = 0;           // run.threads; 0: all cores
  int64_t checkpoint_every = 0;  // run.checkpoint_every; 0: only at the end
  int64_t keep_checkpoints = 0;  // run.keep_checkpoints; 0: every one
  std::string progress;          // run.progress: auto | bar | plain | none
  std::string out;               // run.out; "": runs/<name>
  int64_t eval_batch = 0;        // run.eval_batch; 0: dist.batch_per_gpu
  std::string device;            // run.device: cpu | cuda | auto
  std::string precision;         // run.precision: fp32 | bf16 | fp16
  std::string memory_format;     // run.memory_format: auto | channels_last | contiguous
  double divergence_factor = 0;  // run.divergence_factor; 0: no check
  int64_t noise_scale_every = 0;  // run.noise_scale_every; 0: no gradient noise scale
  double noise_scale_ema = 0;      // run.noise_scale_ema: the estimates' moving-average decay
  // Where [run] was written (the recipe file when it was not), and where device
  // and precision were (unknown when they are the defaults): errors about the
  // device or the arithmetic point there.
  Loc section;
  Loc device_loc, precision_loc;
};

struct DataConfig {
  int64_t workers = 0;           // data.workers (loader threads)
  int64_t prefetch = 0;          // data.prefetch (batches ahead)
  int64_t train_size = 0;        // data.train_size; 0: ask the dataset
};

struct DistConfig {
  int64_t world_size = 0;        // dist.world_size: GPUs the recipe was designed for
  int64_t batch_per_gpu = 0;     // dist.batch_per_gpu: clips per rank per micro-batch
  int64_t accum_steps = 0;       // dist.accum_steps
  double bucket_mb = 0;          // dist.bucket_mb
  std::string compression;       // dist.compression: none | fp16 | bf16
  std::string reduction;         // dist.reduction: exact | fast (docs/distributed.md)
  double timeout_s = 0;          // dist.timeout_s
  Loc batch_per_gpu_loc;         // where batch_per_gpu was written (unknown: the default)
};

// One [[optim.groups]] table: the trainable parameters whose dotted name (as in
// the model's state dict) matches one of `match` train at lr x lr_mult with this
// weight decay. Groups are tried in order and the first that matches a parameter
// takes it; parameters no group matches follow the default rule (no_decay_bn_bias,
// fc_lr5). A glob that matches no parameter is an error once the model is built.
struct OptimGroup {
  std::string name;                 // name; "group<N>" (1-based) when not given
  std::vector<std::string> match;   // match: globs ('*', '?', [a-z]) over parameter names
  std::vector<Loc> match_locs;      // where each glob was written
  double lr_mult = 1;               // lr_mult
  double weight_decay = 0;          // weight_decay; optim.weight_decay when not given
  Loc loc;                          // the group's table
};

struct OptimConfig {
  std::string type;              // optim.type: the optimizer plugin (sgd, adamw, lamb, ...)
  double lr = 0;                 // optim.lr
  double base_lr = 0;            // optim.base_lr; 0: use lr as written
  int64_t base_batch = 0;        // optim.base_batch
  std::string lr_scaling;        // optim.lr_scaling: linear | sqrt | none
  double weight_decay = 0;       // optim.weight_decay
  bool no_decay_bn_bias = false; // optim.no_decay_bn_bias
  bool fc_lr5 = false;           // optim.fc_lr5
  double clip_grad_norm = 0;     // optim.clip_grad_norm; 0: off
  // The optimizer plugin's own keys, written beside `type` (sgd: momentum, nesterov,
  // lars, lars_eta; adamw: betas, eps, amsgrad; ...), checked against its schema,
  // defaults filled: what its factory gets.
  Params params;
  std::vector<OptimGroup> groups;  // [[optim.groups]], in order
  Loc section;                     // where [optim] was written (the recipe file when it was not)
};

struct ScheduleConfig {
  std::string type;              // schedule.type: constant | step | cosine
  double warmup_epochs = 0;      // schedule.warmup_epochs
  double warmup_start = 0;       // schedule.warmup_start (fraction of lr)
  std::vector<int64_t> milestones;  // schedule.milestones (epochs)
  double gamma = 0;              // schedule.gamma
  double min_lr = 0;             // schedule.min_lr
};

}  // namespace vexp::dsl
