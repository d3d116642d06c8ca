// The recipe's [[hooks]]: made once per invocation from plan.hooks, called on every
// rank at their points (vexp/hook.hpp) with the run's context, their metrics checked
// and handed to the records, their weights files written beside the checkpoints,
// their state kept in the checkpoints.
#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>

#include "trainer_parts.hpp"
#include "vexp/base/error.hpp"
#include "vexp/hook.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp::trainer {

namespace {

// Keys of the trainer's own records (metrics.jsonl's step and eval records,
// summary.json): a hook's metric may not take one of them.
const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names{
      // step records
      "type", "epoch", "step", "global_step", "epochs_trained", "loss", "lr", "clips_per_s", "step_s", "data_s",
      "compute_s", "comm_s", "ranks", "buckets", "buckets_in_backward", "loss_scale", "skipped_steps", "hooks_s",
      // eval records
      "top1", "top5", "val_loss",
      // summary.json
      "name", "status", "epochs", "steps", "wall_s", "train_s", "params", "flops_per_clip", "frames", "global_batch",
      "threads", "recipe_hash", "device", "precision", "memory_format", "skipped_samples", "metrics_lines_lost",
      "classes", "hook_weights"};
  return names;
}

bool word(const std::string& s, bool dash) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dash && c == '-'))) return false;
  return true;
}

// "after step 12 (epoch 2)", for errors.
std::string step_text(const HookContext& c) {
  return "step " + std::to_string(c.step) + " (epoch " + std::to_string(c.epoch) + ")";
}

}  // namespace

struct RunHooks::Entry {
  size_t index = 0;
  dsl::PluginUse use;
  std::shared_ptr<Hook> hook;
  // "hooks[0] (hook 'ema', recipe.toml:40:1)"
  std::string label() const {
    return "hooks[" + std::to_string(index) + "] (hook '" + use.type + "'" +
           (use.loc.known() ? ", " + use.loc.str() : std::string()) + ")";
  }
};

RunHooks::RunHooks(const dsl::RecipePlan& plan, PluginHost& host) {
  for (size_t i = 0; i < plan.hooks.size(); ++i) {
    Entry e;
    e.index = i;
    e.use = plan.hooks[i];
    try {
      e.hook = host.make<Hook>("hook", e.use.type, e.use.params);
    } catch (const std::exception& ex) {
      // The hook refused its parameters: where the recipe gives them.
      throw base::invalid((e.use.loc.known() ? e.use.loc.str() + ": " : std::string()) + "hooks[" +
                          std::to_string(i) + "]: " + ex.what());
    }
    hooks_.push_back(std::move(e));
  }
}

RunHooks::~RunHooks() = default;

namespace {

// The context every point shares: the model, the run folder, the position.
HookContext base_context(Run& r, int64_t epoch, int64_t epoch_step) {
  HookContext c;
  c.model = r.model.get();
  c.run_dir = r.out.string();
  c.step = r.state.global_step;
  c.epoch = epoch;
  c.epoch_step = epoch_step;
  c.epochs = r.dp.epochs;
  c.rank = r.rank;
  c.ranks = static_cast<int>(r.ranks);
  c.world = r.dp.world;
  return c;
}

// Calls `f` for every hook, naming the hook, the point and the position in its error.
template <class Entries, class F>
void call_each(Entries& hooks, const char* point, const HookContext& c, F f) {
  for (auto& e : hooks) {
    try {
      f(e);
    } catch (const c10::Error& ex) {
      throw base::failure(e.label() + " failed " + point + " " + step_text(c) + ": " + ex.what_without_backtrace());
    } catch (const std::exception& ex) {
      throw base::failure(e.label() + " failed " + point + " " + step_text(c) + ": " + ex.what());
    }
  }
}

// The metrics the hooks add at one point: checked names, no name twice.
struct Added {
  std::set<std::string> reserved;  // besides reserved_names()
  std::map<std::string, double> values;
  std::map<std::string, std::string> by;  // name -> the hook's label
  bool keep = true;                       // false: a step whose record is not written

  std::function<void(const std::string&, double)> adder(const std::string& label) {
    return [this, label](const std::string& name, double value) {
      if (!word(name, false))
        throw std::invalid_argument("metric name '" + name + "' is not letters, digits and '_' (at most 64)");
      if (reserved_names().count(name))
        throw std::invalid_argument("metric '" + name + "' is one of the trainer's own; name it otherwise");
      if (reserved.count(name))
        throw std::invalid_argument("metric '" + name + "' is in summary.json already (the last evaluation's); name it otherwise");
      auto it = by.find(name);
      if (it != by.end())
        throw std::invalid_argument("metric '" + name + "' was added at this point already, by " +
                                    (it->second == label ? std::string("this hook") : it->second) +
                                    (it->second == label ? "" : "; give the hooks different names"));
      by[name] = label;
      if (keep) values[name] = value;
    };
  }
};

// Calls `point` (a Hook member) of every hook with an add_metric that `added`
// checks; the metrics the hooks added.
template <class Entries>
std::map<std::string, double> collect_each(Entries& hooks, const char* when, HookContext& c, Added added,
                                           void (Hook::*point)(const HookContext&)) {
  call_each(hooks, when, c, [&](auto& e) {
    c.add_metric = added.adder(e.label());
    ((*e.hook).*point)(c);
  });
  return std::move(added.values);
}

// An evaluation as hooks see it (HookContext::metrics after an evaluation, and what
// HookContext::evaluate returns).
std::map<std::string, double> eval_metrics(const EvalResult& e) {
  return {{"top1", e.top1}, {"top5", e.top5}, {"val_loss", e.loss}};
}

// HookContext::evaluate: the run's validation with other weights in place.
void let_evaluate(HookContext& c, Run& r) {
  c.evaluate = [&r](const std::map<std::string, at::Tensor>& w) { return eval_metrics(evaluate_weights(r, w)); };
}

}  // namespace

void RunHooks::start(Run& r) {
  const int64_t epoch = r.state.start_epoch + 1;
  HookContext c = base_context(r, std::min(epoch, r.dp.epochs), r.state.start_step);
  call_each(hooks_, "at its start,", c, [&](Entry& e) { e.hook->start(c); });
}

std::map<std::string, double> RunHooks::after_step(Run& r, int64_t epoch, int64_t epoch_step, double loss, double lr,
                                                   bool logged) {
  HookContext c = base_context(r, epoch, epoch_step);
  c.logged = logged;
  c.metrics = {{"loss", loss}, {"lr", lr}};
  Added added;
  added.keep = logged;
  return collect_each(hooks_, "after", c, std::move(added), &Hook::after_step);
}

void RunHooks::after_eval(Run& r, int64_t done_epochs, EvalResult& ev) {
  HookContext c = base_context(r, done_epochs, r.dp.stream.steps_in(done_epochs - 1));
  c.metrics = eval_metrics(ev);
  let_evaluate(c, r);
  for (auto& [k, v] : collect_each(hooks_, "after the evaluation after", c, Added{}, &Hook::after_eval)) ev.extra[k] = v;
}

void RunHooks::at_checkpoint(Run& r, int64_t done_epochs, int64_t epoch_step, const std::string& path) {
  // After whole epochs the point is the end of the last one; mid-epoch, step
  // `epoch_step` of the next.
  const int64_t epoch = epoch_step == 0 ? done_epochs : done_epochs + 1;
  HookContext c = base_context(r, epoch, epoch_step == 0 ? r.dp.stream.steps_in(done_epochs - 1) : epoch_step);
  c.checkpoint = path;
  const std::vector<std::string> order = [&] {
    std::vector<std::string> names;
    for (const auto& p : r.model->named_parameters(true)) names.push_back(p.key());
    for (const auto& b : r.model->named_buffers(true)) names.push_back(b.key());
    return names;
  }();
  call_each(hooks_, "at the checkpoint after", c, [&](Entry& e) {
    c.save_weights = [&](const std::string& tag, const std::map<std::string, at::Tensor>& w) {
      if (!word(tag, true))
        throw std::invalid_argument("weights tag '" + tag + "' is not letters, digits, '_' and '-' (at most 64)");
      auto [owner, fresh] = tag_owner_.emplace(tag, e.index);
      if (!fresh && owner->second != e.index)
        throw std::invalid_argument("weights tag '" + tag + "' is " + hooks_[owner->second].label() +
                                    "'s; give the hooks different names");
      const std::string file = rundir::checkpoint_side_file(path, tag);
      if (r.writer) {
        // The model's order first (a state dict as torch would write it), then any others.
        StateDict sd;
        std::set<std::string> done;
        for (const auto& n : order)
          if (auto it = w.find(n); it != w.end()) {
            sd.emplace_back(n, it->second.detach().cpu().contiguous());
            done.insert(n);
          }
        for (const auto& [n, t] : w)
          if (!done.count(n)) sd.emplace_back(n, t.detach().cpu().contiguous());
        save_tensor_dict(file, sd);
      }
      weights_files_[tag] = (fs::path(rundir::kCheckpoints) / fs::path(file).filename()).string();
      return file;
    };
    e.hook->at_checkpoint(c);
  });
}

std::map<std::string, double> RunHooks::at_end(Run& r, const std::set<std::string>& taken) {
  HookContext c = base_context(r, r.dp.epochs, r.dp.stream.steps_in(r.dp.epochs - 1));
  let_evaluate(c, r);
  Added added;
  added.reserved = taken;
  return collect_each(hooks_, "at the end, after", c, std::move(added), &Hook::at_end);
}

std::map<std::string, at::Tensor> RunHooks::state() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& e : hooks_)
    for (auto& [k, v] : e.hook->state()) out[std::to_string(e.index) + "." + e.use.type + "/" + k] = v;
  return out;
}

void RunHooks::load_state(const std::map<std::string, at::Tensor>& state, const std::string& path) {
  std::vector<std::map<std::string, at::Tensor>> per(hooks_.size());
  for (const auto& [k, v] : state) {
    const size_t dot = k.find('.'), slash = k.find('/');
    size_t i = hooks_.size();
    if (dot != std::string::npos && slash != std::string::npos && dot < slash && dot > 0) {
      try {
        i = std::stoul(k.substr(0, dot));
      } catch (const std::exception&) {
        i = hooks_.size();
      }
    }
    if (i >= hooks_.size() || k.substr(dot + 1, slash - dot - 1) != hooks_[i].use.type)
      throw base::failure("checkpoint '" + path + "' holds the state '" + k +
                               "' of a hook this recipe does not have; resume it with the recipe it was trained with");
    per[i][k.substr(slash + 1)] = v;
  }
  for (size_t i = 0; i < hooks_.size(); ++i) {
    if (per[i].empty()) continue;
    try {
      hooks_[i].hook->load_state(per[i]);
    } catch (const std::exception& ex) {
      throw base::failure(hooks_[i].label() + " cannot take its state from checkpoint '" + path + "': " + ex.what());
    }
  }
}

}  // namespace vexp::trainer
