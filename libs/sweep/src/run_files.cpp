#include "vexp/sweep/run_files.hpp"

#include <stdexcept>
#include <utility>

namespace vexp::sweep {

namespace {
RunFileReader& bound() {
  static RunFileReader r;
  return r;
}
}  // namespace

void bind_run_files(RunFileReader reader) {
  if (!reader.text || !reader.lines || !reader.summary || !reader.record_problem)
    throw std::invalid_argument("sweep::bind_run_files: every reader function must be set");
  bound() = std::move(reader);
}

const RunFileReader& run_files() {
  const RunFileReader& r = bound();
  if (!r.text) throw std::logic_error("sweep::run_files(): no run-file reader was bound (sweep::bind_run_files)");
  return r;
}

}  // namespace vexp::sweep
