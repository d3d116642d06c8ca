#include "vexp/report/batch_size.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>

#include "vexp/base/attempt.hpp"
#include "vexp/base/error.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/noise.hpp"

namespace vexp::report {

namespace {

std::string num(const char* f, double v) { return fmt_number(f, v); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A trial's B_noise at the target and at the end (TargetTrial); a run folder that
// cannot be read is a warning and no value.
void read_noise_of(TargetTrial& t) {
  const sweep::Row& r = *t.row;
  struct Noise {
    std::optional<double> at_target, end;
  };
  auto read = base::attempt([&] {
    Noise n;
    if (!r.to_target.steps) {
      n.end = rundir::last_noise_scale(r.run_dir);
      return n;
    }
    const auto records = rundir::read_noise(r.run_dir);  // once: the end and the target
    n.end = rundir::last_noise_scale(r.run_dir, records);
    if (!n.end) return n;
    for (const auto& rec : records) {
      if (rec.global_step > *r.to_target.steps) break;
      if (rec.scale && std::isfinite(*rec.scale)) n.at_target = rec.scale;
    }
    return n;
  });
  if (!read) {
    std::cerr << "vexp: warning: trial " << sweep::trial_name(r.id) << ": " << base::printable(read.message(), 400)
              << "; its noise scale is left out\n";
    return;
  }
  const Noise n = std::move(read).value();
  t.noise_at_target = n.at_target;
  t.noise_end = n.end;
}

}  // namespace

std::optional<BatchSizeStudy> batch_size_study(const Opened& o) {
  if (!o.target) return std::nullopt;
  BatchSizeStudy s;
  s.target = *o.target;
  std::set<int64_t> batches;
  for (const auto& r : o.rows) {
    TargetTrial t;
    t.row = &r;
    if (r.global_batch > 0) batches.insert(r.global_batch);
    s.trials.push_back(t);
  }
  if (batches.size() < 2) return std::nullopt;
  s.batches.assign(batches.begin(), batches.end());
  for (auto& t : s.trials) read_noise_of(t);

  // The best trial of each batch: the fewest steps to the target (McCandlish et al.
  // take each batch at its best learning rate), then the fewer clips, then the lower id.
  s.best.assign(s.batches.size(), std::nullopt);
  std::vector<BatchPoint> points;
  for (size_t bi = 0; bi < s.batches.size(); ++bi) {
    for (size_t i = 0; i < s.trials.size(); ++i) {
      const sweep::Row& r = *s.trials[i].row;
      if (r.global_batch != s.batches[bi] || !o.measured(r) || !r.to_target.steps) continue;
      if (!s.best[bi]) {
        s.best[bi] = i;
        continue;
      }
      const sweep::Row& b = *s.trials[*s.best[bi]].row;
      if (*r.to_target.steps < *b.to_target.steps ||
          (*r.to_target.steps == *b.to_target.steps && r.to_target.clips.value_or(0) < b.to_target.clips.value_or(0)))
        s.best[bi] = i;
    }
    if (s.best[bi])
      points.push_back({static_cast<double>(s.batches[bi]),
                        static_cast<double>(*s.trials[*s.best[bi]].row->to_target.steps)});
  }
  // A trial that reached the target at step 0 (an evaluation before any step) cannot
  // be fitted: the fit says so.
  s.fit = fit_critical_batch(points);
  if (s.fit.fit) {
    const CriticalBatchFit& f = *s.fit.fit;
    s.fit_text = "S_min = " + num("%.4g", f.s_min) + " steps, E_min = " + num("%.4g", f.e_min) + " clips, B_crit = " +
                 "E_min / S_min = " + (std::isinf(f.b_crit) ? std::string("unbounded") : num("%.4g", f.b_crit)) +
                 " clips: fitted through the best trial of " + std::to_string(f.batches) + " global batches" +
                 (f.batches == 2 ? " (2 points, 2 parameters: an exact fit, no test of the model)"
                                 : ", relative rms misfit " + num("%.2g", 100 * f.rel_rms) + " %");
    if (f.s_min_at_zero)
      s.fit_text += "; S_min held at 0: steps fell as 1/B over every batch measured, so all of them are below the "
                    "critical batch (measure larger batches to find it)";
    if (f.e_min_at_zero)
      s.fit_text += "; E_min held at 0: steps did not fall with the batch, so every batch measured is past the "
                    "critical batch (measure smaller batches to find it)";
  } else {
    s.fit_text = "no fit: " + s.fit.why_not;
  }

  // B_noise beside the fit: at the target where the trials measured it there, else at the end.
  std::vector<double> at_target, at_end;
  for (const auto& t : s.trials) {
    if (t.noise_at_target && o.measured(*t.row) && t.row->to_target.reached()) at_target.push_back(*t.noise_at_target);
    if (t.noise_end && std::isfinite(*t.noise_end)) at_end.push_back(*t.noise_end);
  }
  const std::vector<double>& used = !at_target.empty() ? at_target : at_end;
  s.noise_where = !at_target.empty() ? "at the target" : "at the end of the runs";
  if (!used.empty()) {
    s.noise = median(used);
    s.noise_lo = *std::min_element(used.begin(), used.end());
    s.noise_hi = *std::max_element(used.begin(), used.end());
    s.noise_trials = used.size();
    s.noise_text = "B_noise measured by " + std::to_string(used.size()) + " trial" + (used.size() == 1 ? "" : "s") +
                   " " + s.noise_where + ": median " + num("%.4g", *s.noise) +
                   (used.size() > 1 ? " (" + num("%.4g", s.noise_lo) + " to " + num("%.4g", s.noise_hi) + ")" : "");
    if (s.fit.fit && std::isfinite(s.fit.fit->b_crit) && *s.noise > 0)
      s.noise_text += "; B_crit / B_noise = " + num("%.3g", s.fit.fit->b_crit / *s.noise) +
                      " (the model expects about 1)";
    else if (s.fit.fit)
      s.noise_text += "; no ratio to B_crit, which the fit leaves unbounded";
  } else {
    s.noise_text = "no trial measured the gradient noise scale (run.noise_scale_every = N, with at least 2 GPUs or "
                   "emulated GPUs per step, draws B_noise beside the fit)";
  }
  return s;
}

}  // namespace vexp::report
