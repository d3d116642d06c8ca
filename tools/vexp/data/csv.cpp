#include "data/csv.hpp"

namespace vexp::data {

bool split_csv(const std::string& line, std::vector<std::string>& fields, std::string& error) {
  fields.assign(1, "");
  size_t i = 0;
  const size_t n = line.size() - (!line.empty() && line.back() == '\r' ? 1 : 0);
  bool at_field_start = true;
  while (i < n) {
    const char c = line[i];
    if (at_field_start && c == '"') {
      ++i;
      for (;;) {
        if (i >= n) {
          error = "a quoted field is not closed";
          return false;
        }
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            fields.back() += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        fields.back() += line[i++];
      }
      if (i < n && line[i] != ',') {
        error = "text after the closing quote of field " + std::to_string(fields.size());
        return false;
      }
      at_field_start = false;
      continue;
    }
    if (c == ',') {
      fields.emplace_back();
      at_field_start = true;
    } else {
      fields.back() += c;
      at_field_start = false;
    }
    ++i;
  }
  return true;
}

std::string csv_field(const std::string& text, bool quote_spaces) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string::npos ||
                     (quote_spaces && text.find(' ') != std::string::npos);
  if (!quote) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace vexp::data
