// Reading files written by Python's torch.save, in both of its formats:
//  - zip (torch >= 1.6 default, and libtorch's pickle_save): archive/data.pkl plus one record per storage;
//  - legacy (_use_new_zipfile_serialization=False):
//    magic number, protocol, sys_info and the object as pickles, then the sorted
//    storage keys as a pickle, then each storage as int64 element count + raw bytes.
// Every byte goes through one bounded reader of vexp's own (torch_read.cpp): the zip
// directory is parsed with each offset and size checked against the file, the pickle
// is interpreted with an explicit stack under the limits below, and each tensor's
// storage is checked against the bytes its record holds before anything is allocated.
// Globals it does not know (numpy scalars, mmcv configs in a checkpoint's meta) become
// opaque objects, never calls: nothing in the file runs, so whole checkpoints load and
// the state dict inside them can be found. Globals under torch._utils._rebuild* other
// than plain tensors and parameters are refused by name.
#pragma once

#include "vexp/base/error.hpp"
#include <cstdint>
#include <memory>
#include <stdexcept>
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
  PyValue() = default;
  PyValue(const PyValue&) = delete;
  PyValue& operator=(const PyValue&) = delete;
  // Iterative: a million nested lists must not overflow the stack when freed.
  ~PyValue();
  enum class Kind { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict, Tensor, Global, Object };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                // Str, Bytes, BigInt (raw little-endian), Global ("module.name")
  std::vector<PyRef> items;                     // List, Tuple; Object: [callable, args, state]
  std::vector<std::pair<PyRef, PyRef>> entries; // Dict, in insertion order
  at::Tensor tensor;                            // Tensor (materialised after loading)
  uint32_t depth = 0;                           // containers nested inside (bounded while reading)
};

// What a file may ask of the reader. A file past one of them is refused with the
// limit named; the defaults take any real checkpoint (a state dict needs ~20 pickle
// values and 1 nesting level per tensor) and bound memory to well under 1 GB plus
// the tensors themselves.
struct TorchFileLimits {
  uint64_t max_pickle_bytes = 64ull << 20;  // data.pkl (or the legacy format's pickles)
  uint64_t max_values = 2'000'000;          // pickle values created (each ~150 bytes)
  uint64_t max_stack = 2'000'000;           // values on the pickle stack at once
  uint64_t max_memo = 1'000'000;            // memo entries
  uint32_t max_depth = 256;                 // containers nested in containers, and MARKs open at once
  uint64_t max_records = 1'000'000;         // zip entries
  uint64_t max_directory_bytes = 64ull << 20;  // the zip central directory
  uint32_t max_dims = 32;                   // dimensions of one tensor
};

// Why a file does not load: what() is the whole line, reason() the part after the file.
class TorchFileError : public base::Error {
 public:
  TorchFileError(const std::string& what, std::string reason, bool opened)
      : base::Error(what), reason_(std::move(reason)), opened_(opened) {}
  const std::string& reason() const { return reason_; }
  // False when the file could not be opened at all (missing, a directory, a FIFO).
  bool opened() const { return opened_; }

 private:
  std::string reason_;
  bool opened_;
};

// Reads a torch.save file. Throws TorchFileError, one line:
// "'PATH' is not a readable torch.save file: REASON" (or "cannot read 'PATH': ...").
PyRef load_torch_file(const std::string& path, const TorchFileLimits& limits = {});

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
