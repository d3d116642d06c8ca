#include "vexp/runtime/torch_save.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "vexp/base/error.hpp"
#include "vexp/base/files.hpp"
#include "vexp/runtime/checkpoint.hpp"

namespace vexp {
namespace {

bool is_tensor_dict(const PyRef& v) {
  if (v->kind != PyValue::Kind::Dict || v->entries.empty()) return false;
  for (const auto& [k, val] : v->entries)
    if (k->kind != PyValue::Kind::Str || val->kind != PyValue::Kind::Tensor) return false;
  return true;
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> find_state_dict(const PyRef& root, const std::string& path) {
  PyRef sd;
  if (is_tensor_dict(root)) {
    sd = root;
  } else if (root->kind == PyValue::Kind::Dict) {
    for (const char* name : {"state_dict", "model", "module", "state_dict_ema"})
      for (const auto& [k, v] : root->entries)
        if (!sd && k->kind == PyValue::Kind::Str && k->s == name && v->kind == PyValue::Kind::Dict) {
          bool any = false;
          for (const auto& e : v->entries) any = any || e.second->kind == PyValue::Kind::Tensor;
          if (any) sd = v;
        }
  }
  if (!sd) throw base::failure("'" + path + "' holds no state dict (a dict of name -> tensor, or one under "
                                    "'state_dict' or 'model')");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [k, v] : sd->entries)
    if (k->kind == PyValue::Kind::Str && v->kind == PyValue::Kind::Tensor) out.emplace_back(k->s, v->tensor);
  return out;
}

at::Tensor find_tensor(const PyRef& root, const std::string& path) {
  if (root->kind == PyValue::Kind::Tensor) return root->tensor;
  std::vector<at::Tensor> found;
  if (root->kind == PyValue::Kind::Dict)
    for (const auto& e : root->entries)
      if (e.second->kind == PyValue::Kind::Tensor) found.push_back(e.second->tensor);
  if (root->kind == PyValue::Kind::List || root->kind == PyValue::Kind::Tuple)
    for (const auto& e : root->items)
      if (e->kind == PyValue::Kind::Tensor) found.push_back(e->tensor);
  if (found.size() == 1) return found[0];
  throw base::failure("'" + path + "' does not hold a single tensor (save one with torch.save(tensor, path))");
}

std::vector<char> pickle_save_plain(const c10::IValue& value) {
  // torch.save's zip format, as libtorch's pickle_save writes it: archive/data.pkl, the
  // object pickled with a persistent id per storage, and one archive/data/N record per
  // storage. The only difference is tag_aggregates = false.
  std::vector<char> pickled;
  torch::jit::Pickler pickler([&pickled](const char* p, size_t n) { pickled.insert(pickled.end(), p, p + n); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> out;
  caffe2::serialize::PyTorchStreamWriter writer([&out](const void* p, size_t n) -> size_t {
    const char* bytes = static_cast<const char*>(p);
    out.insert(out.end(), bytes, bytes + n);
    return n;
  });
  writer.writeRecord("data.pkl", pickled.data(), pickled.size());
  const std::vector<at::Tensor>& storages = pickler.tensorData();
  for (size_t i = 0; i < storages.size(); ++i) {
    torch::jit::WriteableTensorData data = torch::jit::getWriteableTensorData(storages[i]);
    writer.writeRecord("data/" + std::to_string(i), data.data(), data.sizeInBytes());
  }
  writer.writeEndOfFile();
  return out;
}

void save_tensor_dict(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::string& under) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& [k, v] : tensors) d.insert(k, v.detach().cpu().contiguous());
  c10::IValue root(d);
  if (!under.empty()) {
    c10::impl::GenericDict outer(c10::StringType::get(), root.type());
    outer.insert(c10::IValue(under), root);
    root = c10::IValue(outer);
  }
  std::vector<char> bytes = pickle_save_plain(root);
  base::write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

void save_tensor(const std::string& path, const at::Tensor& t) {
  std::vector<char> bytes = pickle_save_plain(c10::IValue(t.detach().cpu().contiguous()));
  base::write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

}  // namespace vexp
