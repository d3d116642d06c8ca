// vexp bench train RECIPE [--steps N] [--warmup W] [--synthetic] [--channels-last] [--device D] [--precision P]
//                         [--save-weights FILE] [--json]
// Training-step throughput of a recipe, median of N steps after W warm-up steps,
// split into data, forward, backward, optimizer and communication time. The step
// is `vexp run`'s (runtime TrainStep): W + N steps leave the weights W + N steps of
// `vexp run` leave, which --save-weights writes.
#include <cstdio>
#include <iostream>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "commands/bench_train.hpp"
#include "commands/common.hpp"
#include "vexp/rundir/files.hpp"

namespace vexp::cli {

namespace {
struct BenchTrainArgs {
  RecipeArgs recipe;
  BenchTrainOptions options;
  bool json = false;
};

void run_bench_train(const BenchTrainArgs& a) {
  Session s;
  // --synthetic needs no data: the clip shape comes from the dataset's parameters
  // (a stand-in's when its plugin is not installed).
  RecipeArgs recipe = a.recipe;
  recipe.require_data = true;
  if (!(a.options.synthetic ? open_session_for_planning(s, recipe) : open_session(s, recipe)))
    throw base::invalid("");
  rundir::refuse_output(a.options.save_weights, "--save-weights", {{a.recipe.path, "the recipe"}});
  BenchTrainResult r;
  try {
    r = bench_train(s, a.options);
  } catch (const c10::Error& e) {
    throw base::failure(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw base::failure(e.what());
  }
  auto ms = [](const PhaseTimes& p) { return p.median() * 1e3; };
  if (a.json) {
    nlohmann::json phases;
    for (auto [name, p] : {std::pair<const char*, const PhaseTimes*>{"step", &r.step}, {"data", &r.data},
                           {"forward", &r.forward}, {"backward", &r.backward}, {"optimizer", &r.optimizer},
                           {"comm", &r.comm}})
      phases[name] = {{"median_ms", ms(*p)}, {"samples_ms", [&] {
                        std::vector<double> v;
                        for (double x : p->samples) v.push_back(x * 1e3);
                        return v;
                      }()}};
    nlohmann::json out{{"recipe", a.recipe.path}, {"synthetic", a.options.synthetic},
                       {"memory_format", r.memory_format}, {"channels_last", r.memory_format == "channels_last"},
                       {"device", r.device},
                       {"precision", r.precision}, {"threads", r.threads}, {"ranks", r.ranks},
                       {"clips_per_step", r.clips_per_step}, {"micro_batches", r.micro},
                       {"global_batch", r.global_batch}, {"lr_first", r.lr_first}, {"lr_last", r.lr_last},
                       {"buckets", r.buckets}, {"bucket_mb", r.bucket_mb},
                       {"clip", r.clip}, {"params", r.params},
                       {"steps", a.options.steps}, {"warmup", a.options.warmup},
                       {"loader_ahead_steps", r.loader_ahead_steps}, {"data_workers", r.data_workers},
                       {"clips_per_s", r.clips_per_s},
                       {"frames_per_s", r.frames_per_s}, {"peak_rss_mb", static_cast<double>(r.peak_rss_kb) / 1024.0},
                       {"final_loss", r.final_loss}, {"phases", phases}};
    if (!a.options.save_weights.empty()) out["saved_weights"] = a.options.save_weights;
    if (r.noise_every > 0)
      out["noise_scale"] = {{"every", r.noise_every},
                            {"measured_step_ms", ms(r.noise_step)},
                            {"step_ms", ms(r.step)},
                            {"measured_step_ratio", r.noise_step_ratio},
                            {"measurement_ms", ms(r.noise_work)},
                            {"measurement_fraction", r.noise_work_fraction},
                            {"measuring_blocks_s", r.noise_block_s},
                            {"plain_blocks_s", r.plain_block_s},
                            {"ratio", r.noise_interval_ratio},
                            {"measuring_blocks_cpu_s", r.noise_block_cpu_s},
                            {"plain_blocks_cpu_s", r.plain_block_cpu_s},
                            {"cpu_ratio", r.noise_cpu_ratio}};
    if (r.precision == "fp16") {
      out["loss_scale"] = r.loss_scale;
      out["skipped_steps"] = r.skipped_steps;
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("bench train %s: %lld clips x [%lld, %lld, %lld, %lld] per micro-batch, %lld micro-batch(es) per step "
              "(global batch %lld), %lld threads, %lld rank(s), %.1f M parameters, %s data%s, %s %s\n",
              a.recipe.path.c_str(), (long long)(r.clips_per_step / r.micro), (long long)r.clip[0], (long long)r.clip[1],
              (long long)r.clip[2], (long long)r.clip[3], (long long)r.micro, (long long)r.global_batch,
              (long long)r.threads, (long long)r.ranks, r.params / 1e6,
              a.options.synthetic ? "synthetic" : "dataset", r.memory_format == "channels_last" ? ", channels-last" : ", contiguous",
              r.device.c_str(), r.precision.c_str());
  std::printf("median of %lld steps after %lld warm-up: step %.1f ms = %.2f clips/s = %.1f frames/s\n",
              (long long)r.step.samples.size(), (long long)a.options.warmup, ms(r.step), r.clips_per_s, r.frames_per_s);
  std::printf("  data      %9.1f ms\n  forward   %9.1f ms\n  backward  %9.1f ms\n  optimizer %9.1f ms\n"
              "  comm      %9.1f ms\n",
              ms(r.data), ms(r.forward), ms(r.backward), ms(r.optimizer), ms(r.comm));
  std::printf("scheduled lr %.6g (first step) to %.6g (last step)\n", r.lr_first, r.lr_last);
  std::printf("peak RSS %.0f MB\n", static_cast<double>(r.peak_rss_kb) / 1024.0);
  if (!a.options.save_weights.empty()) std::printf("weights after %lld steps written to %s\n",
                                                   (long long)(a.options.warmup + a.options.steps),
                                                   a.options.save_weights.c_str());
  if (r.precision == "fp16")
    std::printf("loss scale %g, %lld step(s) skipped on inf/NaN gradients\n", r.loss_scale, (long long)r.skipped_steps);
  if (r.noise_every > 0)
    std::printf("noise scale: a measured step %.1f ms, %.3fx the plain step's median; measured every %lld steps "
                "(%lld blocks of %lld steps each way, alternating: %.3f s against %.3f s): step time ratio %.4f "
                "(%+.2f %%); in CPU time of the process %.3f s against %.3f s: ratio %.4f (%+.2f %%)\n",
                ms(r.noise_step), r.noise_step_ratio, (long long)r.noise_every, (long long)a.options.steps,
                (long long)r.noise_every, r.noise_block_s, r.plain_block_s, r.noise_interval_ratio,
                (r.noise_interval_ratio - 1) * 100, r.noise_block_cpu_s, r.plain_block_cpu_s, r.noise_cpu_ratio,
                (r.noise_cpu_ratio - 1) * 100);
  if (r.noise_every > 0)
    std::printf("noise scale: the measurement itself (norms, copies, gather) %.1f ms per measured step (median), "
                "%.2f %% of the plain step; every %lld steps: %.3f %% of the step time\n",
                ms(r.noise_work), r.noise_work_fraction * static_cast<double>(r.noise_every) * 100,
                (long long)r.noise_every, r.noise_work_fraction * 100);
}
}  // namespace

void add_bench_train(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("train", "Training-step throughput of a recipe: data / forward / backward / optimizer / comm");
  auto a = std::make_shared<BenchTrainArgs>();
  a->recipe.add_to(cmd);
  cmd->add_option("--steps", a->options.steps, "Timed steps (the median is reported)")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->options.warmup, "Untimed steps first")->check(CLI::Range(0, 100000));
  cmd->add_flag("--synthetic", a->options.synthetic, "Random clips of the recipe's shape instead of its dataset");
  auto* fmt = cmd->add_option("--memory-format", a->options.memory_format,
                              "Layout of convolution weights and activations: auto, channels_last or contiguous "
                              "(default: the recipe's run.memory_format)")
                  ->check(CLI::IsMember({"auto", "channels_last", "contiguous"}));
  cmd->add_flag_callback("--channels-last", [a] { a->options.memory_format = "channels_last"; },
                         "Same as --memory-format channels_last")
      ->excludes(fmt);
  cmd->add_option("--device", a->options.device, "cpu, cuda or auto (default: the recipe's run.device)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--precision", a->options.precision, "fp32, bf16 or fp16 autocast (default: the recipe's run.precision)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--save-weights", a->options.save_weights,
                  "Write the weights after all the steps (warm-up included) to FILE, a vexp checkpoint "
                  "(torch.load reads it; vexp predict/export --weights take it)");
  cmd->add_option("--noise-scale-every", a->options.noise_every,
                  "Time --steps blocks of N steps whose last step measures the gradient noise scale "
                  "(run.noise_scale_every = N) against --steps blocks of N plain steps, alternating, and print the "
                  "ratio of their times")
      ->check(CLI::Range(int64_t(1), int64_t(10000)));
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { run_bench_train(*a); });
}

}  // namespace vexp::cli
