// gnuplot, driven safely: it is started by argv (never through a shell), its paths
// arrive as arguments of `gnuplot -c SCRIPT ARG1 ...` (string variables, never parsed
// as code), and every text from data that the script shows (sweep, trial, recipe
// names) goes through gp_string: a single-quoted gnuplot string, the one kind where
// gnuplot expands neither `backquotes` nor @macros and where only '' is special.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::report {

// `s` as a gnuplot single-quoted string literal: control characters (newline, CR,
// ESC ...) shown escaped as vexp::base::printable does (a newline would end the
// command and start another), each ' doubled, cut after `max_bytes`.
std::string gp_string(std::string_view s, std::size_t max_bytes = 200);

// Several lines of text as one gnuplot string expression ('one'."\n".'two'): each
// line a gp_string, joined by gnuplot's own newline (for titles and labels).
std::string gp_lines(const std::vector<std::string>& lines, std::size_t max_bytes = 400);

// `s` as one column of a gnuplot data file, read as a string by `with labels` or
// stringcolumn(): double-quoted, control characters escaped (printable), each '\'
// doubled and each '"' shown as ', so that it can neither end the field nor the line.
std::string gp_data_string(std::string_view s, std::size_t max_bytes = 200);

// Tick labels for `values` (sorted or not) printed with the fewest significant
// digits (at least `min_digits`, at most 17) at which every distinct value gets a
// distinct label: 3e-4, 3.2e-4 and 3.25e-4 are not all "3e-4".
std::vector<std::string> tick_labels(const std::vector<double>& values, int min_digits = 2);

// The gnuplot program on PATH, or nullopt.
std::optional<std::string> gnuplot_program();

// Runs `gnuplot -c SCRIPT ARGS...` with its standard output and error in `log`.
// Returns "" when it exited 0, else why not ("exit code 1", or that it could not start).
std::string run_gnuplot(const std::string& script, const std::vector<std::string>& args, const std::string& log);

}  // namespace vexp::report
