// vexp trust DIR... | --list | --remove DIR...
// The plugin folders this user allows recipes to name in [plugins] paths (see
// runtime/include/vexp/runtime/plugin_trust.hpp): canonical absolute paths, one per line, in
// ${XDG_CONFIG_HOME:-$HOME/.config}/vexp/trusted-plugin-dirs.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "vexp/runtime/plugin_trust.hpp"

namespace fs = std::filesystem;

namespace vexp::cli {

namespace {

struct TrustArgs {
  std::vector<std::string> dirs;
  std::vector<std::string> remove;
  bool list = false;
};

void store(const std::vector<std::string>& dirs) {
  try {
    write_trusted_plugin_dirs(dirs);
  } catch (const std::exception& e) {
    throw Exit{kExitFailure, e.what()};
  }
}

void run_trust(const TrustArgs& a) {
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) throw Exit{kExitFailure, "cannot find the trust file: neither XDG_CONFIG_HOME nor HOME is set"};
  const int actions = (a.list ? 1 : 0) + (a.dirs.empty() ? 0 : 1) + (a.remove.empty() ? 0 : 1);
  if (actions != 1)
    throw Exit{kExitInvalid, "give one of: vexp trust DIR..., vexp trust --list, vexp trust --remove DIR..."};
  std::vector<std::string> trusted = read_trusted_plugin_dirs();
  if (a.list) {
    for (const auto& d : trusted) std::cout << d << "\n";
    if (trusted.empty()) std::cerr << "vexp: no trusted plugin folders (" << file << ")\n";
    return;
  }
  if (!a.remove.empty()) {
    std::vector<std::string> keep = trusted;
    for (const auto& d : a.remove) {
      // A folder that is gone is matched by its absolute path as written.
      std::string c = canonical_path(d);
      if (c.empty()) c = fs::absolute(d).lexically_normal().string();
      while (c.size() > 1 && c.back() == '/') c.pop_back();
      auto it = std::find(keep.begin(), keep.end(), c);
      if (it == keep.end()) throw Exit{kExitFailure, "'" + c + "' is not a trusted plugin folder (" + file + "); nothing changed"};
      keep.erase(it);
    }
    store(keep);
    for (const auto& d : a.remove) std::cout << "no longer trusted: " << d << "\n";
    return;
  }
  std::vector<std::string> added;
  for (const auto& d : a.dirs) {
    std::string why;
    const std::string c = canonical_path(d, &why);
    if (c.empty()) throw Exit{kExitInvalid, "cannot trust '" + d + "': " + why};
    std::error_code ec;
    if (!fs::is_directory(c, ec))
      throw Exit{kExitInvalid, "cannot trust '" + d + "': not a folder (trust the folder that holds the library)"};
    if (std::find(trusted.begin(), trusted.end(), c) == trusted.end()) trusted.push_back(c);
    added.push_back(c);
  }
  store(trusted);
  for (const auto& c : added) std::cout << "trusted: " << c << "\n";
  std::cout << "recipes may now name " << (added.size() == 1 ? "this folder" : "these folders")
            << " in [plugins] paths (stored in " << file << ")\n";
}

}  // namespace

void add_trust(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trust", "Allow recipes to name a plugin folder in [plugins] paths (its libraries' code will run)");
  auto a = std::make_shared<TrustArgs>();
  cmd->add_option("dir", a->dirs, "Plugin folder to trust (stored as its canonical absolute path)")->type_name("DIR");
  cmd->add_flag("--list", a->list, "Print the trusted plugin folders");
  cmd->add_option("--remove", a->remove, "Stop trusting a folder (repeatable)")->type_name("DIR");
  cmd->callback([a] { run_trust(*a); });
}

}  // namespace vexp::cli
