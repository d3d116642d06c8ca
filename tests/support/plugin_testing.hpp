// Helpers for plugin tests: a host with the build's plugins loaded, and
// defaults-filled parameters from a plugin's schema.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "vexp/runtime/plugin_host.hpp"

namespace vexp::testing {

// The build's plugin folder, loaded once per test binary (problems fail loudly).
PluginHost& host();

// Parameters for plugin (kind, name): the schema's defaults overridden by `given`.
Params params(const std::string& kind, const std::string& name,
              std::map<std::string, dsl::Value> given = {});

// host().make<T>(kind, name, params(kind, name, given))
template <class T>
std::shared_ptr<T> make(const std::string& kind, const std::string& name,
                        std::map<std::string, dsl::Value> given = {}) {
  return host().make<T>(kind, name, params(kind, name, std::move(given)));
}

// The message of what `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace vexp::testing
