#include "vexp/base/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::base {
namespace {

std::string lock_path(const std::string& dir) { return dir + "/" + DirLock::kFileName; }

std::string read_holder(int fd) {
  char buf[512];
  const ssize_t r = ::pread(fd, buf, sizeof buf - 1, 0);
  if (r <= 0) return "another process";
  std::string s(buf, static_cast<std::size_t>(r));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return printable(s, 300);
}

// Why the opened lock file cannot be this directory's lock ("" when it can): the
// lock's description is written over the file (ftruncate, pwrite), so it must be a
// regular file of one name, ours. A hard link planted as DIR/.vexp.lock would
// otherwise let the lock destroy the file it links to (a checkpoint, a file
// outside the folder); O_NOFOLLOW already refuses a symbolic link.
std::string lock_file_problem(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "it is " + file_kind(st.st_mode) + ", not a regular file";
  if (st.st_nlink != 1)
    return "it has " + std::to_string(st.st_nlink) +
           " names (a hard link to another file); remove it if no vexp is running there";
  if (st.st_uid != ::geteuid())
    return "it belongs to user " + std::to_string(st.st_uid) + ", not to you (user " + std::to_string(::geteuid()) +
           "); vexp writes only into folders it locks as their owner";
  return "";
}

std::string now_text() { return utc_now(); }

}  // namespace

DirLock::DirLock(const std::string& dir, const std::string& what) {
  const std::string p = lock_path(dir);
  // O_NONBLOCK: a FIFO planted under the lock's name must not block the open.
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw Error("cannot lock '" + printable(dir) + "': cannot open '" + printable(p) + "': " +
                (err == ELOOP ? std::string("it is a symbolic link; remove it if no vexp is running there")
                              : std::strerror(err)));
  }
  if (const std::string why = lock_file_problem(fd_); !why.empty()) {
    ::close(fd_);
    fd_ = -1;
    throw Error("cannot lock '" + printable(dir) + "': its lock file '" + printable(p) + "' is refused: " + why);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string who = err == EWOULDBLOCK ? read_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error("'" + dir + "' is in use by " + who + "; wait for it to finish or stop it");
    throw Error("cannot lock '" + dir + "': " + std::strerror(err));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string info = what + " (pid " + std::to_string(::getpid()) + " on " + host + ", since " + now_text() + ")\n";
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t w = ::pwrite(fd_, info.data(), info.size(), 0);
    (void)w;  // the description is a courtesy; the flock is the lock
  }
}

DirLock::~DirLock() { release(); }

DirLock::DirLock(DirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void DirLock::release() {
  if (fd_ < 0) return;
  // The file stays (removing it would race with a process about to lock it); the
  // kernel drops the flock with the descriptor.
  ::close(fd_);
  fd_ = -1;
}

std::string DirLock::holder(const std::string& dir) {
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return "";
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) who = read_holder(fd);
  ::close(fd);
  return who;
}

}  // namespace vexp::base
