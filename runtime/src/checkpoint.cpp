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

#include "vexp/base/error.hpp"
#include "vexp/base/files.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp {
namespace fs = std::filesystem;

namespace {
constexpr const char* kFormat = "vexp-checkpoint-1";

c10::IValue to_dict(const std::map<std::string, at::Tensor>& tensors) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& [k, v] : tensors) d.insert(k, v.detach().cpu().contiguous());
  return d;
}

// Entry `key` of the checkpoint's root dict (nullptr when there is none).
const PyValue* entry(const PyValue& root, const char* key) {
  for (const auto& [k, v] : root.entries)
    if (k->kind == PyValue::Kind::Str && k->s == key) return v.get();
  return nullptr;
}

std::map<std::string, at::Tensor> from_dict(const PyValue* v, const std::string& path, const char* what) {
  if (v->kind != PyValue::Kind::Dict)
    throw base::failure("'" + path + "' is not a vexp checkpoint: '" + what + "' is not a dict");
  std::map<std::string, at::Tensor> out;
  for (const auto& [k, t] : v->entries) {
    if (k->kind != PyValue::Kind::Str || t->kind != PyValue::Kind::Tensor)
      throw base::failure("'" + path + "' is not a vexp checkpoint: '" + what + "' holds a non-tensor entry");
    out[k->s] = t->tensor;
  }
  return out;
}

// When `root` (read from `path`) is a torch.save state dict (torchvision, the official
// TSM code, mmaction2, a vexp export), what it is and what to do with it: it loads as
// weights, not as a run's state to continue. Empty otherwise.
std::string state_dict_hint(const PyRef& root, const std::string& path) {
  std::vector<std::pair<std::string, at::Tensor>> sd;
  try {
    sd = find_state_dict(root, path);
  } catch (const std::exception&) {
    return "";
  }
  return "'" + path + "' is a torch.save state dict (" + std::to_string(sd.size()) + " tensors" +
         (sd.empty() ? std::string() : ", e.g. '" + sd.front().first + "'") +
         "), not a vexp checkpoint (which also holds the optimizer state and the run's position): use it as "
         "weights, `vexp predict RECIPE --weights " + path + "` or a model node's `pretrained = \"" + path + "\"`";
}
}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert(c10::IValue(std::string("format")), c10::IValue(std::string(kFormat)));
  root.insert(c10::IValue(std::string("model")), to_dict(ckpt.model));
  root.insert(c10::IValue(std::string("optimizer")), to_dict(ckpt.optimizer));
  root.insert(c10::IValue(std::string("meta")), c10::IValue(ckpt.meta_json));
  if (!ckpt.hooks.empty()) root.insert(c10::IValue(std::string("hooks")), to_dict(ckpt.hooks));
  std::vector<char> bytes = pickle_save_plain(c10::IValue(root));
  base::write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));  // folder fsynced too
}

bool is_checkpoint(const PyRef& root) {
  if (root->kind != PyValue::Kind::Dict) return false;
  const PyValue* format = entry(*root, "format");
  return format && format->kind == PyValue::Kind::Str && format->s == kFormat;
}

Checkpoint checkpoint_from(const PyRef& root, const std::string& path) {
  if (!is_checkpoint(root)) {
    std::string hint = state_dict_hint(root, path);
    if (!hint.empty()) throw base::failure(hint);
    throw base::failure("'" + path + "' is not a vexp checkpoint (no format tag '" + kFormat + "')");
  }
  const PyValue* model = entry(*root, "model");
  const PyValue* optimizer = entry(*root, "optimizer");
  const PyValue* meta = entry(*root, "meta");
  if (!model || !optimizer || !meta || meta->kind != PyValue::Kind::Str)
    throw base::failure("'" + path + "' is not a vexp checkpoint (missing model, optimizer or meta)");
  Checkpoint c;
  c.model = from_dict(model, path, "model");
  c.optimizer = from_dict(optimizer, path, "optimizer");
  c.meta_json = meta->s;
  if (const PyValue* hooks = entry(*root, "hooks")) c.hooks = from_dict(hooks, path, "hooks");
  return c;
}

PyRef load_checkpoint_file(const std::string& path) {
  try {
    return load_torch_file(path);
  } catch (const TorchFileError& e) {
    if (!e.opened()) throw base::failure("cannot read checkpoint '" + path + "': " + e.reason());
    if (e.reason() == "it is empty")
      throw base::failure("'" + path + "' is empty, not a vexp checkpoint (a copy or a write that did not finish?)");
    throw base::failure("'" + path + "' is not a readable checkpoint: " + e.reason());
  }
}

Checkpoint load_checkpoint(const std::string& path) { return checkpoint_from(load_checkpoint_file(path), path); }

}  // namespace vexp
