// vexp predict RECIPE --weights FILE --input FILE [--topk K] [--logits OUT]
// Runs the recipe's model in evaluation mode on a preprocessed clip tensor (.pt)
// or a video file and prints the top-K classes.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "vexp/runtime/checkpoint.hpp"
#include "model_session.hpp"
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

std::vector<std::string> read_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Exit{kExitFailure, "cannot read the label file '" + path + "'"};
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    names.push_back(line);
  }
  return names;
}

// The recipe's test pipeline for one video: the kinetics dataset plugin, given a
// one-line list naming the file, samples, crops and normalises it exactly as
// evaluation does, every view (test_clips x test_crops). Returns [views, T, C, H, W].
// `clip` ([T, 3, H, W] with H == W) and `short_side` (> 0) override the recipe's
// frames, input_size and scale_size, as --clip and --short-side say.
at::Tensor recipe_test_views(const Session& s, const std::string& video, const dsl::Shape& clip, int64_t short_side) {
  std::error_code ec;
  const fs::path abs = fs::absolute(video, ec);
  if (ec || !fs::is_regular_file(abs)) throw Exit{kExitFailure, "cannot read video '" + video + "': no such file"};
  const fs::path dir = fs::temp_directory_path() / ("vexp_predict_" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{dir};
  std::ofstream(dir / "predict.txt") << abs.string() << " 0\n";
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
    std::vector<at::Tensor> views;
    for (int64_t v = 0; v < data->views(Split::Val); ++v) views.push_back(data->get_view(Split::Val, 0, v, 0).clip);
    return at::stack(views);
  } catch (const std::exception& e) {
    throw Exit{kExitFailure, "cannot use video '" + video + "': " + e.what()};
  }
}

// A video for a recipe whose dataset has no video pipeline: TSN segment centres,
// short-side resize, centre crop, ImageNet normalisation (mean 123.675, 116.28,
// 103.53 and std 58.395, 57.12, 57.375 on 0..255). Returns [1, T, 3, H, W].
at::Tensor centre_clip(const std::string& video, const dsl::Shape& clip, int64_t short_side) {
  media::CentreClip c;
  c.frames = static_cast<int>(clip[0]);
  c.height = static_cast<int>(clip[2]);
  c.width = static_cast<int>(clip[3]);
  c.short_side = static_cast<int>(short_side);
  c.channels = 3;
  std::vector<uint8_t> pixels;
  try {
    pixels = media::read_centre_clip(video, c);
  } catch (const media::MediaError& e) {
    throw Exit{kExitFailure, std::string("cannot decode video ") + e.what()};
  }
  const int64_t T = clip[0], H = clip[2], W = clip[3];
  at::Tensor out = at::empty({1, T, 3, H, W});
  const float mean[3] = {123.675f, 116.28f, 103.53f};
  const float stdv[3] = {58.395f, 57.12f, 57.375f};
  float* o = out.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t i = 0; i < H * W; ++i)
        *o++ = (static_cast<float>(pixels[static_cast<size_t>((t * H * W + i) * 3 + ch)]) - mean[ch]) / stdv[ch];
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
  cmd->add_option("--clip", *clip_text, "Video: clip shape T x 3 x H x W to sample (default: the dataset's)");
  cmd->add_option("--weights", *weights, "vexp checkpoint, run directory (its latest checkpoint) or PyTorch state dict (.pth: torchvision, TSM, mmaction2)")
      ->required();
  cmd->add_option("--input", *input, "Clip: .pt holding a float tensor [T,3,H,W] or [N,T,3,H,W], or a video file")
      ->required();
  cmd->add_option("--topk", *topk, "Classes to print per clip")->check(CLI::PositiveNumber);
  cmd->add_option("--logits", *logits_out, "Write the raw logits to OUT.pt (torch.load) or OUT.json ({\"logits\": [[...]]})");
  cmd->add_option("--labels", *labels, "Class names, one per line (default: the recipe's data.params.label_map if any)");
  cmd->add_option("--classes", *classes, "Class count when the dataset cannot give it")->check(CLI::PositiveNumber);
  cmd->add_option("--short-side", *short_side, "Video: resize the shorter side to this before the centre crop "
                                               "(default: crop size x 256/224)")->check(CLI::PositiveNumber);
  cmd->callback([=] {
    if (!logits_out->empty() && !has_ext(*logits_out, {".pt", ".pth", ".json"}))
      throw Exit{kExitInvalid, "--logits '" + *logits_out + "': the name must end in .pt or .json"};
    if (!fs::is_regular_file(*input)) throw Exit{kExitFailure, "--input '" + *input + "': no such file"};
    const std::string weights_path = weights_file(*weights, "--weights");
    const bool tensor_input = has_ext(*input, {".pt", ".pth"});
    at::Tensor clips;
    ModelArgs m;
    m.classes = *classes;
    if (!clip_text->empty() && !tensor_input) m.clip = parse_clip_shape(*clip_text, "--clip");
    if (tensor_input) {
      try {
        clips = find_tensor(load_torch_file(*input), *input);
      } catch (const std::exception& e) {
        throw Exit{kExitFailure, e.what()};
      }
      if (clips.dim() == 4) clips = clips.unsqueeze(0);
      if (clips.dim() != 5 || !clips.is_floating_point())
        throw Exit{kExitFailure, "'" + *input + "' must hold a float tensor [T, C, H, W] or [N, T, C, H, W], got " +
                                     dsl::shape_str(dsl::Shape(clips.sizes().begin(), clips.sizes().end())) + " " +
                                     std::string(c10::toString(clips.scalar_type()))};
      clips = clips.to(at::kFloat).contiguous();
      m.clip = dsl::Shape(clips.sizes().begin() + 1, clips.sizes().end());
    }
    Session s;
    int64_t view_count = 1;
    if (!open_model_session(s, *args, m)) throw Exit{kExitInvalid, ""};
    dsl::Shape clip = clip_shape(s);
    if (!tensor_input) {
      if (clip.size() == 4 && clip[2] == clip[3] && s.plan->dataset == "kinetics" &&
          s.host.find("dataset", "kinetics")) {
        // The recipe's own test pipeline, every view; --clip without --short-side keeps
        // the usual 256/224 ratio of resize to crop.
        const int64_t side = *short_side > 0 ? *short_side : (m.clip ? (clip[2] * 256 + 223) / 224 : 0);
        clips = recipe_test_views(s, *input, clip, side);
        view_count = clips.size(0);
      } else {
        // Other datasets have no video pipeline: TSN segment centres, short-side
        // resize, centre crop, ImageNet normalisation.
        if (clip.size() != 4 || clip[1] != 3)
          throw Exit{kExitInvalid, "'" + args->path + "': video input needs the dataset's clip shape [T, 3, H, W]"};
        clips = centre_clip(*input, clip, *short_side > 0 ? *short_side : (clip[2] * 256 + 111) / 224);
      }
    }
    auto model = build_model(s);
    WeightReport r = load_model_weights(*model, weights_path, true);
    std::cerr << "vexp: " << r.summary(weights_path, false) << "\n";
    apply_memory_format(model->parameters(true), parse_memory_format(s.plan->run.memory_format));
    model->eval();
    at::Tensor logits;
    {
      at::NoGradGuard no_grad;
      try {
        logits = model->forward(clips);
      } catch (const c10::Error& e) {
        throw Exit{kExitFailure, std::string("the model cannot run on '") + *input + "': " + e.what_without_backtrace()};
      } catch (const std::exception& e) {
        throw Exit{kExitFailure, std::string("the model cannot run on '") + *input + "': " + e.what()};
      }
    }
    if (logits.dim() != 2) throw Exit{kExitFailure, "the model's output is not [N, classes] logits"};
    // Several test views of one video (clips x crops): scores averaged, as in evaluation.
    if (view_count > 1) logits = logits.mean(0, /*keepdim=*/true);
    std::vector<std::string> names;
    std::string label_file = *labels;
    if (label_file.empty() && s.plan->dataset_params.has("label_map") &&
        s.plan->dataset_params.get("label_map").is_string())
      label_file = s.plan->dataset_params.str("label_map");
    if (!label_file.empty()) names = read_labels(label_file);
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
      if (has_ext(*logits_out, {".json"})) {
        nlohmann::json j;
        j["logits"] = nlohmann::json::array();
        at::Tensor l = logits.to(at::kDouble).contiguous();
        for (int64_t n = 0; n < l.size(0); ++n) {
          std::vector<double> row(l[n].data_ptr<double>(), l[n].data_ptr<double>() + l.size(1));
          j["logits"].push_back(row);
        }
        write_file_atomic(*logits_out, j.dump() + "\n");
      } else {
        save_tensor(*logits_out, logits);
      }
    }
  });
}

}  // namespace vexp::cli
