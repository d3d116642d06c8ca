// vexp trust DIR... | --list | --remove DIR...
// The plugin folders this user allows recipes to name in [plugins] paths (see
// runtime/include/vexp/runtime/plugin_trust.hpp): canonical absolute paths, one JSON
// string per line, in ${XDG_CONFIG_HOME:-$HOME/.config}/vexp/trusted-plugin-dirs,
// changed only under its lock.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <iostream>

#include "commands/common.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/plugin_trust.hpp"

namespace fs = std::filesystem;

namespace vexp::cli {

namespace {

struct TrustArgs {
  std::vector<std::string> dirs;
  std::vector<std::string> remove;
  bool list = false;
};

// A path as the user reads it: quoted when a space at either end would be invisible.
std::string shown(const std::string& path) {
  const std::string p = base::printable(path, 4096);
  const bool edge_space = !p.empty() && (std::isspace(static_cast<unsigned char>(p.front())) ||
                                         std::isspace(static_cast<unsigned char>(p.back())));
  return edge_space ? "'" + p + "'" : p;
}

// The canonical folder `d` names, or base::Error (invalid) saying why it cannot be trusted.
std::string folder_to_trust(const std::string& d) {
  const std::string typed = base::printable(d, 4096);
  std::string why;
  const std::string c = canonical_path(d, &why);
  if (c.empty()) {
    // On POSIX a space is part of a name: "dir " is not "dir".
    const bool edge_space = !d.empty() && (std::isspace(static_cast<unsigned char>(d.front())) ||
                                           std::isspace(static_cast<unsigned char>(d.back())));
    throw base::invalid("cannot trust '" + typed + "': " + why +
                                 (edge_space ? " (the name has a space at its start or end, which is part of it)" : ""));
  }
  const std::string problem = trust_path_problem(c);
  if (!problem.empty()) throw base::invalid("cannot trust '" + base::printable(c, 4096) + "': " + problem);
  std::error_code ec;
  if (!fs::is_directory(c, ec))
    throw base::invalid("cannot trust '" + typed + "': not a folder (trust the folder that holds the library)");
  return c;
}

std::vector<std::string> update(const std::function<void(std::vector<std::string>&)>& change) {
  return update_trusted_plugin_dirs(change);
}

void run_trust(const TrustArgs& a) {
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) throw base::failure("cannot find the trust file: neither XDG_CONFIG_HOME nor HOME is set");
  const int actions = (a.list ? 1 : 0) + (a.dirs.empty() ? 0 : 1) + (a.remove.empty() ? 0 : 1);
  if (actions != 1)
    throw base::invalid("give one of: vexp trust DIR..., vexp trust --list, vexp trust --remove DIR...");
  if (a.list) {
    std::vector<std::string> trusted;
    try {
      trusted = read_trusted_plugin_dirs();
    } catch (const std::exception& e) {
      throw base::failure(e.what());
    }
    for (const auto& d : trusted) std::cout << shown(d) << "\n";
    if (trusted.empty()) std::cerr << "vexp: no trusted plugin folders (" << file << ")\n";
    return;
  }
  if (!a.remove.empty()) {
    std::vector<std::string> gone;
    for (const auto& d : a.remove) {
      // A folder that is gone is matched by its absolute path as written.
      std::string c = canonical_path(d);
      if (c.empty()) c = fs::absolute(d).lexically_normal().string();
      while (c.size() > 1 && c.back() == '/') c.pop_back();
      gone.push_back(c);
    }
    // Checked and removed under the lock: a concurrent `vexp trust` cannot bring
    // back what this command reports as removed.
    update([&](std::vector<std::string>& keep) {
      for (const auto& c : gone) {
        auto it = std::find(keep.begin(), keep.end(), c);
        if (it == keep.end())
          throw base::failure("'" + shown(c) + "' is not a trusted plugin folder (" + file + "); nothing changed");
        keep.erase(it);
      }
    });
    for (const auto& d : a.remove) std::cout << "no longer trusted: " << shown(d) << "\n";
    return;
  }
  std::vector<std::string> added;
  for (const auto& d : a.dirs) added.push_back(folder_to_trust(d));
  update([&](std::vector<std::string>& trusted) {
    for (const auto& c : added)
      if (std::find(trusted.begin(), trusted.end(), c) == trusted.end()) trusted.push_back(c);
  });
  for (const auto& c : added) std::cout << "trusted: " << shown(c) << "\n";
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
