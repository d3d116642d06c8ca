// Directory locks: a run directory or a sweep directory is worked on by one process
// at a time. The lock is an flock on DIR/.vexp.lock (released by the kernel when the
// holder exits, however it exits) and the file says who holds it.
#pragma once

#include <string>

#include "vexp/base/error.hpp"

namespace vexp::base {

class DirLock {
 public:
  DirLock() = default;
  // Takes the lock of folder `dir` (which must exist) for `what` (for example
  // "vexp run"). Throws Error "'DIR' is in use by WHAT (pid P on HOST, since TIME);
  // wait for it to finish or stop it" when another process holds it.
  DirLock(const std::string& dir, const std::string& what);
  ~DirLock();
  DirLock(DirLock&& o) noexcept;
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool held() const { return fd_ >= 0; }
  void release();

  // The holder's description when another process holds the lock of `dir`, else "".
  static std::string holder(const std::string& dir);

  static constexpr const char* kFileName = ".vexp.lock";

 private:
  int fd_ = -1;
};

}  // namespace vexp::base
