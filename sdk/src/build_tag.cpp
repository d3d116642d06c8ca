#include "vexp/build_tag.hpp"

#include <map>
#include <sstream>

namespace vexp {

const char* host_build_tag() { return VEXP_BUILD_TAG; }

namespace {
std::map<std::string, std::string> parse_tag(const std::string& tag) {
  std::map<std::string, std::string> out;
  std::stringstream ss(tag);
  std::string item;
  while (std::getline(ss, item, ';')) {
    auto eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}
}  // namespace

std::string compare_build_tags(const std::string& host, const std::string& plugin) {
  auto h = parse_tag(host);
  auto p = parse_tag(plugin);
  // The compiler is informative only: gcc and clang share libstdc++ here.
  for (const char* key : {"torch", "cxx11abi", "cuda"}) {
    auto hv = h.count(key) ? h[key] : "(missing)";
    auto pv = p.count(key) ? p[key] : "(missing)";
    if (hv != pv) {
      return std::string("built with ") + key + "=" + pv + " but vexp has " + key + "=" + hv +
             " (plugin tag '" + plugin + "', vexp tag '" + host + "'); rebuild the plugin against this vexp";
    }
  }
  return {};
}

}  // namespace vexp
