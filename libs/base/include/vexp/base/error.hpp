// vexp's one error vocabulary: every library's error is a vexp::base::Error, a
// complete sentence ready to print, carrying what kind of failure it is. Libraries
// throw; nothing translates one library's error into another's. The command line maps
// the kind to an exit code once, in tools/vexp/main.cpp (docs/architecture.md#errors):
//   failure 1 · invalid 2 · refused 2 · diverged 3 · interrupted 130 · child: its own code.
#pragma once

#include <stdexcept>
#include <string>

namespace vexp::base {

enum class ErrorKind {
  failure,      // something failed: a file that cannot be read, a child that cannot start
  invalid,      // the input or the usage is wrong (a recipe, an option, a sweep file)
  refused,      // what was asked would be unsafe or cannot work as asked; nothing was done
  diverged,     // training diverged (a non-finite loss)
  interrupted,  // SIGINT / SIGTERM stopped the work after saving what it had
  child,        // a process this one ran failed and already said why: leave with its code
};

struct Error : std::runtime_error {
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::failure)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }
  // ErrorKind::child: the exit code to leave with (0 otherwise).
  int child_code() const noexcept { return child_code_; }
  // This error with a child's exit code (base::attempt keeps it when it re-words one).
  Error with_child_code(int code) const {
    Error e(*this);
    e.child_code_ = code;
    return e;
  }

 protected:
  Error(const std::string& message, ErrorKind kind, int child_code)
      : std::runtime_error(message), kind_(kind), child_code_(child_code) {}

 private:
  ErrorKind kind_;
  int child_code_ = 0;

  friend Error child_failed(int code, const std::string& message);
};

// The kinds, spelled at the throw site: `throw base::invalid("--top: expected ...")`.
inline Error failure(const std::string& message) { return Error(message, ErrorKind::failure); }
inline Error invalid(const std::string& message) { return Error(message, ErrorKind::invalid); }
inline Error refused(const std::string& message) { return Error(message, ErrorKind::refused); }
inline Error diverged(const std::string& message) { return Error(message, ErrorKind::diverged); }
inline Error interrupted(const std::string& message) { return Error(message, ErrorKind::interrupted); }
// A child process failed with `code` (1-255) and said why itself; `message` ("" for
// none) is printed after it.
inline Error child_failed(int code, const std::string& message = "") {
  return Error(message, ErrorKind::child, code);
}

}  // namespace vexp::base
