// vexp predict RECIPE --weights FILE|RUN_DIR --input FILE [--topk K] [--logits OUT] [--labels FILE]
// Runs the recipe's model in evaluation mode on a preprocessed clip tensor (.pt)
// or a video file and prints the top-K classes, with their names where known.

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "commands/model_session.hpp"
#include "vexp/runtime/data_pipeline.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/torch_save.hpp"
#include "vexp/dataset.hpp"
#include "vexp/media/media.hpp"

namespace vexp::cli {
namespace {

namespace fs = std::filesystem;

bool has_ext(const std::string& path, std::initializer_list<const char*> exts) {
  std::string e = fs::path(path).extension().string();
  for (auto& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* x : exts)
    if (e == x) return true;
  return false;
}

// The recipe's test pipeline for one video: the kinetics dataset plugin, given a
// one-line list naming the file, samples, crops and normalises it exactly as
// evaluation does, every view (test_clips x test_crops). Returns [views, T, C, H, W].
// `clip` ([T, 3, H, W] with H == W) and `short_side` (> 0) override the recipe's
// frames, input_size and scale_size, as --clip and --short-side say.
at::Tensor recipe_test_views(const Session& s, const std::string& video, const dsl::Shape& clip, int64_t short_side) {
  std::error_code ec;
  const fs::path abs = fs::absolute(video, ec);
  if (ec || !fs::is_regular_file(abs)) throw base::failure("cannot read video '" + video + "': no such file");
  // The list is one "PATH LABEL" line: a newline in the path would add lines.
  if (base::has_control(abs.string()))
    throw base::failure("cannot use video '" + video + "': its path holds a control character");
  // The one-line list lives in a private folder (mkdtemp, 0700): a fixed or
  // pid-derived name under /tmp could be a link planted by another user.
  std::optional<base::TempDir> tmp;
  try {
    tmp.emplace("vexp_predict");
    base::write_file_atomic((tmp->path() / "predict.txt").string(), abs.string() + " 0\n", 0600);
  } catch (const base::Error& e) {
    throw base::failure(std::string("cannot prepare video '") + video + "': " + e.what());
  }
  const fs::path dir = tmp->path();
  dsl::Params p = s.plan->dataset_params;
  p.values()["root"] = dsl::Value(dir.string());
  p.values()["train_list"] = dsl::Value("predict.txt");
  p.values()["val_list"] = dsl::Value("predict.txt");
  p.values()["format"] = dsl::Value("mmaction");
  p.values()["label_map"] = dsl::Value("");
  p.values()["strict"] = dsl::Value(true);  // a bad file is an error here, not a skipped sample
  p.values()["frames"] = dsl::Value(clip[0]);
  p.values()["input_size"] = dsl::Value(clip[2]);
  if (short_side > 0) p.values()["scale_size"] = dsl::Value(short_side);
  try {
    auto data = s.host.make<Dataset>("dataset", "kinetics", p);
    attach_transforms(*data, s.host, *s.plan);  // the recipe's test pipeline, when it gives one
    std::vector<at::Tensor> views;
    for (int64_t v = 0; v < data->views(Split::Val); ++v) views.push_back(data->get_view(Split::Val, 0, v, 0).clip);
    return at::stack(views);
  } catch (const std::exception& e) {
    throw base::failure("cannot use video '" + video + "': " + e.what());
  }
}

// The usual resize before a centre crop: crop x 256/224, rounded up.
int64_t default_short_side(int64_t crop) { return (crop * 256 + 223) / 224; }

// How a video's 8-bit frames become the values a dataset without a video pipeline
// gives the model: per-channel mean and std on [0, 1], and the shorter side the
// frame is resized to before the centre crop.
struct VideoConvention {
  std::vector<double> mean, std;
  int64_t short_side = 0;
  std::string what;
};

VideoConvention video_convention(const Session& s, const dsl::Shape& clip, int64_t short_side) {
  const dsl::Params& p = s.plan->dataset_params;
  const size_t C = static_cast<size_t>(clip[1]);
  VideoConvention v;
  auto per_channel = [C](std::vector<double> x) { return x.size() == 1 ? std::vector<double>(C, x[0]) : x; };
  if (s.plan->dataset == "synthetic_motion") {
    // Its clips are whole frames with x in [0, 1] given as (x - 0.5) / 0.25 (what
    // `vexp data make-synthetic` turns back into bytes).
    v.mean.assign(C, 0.5);
    v.std.assign(C, 0.25);
    v.short_side = std::min(clip[2], clip[3]);
    v.what = "synthetic_motion's whole frame, (x - 0.5) / 0.25";
  } else if (p.has("mean") && p.has("std") && p.get("mean").is_array() && p.get("std").is_array()) {
    v.mean = per_channel(p.f64_list("mean"));
    v.std = per_channel(p.f64_list("std"));
    v.what = "the dataset's mean and std";
  } else {
    v.mean = per_channel(C == 3 ? std::vector<double>{0.485, 0.456, 0.406} : std::vector<double>{0.449});
    v.std = per_channel(C == 3 ? std::vector<double>{0.229, 0.224, 0.225} : std::vector<double>{0.226});
    v.what = "ImageNet mean and std";
  }
  if (v.short_side == 0) v.short_side = p.has("scale_size") && p.get("scale_size").is_int() ? p.i64("scale_size") : 0;
  if (v.short_side == 0) v.short_side = default_short_side(std::min(clip[2], clip[3]));
  if (short_side > 0) v.short_side = short_side;
  if (v.mean.size() != C || v.std.size() != C)
    throw base::failure("the dataset's mean/std have " + std::to_string(v.mean.size()) + "/" +
                                 std::to_string(v.std.size()) + " values for " + std::to_string(C) + " channels");
  return v;
}

// A video for a recipe whose dataset has no video pipeline: one frame at the centre
// of each of T equal segments (TSN's test sampling), short-side resize, centre crop,
// normalised as `v` says. Returns [1, T, C, H, W] (C: 1 gray or 3 RGB).
at::Tensor centre_clip(const std::string& video, const dsl::Shape& clip, const VideoConvention& v) {
  media::CentreClip c;
  c.frames = static_cast<int>(clip[0]);
  c.height = static_cast<int>(clip[2]);
  c.width = static_cast<int>(clip[3]);
  c.short_side = static_cast<int>(v.short_side);
  c.channels = static_cast<int>(clip[1]);
  std::vector<uint8_t> pixels;
  try {
    pixels = media::read_centre_clip(video, c);
  } catch (const media::MediaError& e) {
    throw base::failure(std::string("cannot decode video ") + e.what());
  }
  const int64_t T = clip[0], C = clip[1], H = clip[2], W = clip[3];
  at::Tensor out = at::empty({1, T, C, H, W});
  float* o = out.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float mean = static_cast<float>(v.mean[static_cast<size_t>(ch)] * 255.0);
      const float stdv = static_cast<float>(v.std[static_cast<size_t>(ch)] * 255.0);
      for (int64_t i = 0; i < H * W; ++i)
        *o++ = (static_cast<float>(pixels[static_cast<size_t>((t * H * W + i) * C + ch)]) - mean) / stdv;
    }
  return out;
}

}  // namespace

void add_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Classify a clip (.pt tensor or video file) with a recipe's model and weights");
  auto args = std::make_shared<RecipeArgs>();
  auto weights = std::make_shared<std::string>();
  auto input = std::make_shared<std::string>();
  auto logits_out = std::make_shared<std::string>();
  auto labels = std::make_shared<std::string>();
  auto topk = std::make_shared<int64_t>(5);
  auto classes = std::make_shared<int64_t>(-1);
  auto short_side = std::make_shared<int64_t>(0);
  auto clip_text = std::make_shared<std::string>();
  args->add_to(cmd);
  cmd->add_option("--clip", *clip_text, "Video: clip shape T x C x H x W to sample (default: the recipe's)");
  cmd->add_option("--weights", *weights, "vexp checkpoint, run directory (its latest checkpoint) or PyTorch state dict (.pth: torchvision, TSM, mmaction2)")
      ->required();
  cmd->add_option("--input", *input,
                  "Clip: .pt holding a float tensor [T,C,H,W] or [N,T,C,H,W], or a video file, sampled at the "
                  "recipe's clip shape T x C x H x W: kinetics recipes by their own test pipeline (sampling, views, "
                  "crops), other datasets at the centres of T equal segments (TSN), centre crop, the dataset's "
                  "normalisation")
      ->required();
  cmd->add_option("--topk", *topk, "Classes to print per clip")->check(CLI::PositiveNumber);
  cmd->add_option("--logits", *logits_out, "Write the raw logits to OUT.pt (torch.load) or OUT.json ({\"logits\": [[...]]})");
  cmd->add_option("--labels", *labels,
                  "Class names, one per line (default: the recipe's data.params.label_map (relative to its data root), "
                  "the dataset's class names, or classes.txt in the data root)");
  cmd->add_option("--classes", *classes, "Class count when the dataset cannot give it")->check(CLI::PositiveNumber);
  cmd->add_option("--short-side", *short_side, "Video: resize the shorter side to this before the centre crop "
                                               "(default: the dataset's scale, else crop size x 256/224)")
      ->check(CLI::PositiveNumber);
  cmd->callback([=] {
    if (!logits_out->empty() && !has_ext(*logits_out, {".pt", ".pth", ".json"}))
      throw base::invalid("--logits '" + *logits_out + "': the name must end in .pt or .json");
    if (!fs::is_regular_file(*input)) throw base::failure("--input '" + *input + "': no such file");
    const std::string weights_path = weights_file(*weights, "--weights");
    rundir::refuse_output(*logits_out, "--logits",
                  {{weights_path, "the checkpoint"}, {*input, "the input"}, {args->path, "the recipe"},
                   {*labels, "the label file"}});
    const bool tensor_input = has_ext(*input, {".pt", ".pth"});
    at::Tensor clips;
    ModelArgs m;
    m.classes = *classes;
    if (!clip_text->empty() && !tensor_input) m.clip = parse_clip_shape(*clip_text, "--clip");
    if (tensor_input) {
      try {
        clips = find_tensor(load_torch_file(*input), *input);
      } catch (const std::exception& e) {
        throw base::failure(e.what());
      }
      if (clips.dim() == 4) clips = clips.unsqueeze(0);
      if (clips.dim() != 5 || !clips.is_floating_point())
        throw base::failure("'" + *input + "' must hold a float tensor [T, C, H, W] or [N, T, C, H, W], got " +
                                     dsl::shape_str(dsl::Shape(clips.sizes().begin(), clips.sizes().end())) + " " +
                                     std::string(c10::toString(clips.scalar_type())));
      clips = clips.to(at::kFloat).contiguous();
      m.clip = dsl::Shape(clips.sizes().begin() + 1, clips.sizes().end());
    }
    Session s;
    int64_t view_count = 1;
    if (!open_model_session(s, *args, m)) throw base::invalid("");
    rundir::refuse_output(*logits_out, "--logits");  // the recipe's `extends` bases are read now
    dsl::Shape clip = clip_shape(s);
    if (!tensor_input) {
      if (clip.size() == 4 && clip[2] == clip[3] && s.plan->dataset == "kinetics" &&
          s.host.find("dataset", "kinetics")) {
        // The recipe's own test pipeline, every view; --clip without --short-side keeps
        // the usual 256/224 ratio of resize to crop.
        const int64_t side = *short_side > 0 ? *short_side : (m.clip ? default_short_side(clip[2]) : 0);
        clips = recipe_test_views(s, *input, clip, side);
        view_count = clips.size(0);
      } else {
        // Other datasets have no video pipeline: the plan's clip shape, TSN segment
        // centres, short-side resize, centre crop, the dataset's normalisation.
        if (clip.size() != 4 || (clip[1] != 1 && clip[1] != 3))
          throw base::invalid("'" + args->path + "': a video needs a clip shape [T, 1 or 3, H, W]; the recipe's is " +
                                       dsl::shape_str(clip) + " (give --clip TxCxHxW)");
        const VideoConvention v = video_convention(s, clip, *short_side);
        std::cerr << "vexp: video '" << *input << "': " << clip[0] << " segment centres, shorter side " << v.short_side
                  << ", centre crop " << clip[2] << "x" << clip[3] << ", " << (clip[1] == 1 ? "gray" : "RGB") << ", "
                  << v.what << "\n";
        clips = centre_clip(*input, clip, v);
      }
    }
    auto model = build_model(s);
    WeightReport r = load_model_weights(*model, weights_path, true);
    std::cerr << "vexp: " << r.summary(weights_path, false) << "\n";
    apply_memory_format(model->parameters(true), parse_memory_format(s.plan->run.memory_format));
    model->eval();
    at::Tensor logits;
    {
      c10::NoGradGuard no_grad;
      try {
        logits = model->forward(clips);
      } catch (const c10::Error& e) {
        throw base::failure(std::string("the model cannot run on '") + *input + "': " + e.what_without_backtrace());
      } catch (const std::exception& e) {
        throw base::failure(std::string("the model cannot run on '") + *input + "': " + e.what());
      }
    }
    if (logits.dim() != 2) throw base::failure("the model's output is not [N, classes] logits");
    // Several test views of one video (clips x crops): scores averaged, as in evaluation.
    if (view_count > 1) logits = logits.mean(0, /*keepdim=*/true);
    const auto [names, names_from] = class_names(s, *labels);
    if (!names.empty() && static_cast<int64_t>(names.size()) != logits.size(1))
      std::cerr << "vexp: warning: " << names_from << " names " << names.size() << " classes, the model has "
                << logits.size(1) << "\n";
    else if (!names.empty())
      std::cerr << "vexp: class names from " << names_from << "\n";
    at::Tensor prob = logits.softmax(1);
    const int64_t k = std::min<int64_t>(*topk, logits.size(1));
    auto top = prob.topk(k, 1);
    at::Tensor values = std::get<0>(top), indices = std::get<1>(top);
    for (int64_t n = 0; n < logits.size(0); ++n) {
      std::cout << "clip " << n << ":";
      for (int64_t j = 0; j < k; ++j) {
        const int64_t c = indices[n][j].item<int64_t>();
        char buf[64];
        std::snprintf(buf, sizeof buf, " %.4f", values[n][j].item<double>());
        std::cout << "  " << c;
        if (c < static_cast<int64_t>(names.size())) std::cout << " (" << names[static_cast<size_t>(c)] << ")";
        std::cout << buf;
      }
      std::cout << "\n";
    }
    if (!logits_out->empty()) {
      rundir::refuse_output(*logits_out, "--logits");  // and every file read since (the recipe's bases, the labels)
      if (has_ext(*logits_out, {".json"})) {
        nlohmann::json j;
        j["logits"] = nlohmann::json::array();
        at::Tensor l = logits.to(at::kDouble).contiguous();
        for (int64_t n = 0; n < l.size(0); ++n) {
          std::vector<double> row(l[n].data_ptr<double>(), l[n].data_ptr<double>() + l.size(1));
          j["logits"].push_back(row);
        }
        base::write_file_atomic(*logits_out, j.dump() + "\n");
      } else {
        save_tensor(*logits_out, logits);
      }
    }
  });
}

}  // namespace vexp::cli
