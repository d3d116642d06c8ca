#include "vexp/runtime/plugin_trust.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "vexp/base/error.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/log.hpp"
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

namespace {

// Format 2 of the trust file: this first line, then one JSON string per line.
constexpr const char* kHeader =
    "# Plugin folders that vexp recipes may name in [plugins] paths (written by `vexp trust`; format 2: one JSON "
    "string per line).\n";

// One entry of a line ("" when the line holds none).
std::string entry_of(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty() || line[0] == '#') return "";
  std::string path;
  if (line[0] == '"') {
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (!j.is_string()) return "";
      path = j.get<std::string>();
    } catch (const std::exception&) {
      return "";  // a damaged line trusts nothing
    }
  } else {
    path = line;  // format 1: the path as written, spaces included
  }
  if (path.empty() || path[0] != '/' || !trust_path_problem(path).empty()) return "";
  return path;
}

std::vector<std::string> parse_trust_file(const std::string& file) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return out;
  std::string text;
  try {
    text = base::read_file_bounded(file, base::kMaxTextFileBytes);
  } catch (const std::exception& e) {
    throw base::failure(std::string("cannot read the trust file: ") + e.what());
  }
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::string d = entry_of(line);
    if (!d.empty() && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

std::string trust_file_or_throw() {
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) throw base::failure("cannot store trusted plugin folders: neither XDG_CONFIG_HOME nor HOME is set");
  return file;
}

void store_list(const std::string& file, const std::vector<std::string>& dirs) {
  const fs::path target(file);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) throw base::failure("cannot create '" + target.parent_path().string() + "': " + ec.message());
  std::string text = kHeader;
  for (const auto& d : dirs) {
    const std::string why = trust_path_problem(d);
    if (!why.empty()) throw base::failure("cannot store '" + base::printable(d) + "' in '" + file + "': " + why);
    text += nlohmann::json(d).dump() + "\n";
  }
  try {
    base::write_file_atomic(file, text, 0600);
  } catch (const std::exception& e) {
    throw base::failure(e.what());
  }
}

// An exclusive flock on FILE.lock, beside the trust file (the trust file itself is
// replaced by rename, so a lock on it would not survive a write).
class TrustFileLock {
 public:
  explicit TrustFileLock(const std::string& file) {
    const fs::path lock = file + ".lock";
    std::error_code ec;
    fs::create_directories(lock.parent_path(), ec);
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) throw base::failure("cannot lock '" + file + "': cannot open '" + lock.string() + "': " + std::strerror(errno));
    // Another `vexp trust` holds it for milliseconds; a minute means something is wrong.
    for (int i = 0; ::flock(fd_, LOCK_EX | LOCK_NB) != 0; ++i) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        const int err = errno;
        ::close(fd_);
        throw base::failure("cannot lock '" + lock.string() + "': " + std::strerror(err));
      }
      if (i >= 6000) {
        ::close(fd_);
        throw base::failure("'" + lock.string() + "' has been locked by another process for a minute; is a `vexp trust` stuck?");
      }
      ::usleep(10000);
    }
  }
  ~TrustFileLock() { ::close(fd_); }
  TrustFileLock(const TrustFileLock&) = delete;
  TrustFileLock& operator=(const TrustFileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::string trust_path_problem(const std::string& path) {
  if (base::has_control(path))
    return "the path holds a control character (a newline, a tab, ...) or bytes that are not UTF-8; rename the folder";
  return "";
}

std::vector<std::string> read_trusted_plugin_dirs() {
  const std::string file = trusted_plugin_dirs_file();
  if (file.empty()) return {};
  return parse_trust_file(file);
}

void write_trusted_plugin_dirs(const std::vector<std::string>& dirs) {
  const std::string file = trust_file_or_throw();
  TrustFileLock lock(file);
  store_list(file, dirs);
}

std::vector<std::string> update_trusted_plugin_dirs(const std::function<void(std::vector<std::string>&)>& change) {
  const std::string file = trust_file_or_throw();
  TrustFileLock lock(file);
  std::vector<std::string> dirs = parse_trust_file(file);
  change(dirs);
  store_list(file, dirs);
  return dirs;
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
  std::vector<std::string> trusted;
  try {
    trusted = read_trusted_plugin_dirs();
  } catch (const std::exception& e) {
    // Nothing of it is trusted: folders it names are refused with the usual message.
    log_warn(e.what());
  }
  for (const auto& d : trusted) add(d);  // re-canonicalised: a link swapped since is followed now
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
