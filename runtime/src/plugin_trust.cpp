#include "vexp/runtime/plugin_trust.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace fs = std::filesystem;

namespace vexp {

std::string trusted_plugin_dirs_file() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  fs::path base;
  if (xdg && *xdg == '/') {
    base = xdg;  // the XDG spec: a relative XDG_CONFIG_HOME is invalid and ignored
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = fs::path(home) / ".config";
  } else {
    return "";
  }
  return (base / "vexp" / "trusted-plugin-dirs").string();
}

std::vector<std::string> read_trusted_plugin_dirs() {
  std::vector<std::string> out;
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) return out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != '/') continue;  // only absolute paths are entries
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
  }
  return out;
}

void write_trusted_plugin_dirs(const std::vector<std::string>& dirs) {
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) throw std::runtime_error("cannot store trusted plugin folders: neither XDG_CONFIG_HOME nor HOME is set");
  const fs::path target(file);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create '" + target.parent_path().string() + "': " + ec.message());
  std::string text =
      "# Plugin folders that vexp recipes may name in [plugins] paths (written by `vexp trust`).\n";
  for (const auto& d : dirs) text += d + "\n";
  write_file_atomic(file, text, 0600);
}

std::string canonical_path(const std::string& path, std::string* error) {
  std::error_code ec;
  fs::path p = fs::canonical(path, ec);
  if (ec) {
    if (error) *error = ec.message();
    return "";
  }
  return p.string();
}

PluginTrust PluginTrust::current(const std::vector<std::string>& plugin_dirs) {
  PluginTrust t;
  auto add = [&t](const std::string& dir) {
    if (dir.empty()) return;
    std::string c = canonical_path(dir);
    if (!c.empty() && std::find(t.allowed_.begin(), t.allowed_.end(), c) == t.allowed_.end()) t.allowed_.push_back(c);
  };
  add(PluginHost::default_plugin_dir());
  if (const char* env = std::getenv("VEXP_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string dir;
    while (std::getline(ss, dir, ':')) add(dir);
  }
  for (const auto& d : plugin_dirs) add(d);
  t.preloaded_count_ = t.allowed_.size();
  for (const auto& d : read_trusted_plugin_dirs()) add(d);  // re-canonicalised: a link swapped since is followed now
  return t;
}

bool PluginTrust::allows(const std::string& canonical) const {
  if (canonical.empty()) return false;
  if (std::find(allowed_.begin(), allowed_.end(), canonical) != allowed_.end()) return true;
  std::error_code ec;
  if (fs::is_regular_file(canonical, ec)) {
    const std::string parent = fs::path(canonical).parent_path().string();
    return std::find(allowed_.begin(), allowed_.end(), parent) != allowed_.end();
  }
  return false;
}

bool PluginTrust::preloaded(const std::string& canonical) const {
  return std::find(allowed_.begin(), allowed_.begin() + static_cast<std::ptrdiff_t>(preloaded_count_), canonical) !=
         allowed_.begin() + static_cast<std::ptrdiff_t>(preloaded_count_);
}

std::string untrusted_plugin_folder_message(const std::string& written, const std::string& canonical) {
  std::string what = "plugin folder '" + written + "'";
  if (canonical != written) what += " (" + canonical + ")";
  return what + " is not trusted, so nothing was loaded from it: loading a plugin runs its code; if you trust it, "
                "run 'vexp trust " + canonical + "' once, or pass --plugin-path " + canonical +
         " (or add it to VEXP_PLUGIN_PATH)";
}

}  // namespace vexp
