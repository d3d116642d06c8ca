#include "plugin_testing.hpp"

#include <stdexcept>
#include <vector>

namespace vexp::testing {

PluginHost& host() {
  static PluginHost* h = [] {
    auto* ph = new PluginHost();
    std::vector<std::string> problems;
    ph->load_directory(VEXP_TEST_PLUGIN_DIR, problems);
    if (!problems.empty()) throw std::runtime_error("loading test plugins: " + problems.front());
    return ph;
  }();
  return *h;
}

Params params(const std::string& kind, const std::string& name, std::map<std::string, dsl::Value> given) {
  const PluginDecl* decl = host().find(kind, name);
  if (!decl) throw std::runtime_error("no " + kind + " plugin named '" + name + "'");
  return dsl::make_params(decl->schema, std::move(given));
}

}  // namespace vexp::testing
