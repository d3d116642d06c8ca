// CSV as the Kinetics annotation files use it (RFC 4180: a field may be quoted;
// inside quotes a comma is data and "" is one quote).
#pragma once

#include <string>
#include <vector>

namespace vexp::data {

// Splits one record into `fields` (quotes removed). Returns false with `error`
// set when a quote is not closed or a closing quote is followed by other text.
bool split_csv(const std::string& line, std::vector<std::string>& fields, std::string& error);

// A field as a CSV writer writes it: in quotes (inner quotes doubled) when it
// holds a comma, a quote or a line break, and, with `quote_spaces`, also when it
// holds a space, as the official Kinetics CSVs quote every multi-word label.
std::string csv_field(const std::string& text, bool quote_spaces = false);

}  // namespace vexp::data
