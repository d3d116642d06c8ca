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

#include "vexp/base/files.hpp"
#include "vexp/runtime/checkpoint.hpp"

namespace vexp {
namespace {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

PyRef make(PyValue::Kind k) {
  auto v = std::make_shared<PyValue>();
  v->kind = k;
  return v;
}
PyRef make_str(PyValue::Kind k, std::string s) {
  auto v = make(k);
  v->s = std::move(s);
  return v;
}
PyRef make_int(int64_t i) {
  auto v = make(PyValue::Kind::Int);
  v->i = i;
  return v;
}

// A storage named by a persistent id, and tensors that view it.
struct StorageRef {
  std::string key;
  at::ScalarType dtype = at::kFloat;
  int64_t numel = 0;
  at::Tensor flat;  // filled once the bytes are read
};
struct PendingTensor {
  PyRef value;
  std::shared_ptr<StorageRef> storage;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

bool storage_dtype(const std::string& global, at::ScalarType& out) {
  static const std::map<std::string, at::ScalarType> types{
      {"torch.FloatStorage", at::kFloat},   {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},     {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},     {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},   {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},     {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat}, {"torch.ComplexDoubleStorage", at::kComplexDouble}};
  auto it = types.find(global);
  if (it == types.end()) return false;
  out = it->second;
  return true;
}

class Unpickler {
 public:
  Unpickler(const char* data, size_t size, std::map<std::string, std::shared_ptr<StorageRef>>* storages,
            std::vector<PendingTensor>* pending)
      : p_(data), end_(data + size), begin_(data), storages_(storages), pending_(pending) {}

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

  PyRef run() {
    stack_.clear();
    marks_.clear();
    memo_.clear();
    for (;;) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;            // PROTO
        case 0x95: bytes(8); break;          // FRAME
        case '.': {                          // STOP
          if (stack_.empty()) throw FormatError("pickle stops with an empty stack");
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;
        case '0': pop(); break;
        case '1': pop_mark(); break;
        case '2': push(top()); break;
        case 'N': push(make(PyValue::Kind::None)); break;
        case 0x88: case 0x89: {
          auto v = make(PyValue::Kind::Bool);
          v->b = op == 0x88;
          push(v);
          break;
        }
        case 'J': push(make_int(static_cast<int32_t>(le(4)))); break;
        case 'K': push(make_int(static_cast<int64_t>(le(1)))); break;
        case 'M': push(make_int(static_cast<int64_t>(le(2)))); break;
        case 'I': {  // INT (text): "I01\n" is True
          std::string line = read_line();
          if (line == "01" || line == "00") {
            auto v = make(PyValue::Kind::Bool);
            v->b = line == "01";
            push(v);
          } else {
            push(make_int(std::stoll(line)));
          }
          break;
        }
        case 'L': push(make_int(std::stoll(read_line()))); break;  // LONG (text) "123L"
        case 0x8a: long_bytes(le(1)); break;
        case 0x8b: long_bytes(le(4)); break;
        case 'G': {
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | byte();
          auto v = make(PyValue::Kind::Float);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 'X': push(make_str(PyValue::Kind::Str, bytes(le(4)))); break;
        case 0x8c: push(make_str(PyValue::Kind::Str, bytes(le(1)))); break;
        case 0x8d: push(make_str(PyValue::Kind::Str, bytes(le(8)))); break;
        case 'T': push(make_str(PyValue::Kind::Str, bytes(le(4)))); break;
        case 'U': push(make_str(PyValue::Kind::Str, bytes(le(1)))); break;
        case 'B': push(make_str(PyValue::Kind::Bytes, bytes(le(4)))); break;
        case 'C': push(make_str(PyValue::Kind::Bytes, bytes(le(1)))); break;
        case 0x8e: case 0x96: push(make_str(PyValue::Kind::Bytes, bytes(le(8)))); break;
        case '}': push(make(PyValue::Kind::Dict)); break;
        case ']': case 0x8f: push(make(PyValue::Kind::List)); break;
        case ')': push(make(PyValue::Kind::Tuple)); break;
        case 'd': {
          auto items = pop_mark();
          if (items.size() % 2) throw FormatError("DICT with an odd number of items");
          auto d = make(PyValue::Kind::Dict);
          for (size_t k = 0; k < items.size(); k += 2) set_item(d, items[k], items[k + 1]);
          push(d);
          break;
        }
        case 'l': case 0x91: {
          auto l = make(PyValue::Kind::List);
          l->items = pop_mark();
          push(l);
          break;
        }
        case 't': {
          auto t = make(PyValue::Kind::Tuple);
          t->items = pop_mark();
          push(t);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          const size_t n = op - 0x84;
          if (stack_.size() < n) throw FormatError("TUPLE on a short stack");
          auto t = make(PyValue::Kind::Tuple);
          t->items.assign(stack_.end() - static_cast<long>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 'a': {
          PyRef v = pop();
          append(top(), v);
          break;
        }
        case 'e': case 0x90: {
          auto items = pop_mark();
          for (auto& v : items) append(top(), v);
          break;
        }
        case 's': {
          PyRef v = pop();
          PyRef k = pop();
          set_item(top(), k, v);
          break;
        }
        case 'u': {
          auto items = pop_mark();
          if (items.size() % 2) throw FormatError("SETITEMS with an odd number of items");
          for (size_t k = 0; k < items.size(); k += 2) set_item(top(), items[k], items[k + 1]);
          break;
        }
        case 'c': {
          std::string module = read_line();
          std::string name = read_line();
          push(make_str(PyValue::Kind::Global, module + "." + name));
          break;
        }
        case 0x93: {
          PyRef name = pop();
          PyRef module = pop();
          push(make_str(PyValue::Kind::Global, module->s + "." + name->s));
          break;
        }
        case 'R': {
          PyRef args = pop();
          PyRef fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 0x81: {  // NEWOBJ
          PyRef args = pop();
          PyRef cls = pop();
          push(reduce(cls, args));
          break;
        }
        case 0x92: {  // NEWOBJ_EX
          pop();
          PyRef args = pop();
          PyRef cls = pop();
          push(reduce(cls, args));
          break;
        }
        case 'b': {  // BUILD: state only matters for opaque objects
          PyRef state = pop();
          PyRef obj = top();
          if (obj->kind == PyValue::Kind::Object) obj->items.push_back(state);
          break;
        }
        case 'q': memo_[le(1)] = top(); break;
        case 'r': memo_[le(4)] = top(); break;
        case 'p': memo_[std::stoull(read_line())] = top(); break;
        case 0x94: memo_[memo_.size()] = top(); break;
        case 'h': push(memo_get(le(1))); break;
        case 'j': push(memo_get(le(4))); break;
        case 'g': push(memo_get(std::stoull(read_line()))); break;
        case 'Q': push(persistent(pop())); break;
        default: {
          char buf[64];
          std::snprintf(buf, sizeof buf, "unsupported pickle opcode 0x%02x at byte %zu", op, consumed() - 1);
          throw FormatError(buf);
        }
      }
    }
  }

 private:
  uint8_t byte() {
    if (p_ >= end_) throw FormatError("the pickle ends early");
    return static_cast<uint8_t>(*p_++);
  }
  std::string bytes(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) throw FormatError("the pickle ends early");
    std::string s(p_, p_ + n);
    p_ += n;
    return s;
  }
  uint64_t le(int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(byte()) << (8 * k);
    return v;
  }
  std::string read_line() {
    const char* nl = static_cast<const char*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
    if (!nl) throw FormatError("the pickle ends early");
    std::string s(p_, nl);
    p_ = nl + 1;
    if (!s.empty() && s.back() == 'L') s.pop_back();
    return s;
  }
  void long_bytes(uint64_t n) {
    std::string raw = bytes(n);
    if (n <= 8) {
      int64_t v = 0;
      for (size_t k = 0; k < n; ++k) v |= static_cast<int64_t>(static_cast<uint8_t>(raw[k])) << (8 * k);
      if (n > 0 && n < 8 && (static_cast<uint8_t>(raw[n - 1]) & 0x80)) v -= int64_t{1} << (8 * n);  // sign
      push(make_int(v));
    } else {
      push(make_str(PyValue::Kind::BigInt, raw));
    }
  }
  void push(PyRef v) { stack_.push_back(std::move(v)); }
  PyRef pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) throw FormatError("pickle stack underflow");
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PyRef top() {
    if (stack_.empty()) throw FormatError("pickle stack underflow");
    return stack_.back();
  }
  std::vector<PyRef> pop_mark() {
    if (marks_.empty()) throw FormatError("pickle MARK missing");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  PyRef memo_get(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) throw FormatError("pickle memo entry " + std::to_string(k) + " is missing");
    return it->second;
  }
  static void append(const PyRef& list, const PyRef& v) {
    if (list->kind == PyValue::Kind::List || list->kind == PyValue::Kind::Object) {
      list->items.push_back(v);
      return;
    }
    throw FormatError("APPEND on something that is not a list");
  }
  static void set_item(const PyRef& d, const PyRef& k, const PyRef& v) {
    if (d->kind == PyValue::Kind::Dict) {
      d->entries.emplace_back(k, v);
    } else if (d->kind != PyValue::Kind::Object) {
      throw FormatError("SETITEM on something that is not a dict");
    }
  }

  static std::vector<int64_t> ints(const PyRef& t, const char* what) {
    if (t->kind != PyValue::Kind::Tuple && t->kind != PyValue::Kind::List)
      throw FormatError(std::string("tensor ") + what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& v : t->items) {
      if (v->kind != PyValue::Kind::Int) throw FormatError(std::string("tensor ") + what + " holds a non-integer");
      out.push_back(v->i);
    }
    return out;
  }

  PyRef persistent(const PyRef& pid) {
    // ('storage', torch.XStorage, key, location, numel[, view_metadata])
    if (pid->kind != PyValue::Kind::Tuple || pid->items.size() < 5 || pid->items[0]->s != "storage")
      throw FormatError("unsupported persistent id (not a tensor storage)");
    const auto& it = pid->items;
    auto ref = std::make_shared<StorageRef>();
    if (it[1]->kind != PyValue::Kind::Global || !storage_dtype(it[1]->s, ref->dtype))
      throw FormatError("unsupported storage type '" + it[1]->s + "'");
    if (it[2]->kind != PyValue::Kind::Str || it[4]->kind != PyValue::Kind::Int)
      throw FormatError("malformed storage reference");
    ref->key = it[2]->s;
    ref->numel = it[4]->i;
    auto found = storages_->find(ref->key);
    if (found == storages_->end()) found = storages_->emplace(ref->key, ref).first;
    auto v = make_str(PyValue::Kind::Object, "<storage>");
    v->tensor = at::Tensor();
    storage_of_[v.get()] = found->second;
    return v;
  }

  PyRef reduce(const PyRef& fn, const PyRef& args) {
    const std::string name = fn->kind == PyValue::Kind::Global ? fn->s : std::string();
    const auto& a = args->items;
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4) throw FormatError(name + " with too few arguments");
      auto st = storage_of_.find(a[0].get());
      if (st == storage_of_.end()) throw FormatError(name + " without a storage");
      PendingTensor t;
      t.value = make(PyValue::Kind::Tensor);
      t.storage = st->second;
      if (a[1]->kind != PyValue::Kind::Int) throw FormatError("tensor offset is not an integer");
      t.offset = a[1]->i;
      t.sizes = ints(a[2], "size");
      t.strides = ints(a[3], "stride");
      if (t.sizes.size() != t.strides.size()) throw FormatError("tensor size and stride differ in length");
      pending_->push_back(t);
      return t.value;
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty()) throw FormatError(name + " without arguments");
      return a[0];
    }
    if (name == "collections.OrderedDict" || name == "builtins.dict" || name == "__builtin__.dict") {
      auto d = make(PyValue::Kind::Dict);
      if (!a.empty() && (a[0]->kind == PyValue::Kind::List || a[0]->kind == PyValue::Kind::Tuple)) {
        for (const auto& pair : a[0]->items)
          if (pair->items.size() == 2) d->entries.emplace_back(pair->items[0], pair->items[1]);
      }
      return d;
    }
    // libtorch's pickler tags typed containers: restore_type_tag(value, "Dict[str, Tensor]"),
    // build_intlist(list), build_tensorlist(list), ...
    if (name == "torch.jit._pickle.restore_type_tag" || name.rfind("torch.jit._pickle.build_", 0) == 0) {
      if (a.empty()) throw FormatError(name + " without arguments");
      return a[0];
    }
    if (name.rfind("torch._utils._rebuild", 0) == 0)
      throw FormatError("unsupported tensor kind '" + name + "' (quantized or sparse tensors cannot be loaded)");
    auto obj = make_str(PyValue::Kind::Object, name);
    obj->items = {fn, args};
    return obj;
  }

  const char* p_;
  const char* end_;
  const char* begin_;
  std::map<std::string, std::shared_ptr<StorageRef>>* storages_;
  std::vector<PendingTensor>* pending_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PyRef> memo_;
  std::map<const PyValue*, std::shared_ptr<StorageRef>> storage_of_;
};

std::vector<char> read_all(const std::string& path) {
  // A FIFO or a device is refused, not read without end; the size is not limited.
  if (const std::string p = base::regular_file_problem(path, ~std::uint64_t(0)); !p.empty()) throw std::runtime_error(p);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

at::Tensor storage_tensor(const StorageRef& s, const char* data, size_t bytes) {
  at::Tensor flat = at::empty({s.numel}, at::TensorOptions().dtype(s.dtype));
  const size_t need = static_cast<size_t>(s.numel) * flat.element_size();
  if (bytes < need) throw FormatError("storage '" + s.key + "' is truncated");
  if (need) std::memcpy(flat.data_ptr(), data, need);
  return flat;
}

void materialise(std::vector<PendingTensor>& pending) {
  for (auto& t : pending) {
    if (!t.storage->flat.defined()) throw FormatError("storage '" + t.storage->key + "' is missing");
    int64_t last = t.offset;
    bool empty = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] == 0) empty = true;
      last += (t.sizes[d] - 1) * t.strides[d];
    }
    if (!empty && (t.offset < 0 || last >= t.storage->numel))
      throw FormatError("a tensor reaches past the end of storage '" + t.storage->key + "'");
    t.value->tensor = empty ? at::empty(t.sizes, t.storage->flat.options())
                            : t.storage->flat.as_strided(t.sizes, t.strides, t.offset);
  }
}

PyRef load_zip(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  at::DataPtr pkl;
  size_t pkl_size = 0;
  std::tie(pkl, pkl_size) = reader.getRecord("data.pkl");
  std::map<std::string, std::shared_ptr<StorageRef>> storages;
  std::vector<PendingTensor> pending;
  Unpickler u(static_cast<const char*>(pkl.get()), pkl_size, &storages, &pending);
  PyRef root = u.run();
  for (auto& [key, ref] : storages) {
    const std::string record = "data/" + key;
    if (!reader.hasRecord(record)) throw FormatError("storage record '" + record + "' is missing");
    at::DataPtr data;
    size_t size = 0;
    std::tie(data, size) = reader.getRecord(record);
    ref->flat = storage_tensor(*ref, static_cast<const char*>(data.get()), size);
  }
  materialise(pending);
  return root;
}

PyRef load_legacy(const std::vector<char>& bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  std::map<std::string, std::shared_ptr<StorageRef>> storages;
  std::vector<PendingTensor> pending;
  auto next = [&]() {
    Unpickler u(p, left, &storages, &pending);
    PyRef v = u.run();
    p += u.consumed();
    left -= u.consumed();
    return v;
  };
  PyRef magic = next();
  static const char kMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
  if (magic->kind != PyValue::Kind::BigInt || magic->s != std::string(kMagic, 10))
    throw FormatError("no torch.save magic number");
  PyRef protocol = next();
  if (protocol->kind != PyValue::Kind::Int || protocol->i != 1001)
    throw FormatError("unsupported legacy protocol version");
  next();  // sys_info
  PyRef root = next();
  PyRef keys = next();
  if (keys->kind != PyValue::Kind::List) throw FormatError("the storage key list is missing");
  for (const auto& k : keys->items) {
    if (left < 8) throw FormatError("the storages are truncated");
    int64_t numel = 0;
    std::memcpy(&numel, p, 8);
    p += 8;
    left -= 8;
    auto it = storages.find(k->s);
    if (it == storages.end()) throw FormatError("storage '" + k->s + "' is not referenced");
    if (numel != it->second->numel) throw FormatError("storage '" + k->s + "' has an unexpected size");
    it->second->flat = storage_tensor(*it->second, p, left);
    const size_t used = static_cast<size_t>(numel) * it->second->flat.element_size();
    p += used;
    left -= used;
  }
  materialise(pending);
  return root;
}

bool is_tensor_dict(const PyRef& v) {
  if (v->kind != PyValue::Kind::Dict || v->entries.empty()) return false;
  for (const auto& [k, val] : v->entries)
    if (k->kind != PyValue::Kind::Str || val->kind != PyValue::Kind::Tensor) return false;
  return true;
}

}  // namespace

PyRef load_torch_file(const std::string& path) {
  std::vector<char> bytes = read_all(path);
  try {
    if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0) return load_zip(path);
    if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x80) return load_legacy(bytes);
    throw FormatError("neither a zip archive nor a pickle");
  } catch (const FormatError& e) {
    throw std::runtime_error("'" + path + "' is not a readable torch.save file: " + e.what());
  } catch (const c10::Error& e) {
    throw std::runtime_error("'" + path + "' is not a readable torch.save file: " + e.what_without_backtrace());
  } catch (const std::invalid_argument&) {
    throw std::runtime_error("'" + path + "' is not a readable torch.save file: a malformed number");
  } catch (const std::out_of_range&) {
    throw std::runtime_error("'" + path + "' is not a readable torch.save file: a malformed number");
  }
}

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
  if (!sd) throw std::runtime_error("'" + path + "' holds no state dict (a dict of name -> tensor, or one under "
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
  throw std::runtime_error("'" + path + "' does not hold a single tensor (save one with torch.save(tensor, path))");
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
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

void save_tensor(const std::string& path, const at::Tensor& t) {
  std::vector<char> bytes = pickle_save_plain(c10::IValue(t.detach().cpu().contiguous()));
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

}  // namespace vexp
