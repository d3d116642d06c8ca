// The typed configuration (config.hpp): the one place that reads the keys of the
// built-in sections [run], [data], [dist], [optim] and [schedule], from their
// checked tables. A key whose value failed its check is absent from the table and
// its field keeps its zero (the plan is then not returned); a key of a schema that
// no field takes is a programming error, caught on the first validation.
#include "validator.hpp"

#include <stdexcept>

namespace vexp::dsl::detail {

namespace {

// Reads the keys of one checked section into fields and remembers which it read.
class SectionReader {
 public:
  SectionReader(const std::string& section, const Params& params) : section_(section), params_(params) {}

  void read(const char* key, int64_t& out, Loc* loc = nullptr) {
    if (const Value* v = take(key, loc)) out = v->as_int();
  }
  void read(const char* key, double& out, Loc* loc = nullptr) {
    if (const Value* v = take(key, loc)) out = v->as_double();
  }
  void read(const char* key, bool& out, Loc* loc = nullptr) {
    if (const Value* v = take(key, loc)) out = v->as_bool();
  }
  void read(const char* key, std::string& out, Loc* loc = nullptr) {
    if (const Value* v = take(key, loc)) out = v->as_string();
  }
  void read(const char* key, std::vector<int64_t>& out, Loc* loc = nullptr) {
    if (take(key, loc)) out = params_.i64_list(key);
  }
  // Keys of the section that are read elsewhere (the plugin tables).
  void skip(const char* key) { read_.insert(key); }

  // Every key the schema gave must have been read: a key added to a schema
  // without its field would otherwise be silently ignored.
  void check_all_read() const {
    for (const auto& [key, value] : params_.values()) {
      if (!read_.count(key))
        throw std::logic_error("[" + section_ + "] " + key + " has no field in the typed configuration (config.hpp)");
    }
  }

 private:
  const Value* take(const char* key, Loc* loc) {
    read_.insert(key);
    if (!params_.has(key)) return nullptr;
    const Value& v = params_.get(key);
    if (loc) *loc = v.loc();
    return &v;
  }

  std::string section_;
  const Params& params_;
  std::set<std::string> read_;
};

RunConfig read_run(const Params& p) {
  RunConfig c;
  SectionReader r("run", p);
  r.read("name", c.name);
  r.read("seed", c.seed);
  r.read("epochs", c.epochs);
  r.read("eval_every", c.eval_every);
  r.read("log_every", c.log_every);
  r.read("threads", c.threads);
  r.read("checkpoint_every", c.checkpoint_every);
  r.read("keep_checkpoints", c.keep_checkpoints);
  r.read("progress", c.progress);
  r.read("out", c.out);
  r.read("eval_batch", c.eval_batch);
  r.read("device", c.device, &c.device_loc);
  r.read("precision", c.precision, &c.precision_loc);
  r.read("memory_format", c.memory_format);
  r.read("divergence_factor", c.divergence_factor);
  r.read("noise_scale_every", c.noise_scale_every);
  r.read("noise_scale_ema", c.noise_scale_ema);
  r.check_all_read();
  c.section = p.owner();
  return c;
}

DataConfig read_data(const Params& p) {
  DataConfig c;
  SectionReader r("data", p);
  r.skip("dataset");  // RecipePlan::dataset, dataset_params
  r.skip("params");
  r.read("workers", c.workers);
  r.read("prefetch", c.prefetch);
  r.read("train_size", c.train_size);
  r.check_all_read();
  return c;
}

DistConfig read_dist(const Params& p) {
  DistConfig c;
  SectionReader r("dist", p);
  r.skip("backend");  // RecipePlan::comm, comm_params
  r.skip("params");
  r.read("world_size", c.world_size);
  r.read("batch_per_gpu", c.batch_per_gpu, &c.batch_per_gpu_loc);
  r.read("accum_steps", c.accum_steps);
  r.read("bucket_mb", c.bucket_mb);
  r.read("compression", c.compression);
  r.read("reduction", c.reduction);
  r.read("timeout_s", c.timeout_s);
  r.check_all_read();
  return c;
}

OptimConfig read_optim(const Params& p) {
  OptimConfig c;
  SectionReader r("optim", p);
  r.read("type", c.type);
  r.read("lr", c.lr);
  r.read("base_lr", c.base_lr);
  r.read("base_batch", c.base_batch);
  r.read("lr_scaling", c.lr_scaling);
  r.read("weight_decay", c.weight_decay);
  r.read("no_decay_bn_bias", c.no_decay_bn_bias);
  r.read("fc_lr5", c.fc_lr5);
  r.read("clip_grad_norm", c.clip_grad_norm);
  r.check_all_read();
  return c;
}

ScheduleConfig read_schedule(const Params& p) {
  ScheduleConfig c;
  SectionReader r("schedule", p);
  r.read("type", c.type);
  r.read("warmup_epochs", c.warmup_epochs);
  r.read("warmup_start", c.warmup_start);
  r.read("milestones", c.milestones);
  r.read("gamma", c.gamma);
  r.read("min_lr", c.min_lr);
  r.check_all_read();
  return c;
}

}  // namespace

void Validator::read_config() {
  plan_.run = read_run(sections_.at("run").params);
  plan_.data = read_data(sections_.at("data").params);
  plan_.dist = read_dist(sections_.at("dist").params);
  plan_.optim = read_optim(sections_.at("optim").params);
  plan_.optim.section = section_loc_.at("optim");
  plan_.schedule = read_schedule(sections_.at("schedule").params);
}

}  // namespace vexp::dsl::detail
