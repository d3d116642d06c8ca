// Reading files written by Python's torch.save, in both of its formats:
//  - zip (torch >= 1.6 default, and libtorch's pickle_save): archive/data.pkl plus one record per storage;
//  - legacy (_use_new_zipfile_serialization=False):
//    magic number, protocol, sys_info and the object as pickles, then the sorted
//    storage keys as a pickle, then each storage as int64 element count + raw bytes.
// The unpickler is our own small interpreter of the opcodes pickle protocols 2-5
// emit; globals it does not know (numpy scalars, mmcv configs in a checkpoint's
// meta) become opaque objects instead of errors, so whole checkpoints load and
// the state dict inside them can be found.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace c10 {
struct IValue;
}

namespace vexp {

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

struct PyValue {
  enum class Kind { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict, Tensor, Global, Object };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                // Str, Bytes, BigInt (raw little-endian), Global ("module.name")
  std::vector<PyRef> items;                     // List, Tuple; Object: [callable, args, state]
  std::vector<std::pair<PyRef, PyRef>> entries; // Dict, in insertion order
  at::Tensor tensor;                            // Tensor (materialised after loading)
};

// Reads a torch.save file. Throws std::runtime_error naming `path` when the file
// is missing, truncated or not a torch.save file.
PyRef load_torch_file(const std::string& path);

// The state dict inside a loaded object: the object itself when it is a dict of
// tensors, else the first of its entries "state_dict", "model", "module",
// "state_dict_ema" that is one (nested checkpoints of the official TSM code and
// mmaction2). Non-tensor entries of a state dict (none in practice) are skipped.
// Throws std::runtime_error naming `path` when there is none.
std::vector<std::pair<std::string, at::Tensor>> find_state_dict(const PyRef& root, const std::string& path);

// A single tensor saved with torch.save (or a dict/list holding exactly one).
at::Tensor find_tensor(const PyRef& root, const std::string& path);

// The bytes of `value` (dicts, lists, strings, numbers, tensors; a CUDA tensor's data
// is copied through the CPU and its device recorded, as torch.save does) in torch.save's
// zip format, as libtorch's torch::jit::pickle_save
// writes them but without its type tags: pickle_save wraps every dict and list in a
// torch.jit._pickle.restore_type_tag call, a global that torch.load refuses with
// weights_only=True, PyTorch 2.6's default. These files load with a plain
// torch.load(path) in PyTorch 1.13 to 2.x, and with torch::jit::pickle_load (as untyped
// dicts and lists).
std::vector<char> pickle_save_plain(const c10::IValue& value);

// Writes `tensors` (in order) as a dict Python's torch.load reads, atomically;
// with `under` ("state_dict"), that dict is the one entry of an outer dict, as the
// official TSM code and mmaction2 save their checkpoints.
void save_tensor_dict(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::string& under = "");
// Writes a single tensor that torch.load returns as a tensor.
void save_tensor(const std::string& path, const at::Tensor& t);

}  // namespace vexp
