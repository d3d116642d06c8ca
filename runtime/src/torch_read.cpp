// The one reader of the .pt / .pth bytes vexp reads: checkpoints (`--resume`,
// `--resume-from`, `vexp export`), weights (`--weights`, `pretrained`) and clips saved
// with torch.save. Files come from other people: every offset, size, count and nesting
// level is checked against the bytes that remain and the limits in TorchFileLimits
// before anything is allocated, and every failure is one sentence with its reason.
// libtorch's own readers (torch::jit::Unpickler, PyTorchStreamReader) crashed on two-byte
// pickles and allocated without bound on corrupt ones: they are not used here.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include <ATen/ATen.h>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace vexp {

PyValue::~PyValue() {
  // Children whose last owner is being freed are emptied here, one at a time, instead
  // of each freeing its own children recursively.
  std::vector<PyRef> pending;
  auto take = [&pending](PyValue& v) {
    for (auto& c : v.items)
      if (c) pending.push_back(std::move(c));
    v.items.clear();
    for (auto& [k, val] : v.entries) {
      if (k) pending.push_back(std::move(k));
      if (val) pending.push_back(std::move(val));
    }
    v.entries.clear();
  };
  take(*this);
  while (!pending.empty()) {
    PyRef c = std::move(pending.back());
    pending.pop_back();
    if (c.use_count() == 1) take(*c);
  }
}

namespace {
// The zip reader and the unpickler, split along their seams: still one translation unit.
#include "torch_zip.inc"  // NOLINT(build/include)
#include "torch_unpickler.inc"  // NOLINT(build/include)


// A key naming `t` in `root` or in a dict inside it ("" when none does), for messages.
std::string name_of(const PyRef& root, const PyValue* t) {
  std::vector<std::pair<const PyValue*, std::string>> todo{{root.get(), ""}};
  size_t seen = 0;
  while (!todo.empty() && seen < 100000) {
    auto [d, prefix] = todo.back();
    todo.pop_back();
    if (d->kind != PyValue::Kind::Dict || prefix.size() > 200) continue;
    for (const auto& [k, v] : d->entries) {
      ++seen;
      if (k->kind != PyValue::Kind::Str) continue;
      if (v.get() == t) return prefix + k->s;
      if (v->kind == PyValue::Kind::Dict) todo.emplace_back(v.get(), prefix + k->s + ".");
    }
  }
  return "";
}

std::string describe_tensor(const PyRef& root, const PendingTensor& t) {
  const std::string name = name_of(root, t.value.get());
  return (name.empty() ? std::string("a tensor") : "tensor " + in_quotes(name)) + " (" + t.storage->dtype->name + " " +
         shape_str(t.sizes) + ")";
}

const PendingTensor* first_user(const Context& ctx, const StorageRef& s) {
  for (const auto& t : ctx.pending)
    if (t.storage.get() == &s) return &t;
  return nullptr;
}

at::Tensor empty_storage(const StorageRef& s) {
  return at::empty({static_cast<int64_t>(s.numel)}, at::TensorOptions().dtype(s.dtype->type));
}

void materialise(Context& ctx) {
  for (auto& t : ctx.pending) {
    if (!t.storage->flat.defined()) throw FormatError("storage " + in_quotes(t.storage->key) + " is missing");
    bool empty = false;
    for (int64_t s : t.sizes) empty = empty || s == 0;
    t.value->tensor = empty ? at::empty(t.sizes, t.storage->flat.options())
                            : t.storage->flat.as_strided(t.sizes, t.strides, t.offset);
  }
}

PyRef load_zip(const File& f, Context& ctx) {
  Zip zip(f, ctx.limits);
  if (const Zip::Record* order = zip.find("byteorder")) {
    if (order->size > 16) throw FormatError("record " + in_quotes(order->name) + " is not a byte order");
    if (zip.read(*order) == "big") throw FormatError("it was written on a big-endian machine, which vexp does not read");
  }
  const Zip::Record* pkl = zip.find("data.pkl");
  if (!pkl) throw FormatError("it is a zip archive without " + in_quotes(zip.full("data.pkl")) + ": not a torch.save file");
  if (pkl->size > ctx.limits.max_pickle_bytes)
    throw FormatError("record " + in_quotes(pkl->name) + " is " + num(pkl->size) + " bytes, more than the " +
                      num(ctx.limits.max_pickle_bytes) + " allowed");
  const std::string bytes = zip.read(*pkl);
  PyRef root = Unpickler(bytes.data(), bytes.size(), false, in_quotes(pkl->name), &ctx).run();
  for (auto& [key, ref] : ctx.storages) {
    const Zip::Record* rec = zip.find("data/" + key);
    if (!rec) throw FormatError("storage record " + in_quotes(zip.full("data/" + key)) + " is missing");
    const uint64_t need = ref->numel * ref->dtype->size;
    if (rec->size < need) {
      const PendingTensor* user = first_user(ctx, *ref);
      throw FormatError("record " + in_quotes(rec->name) + " holds " + num(rec->size) + " bytes, but storage " +
                        in_quotes(key) + (user ? " of " + describe_tensor(root, *user) : std::string()) + " needs " +
                        num(need) + " (" + num(ref->numel) + " " + ref->dtype->name + " elements)");
    }
    ref->flat = empty_storage(*ref);
    zip.read_into(*rec, ref->flat.data_ptr(), need);
  }
  materialise(ctx);
  return root;
}

// The legacy format: magic number, protocol, sys_info, the object and the storage keys
// as five pickles, then each storage as an int64 element count and its bytes. The
// pickles are parsed from a prefix of the file that grows until they fit.
PyRef load_legacy(const File& f, Context& ctx) {
  const uint64_t size = f.size();
  uint64_t have = std::min<uint64_t>(size, 1u << 20);
  for (;;) {
    const std::string head = f.read(0, have);
    const bool more = have < size;
    Context attempt;
    attempt.limits = ctx.limits;
    try {
      size_t pos = 0;
      auto next = [&](const char* what) {
        Unpickler u(head.data() + pos, head.size() - pos, more, std::string("the ") + what + " pickle", &attempt);
        PyRef v = u.run();
        pos += u.consumed();
        return v;
      };
      PyRef magic = next("magic number");
      static const char kMagic[] = "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
      if (magic->kind != PyValue::Kind::BigInt || magic->s != std::string(kMagic, 10))
        throw FormatError("it starts with a pickle, but not with torch.save's magic number");
      PyRef protocol = next("protocol");
      if (protocol->kind != PyValue::Kind::Int || protocol->i != 1001)
        throw FormatError("its legacy torch.save protocol version is not 1001");
      PyRef sys_info = next("sys_info");
      if (sys_info->kind == PyValue::Kind::Dict)
        for (const auto& [k, v] : sys_info->entries)
          if (k->kind == PyValue::Kind::Str && k->s == "little_endian" && v->kind == PyValue::Kind::Bool && !v->b)
            throw FormatError("it was written on a big-endian machine, which vexp does not read");
      PyRef root = next("object");
      PyRef keys = next("storage keys");
      if (keys->kind != PyValue::Kind::List) throw FormatError("its list of storage keys is missing");
      ctx = std::move(attempt);
      uint64_t at = pos;
      for (const auto& k : keys->items) {
        auto it = k->kind == PyValue::Kind::Str ? ctx.storages.find(k->s) : ctx.storages.end();
        if (it == ctx.storages.end()) throw FormatError("storage " + in_quotes(k->s) + " is listed but never used");
        StorageRef& ref = *it->second;
        if (ref.flat.defined()) throw FormatError("storage " + in_quotes(k->s) + " is listed twice");
        if (size - at < 8)
          throw FormatError("it ends at byte " + num(size) + ", before storage " + in_quotes(k->s) + " (truncated?)");
        char count[8];
        f.read(at, count, 8);
        at += 8;
        if (u64(count) != ref.numel)
          throw FormatError("storage " + in_quotes(k->s) + " holds " + num(u64(count)) + " elements, but the pickle says " +
                            num(ref.numel));
        const uint64_t need = ref.numel * ref.dtype->size;
        if (need > size - at) {
          const PendingTensor* user = first_user(ctx, ref);
          throw FormatError("storage " + in_quotes(k->s) + (user ? " of " + describe_tensor(root, *user) : std::string()) +
                            " needs " + num(need) + " bytes from byte " + num(at) + ", but only " + num(size - at) +
                            " remain (truncated?)");
        }
        ref.flat = empty_storage(ref);
        f.read(at, ref.flat.data_ptr(), need);
        at += need;
      }
      materialise(ctx);
      return root;
    } catch (const NeedMore&) {
      if (have >= ctx.limits.max_pickle_bytes)
        throw FormatError("its pickles take more than the " + num(ctx.limits.max_pickle_bytes) + " bytes allowed");
      have = std::min({size, have * 4, ctx.limits.max_pickle_bytes});
    }
  }
}

std::string leading_bytes(const File& f) {
  const uint64_t n = std::min<uint64_t>(f.size(), 4);
  const std::string b = f.read(0, n);
  std::string s;
  char buf[4];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    s += (s.empty() ? "" : " ") + std::string(buf);
  }
  return s;
}

}  // namespace

PyRef load_torch_file(const std::string& path, const TorchFileLimits& limits) {
  const std::string who = in_quotes(path);
  try {
    File f(path);
    if (f.size() == 0) throw FormatError("it is empty");
    char magic[4] = {};
    f.read(0, magic, std::min<uint64_t>(f.size(), 4));
    Context ctx;
    ctx.limits = limits;
    if (f.size() >= 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0) return load_zip(f, ctx);
    if (static_cast<uint8_t>(magic[0]) == 0x80) return load_legacy(f, ctx);
    throw FormatError("it is neither a zip archive (torch.save's format) nor a pickle (its legacy format): it starts "
                      "with bytes " + leading_bytes(f));
  } catch (const OpenError& e) {
    throw TorchFileError("cannot read " + who + ": " + e.what(), e.what(), false);
  } catch (const FormatError& e) {
    if (std::string(e.what()) == "it is empty")
      throw TorchFileError(who + " is empty, not a torch.save file (a copy or a write that did not finish?)", e.what(),
                           true);
    throw TorchFileError(who + " is not a readable torch.save file: " + e.what(), e.what(), true);
  } catch (const c10::Error& e) {
    // at::empty of a size the file does hold, on a machine without that much memory.
    const std::string m = e.what_without_backtrace();
    const std::string line = m.substr(0, m.find('\n'));
    throw TorchFileError(who + " is not a readable torch.save file: " + line, line, true);
  } catch (const std::bad_alloc&) {
    throw TorchFileError(who + " is not a readable torch.save file: out of memory", "out of memory", true);
  }
}

}  // namespace vexp
