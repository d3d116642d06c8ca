// A checkpoint's contents: the model's tensors, the momentum buffers, the loss
// scale and the counters of TrainState, saved after a step or an epoch and
// restored by a resumed run (after checking it is this recipe's and model's).
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "trainer_parts.hpp"
#include "vexp/base/error.hpp"
#include "vexp/log.hpp"

namespace vexp::trainer {

using json = nlohmann::json;

namespace {

// The checkpoint's "sampling": positions are steps of the training stream.
constexpr const char* kSampling = "stream";

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}

// A checkpoint of another model (another recipe's architecture, a TSN run's
// checkpoint given to a TSM recipe): says which parameters do not match.
void check_same_architecture(const Checkpoint& c, ModelGraph& model, const std::string& path) {
  const auto params = model.named_parameters(true);
  const auto buffers = model.named_buffers(true);
  int64_t bad = 0, extra = 0;
  std::string first;
  for (const auto& p : params) {
    auto it = c.model.find(p.key());
    if (it == c.model.end()) {
      ++bad;
      if (first.empty()) first = "'" + p.key() + "' " + shape_str(p.value().sizes()) + " is not in the checkpoint";
    } else if (!it->second.sizes().equals(p.value().sizes())) {
      ++bad;
      if (first.empty())
        first = "'" + p.key() + "' is " + shape_str(p.value().sizes()) + " in the model, " +
                shape_str(it->second.sizes()) + " in the checkpoint";
    }
  }
  for (const auto& [k, v] : c.model)
    if (!params.contains(k) && !buffers.contains(k)) {
      ++extra;
      if (first.empty()) first = "the checkpoint's '" + k + "' " + shape_str(v.sizes()) + " is not in the model";
    }
  if (bad == 0 && extra == 0) return;
  throw base::failure("checkpoint '" + path + "' belongs to another model than this recipe's: " +
                           std::to_string(bad) + " of the model's " + std::to_string(params.size()) +
                           " parameters are missing from it or have another shape, and " + std::to_string(extra) +
                           " of its " + std::to_string(c.model.size()) + " tensors are not in the model (first: " +
                           first + "); resume it with the recipe it was trained with (its run directory's resolved.toml)");
}

// Where the checkpoint stands in the training stream (sample_stream.hpp) must be
// where this run's stream has it: the same layout, the same clips per epoch, and
// global_step = the first step of epoch `epoch` + `epoch_step`.
void check_stream_position(const Run& r, const json& meta, const TrainState& s, const std::string& path) {
  // Checkpoints of the vexp that rounded steps per epoch down (and dropped each
  // epoch's last partial global batch) carry no "sampling": their steps do not
  // line up with this one's, so continuing would not be the uninterrupted run.
  if (meta.value("sampling", "") != kSampling)
    throw base::failure("cannot resume from '" + path +
                             "': it was written by an earlier vexp whose epochs dropped the clips of their last partial "
                             "global batch; this vexp trains every clip once per epoch, so its steps differ and the run "
                             "cannot continue exactly: start it again (or finish it with the vexp that wrote it)");
  const SampleStream& st = r.dp.stream;
  const int64_t clips = meta.value("epoch_clips", int64_t(0));
  if (clips != st.clips)
    throw base::failure("cannot resume from '" + path + "': it was trained on " + std::to_string(clips) +
                             " training clips per epoch, the training split now has " + std::to_string(st.clips) +
                             ", which changes every epoch's steps; resume with the data lists it was trained on");
  if (s.start_epoch < 0 || s.start_epoch > r.dp.epochs || s.start_step < 0 ||
      (s.start_epoch < r.dp.epochs && s.start_step > st.steps_in(s.start_epoch)) ||
      s.global_step != st.first_step(s.start_epoch) + s.start_step)
    throw base::failure("checkpoint '" + path + "' stopped at step " + std::to_string(s.start_step) + " of epoch " +
                             std::to_string(s.start_epoch + 1) + " (global step " + std::to_string(s.global_step) +
                             "), which is not a step of this run's epochs of " + steps_per_epoch_text(r.dp) + " steps");
}

}  // namespace

// A checkpoint holds the state after `epoch` epochs and `epoch_step` steps of
// the next one (non-zero when the run was interrupted mid-epoch).
void check_same_recipe(const Run& r, const Checkpoint& c, const std::string& path) {
  const json meta = json::parse(c.meta_json, nullptr, false);
  const std::string was = meta.is_object() ? meta.value("recipe_hash", "") : "";
  if (was != r.recipe_hash)
    throw base::failure("cannot resume '" + r.out.string() + "' from '" + path +
                             "': the recipe changed since the run started (hash " + (was.empty() ? "?" : was) +
                             ", now " + r.recipe_hash + "); resume with the same recipe and --set values");
}

TrainState restore(Run& r, const Checkpoint& c, const std::string& path) {
  json meta = json::parse(c.meta_json);
  check_same_architecture(c, *r.model, path);
  check_same_recipe(r, c, path);
  TrainState s;
  s.start_epoch = meta.at("epoch").get<int64_t>();
  s.start_step = meta.value("epoch_step", int64_t(0));
  s.global_step = meta.at("global_step").get<int64_t>();
  check_stream_position(r, meta, s, path);
  c10::NoGradGuard no_grad;
  for (auto& p : r.model->named_parameters(true)) p.value().copy_(c.model.at(p.key()));
  for (auto& b : r.model->named_buffers(true)) {
    auto it = c.model.find(b.key());
    if (it != c.model.end()) b.value().copy_(it->second);
  }
  // The optimizer's state (SGD's momentum buffers, Adam's moments): the optimizer
  // places each beside its parameter (checkpoints hold contiguous CPU copies; a
  // channels-last weight wants a channels-last buffer).
  try {
    r.rig->optimizer().load_state(c.optimizer);
  } catch (const std::exception& e) {
    throw base::failure("cannot resume from '" + path + "': its optimizer state does not fit optimizer '" +
                             r.plan.optim.type + "': " + e.what());
  }
  if (meta.contains("grad_scale"))
    r.rig->scaler().restore(meta.at("grad_scale").get<double>(), meta.value("grad_scale_good_steps", int64_t(0)),
                      meta.value("skipped_steps", int64_t(0)));
  s.train_time = meta.value("train_time_s", 0.0);
  s.prior_wall = meta.value("wall_time_s", s.train_time);
  s.train_clips = meta.value("train_clips", int64_t(0));
  s.reference_loss = meta.value("reference_loss", -1.0);
  s.window_sum = meta.value("window_loss_sum", 0.0);
  s.window_n = meta.value("window_steps", int64_t(0));
  s.noise_g2 = meta.value("noise_g2_avg", 0.0);
  s.noise_trace = meta.value("noise_trace_avg", 0.0);
  s.noise_n = meta.value("noise_measurements", int64_t(0));
  if (meta.contains("bad_items"))
    for (const auto& b : meta.at("bad_items")) s.bad_saved.insert(b.get<std::string>());
  if (r.hooks) r.hooks->load_state(c.hooks, path);
  return s;
}

namespace {

// The checkpoint after `done_epochs` epochs and `epoch_step` steps (rank 0 writes it).
std::string write_state(Run& r, int64_t done_epochs, int64_t epoch_step) {
  const TrainState& s = r.state;
  const std::set<std::string> bad = all_bad_items(*r.data, *r.comm, s.bad_saved);
  const std::string path = (r.ckpt_dir / checkpoint_file_name(done_epochs, epoch_step)).string();
  if (!r.writer) return path;
  Checkpoint c;
  for (const auto& p : r.model->named_parameters(true)) c.model[p.key()] = p.value();
  for (const auto& b : r.model->named_buffers(true)) c.model[b.key()] = b.value();
  c.optimizer = r.rig->optimizer().state();
  if (r.hooks) c.hooks = r.hooks->state();
  json meta{{"epoch", done_epochs},            {"epoch_step", epoch_step},
            {"sampling", kSampling},           {"epoch_clips", r.dp.stream.clips},
            {"global_step", s.global_step},    {"recipe_hash", r.recipe_hash},
            {"train_time_s", s.train_time},    {"wall_time_s", s.prior_wall + seconds_since(r.wall_start)},
            {"train_clips", s.train_clips},    {"reference_loss", s.reference_loss},
            {"window_loss_sum", s.window_sum}, {"window_steps", s.window_n},
            {"bad_items", std::vector<std::string>(bad.begin(), bad.end())}};
  if (s.noise_n > 0) {
    meta["noise_g2_avg"] = s.noise_g2;
    meta["noise_trace_avg"] = s.noise_trace;
    meta["noise_measurements"] = s.noise_n;
  }
  if (r.rig->scaler().enabled()) {
    meta["grad_scale"] = r.rig->scaler().scale();
    meta["grad_scale_good_steps"] = r.rig->scaler().good_steps();
    meta["skipped_steps"] = r.rig->scaler().skipped_steps();
  }
  c.meta_json = meta.dump();
  save_checkpoint(path, c);
  // Only after the new one is safely on disk: a crash in between leaves one more, never one fewer.
  if (r.plan.run.keep_checkpoints > 0) prune_checkpoints(r.ckpt_dir.string(), r.plan.run.keep_checkpoints, path);
  return path;
}

}  // namespace

std::string save_state(Run& r, int64_t done_epochs, int64_t epoch_step) {
  const std::string path = write_state(r, done_epochs, epoch_step);
  // The hooks at the checkpoint (the EMA's weights written beside it), on every rank.
  if (r.hooks) r.hooks->at_checkpoint(r, done_epochs, epoch_step, path);
  return path;
}

}  // namespace vexp::trainer
