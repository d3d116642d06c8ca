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

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The pickle goes on past the bytes read so far (the legacy format: read more, parse again).
struct NeedMore : FormatError {
  using FormatError::FormatError;
};
struct OpenError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string num(uint64_t v) { return std::to_string(v); }

std::string in_quotes(const std::string& s) { return "'" + base::printable(s, 120) + "'"; }

uint16_t u16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | static_cast<uint8_t>(p[1]) << 8);
}
uint32_t u32(const char* p) { return u16(p) | static_cast<uint32_t>(u16(p + 2)) << 16; }
uint64_t u64(const char* p) { return u32(p) | static_cast<uint64_t>(u32(p + 4)) << 32; }

uint32_t crc32_update(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// A regular file read at offsets; never whole.
class File {
 public:
  explicit File(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd_ < 0) throw OpenError(std::string(std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw OpenError(std::string(std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw OpenError("it is " + base::file_kind(st.st_mode) + ", not a regular file");
    size_ = static_cast<uint64_t>(st.st_size);
    base::note_input(path, st.st_dev, st.st_ino);
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  uint64_t size() const { return size_; }
  // The caller has checked off + n <= size().
  void read(uint64_t off, void* dst, uint64_t n) const {
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
      const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw FormatError(std::string("reading at byte ") + num(off) + " failed: " + std::strerror(errno));
      if (got == 0) throw FormatError("the file ended at byte " + num(off) + " while being read (it shrank?)");
      out += got;
      off += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  }
  std::string read(uint64_t off, uint64_t n) const {
    std::string s(static_cast<size_t>(n), '\0');
    read(off, s.data(), n);
    return s;
  }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// torch.save's zip: records stored (never compressed) under one folder, "archive/"
// or the file's stem. Only the central directory is read here; a record's bytes are
// read when asked for, after its local header has been checked against the directory.
class Zip {
 public:
  struct Record {
    std::string name;  // full, with the folder
    uint64_t header = 0, size = 0;
    uint32_t crc = 0;
  };

  Zip(const File& f, const TorchFileLimits& lim) : f_(f) {
    const uint64_t size = f.size();
    if (size < 22) throw FormatError("it is " + num(size) + " bytes, too short for a zip archive (truncated?)");
    const uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535);
    const std::string tail = f.read(size - tail_len, tail_len);
    size_t pos = std::string::npos;
    for (size_t i = tail_len - 22 + 1; i-- > 0;)
      if (std::memcmp(tail.data() + i, "PK\x05\x06", 4) == 0) {
        pos = i;
        break;
      }
    if (pos == std::string::npos)
      throw FormatError("it has no zip end-of-directory record (truncated, or not a zip archive?)");
    const uint64_t eocd = size - tail_len + pos;
    const char* e = tail.data() + pos;
    uint64_t entries = u16(e + 10), cd_size = u32(e + 12), cd_off = u32(e + 16);
    if ((u16(e + 4) != 0 && u16(e + 4) != 0xFFFF) || (u16(e + 6) != 0 && u16(e + 6) != 0xFFFF))
      throw FormatError("it is a zip archive split over several disks");
    if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {
      if (eocd < 20) throw FormatError("its zip64 directory locator is missing");
      const std::string loc = f.read(eocd - 20, 20);
      if (std::memcmp(loc.data(), "PK\x06\x07", 4) != 0) throw FormatError("its zip64 directory locator is missing");
      const uint64_t z = u64(loc.data() + 8);
      if (eocd < 56 || z > eocd - 56)
        throw FormatError("its zip64 directory record (at byte " + num(z) + ") lies outside the file");
      const std::string rec = f.read(z, 56);
      if (std::memcmp(rec.data(), "PK\x06\x06", 4) != 0)
        throw FormatError("no zip64 directory record at byte " + num(z));
      entries = u64(rec.data() + 32);
      cd_size = u64(rec.data() + 40);
      cd_off = u64(rec.data() + 48);
    }
    if (cd_off > eocd || cd_size > eocd - cd_off)
      throw FormatError("its zip directory (" + num(cd_size) + " bytes at byte " + num(cd_off) +
                        ") lies outside the file (truncated?)");
    if (cd_size > lim.max_directory_bytes)
      throw FormatError("its zip directory is " + num(cd_size) + " bytes, more than the " +
                        num(lim.max_directory_bytes) + " allowed");
    if (entries > lim.max_records)
      throw FormatError("its zip directory lists " + num(entries) + " records, more than the " +
                        num(lim.max_records) + " allowed");
    if (entries > cd_size / 46)
      throw FormatError("its zip directory claims " + num(entries) + " records in " + num(cd_size) + " bytes");
    cd_off_ = cd_off;
    const std::string cd = f.read(cd_off, cd_size);
    size_t p = 0;
    for (uint64_t i = 0; i < entries; ++i) {
      if (cd.size() - p < 46 || std::memcmp(cd.data() + p, "PK\x01\x02", 4) != 0)
        throw FormatError("zip directory entry " + num(i) + " (at byte " + num(cd_off + p) + ") is malformed");
      const char* h = cd.data() + p;
      const uint16_t flags = u16(h + 8), method = u16(h + 10);
      Record r;
      r.crc = u32(h + 16);
      uint64_t csize = u32(h + 20), usize = u32(h + 24), header = u32(h + 42);
      const size_t nlen = u16(h + 28), xlen = u16(h + 30), clen = u16(h + 32);
      if (cd.size() - p - 46 < nlen + xlen + clen)
        throw FormatError("zip directory entry " + num(i) + " runs past the end of the directory");
      r.name.assign(h + 46, nlen);
      // zip64: the 32-bit fields that are all ones follow in this order in extra field 1.
      for (size_t x = 0; x + 4 <= xlen;) {
        const char* xp = h + 46 + nlen + x;
        const size_t id = u16(xp), len = u16(xp + 2);
        if (x + 4 + len > xlen) break;
        if (id == 1) {
          size_t at = 0;
          for (uint64_t* field : {&usize, &csize, &header})
            if (*field == 0xFFFFFFFF) {
              if (at + 8 > len) throw FormatError("record " + in_quotes(r.name) + " has a short zip64 field");
              *field = u64(xp + 4 + at);
              at += 8;
            }
        }
        x += 4 + len;
      }
      if (flags & 1) throw FormatError("record " + in_quotes(r.name) + " is encrypted");
      if (method != 0)
        throw FormatError("record " + in_quotes(r.name) + " is compressed (zip method " + num(method) +
                          "); torch.save stores its records uncompressed");
      if (csize != usize) throw FormatError("record " + in_quotes(r.name) + " has two different sizes");
      if (header > cd_off || usize > cd_off - header)
        throw FormatError("record " + in_quotes(r.name) + " (" + num(usize) + " bytes at byte " + num(header) +
                          ") lies outside the file's data (truncated or corrupt?)");
      r.header = header;
      r.size = usize;
      if (i == 0) {
        const size_t slash = r.name.find('/');
        if (slash == std::string::npos || slash == 0)
          throw FormatError("its first zip record " + in_quotes(r.name) + " is not in a folder: not a torch.save archive");
        prefix_ = r.name.substr(0, slash + 1);
      }
      if (r.name.compare(0, prefix_.size(), prefix_) == 0) {
        const std::string key = r.name.substr(prefix_.size());
        if (!records_.emplace(key, r).second) throw FormatError("record " + in_quotes(r.name) + " appears twice");
      }
      p += 46 + nlen + xlen + clen;
    }
  }

  const Record* find(const std::string& name) const {
    auto it = records_.find(name);
    return it == records_.end() ? nullptr : &it->second;
  }
  std::string full(const std::string& name) const { return prefix_ + name; }

  // Where the bytes of `r` start, from its local header (whose name must match).
  uint64_t data_offset(const Record& r) const {
    if (cd_off_ - r.header < 30) throw FormatError("the local header of record " + in_quotes(r.name) + " is cut short");
    const std::string h = f_.read(r.header, 30);
    if (std::memcmp(h.data(), "PK\x03\x04", 4) != 0)
      throw FormatError("no local header for record " + in_quotes(r.name) + " at byte " + num(r.header));
    const uint64_t nlen = u16(h.data() + 26), xlen = u16(h.data() + 28);
    const uint64_t data = r.header + 30 + nlen + xlen;
    if (data > cd_off_ || r.size > cd_off_ - data)
      throw FormatError("record " + in_quotes(r.name) + " (" + num(r.size) + " bytes from byte " + num(data) +
                        ") runs into the zip directory (truncated or corrupt?)");
    if (f_.read(r.header + 30, nlen) != r.name)
      throw FormatError("the local header of record " + in_quotes(r.name) + " names another record");
    return data;
  }

  // The whole record, CRC-checked.
  std::string read(const Record& r) const {
    std::string s = f_.read(data_offset(r), r.size);
    check_crc(r, crc32_update(0, reinterpret_cast<const unsigned char*>(s.data()), s.size()));
    return s;
  }
  // The first n bytes of the record into dst (n <= r.size), the whole record CRC-checked.
  void read_into(const Record& r, void* dst, uint64_t n) const {
    const uint64_t data = data_offset(r);
    uint32_t crc = 0;
    auto* out = static_cast<unsigned char*>(dst);
    for (uint64_t done = 0; done < n;) {
      const uint64_t chunk = std::min<uint64_t>(n - done, 64u << 20);
      f_.read(data + done, out + done, chunk);
      crc = crc32_update(crc, out + done, static_cast<size_t>(chunk));
      done += chunk;
    }
    std::vector<unsigned char> rest(static_cast<size_t>(std::min<uint64_t>(r.size - n, 1u << 16)));
    for (uint64_t done = n; done < r.size;) {
      const uint64_t chunk = std::min<uint64_t>(r.size - done, rest.size());
      f_.read(data + done, rest.data(), chunk);
      crc = crc32_update(crc, rest.data(), static_cast<size_t>(chunk));
      done += chunk;
    }
    check_crc(r, crc);
  }

 private:
  static void check_crc(const Record& r, uint32_t crc) {
    if (crc != r.crc) throw FormatError("record " + in_quotes(r.name) + " fails its CRC check (corrupt?)");
  }
  const File& f_;
  uint64_t cd_off_ = 0;
  std::string prefix_;
  std::map<std::string, Record> records_;
};

struct DType {
  at::ScalarType type;
  const char* name;
  uint64_t size;
};

const DType* storage_dtype(const std::string& global) {
  static const std::map<std::string, DType> types{
      {"torch.FloatStorage", {at::kFloat, "float32", 4}},
      {"torch.DoubleStorage", {at::kDouble, "float64", 8}},
      {"torch.HalfStorage", {at::kHalf, "float16", 2}},
      {"torch.BFloat16Storage", {at::kBFloat16, "bfloat16", 2}},
      {"torch.LongStorage", {at::kLong, "int64", 8}},
      {"torch.IntStorage", {at::kInt, "int32", 4}},
      {"torch.ShortStorage", {at::kShort, "int16", 2}},
      {"torch.CharStorage", {at::kChar, "int8", 1}},
      {"torch.ByteStorage", {at::kByte, "uint8", 1}},
      {"torch.BoolStorage", {at::kBool, "bool", 1}},
      {"torch.ComplexFloatStorage", {at::kComplexFloat, "complex64", 8}},
      {"torch.ComplexDoubleStorage", {at::kComplexDouble, "complex128", 16}}};
  auto it = types.find(global);
  return it == types.end() ? nullptr : &it->second;
}

// A storage named by a persistent id, and tensors that view it.
struct StorageRef {
  std::string key;
  const DType* dtype = nullptr;
  uint64_t numel = 0;
  at::Tensor flat;  // filled once the bytes are read
};
struct PendingTensor {
  PyRef value;
  std::shared_ptr<StorageRef> storage;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

// What the pickles of one file share: the legacy format has several.
struct Context {
  TorchFileLimits limits;
  uint64_t values = 0;
  std::map<std::string, std::shared_ptr<StorageRef>> storages;
  std::vector<PendingTensor> pending;
  // Storage objects, kept alive so that their addresses stay theirs.
  std::unordered_map<const PyValue*, std::pair<PyRef, std::shared_ptr<StorageRef>>> storage_of;
};

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const char* op_name(uint8_t op) {
  switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case '.': return "STOP";
    case '(': return "MARK";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'G': return "BINFLOAT";
    case 'X': return "BINUNICODE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case '}': return "EMPTY_DICT";
    case ']': return "EMPTY_LIST";
    case 0x8f: return "EMPTY_SET";
    case ')': return "EMPTY_TUPLE";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 0x91: return "FROZENSET";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case 0x90: return "ADDITEMS";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'b': return "BUILD";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 'p': return "PUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'g': return "GET";
    case 'Q': return "BINPERSID";
    default: return nullptr;
  }
}

// Our own interpreter of the opcodes pickle protocols 0-5 emit for data: an explicit
// stack, no recursion, nothing called. `more` says whether the file goes on past
// `size` (the legacy reader then reads more and starts again).
class Unpickler {
 public:
  Unpickler(const char* data, size_t size, bool more, std::string where, Context* ctx)
      : p_(data), end_(data + size), begin_(data), more_(more), where_(std::move(where)), ctx_(ctx),
        lim_(ctx->limits) {}

  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

  PyRef run() {
    for (;;) {
      op_at_ = consumed();
      op_ = byte();
      switch (op_) {
        case 0x80: byte(); break;
        case 0x95: le(8); break;
        case '.': need(1); return stack_.back();
        case '(':
          if (marks_.size() >= lim_.max_depth) fail("opens more than the " + num(lim_.max_depth) + " MARKs allowed at once");
          marks_.push_back(stack_.size());
          break;
        case '0': need(1); stack_.pop_back(); break;
        case '1': pop_mark(); break;
        case '2': need(1); push(stack_.back()); break;
        case 'N': push(make(PyValue::Kind::None)); break;
        case 0x88: case 0x89: {
          auto v = make(PyValue::Kind::Bool);
          v->b = op_ == 0x88;
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
            push(make_int(text_int(line)));
          }
          break;
        }
        case 'L': push(make_int(text_int(read_line()))); break;
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
        case 'X': case 'T': push(make_str(PyValue::Kind::Str, bytes(le(4)))); break;
        case 0x8c: case 'U': push(make_str(PyValue::Kind::Str, bytes(le(1)))); break;
        case 0x8d: push(make_str(PyValue::Kind::Str, bytes(le(8)))); break;
        case 'B': push(make_str(PyValue::Kind::Bytes, bytes(le(4)))); break;
        case 'C': push(make_str(PyValue::Kind::Bytes, bytes(le(1)))); break;
        case 0x8e: case 0x96: push(make_str(PyValue::Kind::Bytes, bytes(le(8)))); break;
        case '}': push(make(PyValue::Kind::Dict)); break;
        case ']': case 0x8f: push(make(PyValue::Kind::List)); break;
        case ')': push(make(PyValue::Kind::Tuple)); break;
        case 'd': {
          auto items = pop_mark();
          if (items.size() % 2) fail("has an odd number of items (" + num(items.size()) + ") for a dict");
          auto d = make(PyValue::Kind::Dict);
          for (size_t k = 0; k < items.size(); k += 2) set_item(d, items[k], items[k + 1]);
          push(d);
          break;
        }
        case 'l': case 0x91: case 't': {
          auto v = make(op_ == 't' ? PyValue::Kind::Tuple : PyValue::Kind::List);
          for (auto& item : pop_mark()) add(*v, std::move(item));
          push(v);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          const size_t n = op_ - 0x84u;
          need(n);
          auto t = make(PyValue::Kind::Tuple);
          for (size_t k = stack_.size() - n; k < stack_.size(); ++k) add(*t, stack_[k]);
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 'a': {
          need(2);
          PyRef v = pop();
          append(stack_.back(), v);
          break;
        }
        case 'e': case 0x90: {
          auto items = pop_mark();
          need(1);
          for (auto& v : items) append(stack_.back(), v);
          break;
        }
        case 's': {
          need(3);
          PyRef v = pop();
          PyRef k = pop();
          set_item(stack_.back(), k, v);
          break;
        }
        case 'u': {
          auto items = pop_mark();
          if (items.size() % 2) fail("has an odd number of items (" + num(items.size()) + ") for a dict");
          need(1);
          for (size_t k = 0; k < items.size(); k += 2) set_item(stack_.back(), items[k], items[k + 1]);
          break;
        }
        case 'c': {
          std::string module = read_line();
          std::string name = read_line();
          push(make_str(PyValue::Kind::Global, module + "." + name));
          break;
        }
        case 0x93: {
          need(2);
          PyRef name = pop();
          PyRef module = pop();
          if (module->kind != PyValue::Kind::Str || name->kind != PyValue::Kind::Str)
            fail("needs a module and a name that are strings");
          push(make_str(PyValue::Kind::Global, module->s + "." + name->s));
          break;
        }
        case 'R': case 0x81: {
          need(2);
          PyRef args = pop();
          PyRef fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 0x92: {
          need(3);
          pop();
          PyRef args = pop();
          PyRef cls = pop();
          push(reduce(cls, args));
          break;
        }
        case 'b': {  // BUILD: state only matters for opaque objects
          need(2);
          PyRef state = pop();
          PyRef obj = stack_.back();
          if (obj->kind == PyValue::Kind::Object) add(*obj, state);
          break;
        }
        case 'q': memo_put(le(1)); break;
        case 'r': memo_put(le(4)); break;
        case 'p': memo_put(static_cast<uint64_t>(text_int(read_line()))); break;
        case 0x94: memo_put(memo_.size()); break;
        case 'h': push(memo_get(le(1))); break;
        case 'j': push(memo_get(le(4))); break;
        case 'g': push(memo_get(static_cast<uint64_t>(text_int(read_line())))); break;
        case 'Q': need(1); push(persistent(pop())); break;
        default: {
          char buf[96];
          std::snprintf(buf, sizeof buf, "unsupported pickle opcode 0x%02x at byte %zu of %s", op_, op_at_,
                        where_.c_str());
          throw FormatError(buf);
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const char* name = op_name(op_);
    throw FormatError(std::string("pickle opcode ") + (name ? name : "?") + " at byte " + num(op_at_) + " of " +
                      where_ + " " + what);
  }
  [[noreturn]] void ends_early() const {
    if (more_) throw NeedMore("");
    const char* name = op_name(op_);
    throw FormatError(std::string("the pickle in ") + where_ + " ends inside opcode " + (name ? name : "?") +
                      " at byte " + num(op_at_) + " (truncated?)");
  }
  uint8_t byte() {
    if (p_ >= end_) {
      if (p_ == begin_ || consumed() == op_at_) {
        if (more_) throw NeedMore("");
        throw FormatError("the pickle in " + where_ + " ends at byte " + num(consumed()) + " without a STOP (truncated?)");
      }
      ends_early();
    }
    return static_cast<uint8_t>(*p_++);
  }
  std::string bytes(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) {
      if (more_) throw NeedMore("");
      fail("holds " + num(n) + " bytes, but only " + num(static_cast<uint64_t>(end_ - p_)) + " remain");
    }
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
    if (!nl) ends_early();
    std::string s(p_, nl);
    p_ = nl + 1;
    if (!s.empty() && s.back() == 'L') s.pop_back();
    return s;
  }
  int64_t text_int(const std::string& line) {
    errno = 0;
    char* endp = nullptr;
    const long long v = std::strtoll(line.c_str(), &endp, 10);
    if (line.empty() || errno != 0 || *endp != '\0') fail("holds " + in_quotes(line) + ", not a 64-bit integer");
    return v;
  }
  void long_bytes(uint64_t n) {
    std::string raw = bytes(n);
    if (n <= 8) {
      uint64_t v = 0;
      for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(raw[k])) << (8 * k);
      if (n > 0 && n < 8 && (static_cast<uint8_t>(raw[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
      push(make_int(static_cast<int64_t>(v)));
    } else {
      push(make_str(PyValue::Kind::BigInt, raw));
    }
  }

  PyRef make(PyValue::Kind k) {
    if (++ctx_->values > lim_.max_values) fail("makes more than the " + num(lim_.max_values) + " values allowed");
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

  // n values above the innermost MARK.
  void need(size_t n) const {
    const size_t base = marks_.empty() ? 0 : marks_.back();
    const size_t have = stack_.size() - base;
    if (have < n)
      fail("needs " + num(n) + (n == 1 ? " value" : " values") + " on the stack, found " + num(have));
  }
  void push(PyRef v) {
    if (stack_.size() >= lim_.max_stack) fail("puts more than the " + num(lim_.max_stack) + " values allowed on the stack");
    stack_.push_back(std::move(v));
  }
  PyRef pop() {
    PyRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<PyRef> pop_mark() {
    if (marks_.empty()) fail("has no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(std::make_move_iterator(stack_.begin() + static_cast<long>(m)),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }
  void memo_put(uint64_t k) {
    need(1);
    auto it = memo_.find(k);
    if (it != memo_.end()) {
      it->second = stack_.back();
      return;
    }
    if (memo_.size() >= lim_.max_memo) fail("stores more than the " + num(lim_.max_memo) + " memo entries allowed");
    memo_.emplace(k, stack_.back());
  }
  PyRef memo_get(uint64_t k) const {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("reads memo entry " + num(k) + ", which was never stored");
    return it->second;
  }

  // Every child goes into its parent through here: the nesting stays bounded.
  void nest(PyValue& parent, const PyRef& child) const {
    if (child.get() == &parent) fail("puts a container inside itself");
    if (child->depth + 1u > parent.depth) {
      if (child->depth + 1u > lim_.max_depth)
        fail("nests containers deeper than the " + num(lim_.max_depth) + " levels allowed");
      parent.depth = child->depth + 1u;
    }
  }
  void add(PyValue& parent, PyRef child) const {
    nest(parent, child);
    parent.items.push_back(std::move(child));
  }
  void append(const PyRef& list, const PyRef& v) const {
    if (list->kind == PyValue::Kind::List || list->kind == PyValue::Kind::Object) {
      add(*list, v);
      return;
    }
    fail("appends to something that is not a list");
  }
  void set_item(const PyRef& d, const PyRef& k, const PyRef& v) const {
    if (d->kind == PyValue::Kind::Dict) {
      nest(*d, k);
      nest(*d, v);
      d->entries.emplace_back(k, v);
    } else if (d->kind != PyValue::Kind::Object) {
      fail("sets an item of something that is not a dict");
    }
  }

  std::vector<int64_t> ints(const PyRef& t, const char* what) const {
    if (t->kind != PyValue::Kind::Tuple && t->kind != PyValue::Kind::List) fail(std::string("builds a tensor whose ") + what + " is not a tuple");
    if (t->items.size() > lim_.max_dims)
      fail("builds a tensor of " + num(t->items.size()) + " dimensions, more than the " + num(lim_.max_dims) + " allowed");
    std::vector<int64_t> out;
    for (const auto& v : t->items) {
      if (v->kind != PyValue::Kind::Int || v->i < 0)
        fail(std::string("builds a tensor whose ") + what + " holds something other than a non-negative integer");
      out.push_back(v->i);
    }
    return out;
  }

  PyRef persistent(const PyRef& pid) {
    // ('storage', torch.XStorage, key, location, numel[, view_metadata])
    if (pid->kind != PyValue::Kind::Tuple || pid->items.size() < 5 || pid->items[0]->kind != PyValue::Kind::Str ||
        pid->items[0]->s != "storage")
      fail("names something other than a tensor storage");
    const auto& it = pid->items;
    const DType* dtype = it[1]->kind == PyValue::Kind::Global ? storage_dtype(it[1]->s) : nullptr;
    if (!dtype) fail("names storage type " + in_quotes(it[1]->s) + ", which vexp does not read");
    if (it[2]->kind != PyValue::Kind::Str || it[4]->kind != PyValue::Kind::Int || it[4]->i < 0)
      fail("names a storage without a key and a non-negative size");
    const uint64_t numel = static_cast<uint64_t>(it[4]->i);
    if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dtype->size)
      fail("names storage " + in_quotes(it[2]->s) + " of " + num(numel) + " elements, more than any file holds");
    auto found = ctx_->storages.find(it[2]->s);
    if (found == ctx_->storages.end()) {
      auto ref = std::make_shared<StorageRef>();
      ref->key = it[2]->s;
      ref->dtype = dtype;
      ref->numel = numel;
      found = ctx_->storages.emplace(ref->key, ref).first;
    } else if (found->second->dtype != dtype || found->second->numel != numel) {
      fail("names storage " + in_quotes(it[2]->s) + " again with another type or size");
    }
    auto v = make_str(PyValue::Kind::Object, "<storage>");
    ctx_->storage_of[v.get()] = {v, found->second};
    return v;
  }

  PyRef reduce(const PyRef& fn, const PyRef& args) {
    const std::string name = fn->kind == PyValue::Kind::Global ? fn->s : std::string();
    const auto& a = args->items;
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (args->kind != PyValue::Kind::Tuple || a.size() < 4) fail("calls " + name + " with too few arguments");
      auto st = ctx_->storage_of.find(a[0].get());
      if (st == ctx_->storage_of.end()) fail("calls " + name + " without a storage");
      PendingTensor t;
      t.value = make(PyValue::Kind::Tensor);
      t.storage = st->second.second;
      if (a[1]->kind != PyValue::Kind::Int || a[1]->i < 0) fail("builds a tensor whose offset is not a non-negative integer");
      t.offset = a[1]->i;
      t.sizes = ints(a[2], "size");
      t.strides = ints(a[3], "stride");
      if (t.sizes.size() != t.strides.size()) fail("builds a tensor whose size and stride differ in length");
      // The last element it reads must lie in its storage; none when it is empty.
      bool empty = false;
      for (int64_t s : t.sizes) empty = empty || s == 0;
      if (!empty) {
        uint64_t last = static_cast<uint64_t>(t.offset);
        bool overflow = false;
        for (size_t d = 0; d < t.sizes.size(); ++d) {
          uint64_t step = 0;
          overflow = overflow || __builtin_mul_overflow(static_cast<uint64_t>(t.sizes[d] - 1),
                                                        static_cast<uint64_t>(t.strides[d]), &step);
          overflow = overflow || __builtin_add_overflow(last, step, &last);
        }
        if (overflow || last >= t.storage->numel)
          fail("builds a tensor (" + std::string(t.storage->dtype->name) + " " + shape_str(t.sizes) + ", offset " +
               num(static_cast<uint64_t>(t.offset)) + ", strides " + shape_str(t.strides) +
               ") that reaches past the end of storage " + in_quotes(t.storage->key) + " (" + num(t.storage->numel) +
               " elements)");
      }
      ctx_->pending.push_back(t);
      return t.value;
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty()) fail("calls " + name + " without arguments");
      return a[0];
    }
    if (name == "collections.OrderedDict" || name == "builtins.dict" || name == "__builtin__.dict") {
      auto d = make(PyValue::Kind::Dict);
      if (!a.empty() && (a[0]->kind == PyValue::Kind::List || a[0]->kind == PyValue::Kind::Tuple)) {
        for (const auto& pair : a[0]->items)
          if (pair->items.size() == 2) set_item(d, pair->items[0], pair->items[1]);
      }
      return d;
    }
    // libtorch's pickler tags typed containers: restore_type_tag(value, "Dict[str, Tensor]"),
    // build_intlist(list), build_tensorlist(list), ...: checkpoints of earlier vexps.
    if (name == "torch.jit._pickle.restore_type_tag" || name.rfind("torch.jit._pickle.build_", 0) == 0) {
      if (a.empty()) fail("calls " + name + " without arguments");
      return a[0];
    }
    if (name.rfind("torch._utils._rebuild", 0) == 0)
      fail("calls " + in_quotes(name) + ": quantized, sparse and other special tensors cannot be loaded");
    auto obj = make_str(PyValue::Kind::Object, name);
    add(*obj, fn);
    add(*obj, args);
    return obj;
  }

  const char* p_;
  const char* end_;
  const char* begin_;
  bool more_;
  std::string where_;
  Context* ctx_;
  const TorchFileLimits& lim_;
  uint8_t op_ = 0;
  size_t op_at_ = 0;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyRef> memo_;
};

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
