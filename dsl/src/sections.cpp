// The built-in recipe sections. Each key of [run], [data], [dist], [optim] and
// [schedule] becomes one field of the typed configuration (config.hpp, read in
// config.cpp; validation fails loudly on a key without a field): change a name,
// type or default here only together with those and docs/recipes.md.
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl {

namespace {

ParamSpec& table_param(Schema& s, const std::string& name, const std::string& doc) {
  ParamSpec spec;
  spec.name = name;
  spec.type = ParamType::Table;
  spec.default_value = Value::table();
  spec.doc = doc;
  return s.add(std::move(spec));
}

Schema run_section() {
  Schema s;
  s.text("name", "", "Run name; defaults to the recipe file's stem");
  s.integer("seed", 0, "Random seed").at_least(0);
  s.integer("epochs", 1, "Training epochs").at_least(1);
  s.integer("eval_every", 1, "Evaluate every N epochs; 0: only after the last").at_least(0);
  s.integer("log_every", 20, "Log a metrics line every N steps").at_least(1);
  // At most 1024: libtorch's OpenMP pool starts them all at once, and 100,000 hang
  // its creation (deaf to Ctrl-C) instead of failing (docs/recipes.md).
  s.integer("threads", 0, "Intra-op CPU threads; 0: all cores").at_least(0).at_most(1024);
  s.integer("checkpoint_every", 1, "Write a checkpoint every N epochs; 0: only at the end").at_least(0);
  s.integer("keep_checkpoints", 0, "Keep the newest N checkpoints, deleting older ones as new ones are written; "
                                   "0: keep every one").at_least(0);
  s.text("progress", "auto", "Progress display").one_of({"auto", "bar", "plain", "none"});
  s.text("out", "", "Run directory; defaults to runs/<name>");
  s.integer("eval_batch", 0, "Clips per evaluation batch; 0: batch_per_gpu").at_least(0);
  s.text("device", "cpu", "Where the model trains: cpu, cuda (each rank on its local GPU), or auto (cuda when "
                          "available)").one_of({"cpu", "cuda", "auto"});
  s.text("precision", "fp32", "Training arithmetic: fp32, or bf16 / fp16 autocast (fp16 with dynamic loss "
                              "scaling; CUDA only)").one_of({"fp32", "bf16", "fp16"});
  s.text("memory_format", "auto", "Layout of convolution weights and so of activations: channels_last (NHWC), "
                                  "contiguous (NCHW), or auto (channels_last: faster with oneDNN on CPUs and "
                                  "with tensor cores on GPUs)").one_of({"auto", "channels_last", "contiguous"});
  s.real("divergence_factor", 1000, "Divergence: a logged training-loss mean above this many times max(the first "
                                    "step's loss, ln(classes)) stops the run as diverged; 0: no such check").at_least(0);
  // The gradient noise scale (docs/batch-size.md): measured every N steps from the
  // GPUs' gradients; needs dist.world_size >= 2 (checked in validate_sections.cpp).
  s.integer("noise_scale_every", 0, "Measure the gradient noise scale B_noise every N steps (docs/batch-size.md); "
                                    "0: off; needs dist.world_size >= 2").at_least(0);
  s.real("noise_scale_ema", 0.95, "Smoothing of the noise scale's estimates: exponential moving average with this "
                                  "decay per measurement (0: none)").at_least(0).below(1);
  return s;
}

Schema data_section() {
  Schema s;
  s.text("dataset", "", "Dataset plugin").require();
  // At most 256 (docs/recipes.md): each is a decoding thread with its own buffers.
  s.integer("workers", 2, "Loader threads").at_least(0).at_most(256);
  s.integer("prefetch", 4, "Batches prepared ahead of the trainer").at_least(1);
  s.integer("train_size", 0, "Training clips, declared for planning (--dry-run); 0: ask the dataset").at_least(0);
  table_param(s, "params", "The dataset plugin's parameters");
  return s;
}

Schema dist_section() {
  Schema s;
  s.text("backend", "local", "Communication backend plugin");
  s.integer("world_size", 1, "Ranks the recipe was designed for").at_least(1);
  s.integer("batch_per_gpu", 8, "Clips per rank per step (micro-batch)").at_least(1);
  s.integer("accum_steps", 1, "Micro-batches accumulated per optimizer step").at_least(1);
  s.real("bucket_mb", 25, "Gradient bucket size of the reducer, in MiB").above(0);
  s.text("compression", "none", "Wire format of gradient allreduce").one_of({"none", "fp16", "bf16"});
  s.text("reduction", "fast",
         "How the GPUs' gradients are summed: exact (in an order of the GPUs, bit-identical on any rank count) "
         "or fast (the backend's allreduce, overlapping backward; rounding depends on the ranks)")
      .one_of({"exact", "fast"});
  s.real("timeout_s", 600, "A collective waiting longer than this aborts the run, naming the silent rank").above(0);
  table_param(s, "params", "The communication backend's parameters");
  return s;
}

// The host's keys of [optim]. The optimizer plugin's own keys sit beside them
// (checked against its schema by validate_optim.cpp), and [[optim.groups]] tables
// choose parameter groups by name.
Schema optim_section() {
  Schema s;
  s.text("type", "sgd", "Optimizer plugin (vexp plugins lists them); its parameters sit beside type");
  s.real("lr", 0.01, "Learning rate, used as given when base_lr is 0").range(1e-9, 100);
  s.real("base_lr", 0, "Learning rate at base_batch clips, scaled to the global batch; 0: use lr").range(0, 100);
  s.integer("base_batch", 256, "Global batch (clips) at which base_lr is given").at_least(1);
  s.text("lr_scaling", "linear", "How base_lr scales with global batch / base_batch").one_of({"linear", "sqrt", "none"});
  s.real("weight_decay", 1e-4, "Weight decay (the optimizer applies it: L2 for sgd, decoupled for adamw)").at_least(0);
  s.boolean("no_decay_bn_bias", true, "No weight decay on biases and BatchNorm (parameters of one dimension)");
  s.boolean("fc_lr5", false, "TSN policy: classifier weights lr x5, biases lr x10");
  s.real("clip_grad_norm", 0, "Clip the global gradient norm; 0: off").at_least(0);
  return s;
}

Schema schedule_section() {
  Schema s;
  s.text("type", "cosine", "Learning-rate schedule").one_of({"constant", "step", "cosine"});
  s.real("warmup_epochs", 0, "Linear warmup length in epochs").at_least(0);
  s.real("warmup_start", 0, "Warmup starts at this fraction of lr").range(0, 1);
  s.int_list("milestones", {}, "Epochs at which step decay multiplies lr by gamma");
  s.real("gamma", 0.1, "Step decay factor").above(0).at_most(1);
  s.real("min_lr", 0, "Final learning rate of the cosine schedule").at_least(0);
  return s;
}

Schema loss_section() {
  Schema s;
  // The loss plugin's parameters sit beside `type` ([loss] type = "label_smoothing" smoothing = 0.1).
  s.text("type", "cross_entropy", "Loss plugin (vexp plugins lists them); its parameters sit beside type");
  return s;
}

Schema plugins_section() {
  Schema s;
  s.text_list("paths", {}, "Extra plugin folders, relative to the recipe that names them");
  return s;
}

Schema model_section() {
  Schema s;
  s.text("input", "clip", "Name of the input clip tensor [N, T, C, H, W] in the graph");
  s.text("output", "", "Node whose output is the logits [N, classes]").require();
  return s;
}

}  // namespace

const std::vector<std::pair<std::string, Schema>>& builtin_sections() {
  static const std::vector<std::pair<std::string, Schema>> sections{
      {"run", run_section()},           {"data", data_section()},
      {"dist", dist_section()},         {"optim", optim_section()},
      {"schedule", schedule_section()}, {"plugins", plugins_section()},
      {"model", model_section()},       {"loss", loss_section()},
  };
  return sections;
}

}  // namespace vexp::dsl
