// The sweep engine's errors (vexp/sweep/error.hpp) as the CLI's exit codes, for
// `vexp sweep`, `vexp results` and `vexp report`: Interrupted 130, InvalidUse 2,
// any other sweep::Error 1, each with its sentence.
#pragma once

#include "common.hpp"
#include "vexp/sweep/error.hpp"

namespace vexp::cli {

// Runs `fn` and rethrows what the sweep engine throws as cli::Exit.
template <typename F>
decltype(auto) sweep_errors(F&& fn) {
  try {
    return fn();
  } catch (const sweep::Interrupted& e) {
    throw Exit{130, e.what()};
  } catch (const sweep::InvalidUse& e) {
    throw Exit{kExitInvalid, e.what()};
  } catch (const sweep::Error& e) {
    throw Exit{kExitFailure, e.what()};
  }
}

}  // namespace vexp::cli
