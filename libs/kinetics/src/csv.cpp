#include "vexp/kinetics/csv.hpp"

#include "vexp/kinetics/error.hpp"

namespace vexp::kinetics {

namespace {

[[noreturn]] void bad(const std::string& path, int64_t line, const std::string& what) {
  throw Error(path + ":" + std::to_string(line) + ": " + what);
}

bool blank(const std::vector<std::string>& fields) {
  return fields.size() == 1 && fields[0].find_first_not_of(" \t") == std::string::npos;
}

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRecord> out;
  CsvRecord rec;
  rec.fields.emplace_back();
  rec.line = 1;
  int64_t line = 1;
  const size_t n = text.size();
  size_t i = 0;
  bool field_quoted = false;  // the current field was quoted (and closed)
  auto end_record = [&] {
    if (!blank(rec.fields) || field_quoted) out.push_back(std::move(rec));
    rec = CsvRecord{};
    rec.fields.emplace_back();
    rec.line = line;
    field_quoted = false;
  };
  while (i < n) {
    const char c = text[i];
    if (c == '"' && rec.fields.back().empty() && !field_quoted) {
      const int64_t opened = line;
      ++i;
      for (;;) {
        if (i >= n) bad(path, opened, "a quoted field is not closed");
        const char q = text[i];
        if (q == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            rec.fields.back() += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (q == '\n') ++line;
        rec.fields.back() += q;
        ++i;
      }
      field_quoted = true;
      if (i < n && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') &&
          !(text[i] == '\r' && i + 1 == n))
        bad(path, line, "text after the closing quote of field " + std::to_string(rec.fields.size()));
      continue;
    }
    if (c == ',') {
      rec.fields.emplace_back();
      field_quoted = false;
      ++i;
    } else if (c == '\n' || (c == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
      i += c == '\r' ? 2 : 1;
      ++line;
      end_record();
    } else if (c == '"') {
      bad(path, line, "a quote inside the unquoted field " + std::to_string(rec.fields.size()) +
                          " (quote the whole field and double the quote)");
    } else {
      rec.fields.back() += c;
      ++i;
    }
  }
  if (!blank(rec.fields) || field_quoted) out.push_back(std::move(rec));
  return out;
}

std::string csv_field(std::string_view text, bool quote_spaces) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (quote_spaces && text.find(' ') != std::string_view::npos);
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace vexp::kinetics
