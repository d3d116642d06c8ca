// The plugin declaration types (vexp/schema/catalog.hpp): what the SDK compiles.
#include "vexp/schema/catalog.hpp"

namespace vexp::schema {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i] < 0 ? std::string("?") : std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace vexp::schema
