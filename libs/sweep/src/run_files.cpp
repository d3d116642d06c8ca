#include "vexp/sweep/run_files.hpp"

#include "vexp/rundir/files.hpp"
#include "vexp/sweep/error.hpp"

namespace vexp::sweep {

namespace {
// libs/rundir says what is wrong with a file as rundir::Error; the engine's callers
// catch sweep::Error.
template <class F>
auto as_error(F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const rundir::Error& e) {
    throw Error(e.what());
  }
}
}  // namespace

const RunFileReader& run_files() {
  static const RunFileReader r = [] {
    RunFileReader x;
    x.text = [](const std::filesystem::path& p) { return as_error([&] { return rundir::read_text(p); }); };
    x.lines = [](const std::filesystem::path& p, const LineFn& fn) { as_error([&] { rundir::for_each_line(p, fn); }); };
    x.summary = [](const std::filesystem::path& p) { return as_error([&] { return rundir::read_summary(p); }); };
    x.record_problem = [](const nlohmann::json& j) { return rundir::metrics_record_problem(j); };
    return x;
  }();
  return r;
}

}  // namespace vexp::sweep
