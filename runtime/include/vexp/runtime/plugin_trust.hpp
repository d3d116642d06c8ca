// Which plugin folders a recipe may name. Loading a library runs its code (its
// constructors run inside dlopen), so opening a recipe someone sent must not load
// a folder that recipe chose. A folder named in [plugins] paths (of the recipe, an
// `extends` base, or --set) is loaded only when it is, after realpath:
//   - vexp's own plugin folder (the build's or the installation's),
//   - a folder of VEXP_PLUGIN_PATH,
//   - a folder given with --plugin-path on the command line,
//   - a folder the user trusted once with `vexp trust DIR`, listed in
//     ${XDG_CONFIG_HOME:-$HOME/.config}/vexp/trusted-plugin-dirs;
// a path naming a single library is allowed when its folder is. Anything else is
// refused before anything is loaded from it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace vexp {

// ${XDG_CONFIG_HOME:-$HOME/.config}/vexp/trusted-plugin-dirs ("" when neither is set).
std::string trusted_plugin_dirs_file();

// The folders in the trust file. Each entry is one JSON string on its own line
// (format 2: a path with a space, a quote or anything else cannot read back as
// another path); lines of the first format (a bare absolute path) are still read,
// with only a trailing CR dropped. Blank lines and lines starting with '#' are
// skipped; an entry with a control character is ignored. A missing file holds none.
// Throws std::runtime_error naming the file when it cannot be read (a FIFO, a
// device, too large).
std::vector<std::string> read_trusted_plugin_dirs();

// Replaces the trust file with `dirs` (temporary file, fsync, rename: a crash
// leaves the old list or the new one). Throws std::runtime_error naming the file.
// Callers that read, change and write the list use update_trusted_plugin_dirs.
void write_trusted_plugin_dirs(const std::vector<std::string>& dirs);

// Reads the list, lets `change` edit it and writes it back, holding an exclusive
// lock (an flock on trusted-plugin-dirs.lock beside the file) the whole time, so
// that `vexp trust` commands run at once all take effect and a removal cannot be
// undone by a concurrent addition. `change` may throw: nothing is written then.
// Returns the list written. Throws std::runtime_error naming the file.
std::vector<std::string> update_trusted_plugin_dirs(const std::function<void(std::vector<std::string>&)>& change);

// Why `path` cannot be stored in the trust file ("" when it can): a control
// character (newline, tab, ...) or bytes that are not UTF-8.
std::string trust_path_problem(const std::string& path);

// realpath of `path` (relative to the working directory); "" with `error` set
// when it does not exist.
std::string canonical_path(const std::string& path, std::string* error = nullptr);

class PluginTrust {
 public:
  // The default folder, VEXP_PLUGIN_PATH, `plugin_dirs` (--plugin-path) and the
  // trust file, each canonicalised (entries that do not exist are dropped).
  static PluginTrust current(const std::vector<std::string>& plugin_dirs);
  // Whether a recipe may name `canonical` (a folder, or a library in an allowed folder).
  bool allows(const std::string& canonical) const;
  const std::vector<std::string>& folders() const { return allowed_; }
  // Whether `canonical` is one of the folders every session loads first (the
  // default folder, VEXP_PLUGIN_PATH, --plugin-path): nothing more to load.
  bool preloaded(const std::string& canonical) const;

 private:
  std::vector<std::string> allowed_;
  size_t preloaded_count_ = 0;  // the first entries of allowed_
};

// The sentence for a refused folder: what was refused and how to allow it.
std::string untrusted_plugin_folder_message(const std::string& written, const std::string& canonical);

}  // namespace vexp
