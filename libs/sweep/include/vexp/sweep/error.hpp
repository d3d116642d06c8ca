// The errors of the sweep engine: complete sentences, ready to print. The engine
// knows no command line; `vexp sweep` / `vexp results` map them to exit codes
// (Error: 1, InvalidUse: 2, Interrupted: 130, docs/architecture.md#exit-codes).
#pragma once

#include <stdexcept>
#include <string>

namespace vexp::sweep {

// Something failed: a store that cannot be opened, a directory that holds another
// sweep, a run file that cannot be read, a child that cannot be started.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What was asked cannot work as asked (trials that would share a GPU).
struct InvalidUse : Error {
  using Error::Error;
};

// SIGINT / SIGTERM stopped the sweep; the running trials were reset to pending.
struct Interrupted : Error {
  using Error::Error;
};

}  // namespace vexp::sweep
