#include "vexp/base/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <system_error>
#include <utility>

namespace vexp::base {
namespace fs = std::filesystem;

std::string file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

namespace {

std::string size_problem(const std::string& path, std::uint64_t size, std::uint64_t max_bytes) {
  return "'" + path + "' is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
         " bytes vexp reads from such a file";
}

struct Inputs {
  std::mutex mu;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> by_inode;  // the last name read (a deleted file's inode is reused)
};

Inputs& inputs() {
  static Inputs* in = new Inputs;  // never destroyed: readers may run during static destruction
  return *in;
}

}  // namespace

void note_input(const std::string& path, std::uint64_t dev, std::uint64_t ino) {
  Inputs& in = inputs();
  std::lock_guard<std::mutex> l(in.mu);
  in.by_inode.insert_or_assign(std::make_pair(dev, ino), path);
}

void note_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) note_input(path, st.st_dev, st.st_ino);
}

std::string read_as_input(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  Inputs& in = inputs();
  std::lock_guard<std::mutex> l(in.mu);
  auto it = in.by_inode.find({static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)});
  if (it == in.by_inode.end()) return "";
  // The file read may since have been deleted and its inode given to a new file: the
  // name it was read as must still lead to this inode.
  struct stat was {};
  if (::stat(it->second.c_str(), &was) != 0 || was.st_dev != st.st_dev || was.st_ino != st.st_ino) return "";
  return it->second;
}

int open_append_fd(const char* path, bool inherit) noexcept {
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | (inherit ? 0 : O_CLOEXEC),
                        0644);
  if (fd < 0) {
    if (errno == ENXIO) errno = EINVAL;  // a FIFO without a reader (O_NONBLOCK), a socket: not a regular file
    return -1;
  }
  struct stat st {};
  int err = 0;
  if (::fstat(fd, &st) != 0) err = errno;
  else if (!S_ISREG(st.st_mode)) err = EINVAL;
  else if (st.st_nlink != 1) err = EMLINK;
  if (err != 0) {
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

std::string append_problem(int err) {
  if (err == ELOOP) return "it is a symbolic link, which vexp does not append through";
  if (err == EMLINK) return "it has more than one name (a hard link to another file), which vexp does not append to";
  if (err == EINVAL) return "it is not a regular file";
  return std::strerror(err);
}

void append_file(const std::string& path, std::string_view text) {
  const int fd = open_append_fd(path.c_str());
  if (fd < 0) throw Error("cannot append to '" + path + "': " + append_problem(errno));
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      ::close(fd);
      throw Error("cannot append to '" + path + "': " + std::strerror(err));
    }
    off += static_cast<std::size_t>(w);
  }
  if (::close(fd) != 0) throw Error("cannot append to '" + path + "': " + std::strerror(errno));
}

std::string regular_file_problem(const std::string& path, std::uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "cannot read '" + path + "': " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "'" + path + "' is " + file_kind(st.st_mode) + ", not a regular file";
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return size_problem(path, static_cast<std::uint64_t>(st.st_size), max_bytes);
  return "";
}

std::optional<ReadFailure> try_read_file_chunks(const std::string& path, std::uint64_t max_bytes,
                                                const std::function<void(std::string_view)>& chunk,
                                                const std::function<void(std::uint64_t)>& on_size) {
  using Kind = ReadFailure::Kind;
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ReadFailure{Kind::cannot_read, errno, 0, 0};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ReadFailure{Kind::cannot_read, errno, 0, 0};
  if (!S_ISREG(st.st_mode)) return ReadFailure{Kind::not_regular, 0, static_cast<unsigned>(st.st_mode), 0};
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return ReadFailure{Kind::too_big, 0, 0, static_cast<std::uint64_t>(st.st_size)};
  note_input(path, st.st_dev, st.st_ino);
  if (on_size) on_size(static_cast<std::uint64_t>(st.st_size));
  std::uint64_t total = 0;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadFailure{Kind::cannot_read, errno, 0, 0};
    }
    if (r == 0) break;
    // A file that grows while it is read (a log being written) is cut at the limit.
    if (total + static_cast<std::uint64_t>(r) > max_bytes)
      return ReadFailure{Kind::grew, 0, 0, total + static_cast<std::uint64_t>(r)};
    total += static_cast<std::uint64_t>(r);
    chunk(std::string_view(buf, static_cast<std::size_t>(r)));
  }
  return std::nullopt;
}

namespace {

// read_file_chunks, its errors naming the file by `role` when one is given.
std::uint64_t read_chunks_as(const std::string& path, std::uint64_t max_bytes,
                             const std::function<void(std::string_view)>& chunk,
                             const std::function<void(std::uint64_t)>& on_size, std::string_view role) {
  std::uint64_t total = 0;
  const auto failed = try_read_file_chunks(
      path, max_bytes,
      [&](std::string_view piece) {
        total += piece.size();
        chunk(piece);
      },
      on_size);
  if (!failed) return total;
  const std::string named = role.empty() ? std::string() : std::string(role) + " ";
  switch (failed->kind) {
    case ReadFailure::Kind::not_regular:
      throw Error(named + "'" + path + "' is " + file_kind(failed->mode) + ", not a regular file");
    case ReadFailure::Kind::too_big:
    case ReadFailure::Kind::grew:
      throw Error(named + size_problem(path, failed->bytes, max_bytes));
    case ReadFailure::Kind::cannot_read:
      break;
  }
  throw Error("cannot read " + named + "'" + path + "': " + std::strerror(failed->err));
}

}  // namespace

std::uint64_t read_file_chunks(const std::string& path, std::uint64_t max_bytes,
                               const std::function<void(std::string_view)>& chunk,
                               const std::function<void(std::uint64_t)>& on_size) {
  return read_chunks_as(path, max_bytes, chunk, on_size, {});
}

std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes, std::string_view role) {
  std::string data;
  // The size at open reserves the string once (a file that grows meanwhile still fits, by regrowth).
  read_chunks_as(
      path, max_bytes, [&](std::string_view piece) { data.append(piece); },
      [&](std::uint64_t size) { data.reserve(static_cast<std::size_t>(size)); }, role);
  return data;
}

std::string read_file_bounded(const std::string& path, std::uint64_t max_bytes) {
  return read_file_bounded(path, max_bytes, {});
}

std::string read_file_or_empty(const std::string& path, std::uint64_t max_bytes) {
  std::string data;
  const bool read = !try_read_file_chunks(path, max_bytes, [&](std::string_view piece) { data.append(piece); });
  return read ? data : std::string();
}

std::string path_component_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name == ".") return "'.' names the folder itself";
  if (name == "..") return "'..' names the parent folder";
  if (name.size() > 255) return "it is " + std::to_string(name.size()) + " bytes long (255 at most)";
  for (unsigned char c : name) {
    if (c == '/') return "it holds a '/'";
    if (c == 0) return "it holds a NUL byte";
    if (c < 0x20 || c == 0x7f) return "it holds a control character";
  }
  return "";
}

namespace {

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  if (ec) a = p;
  fs::path r = fs::weakly_canonical(a, ec);
  return ec ? a.lexically_normal() : r;
}

}  // namespace

bool is_within(const fs::path& outer, const fs::path& inner) {
  const fs::path o = resolved(outer), i = resolved(inner);
  auto oi = o.begin(), ii = i.begin();
  for (; oi != o.end(); ++oi, ++ii) {
    if (oi->empty()) continue;  // a trailing separator
    if (ii == i.end() || *oi != *ii) return false;
  }
  return true;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool eq = fs::equivalent(a, b, ec);
    if (!ec) return eq;
  }
  return resolved(a) == resolved(b);
}

TempDir::TempDir(const std::string& prefix, const std::string& parent) {
  const char* t = std::getenv("TMPDIR");
  std::string base = !parent.empty() ? parent : t && *t ? t : "/tmp";
  std::string templ = base + "/" + prefix + "_XXXXXX";
  if (!::mkdtemp(templ.data())) throw Error("cannot make a temporary folder in '" + base + "': " + std::strerror(errno));
  path_ = templ;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file_atomic(const std::string& path, std::string_view text, unsigned mode) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    throw Error("cannot write '" + path + "': it is " + file_kind(st.st_mode) + ", not a regular file");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error("cannot write '" + path + "': it is " + file_kind(st.st_mode) + ", not a regular file");
  const fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string templ = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(templ.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  };
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(errno);
    }
    off += static_cast<std::size_t>(w);
  }
  if (::fchmod(fd, mode) != 0) fail(errno);
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(templ.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  }
  if (::rename(templ.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(templ.c_str());
    throw Error("cannot write '" + path + "': " + std::strerror(err));
  }
  // The rename is durable only once the folder's entry is on disk.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace vexp::base
