#include "vexp/base/text.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace vexp::base {
namespace {

// Length of a valid UTF-8 sequence starting at s[i] (2..4), or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b >= 0xe0 && b <= 0xef) n = 3;
  else if (b >= 0xf0 && b <= 0xf4) n = 4;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

bool is_c1(std::string_view s, std::size_t i) {
  // U+0080..U+009F, encoded C2 80..C2 9F: terminals may act on them as on ESC [.
  return static_cast<unsigned char>(s[i]) == 0xc2 && i + 1 < s.size() &&
         static_cast<unsigned char>(s[i + 1]) >= 0x80 && static_cast<unsigned char>(s[i + 1]) <= 0x9f;
}

void hex(std::string& o, unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "\\x%02x", c);
  o += b;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_bytes) {
  std::string o;
  const std::size_t n = std::min(s.size(), max_bytes);
  std::size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n') o += "\\n";
      else if (c == '\t') o += "\\t";
      else if (c == '\r') o += "\\r";
      else if (c == 0x1b) o += "\\e";
      else if (c < 0x20 || c == 0x7f) hex(o, c);
      else o += static_cast<char>(c);
      ++i;
      continue;
    }
    if (is_c1(s, i)) {
      hex(o, c), hex(o, static_cast<unsigned char>(s[i + 1]));
      i += 2;
      continue;
    }
    const std::size_t len = utf8_length(s, i);
    if (len == 0 || i + len > n) {
      hex(o, c);
      ++i;
      continue;
    }
    o.append(s.substr(i, len));
    i += len;
  }
  if (s.size() > max_bytes) o += "... (" + std::to_string(s.size()) + " bytes)";
  return o;
}

bool has_control(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return true;
      ++i;
      continue;
    }
    if (is_c1(s, i)) return true;
    const std::size_t len = utf8_length(s, i);
    if (len == 0) return true;
    i += len;
  }
  return false;
}

bool strip_utf8_bom(std::string& s) {
  if (s.compare(0, 3, "\xEF\xBB\xBF") != 0) return false;
  s.erase(0, 3);
  return true;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[64];
  return std::strftime(b, sizeof b, format, &tm) ? std::string(b) : std::string();
}

std::string count_text(double v) {
  char b[64];
  const double a = std::fabs(v);
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
  if (a < 1e4) {
    std::snprintf(b, sizeof b, "%.0f", v);
    return b;
  }
  const char* unit = a >= 1e12 ? "T" : a >= 1e9 ? "G" : a >= 1e6 ? "M" : "k";
  const double scale = a >= 1e12 ? 1e12 : a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : 1e3;
  // "%.4g" of 999.96 M would read 1000 M: such a value is written in the next unit.
  double x = v / scale;
  if (std::fabs(x) >= 999.95 && scale < 1e12) {
    x /= 1e3;
    unit = scale == 1e3 ? "M" : scale == 1e6 ? "G" : "T";
  }
  std::snprintf(b, sizeof b, "%.4g %s", x, unit);
  return b;
}

std::vector<std::string> split(const std::string& s, char separator) {
  std::vector<std::string> pieces;
  size_t at = 0;
  for (size_t end = s.find(separator); end != std::string::npos; end = s.find(separator, at)) {
    pieces.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  pieces.push_back(s.substr(at));
  return pieces;
}

}  // namespace vexp::base
