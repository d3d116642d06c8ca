// vexp predict RECIPE --weights FILE|RUN_DIR --input FILE [--topk K] [--logits OUT] [--labels FILE]
// Runs the recipe's model in evaluation mode on a preprocessed clip tensor (.pt)
// or a video file and prints the top-K classes, with their names where known.

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

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

// The usual resize before a centre crop: crop x 256/224, rounded up.
int64_t default_short_side(int64_t crop) { return (crop * 256 + 223) / 224; }

// The recipe's test views of one video, made by its dataset plugin
// (Dataset::file_views: its file reader when it registers one, else the dataset
// itself) with the recipe's test pipeline attached. Undefined clips: the plugin
// makes no views of a file, and `why_not` says why.
FileViews dataset_file_views(const Session& s, const std::string& video, const dsl::Shape& clip, int64_t short_side,
                             std::string& why_not) {
  const std::string& name = s.plan->dataset;
  const bool has_reader = s.host.has_file_reader(name);
  std::shared_ptr<Dataset> reader;
  try {
    reader = has_reader ? s.host.make_file_reader(name, s.plan->dataset_params)
                        : s.host.make<Dataset>("dataset", name, s.plan->dataset_params);
  } catch (const std::exception& e) {
    if (has_reader) throw base::failure("cannot use video '" + video + "': " + e.what());
    why_not = "the dataset '" + name + "' cannot be made here (" + e.what() + ")";
    return {};
  }
  attach_transforms(*reader, s.host, *s.plan);  // the recipe's test pipeline, when it gives one
  FileViewRequest r;
  std::error_code ec;
  r.path = fs::absolute(video, ec).string();
  if (ec) r.path = video;
  r.clip = clip;
  r.short_side = short_side;
  FileViews v;
  try {
    v = reader->file_views(r);
  } catch (const std::invalid_argument& e) {
    throw base::invalid("cannot use video '" + video + "': " + e.what());
  } catch (const std::exception& e) {
    throw base::failure("cannot use video '" + video + "': " + e.what());
  }
  if (!v.clips.defined()) {
    why_not = "the dataset '" + name + "' makes no views of a file (its plugin has no Dataset::file_views)";
    return v;
  }
  const dsl::Shape got(v.clips.sizes().begin(), v.clips.sizes().end());
  if (got.size() != 5 || got[0] < 1 || !std::equal(clip.begin(), clip.end(), got.begin() + 1) ||
      v.clips.scalar_type() != at::kFloat)
    throw base::failure("the dataset '" + name + "' made " + dsl::shape_str(got) + " " +
                        std::string(c10::toString(v.clips.scalar_type())) + " views of '" + video +
                        "', not float [views] + " + dsl::shape_str(clip));
  return v;
}

// A video for a recipe whose dataset makes no views of a file: one frame at the
// centre of each of T equal segments (TSN's test sampling), the shorter side resized
// to `short_side`, centre crop, ImageNet's mean and std (the gray mean and std of
// its luma for one channel). Returns [1, T, C, H, W] (C: 1 gray or 3 RGB).
at::Tensor centre_clip(const std::string& video, const dsl::Shape& clip, int64_t short_side) {
  media::CentreClip c;
  c.frames = static_cast<int>(clip[0]);
  c.height = static_cast<int>(clip[2]);
  c.width = static_cast<int>(clip[3]);
  c.short_side = static_cast<int>(short_side);
  c.channels = static_cast<int>(clip[1]);
  const std::vector<double> mean = clip[1] == 3 ? std::vector<double>{0.485, 0.456, 0.406} : std::vector<double>{0.449};
  const std::vector<double> std_ = clip[1] == 3 ? std::vector<double>{0.229, 0.224, 0.225} : std::vector<double>{0.226};
  media::quiet_ffmpeg_logs();  // a bad file is one MediaError (a failure) naming it
  const std::vector<uint8_t> pixels = media::read_centre_clip(video, c);
  const int64_t T = clip[0], C = clip[1], H = clip[2], W = clip[3];
  at::Tensor out = at::empty({1, T, C, H, W});
  float* o = out.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t ch = 0; ch < C; ++ch) {
      const float m = static_cast<float>(mean[static_cast<size_t>(ch)] * 255.0);
      const float sd = static_cast<float>(std_[static_cast<size_t>(ch)] * 255.0);
      for (int64_t i = 0; i < H * W; ++i)
        *o++ = (static_cast<float>(pixels[static_cast<size_t>((t * H * W + i) * C + ch)]) - m) / sd;
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
                  "Clip: .pt holding a float tensor [T,C,H,W] or [N,T,C,H,W], or a video file made into the recipe's "
                  "test views (clip shape T x C x H x W) by its dataset plugin (Dataset::file_views: kinetics by its "
                  "test sampling, crops and normalisation, synthetic_motion whole frames as its clips), else at the "
                  "centres of T equal segments (TSN), centre crop, ImageNet normalisation; the views' scores are "
                  "averaged")
      ->required();
  cmd->add_option("--topk", *topk, "Classes to print per clip")->check(CLI::PositiveNumber);
  cmd->add_option("--logits", *logits_out, "Write the raw logits to OUT.pt (torch.load) or OUT.json ({\"logits\": [[...]]})");
  cmd->add_option("--labels", *labels,
                  "Class names, one per line (default: the recipe's data.params.label_map (relative to its data root), "
                  "the dataset's class names, or classes.txt in the data root)");
  cmd->add_option("--classes", *classes, "Class count when the dataset cannot give it")->check(CLI::PositiveNumber);
  cmd->add_option("--short-side", *short_side, "Video: resize the shorter side to this before cropping "
                                               "(default: the dataset's own, else crop size x 256/224)")
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
      if (clip.size() != 4 || (clip[1] != 1 && clip[1] != 3))
        throw base::invalid("'" + args->path + "': a video needs a clip shape [T, 1 or 3, H, W]; the recipe's is " +
                            dsl::shape_str(clip) + " (give --clip TxCxHxW)");
      std::string why_not;
      FileViews v = dataset_file_views(s, *input, clip, *short_side, why_not);
      if (v.clips.defined()) {
        clips = v.clips.contiguous();
        view_count = clips.size(0);
        std::cerr << "vexp: video '" << base::printable(*input) << "': " << base::printable(v.how) << "\n";
      } else {
        // The generic reading: TSN segment centres, short-side resize, centre crop,
        // ImageNet normalisation.
        const int64_t side = *short_side > 0 ? *short_side : default_short_side(std::min(clip[2], clip[3]));
        std::cerr << "vexp: video '" << base::printable(*input) << "': " << clip[0] << " segment centres, shorter side "
                  << side << ", centre crop " << clip[2] << "x" << clip[3] << ", " << (clip[1] == 1 ? "gray" : "RGB")
                  << ", ImageNet mean and std: " << base::printable(why_not) << "\n";
        clips = centre_clip(*input, clip, side);
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
