// The errors of the sweep engine: complete sentences, ready to print. The engine
// knows no command line; `vexp sweep` / `vexp results` map them to exit codes
// (Error: 1, InvalidUse: 2, Interrupted: 130, docs/architecture.md#exit-codes).
#pragma once

#include "vexp/base/error.hpp"
#include <stdexcept>
#include <string>

namespace vexp::sweep {

// Something failed: a store that cannot be opened, a directory that holds another
// sweep, a run file that cannot be read, a child that cannot be started.
struct Error : base::Error {
  using base::Error::Error;
};

// What was asked cannot work as asked (trials that would share a GPU): kind invalid.
struct InvalidUse : Error {
  explicit InvalidUse(const std::string& what) : Error(what, base::ErrorKind::invalid) {}
};

// SIGINT / SIGTERM stopped the sweep; the running trials were reset to pending.
struct Interrupted : Error {
  explicit Interrupted(const std::string& what) : Error(what, base::ErrorKind::interrupted) {}
};

}  // namespace vexp::sweep
