#include "vexp/report/gnuplot.hpp"

#include <cstdio>
#include <set>

#include "vexp/base/attempt.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"

namespace vexp::report {

std::string gp_string(std::string_view s, std::size_t max_bytes) {
  // printable() leaves no byte below 0x20 (nor DEL, C1 or broken UTF-8): no newline
  // can end the command. Inside '...' gnuplot only reads '' as a quote.
  const std::string p = base::printable(s, max_bytes);
  std::string q = "'";
  for (char c : p) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string gp_lines(const std::vector<std::string>& lines, std::size_t max_bytes) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : ".\"\\n\".") + gp_string(l, max_bytes);
  return out.empty() ? gp_string("") : out;
}

std::string gp_data_string(std::string_view s, std::size_t max_bytes) {
  // Inside "..." in a data file gnuplot 5.4 reads \\ as \ and drops a lone \; its
  // reading of \" varies with what follows. So: every \ doubled (printable's \n
  // and \e stay visible), every " shown as ' (none can close the field early).
  const std::string p = base::printable(s, max_bytes);
  std::string q = "\"";
  for (char c : p) {
    if (c == '"') c = '\'';
    if (c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::vector<std::string> tick_labels(const std::vector<double>& values, int min_digits) {
  std::vector<std::string> out(values.size());
  const std::set<double> distinct(values.begin(), values.end());
  for (int digits = std::max(1, min_digits); digits <= 17; ++digits) {
    std::set<std::string> seen;
    for (size_t i = 0; i < values.size(); ++i) {
      char b[64];
      std::snprintf(b, sizeof b, "%.*g", digits, values[i]);
      out[i] = b;
      seen.insert(out[i]);
    }
    if (seen.size() == distinct.size()) break;
  }
  return out;
}

std::optional<std::string> gnuplot_program() { return base::find_program("gnuplot"); }

std::string run_gnuplot(const std::string& script, const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv{"gnuplot", "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  base::SpawnOptions o;
  o.stdin_path = "/dev/null";
  o.stdout_path = log;
  o.stderr_path = "=stdout";
  auto ran = base::attempt([&] { return base::run_program(argv, o); });
  if (!ran) return ran.message();
  const base::ProcessStatus st = std::move(ran).value();
  return st.ok() ? std::string() : st.describe();
}

}  // namespace vexp::report
