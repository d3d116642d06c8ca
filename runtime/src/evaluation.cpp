// `vexp eval`'s engine (evaluation.hpp): chunks of videos decoded by a pool of
// threads (the next chunk while this one runs the model), every view of a video in
// the same chunk, the views' logits averaged per video, the rows gathered on rank 0.
#include "vexp/runtime/evaluation.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include "vexp/base/error.hpp"

namespace vexp {

// ---- the protocol -----------------------------------------------------------

namespace {

int64_t int_param(const dsl::Params& p, const char* key, int64_t otherwise) {
  return p.has(key) && p.get(key).is_int() ? p.i64(key) : otherwise;
}
bool flag_param(const dsl::Params& p, const char* key) { return p.has(key) && p.get(key).is_bool() && p.flag(key); }
std::string text_param(const dsl::Params& p, const char* key) {
  return p.has(key) && p.get(key).is_string() ? p.str(key) : std::string();
}

}  // namespace

EvalProtocol eval_protocol(const dsl::RecipePlan& plan, int64_t views) {
  const dsl::Params& p = plan.dataset_params;
  EvalProtocol e;
  e.dataset = plan.dataset;
  e.sampling = text_param(p, "sampling");
  e.frames = plan.data_facts.clip.empty() ? 0 : plan.data_facts.clip[0];
  if (e.sampling == "dense") e.frame_interval = int_param(p, "frame_interval", 0);
  e.clips = int_param(p, "test_clips", 1);
  e.crops = int_param(p, "test_crops", 1);
  e.twice_sample = e.sampling == "tsn" && flag_param(p, "twice_sample");
  e.full_res = flag_param(p, "test_full_res");
  e.input_size = int_param(p, "input_size", 0);
  e.scale_size = int_param(p, "scale_size", 0);
  e.crop_size = e.full_res ? e.scale_size : e.input_size;
  e.views = views;
  for (const dsl::PluginUse& t : plan.test_transforms) {
    std::string text = t.type + "(";
    bool first = true;
    for (const auto& [k, v] : t.params.values()) {
      text += (first ? "" : ", ") + k + " = " + v.to_toml_inline();
      first = false;
    }
    e.transforms.push_back(text + ")");
  }
  // A test pipeline makes the crops: views / temporal clips of them.
  const int64_t temporal = e.clips * (e.twice_sample ? 2 : 1);
  if (!e.transforms.empty() && temporal > 0 && views % temporal == 0) e.crops = views / temporal;
  return e;
}

std::string EvalProtocol::name() const {
  std::string n = sampling.empty() ? std::string() : sampling + "-";
  n += std::to_string(clips) + "x" + std::to_string(crops);
  if (twice_sample) n += "-twice";
  if (full_res) n += "-fullres";
  return n;
}

nlohmann::json EvalProtocol::to_json() const {
  nlohmann::json j;
  j["name"] = name();
  j["dataset"] = dataset;
  j["sampling"] = sampling.empty() ? nlohmann::json() : nlohmann::json(sampling);
  j["frames"] = frames;
  if (frame_interval > 0) j["frame_interval"] = frame_interval;
  j["test_clips"] = clips;
  j["test_crops"] = crops;
  j["twice_sample"] = twice_sample;
  j["full_res"] = full_res;
  j["scale_size"] = scale_size > 0 ? nlohmann::json(scale_size) : nlohmann::json();
  j["input_size"] = input_size > 0 ? nlohmann::json(input_size) : nlohmann::json();
  j["crop_size"] = crop_size > 0 ? nlohmann::json(crop_size) : nlohmann::json();
  j["views"] = views;
  if (!transforms.empty()) j["test_transforms"] = transforms;
  j["averaging"] = "the mean of a video's views' logits (before softmax)";
  return j;
}

// ---- sharding -----------------------------------------------------------------

namespace {
int64_t videos_per_chunk(int64_t views, int64_t batch) {
  return std::max<int64_t>(1, batch / std::max<int64_t>(1, views));
}
}  // namespace

std::pair<int64_t, int64_t> eval_shard(int64_t videos, int64_t views, int64_t batch, int rank, int ranks) {
  const int64_t per = videos_per_chunk(views, batch);
  const int64_t chunks = (videos + per - 1) / per;
  const int64_t first = chunks * rank / ranks, end = chunks * (rank + 1) / ranks;
  return {std::min(videos, first * per), std::min(videos, end * per)};
}

// ---- decoding -------------------------------------------------------------------

namespace {

struct LoadedVideo {
  int64_t index = 0;
  int64_t label = -1;
  std::vector<at::Tensor> views;
  std::string error;  // "" when every view loaded
};

// Every view of `videos`, decoded by `workers` threads; a view that fails fails its
// video (the first failing view's error is kept), never replaced by another video.
std::vector<LoadedVideo> load_videos(const Dataset& data, std::vector<int64_t> videos, int64_t views, int64_t workers) {
  const size_t n = videos.size(), v = static_cast<size_t>(views), tasks = n * v;
  std::vector<LoadedVideo> out(n);
  std::vector<std::string> errors(tasks);
  std::vector<int64_t> labels(tasks, -1);
  std::unique_ptr<std::atomic<bool>[]> failed(new std::atomic<bool>[n]);
  for (size_t i = 0; i < n; ++i) {
    failed[i] = false;
    out[i].index = videos[i];
    out[i].views.resize(v);
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t t; (t = next.fetch_add(1)) < tasks;) {
      const size_t i = t / v;
      if (failed[i]) continue;  // its video failed already: no need to decode the rest
      try {
        Sample s = data.get_view(Split::Val, videos[i], static_cast<int64_t>(t % v), 0);
        out[i].views[t % v] = std::move(s.clip);
        labels[t] = s.label;
      } catch (const std::exception& e) {
        errors[t] = *e.what() ? e.what() : "unknown error";
        failed[i] = true;
      }
    }
  };
  const size_t threads = std::min<size_t>(tasks, static_cast<size_t>(std::max<int64_t>(0, workers)));
  if (threads == 0) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (size_t k = 0; k < threads; ++k) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < v; ++k) {
      if (!errors[i * v + k].empty()) {
        out[i].error = errors[i * v + k];
        break;
      }
    }
    if (!failed[i]) out[i].label = labels[i * v];
    if (!out[i].error.empty() || failed[i]) {
      if (out[i].error.empty()) out[i].error = "a view of it failed to load";
      out[i].views.clear();
    }
  }
  return out;
}

// The model's logits for `clips` (in order), `batch` clips per forward pass: [clips, K] float on the CPU.
at::Tensor forward_clips(ModelGraph& model, const std::vector<at::Tensor>& clips, int64_t batch, const EvalOptions& o) {
  std::vector<at::Tensor> pieces;
  const size_t step = static_cast<size_t>(std::max<int64_t>(1, batch));
  for (size_t a = 0; a < clips.size(); a += step) {
    const size_t b = std::min(clips.size(), a + step);
    at::Tensor x = at::stack(at::TensorList(clips.data() + a, b - a)).to(o.device);
    at::Tensor y;
    {
      AutocastScope autocast(o.device.type(), o.precision);
      y = model.forward(x);
    }
    if (y.dim() != 2 || y.size(0) != static_cast<int64_t>(b - a))
      throw base::failure("the model's output for " + std::to_string(b - a) + " clips has shape " +
                               c10::str(y.sizes()) + ", not [clips, classes] logits");
    pieces.push_back(y.to(at::kFloat).cpu());
  }
  return pieces.size() == 1 ? pieces[0] : at::cat(pieces);
}

// Text that travels between ranks as one field of a record: no separators, no NUL.
std::string field(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\x1e' || c == '\x1f' || c == '\0') c = ' ';
  return out;
}

// Every rank's `text`, in rank order (a collective).
std::vector<std::string> gather_text(Comm& comm, const std::string& text) {
  at::Tensor len = at::full({1}, static_cast<int64_t>(text.size()), at::kLong);
  comm.allreduce(len, ReduceOp::Max);
  const int64_t n = len.item<int64_t>();
  std::vector<std::string> out(static_cast<size_t>(comm.size()));
  if (n == 0) return out;
  at::Tensor mine = at::zeros({n}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), text.data(), text.size());
  const at::Tensor all = comm.allgather(mine).contiguous().cpu();
  const char* p = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < comm.size(); ++r) {
    const char* row = p + r * n;
    out[static_cast<size_t>(r)] = std::string(row, strnlen(row, static_cast<size_t>(n)));
  }
  return out;
}

std::string encode_failures(const std::vector<VideoFailure>& fs) {
  std::string t;
  for (const auto& f : fs)
    t += std::to_string(f.index) + '\x1f' + std::to_string(f.label) + '\x1f' + field(f.item) + '\x1f' + field(f.error) +
         '\x1e';
  return t;
}

std::vector<VideoFailure> decode_failures(const std::string& text) {
  std::vector<VideoFailure> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\x1e', at), text.size());
    std::vector<std::string> parts;
    size_t p = at;
    for (int k = 0; k < 3; ++k) {
      const size_t q = std::min(text.find('\x1f', p), end);
      parts.push_back(text.substr(p, q - p));
      p = std::min(q + 1, end);
    }
    parts.push_back(text.substr(p, end - p));
    VideoFailure f;
    f.index = std::stoll(parts[0]);
    f.label = std::stoll(parts[1]);
    f.item = parts[2];
    f.error = parts[3];
    out.push_back(std::move(f));
    at = end + 1;
  }
  return out;
}

}  // namespace

// ---- the evaluation ---------------------------------------------------------------

EvalOutput evaluate_videos(ModelGraph& model, const Dataset& data, Comm& comm, const EvalOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  EvalOutput out;
  out.videos = data.size(Split::Val);
  out.views = std::max<int64_t>(1, data.views(Split::Val));
  out.classes = data.num_classes();
  const int64_t K = out.classes, V = out.views;
  const int rank = comm.rank(), ranks = comm.size();
  const auto [first, end] = eval_shard(out.videos, V, o.batch, rank, ranks);
  const int64_t mine = end - first;
  out.rank_videos = mine;
  model.eval();
  c10::NoGradGuard no_grad;

  // This rank's rows: NaN until a video's views are averaged into it.
  at::Tensor logits = at::full({mine, K}, std::numeric_limits<float>::quiet_NaN(), at::kFloat);
  at::Tensor labels = at::full({mine}, int64_t(-1), at::kLong);
  std::vector<VideoFailure> failures;
  const int64_t per = videos_per_chunk(V, o.batch);
  std::vector<std::vector<int64_t>> chunks;
  for (int64_t a = first; a < end; a += per) {
    chunks.emplace_back();
    for (int64_t i = a; i < std::min(end, a + per); ++i) chunks.back().push_back(i);
  }
  auto load = [&data, V, &o](std::vector<int64_t> videos) {
    return load_videos(data, std::move(videos), V, o.workers);
  };
  std::future<std::vector<LoadedVideo>> pending;
  if (!chunks.empty()) pending = std::async(std::launch::async, load, chunks[0]);
  int64_t done = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::vector<LoadedVideo> loaded = pending.get();
    if (c + 1 < chunks.size()) pending = std::async(std::launch::async, load, chunks[c + 1]);
    std::vector<at::Tensor> clips;
    std::vector<const LoadedVideo*> ok;
    for (const LoadedVideo& v : loaded) {
      if (!v.error.empty()) {
        failures.push_back({v.index, -1, "", v.error});
        continue;
      }
      ok.push_back(&v);
      clips.insert(clips.end(), v.views.begin(), v.views.end());
    }
    if (!ok.empty()) {
      at::Tensor y = forward_clips(model, clips, o.batch, o);
      if (y.size(1) != K)
        throw base::failure("the model gives " + std::to_string(y.size(1)) +
                                 " logits per clip, but the dataset has " + std::to_string(K) + " classes");
      // Each video's views are consecutive rows: their mean is the video's logits.
      const at::Tensor per_video = y.view({static_cast<int64_t>(ok.size()), V, K}).mean(1);
      for (size_t k = 0; k < ok.size(); ++k) {
        logits[ok[k]->index - first].copy_(per_video[static_cast<int64_t>(k)]);
        labels[ok[k]->index - first] = ok[k]->label;
      }
    }
    done += static_cast<int64_t>(loaded.size());
    if (o.progress) o.progress(done, mine);
  }
  // A failed video's file and listed label, as the dataset's own check reports them.
  for (VideoFailure& f : failures) {
    try {
      const ItemReport r = data.inspect(Split::Val, f.index);
      f.item = r.path;
      f.label = r.label;
    } catch (const std::exception&) {
      // the error of the load says what there is to say
    }
    if (f.label >= 0) labels[f.index - first] = f.label;
  }

  if (ranks == 1) {
    out.logits = logits;
    out.labels = labels;
    out.failures = std::move(failures);
  } else {
    // Padded to the largest share for the transport only: each row is one video's, once.
    int64_t widest = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto [a, b] = eval_shard(out.videos, V, o.batch, r, ranks);
      widest = std::max(widest, b - a);
    }
    at::Tensor l = at::full({widest, K}, std::numeric_limits<float>::quiet_NaN(), at::kFloat);
    at::Tensor lab = at::full({widest}, int64_t(-1), at::kLong);
    if (mine > 0) {
      l.narrow(0, 0, mine).copy_(logits);
      lab.narrow(0, 0, mine).copy_(labels);
    }
    const at::Tensor all_l = comm.allgather(l).contiguous().cpu();
    const at::Tensor all_lab = comm.allgather(lab).contiguous().cpu();
    const std::vector<std::string> texts = gather_text(comm, encode_failures(failures));
    if (rank == 0) {
      out.logits = at::empty({out.videos, K}, at::kFloat);
      out.labels = at::empty({out.videos}, at::kLong);
      for (int r = 0; r < ranks; ++r) {
        const auto [a, b] = eval_shard(out.videos, V, o.batch, r, ranks);
        if (b > a) {
          out.logits.narrow(0, a, b - a).copy_(all_l[r].narrow(0, 0, b - a));
          out.labels.narrow(0, a, b - a).copy_(all_lab[r].narrow(0, 0, b - a));
        }
        for (auto& f : decode_failures(texts[static_cast<size_t>(r)])) out.failures.push_back(std::move(f));
      }
    }
  }
  std::sort(out.failures.begin(), out.failures.end(),
            [](const VideoFailure& a, const VideoFailure& b) { return a.index < b.index; });
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// ---- the figures ------------------------------------------------------------------

EvalFigures eval_figures(const EvalOutput& out) {
  EvalFigures f;
  f.videos = out.videos;
  f.classes = out.classes;
  f.failed = static_cast<int64_t>(out.failures.size());
  f.k = std::min<int64_t>(5, std::max<int64_t>(1, out.classes));
  const int64_t K = out.classes;
  f.per_class.assign(static_cast<size_t>(K), ClassFigures{});
  f.confusion.assign(static_cast<size_t>(K), std::vector<int64_t>(static_cast<size_t>(K), 0));
  f.predicted.assign(static_cast<size_t>(out.videos), -1);
  std::vector<bool> failed(static_cast<size_t>(out.videos), false);
  for (const auto& x : out.failures)
    if (x.index >= 0 && x.index < out.videos) failed[static_cast<size_t>(x.index)] = true;
  if (out.videos == 0 || K == 0) return f;
  const at::Tensor top = std::get<1>(out.logits.topk(f.k, 1, /*largest=*/true, /*sorted=*/true)).contiguous();
  const auto t = top.accessor<int64_t, 2>();
  const at::Tensor lab = out.labels.contiguous();
  const auto y = lab.accessor<int64_t, 1>();
  for (int64_t i = 0; i < out.videos; ++i) {
    const int64_t label = y[i];
    const bool known = label >= 0 && label < K;
    if (known) ++f.per_class[static_cast<size_t>(label)].videos;
    if (failed[static_cast<size_t>(i)]) continue;
    ++f.evaluated;
    const int64_t pred = t[i][0];
    f.predicted[static_cast<size_t>(i)] = pred;
    if (!known) continue;
    ClassFigures& c = f.per_class[static_cast<size_t>(label)];
    ++c.evaluated;
    ++f.confusion[static_cast<size_t>(label)][static_cast<size_t>(pred)];
    if (pred == label) {
      ++c.correct;
      ++f.correct1;
    }
    for (int64_t j = 0; j < f.k; ++j)
      if (t[i][j] == label) {
        ++f.correctk;
        break;
      }
  }
  if (f.evaluated > 0) {
    f.top1 = static_cast<double>(f.correct1) / static_cast<double>(f.evaluated);
    f.top5 = static_cast<double>(f.correctk) / static_cast<double>(f.evaluated);
  }
  f.top1_all = static_cast<double>(f.correct1) / static_cast<double>(f.videos);
  f.top5_all = static_cast<double>(f.correctk) / static_cast<double>(f.videos);
  double sum = 0, sum_all = 0;
  for (const auto& c : f.per_class) {
    if (c.evaluated > 0) {
      sum += static_cast<double>(c.correct) / static_cast<double>(c.evaluated);
      ++f.classes_evaluated;
    }
    if (c.videos > 0) {
      sum_all += static_cast<double>(c.correct) / static_cast<double>(c.videos);
      ++f.classes_listed;
    }
  }
  if (f.classes_evaluated > 0) f.mean_class = sum / static_cast<double>(f.classes_evaluated);
  if (f.classes_listed > 0) f.mean_class_all = sum_all / static_cast<double>(f.classes_listed);
  return f;
}

}  // namespace vexp
