// CSV as RFC 4180 defines it, the one reader and writer of vexp's Kinetics files.
//
// Rules: records end with LF or CRLF (the last may have neither); a field is quoted
// when it starts with '"': then a comma, CR or LF inside it is data and "" is one
// quote, and the closing quote must end the field. A quote inside an unquoted field
// is refused (quote the field and double the quote). Spaces are data (no trimming).
// A UTF-8 byte order mark before the first record (spreadsheets write one) is
// dropped. Records that are empty or hold only spaces and tabs are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::kinetics {

struct CsvRecord {
  std::vector<std::string> fields;
  int64_t line = 0;  // 1-based line where the record starts
};

// All records of `text`. Throws kinetics::Error "PATH:LINE: what" (`path` only names
// the text) for a quoted field that is not closed, text after a closing quote, or a
// quote inside an unquoted field.
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path);

// A field as a CSV writer writes it: in quotes (inner quotes doubled) when it holds a
// comma, a quote, CR or LF, and, with `quote_spaces`, also when it holds a space, as
// the official Kinetics CSVs quote every multi-word label. parse_csv reads it back.
std::string csv_field(std::string_view text, bool quote_spaces = false);

}  // namespace vexp::kinetics
