#include "vexp/base/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

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

std::string now_text() {
  char b[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm {};
  ::gmtime_r(&t, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

DirLock::DirLock(const std::string& dir, const std::string& what) {
  const std::string p = lock_path(dir);
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw Error("cannot lock '" + dir + "': cannot open '" + p + "': " + std::strerror(errno));
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
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) who = read_holder(fd);
  ::close(fd);
  return who;
}

}  // namespace vexp::base
