// Text that comes from data (names, paths, file contents) and is printed to a
// terminal: control characters (ESC, OSC, BEL, CR, newlines, C1 controls) are shown
// escaped so that they cannot move the cursor, retitle the window or clear the
// screen, and very long values are cut.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::base {

// `s` with every control character written as \n, \t, \r, \e or \xNN (also the C1
// controls U+0080..U+009F and bytes that are not UTF-8), and, when longer than
// max_bytes, its first max_bytes followed by "... (N bytes)".
std::string printable(std::string_view s, std::size_t max_bytes = 256);

// True when `s` holds any byte printable() would escape.
bool has_control(std::string_view s);

// Removes a UTF-8 byte order mark (EF BB BF) from the start of `s`, as spreadsheet
// programs write one before a CSV's header. True when there was one.
bool strip_utf8_bom(std::string& s);

// `s` as one word for a POSIX shell: unchanged when it holds only characters no
// shell reads specially, else in single quotes (a quote inside written '\'').
std::string shell_quote(const std::string& s);

// Now in UTC, strftime-formatted: by default ISO 8601 with seconds
// ("2026-12-03T14:05:09Z"), the one timestamp of vexp's records (provenance.jsonl,
// jobs.jsonl, lock files).
std::string utc_now(const char* format = "%Y-%m-%dT%H:%M:%SZ");

// A count (parameters, multiply-adds) for people: below 10,000 the integer ("9999"),
// else 4 significant digits and k / M / G / T ("71.59 M", "4.134 G", "12.5 k"); "nan" or
// "inf" when not finite. Every report and table of vexp writes MACs and parameter counts
// with it (the exact number stays in summary.json and --json).
std::string count_text(double v);

// The pieces of `s` between the separators: "8,,64" split at ',' is {"8", "", "64"},
// "" is {""} (the caller refuses the empty pieces it does not allow).
std::vector<std::string> split(const std::string& s, char separator);

}  // namespace vexp::base
