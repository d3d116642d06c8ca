// The line walk the label map and the video lists share.
#pragma once

#include <cstdint>
#include <string_view>

namespace vexp::kinetics::detail {

// Calls fn(line, number) for each line of `text` that is not blank: a UTF-8 byte
// order mark at the start dropped, spaces, TABs and CRs trimmed at both ends, lines
// numbered from 1 as an editor shows them.
template <class F>
void for_each_trimmed_line(std::string_view text, F&& fn) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::int64_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view s = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++number;
    const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    if (a == std::string_view::npos) continue;
    fn(s.substr(a, b - a + 1), number);
  }
}

}  // namespace vexp::kinetics::detail
