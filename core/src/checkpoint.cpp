#include "checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "torch_save.hpp"

namespace vexp {
namespace fs = std::filesystem;

namespace {
constexpr const char* kFormat = "vexp-checkpoint-1";

void write_bytes_atomic(const std::string& path, const char* data, size_t size) {
  fs::path target(path);
  fs::path tmp = target.parent_path() / ("." + target.filename().string() + ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write '" + tmp.string() + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename '" + tmp.string() + "' to '" + path + "': " + std::strerror(err));
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

void write_file_atomic(const std::string& path, const std::string& content) {
  write_bytes_atomic(path, content.data(), content.size());
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert(c10::IValue(std::string("format")), c10::IValue(std::string(kFormat)));
  root.insert(c10::IValue(std::string("model")), to_dict(ckpt.model));
  root.insert(c10::IValue(std::string("optimizer")), to_dict(ckpt.optimizer));
  root.insert(c10::IValue(std::string("meta")), c10::IValue(ckpt.meta_json));
  std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(root));
  write_bytes_atomic(path, bytes.data(), bytes.size());
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
