#include "vexp/runtime/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "vexp/runtime/torch_save.hpp"

namespace vexp {
namespace fs = std::filesystem;

namespace {
constexpr const char* kFormat = "vexp-checkpoint-1";

// A temporary name of this process's own in the same folder, fsync, rename, then
// fsync of the folder: readers see the old file or the new one, never a torn one,
// two writers never share a temporary file, and the rename itself reaches the disk.
// A leftover temporary of the same name can only be a dead process's: truncated.
void write_bytes_atomic(const std::string& path, const char* data, size_t size, unsigned mode) {
  const fs::path target(path);
  const fs::path tmp =
      target.parent_path() / ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename '" + tmp.string() + "' to '" + path + "': " + std::strerror(err));
  }
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  if (int dfd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

c10::IValue to_dict(const std::map<std::string, at::Tensor>& tensors) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& [k, v] : tensors) d.insert(k, v.detach().cpu().contiguous());
  return d;
}

std::map<std::string, at::Tensor> from_dict(const c10::IValue& v, const std::string& path, const char* what) {
  if (!v.isGenericDict()) throw std::runtime_error("'" + path + "' is not a vexp checkpoint: '" + what + "' is not a dict");
  std::map<std::string, at::Tensor> out;
  for (const auto& item : v.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::runtime_error("'" + path + "' is not a vexp checkpoint: '" + what + "' holds a non-tensor entry");
    out[item.key().toStringRef()] = item.value().toTensor();
  }
  return out;
}

// When `path` is a torch.save state dict (torchvision, the official TSM code,
// mmaction2, a vexp export), what it is and what to do with it: it loads as
// weights, not as a run's state to continue. Empty otherwise.
std::string state_dict_hint(const std::string& path) {
  std::vector<std::pair<std::string, at::Tensor>> sd;
  try {
    sd = find_state_dict(load_torch_file(path), path);
  } catch (const std::exception&) {
    return "";
  }
  return "'" + path + "' is a torch.save state dict (" + std::to_string(sd.size()) + " tensors" +
         (sd.empty() ? std::string() : ", e.g. '" + sd.front().first + "'") +
         "), not a vexp checkpoint (which also holds the optimizer state and the run's position): use it as "
         "weights, `vexp predict RECIPE --weights " + path + "` or a model node's `pretrained = \"" + path + "\"`";
}

// Why the bytes of `path` do not unpickle as a checkpoint.
std::string unreadable(const std::string& path, const std::vector<char>& bytes) {
  if (bytes.empty()) return "'" + path + "' is empty, not a vexp checkpoint (a copy or a write that did not finish?)";
  std::string hint = state_dict_hint(path);
  if (!hint.empty()) return hint;
  return "'" + path + "' is not a readable checkpoint (truncated or corrupt?)";
}
}  // namespace

std::string checkpoint_file_name(int64_t epoch, int64_t epoch_step) {
  char buf[48];
  if (epoch_step == 0)
    std::snprintf(buf, sizeof buf, "epoch_%04lld.pt", static_cast<long long>(epoch));
  else
    std::snprintf(buf, sizeof buf, "epoch_%04lld_step_%06lld.pt", static_cast<long long>(epoch),
                  static_cast<long long>(epoch_step));
  return buf;
}

std::vector<std::string> checkpoints_newest_first(const std::string& dir) {
  std::vector<std::pair<std::pair<long long, long long>, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    long long e = 0, st = 0;
    int used = 0;
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    if (std::sscanf(f.c_str(), "epoch_%lld_step_%lld.pt%n", &e, &st, &used) == 2 && used == static_cast<int>(f.size())) {
      found.push_back({{e, st}, it->path().string()});
    } else if (std::sscanf(f.c_str(), "epoch_%lld.pt%n", &e, &used) == 1 && used == static_cast<int>(f.size())) {
      found.push_back({{e, 0}, it->path().string()});
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string latest_checkpoint(const std::string& dir) {
  auto all = checkpoints_newest_first(dir);
  return all.empty() ? "" : all.front();
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep, const std::string& written) {
  std::vector<std::string> removed;
  if (keep < 1) return removed;
  const std::vector<std::string> all = checkpoints_newest_first(dir);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) {
    if (!written.empty() && fs::equivalent(all[i], written, ec)) continue;
    if (fs::remove(all[i], ec)) removed.push_back(all[i]);
  }
  return removed;
}

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode) {
  write_bytes_atomic(path, content.data(), content.size(), mode);
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert(c10::IValue(std::string("format")), c10::IValue(std::string(kFormat)));
  root.insert(c10::IValue(std::string("model")), to_dict(ckpt.model));
  root.insert(c10::IValue(std::string("optimizer")), to_dict(ckpt.optimizer));
  root.insert(c10::IValue(std::string("meta")), c10::IValue(ckpt.meta_json));
  std::vector<char> bytes = pickle_save_plain(c10::IValue(root));
  write_bytes_atomic(path, bytes.data(), bytes.size(), 0644);
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read checkpoint '" + path + "': " + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(bytes);
  } catch (const std::exception&) {
    throw std::runtime_error(unreadable(path, bytes));
  }
  if (!v.isGenericDict()) throw std::runtime_error(unreadable(path, bytes));
  auto d = v.toGenericDict();
  auto has = [&](const char* k) { return d.contains(c10::IValue(std::string(k))); };
  auto get = [&](const char* k) { return d.at(c10::IValue(std::string(k))); };
  if (!has("format") || !get("format").isString() || get("format").toStringRef() != kFormat) {
    std::string hint = state_dict_hint(path);
    if (!hint.empty()) throw std::runtime_error(hint);
    throw std::runtime_error("'" + path + "' is not a vexp checkpoint (no format tag '" + kFormat + "')");
  }
  Checkpoint c;
  if (!has("model") || !has("optimizer") || !has("meta") || !get("meta").isString())
    throw std::runtime_error("'" + path + "' is not a vexp checkpoint (missing model, optimizer or meta)");
  c.model = from_dict(get("model"), path, "model");
  c.optimizer = from_dict(get("optimizer"), path, "optimizer");
  c.meta_json = get("meta").toStringRef();
  return c;
}

}  // namespace vexp
