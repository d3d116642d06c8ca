#include "report/run_files.hpp"

namespace vexp::report {
namespace fs = std::filesystem;

std::string read_run_file(const fs::path& path, std::uint64_t max_bytes) {
  return cli_errors([&] { return rundir::read_text(path, max_bytes); });
}

void for_each_log_line(const fs::path& path, const std::function<void(const std::string&, std::int64_t)>& fn) {
  cli_errors([&] { rundir::for_each_line(path, fn); });
}

nlohmann::json read_summary(const fs::path& file) {
  return cli_errors([&] { return rundir::read_summary(file); });
}

}  // namespace vexp::report
