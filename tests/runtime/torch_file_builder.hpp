// Hand-built torch.save files for the reader's tests and its mutation driver: a
// pickle written opcode by opcode, a zip of chosen records, the legacy format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <caffe2/serialize/inline_container.h>

#include "vexp/base/files.hpp"
#include "vexp/runtime/checkpoint.hpp"

namespace vexp::test {

class PickleBuilder {
 public:
  struct Tensor {
    std::string dtype;  // "Float", "Long", ...: torch.<dtype>Storage
    std::string key;
    int64_t numel = 0;
    int64_t offset = 0;
    std::vector<int64_t> sizes, strides;
  };

  PickleBuilder() { b_ = std::string("\x80\x02", 2); }
  const std::string& bytes() const { return b_; }

  PickleBuilder& op(char c) {
    b_ += c;
    return *this;
  }
  PickleBuilder& global(const std::string& module, const std::string& name) {
    b_ += "c" + module + "\n" + name + "\n";
    return *this;
  }
  PickleBuilder& str(const std::string& s) {
    b_ += 'X';
    le(s.size(), 4);
    b_ += s;
    return *this;
  }
  PickleBuilder& integer(int64_t v) {
    b_ += "\x8a\x08";
    le(static_cast<uint64_t>(v), 8);
    return *this;
  }
  PickleBuilder& mark() { return op('('); }
  PickleBuilder& tuple() { return op('t'); }
  PickleBuilder& tuple1() { return op('\x85'); }
  PickleBuilder& empty_tuple() { return op(')'); }
  PickleBuilder& empty_dict() { return op('}'); }
  PickleBuilder& reduce() { return op('R'); }
  PickleBuilder& setitem() { return op('s'); }
  PickleBuilder& setitems() { return op('u'); }
  PickleBuilder& persistent() { return op('Q'); }
  PickleBuilder& stop() { return op('.'); }

  // An OrderedDict of tensors, as torch.save(model.state_dict()) writes it.
  PickleBuilder& state_dict(const std::vector<std::pair<std::string, Tensor>>& tensors) {
    global("collections", "OrderedDict").empty_tuple().reduce().mark();
    for (const auto& [name, t] : tensors) {
      std::string dtype = t.dtype;
      if (!dtype.empty()) dtype[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(dtype[0])));
      str(name).global("torch._utils", "_rebuild_tensor_v2").mark();
      mark().str("storage").global("torch", dtype + "Storage").str(t.key).str("cpu").integer(t.numel).tuple().persistent();
      integer(t.offset);
      mark();
      for (int64_t s : t.sizes) integer(s);
      tuple().mark();
      for (int64_t s : t.strides) integer(s);
      tuple().op('\x89').global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce();
    }
    return setitems().stop();
  }

 private:
  void le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) b_ += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  std::string b_;
};

// A zip as torch.save writes it (libtorch's writer: archive/NAME, stored, aligned, CRCs),
// with the records given.
inline std::string torch_zip(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&out](const void* p, size_t n) -> size_t {
    out.append(static_cast<const char*>(p), n);
    return n;
  });
  for (const auto& [name, bytes] : records) writer.writeRecord(name, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}
inline void write_torch_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& records) {
  base::write_file_atomic(path, torch_zip(records));
}

struct LegacyStorage {
  std::string key;
  int64_t numel;
  std::string data;
};

// torch.save(..., _use_new_zipfile_serialization=False): five pickles, then the storages.
inline std::string legacy_file(const std::string& object_pickle, const std::vector<LegacyStorage>& storages) {
  std::string f = std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  f += std::string("\x80\x02M\xe9\x03.", 6);
  f += std::string("\x80\x02}.", 4);
  f += object_pickle;
  PickleBuilder keys;
  keys.mark();
  for (const auto& s : storages) keys.str(s.key);
  keys.op('l').stop();
  f += keys.bytes();
  for (const auto& s : storages) {
    for (int k = 0; k < 8; ++k) f += static_cast<char>((static_cast<uint64_t>(s.numel) >> (8 * k)) & 0xff);
    f += s.data;
  }
  return f;
}

}  // namespace vexp::test
