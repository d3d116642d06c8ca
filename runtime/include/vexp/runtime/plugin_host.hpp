// Loads plugin libraries, checks their ABI and build tag, keeps the registry of
// everything they declare, and creates objects that keep their library loaded.
#pragma once

#include "vexp/base/error.hpp"
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vexp/schema/catalog.hpp"
#include "vexp/registrar.hpp"

namespace vexp {

// Any failure that comes from a plugin: loading it or running its factory.
struct PluginError : base::Error {
  using base::Error::Error;
};

// What plugin code a thread is running, for the fatal-signal handler: the
// library's path and a phrase ("running op 'x' of node 'y'"), both texts that
// outlive the call. Formatted before the call, so marking costs two stores.
struct PluginActivity {
  const char* library = nullptr;
  const char* what = nullptr;
};

// Marks the calling thread as running `activity` until destroyed; scopes nest
// (an operator inside a backbone). Cheap enough for every node's forward.
class PluginActivityScope {
 public:
  explicit PluginActivityScope(const PluginActivity* activity) noexcept;
  ~PluginActivityScope();
  PluginActivityScope(const PluginActivityScope&) = delete;
  PluginActivityScope& operator=(const PluginActivityScope&) = delete;

 private:
  const PluginActivity* previous_;
};

// The exit status of a process whose plugin died of a fatal signal.
constexpr int kPluginCrashExitCode = 4;

// Installs the fatal-signal handler (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) on
// an alternate stack. When the signal comes while the thread runs plugin code (a
// PluginActivityScope is open, or the faulting instruction lies in a loaded
// plugin library) it writes one line, for example
//   vexp: fatal: SIGSEGV in plugin library '/p/crash.so' while running op 'crash' of node 'head'
// and exits with kPluginCrashExitCode. Any other fatal signal gets the default
// action (the handler restores it and raises the signal again). Idempotent.
void install_plugin_crash_handler();

struct LoadedLibrary {
  std::string path;
  std::string name;
  std::string version;
  std::string build_tag;
};

class PluginHost : public dsl::PluginCatalog {
 public:
  PluginHost();
  ~PluginHost() override;
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads one library; throws PluginError with a sentence naming the file.
  // Loading the same file twice is a no-op.
  void load_library(const std::string& path);
  // Loads every *.so in `dir` (sorted, not recursive). Failures are appended to
  // `problems` as sentences; a missing directory is a problem too.
  void load_directory(const std::string& dir, std::vector<std::string>& problems);
  // The build's (or installation's) plugin folder, then each entry of VEXP_PLUGIN_PATH.
  void load_default_paths(std::vector<std::string>& problems);
  static std::string default_plugin_dir();

  // Registers plugins compiled into the host (tests); `library` names them.
  Registrar& builtin_registrar(const std::string& library = "<builtin>");

  const PluginDecl* find(const std::string& kind, const std::string& name) const override;
  std::vector<std::string> names(const std::string& kind) const override;
  std::vector<const PluginDecl*> all() const;  // sorted by kind, then name
  const std::vector<LoadedLibrary>& libraries() const { return libraries_; }

  // Creates an object; throws PluginError naming the plugin and its library.
  // T is a plugin interface (vexp/kinds.hpp: Layer, Dataset, Comm; anything else
  // does not compile); a plugin whose registration makes another interface is
  // refused with a sentence naming both. The result keeps the library loaded for
  // as long as it lives.
  template <class T>
  std::shared_ptr<T> make(const std::string& kind, const std::string& name, const Params& params) const {
    return std::static_pointer_cast<T>(make_erased(kind, name, params, InterfaceOf<T>::value));
  }
  // Dataset `name`'s file reader (Registration::file_reader): a Dataset made from
  // `params` without the data its lists name, for Dataset::file_views. Null when
  // the plugin registers none (its own dataset then reads the files, if it can);
  // throws PluginError as make does.
  template <class D = Dataset>
  std::shared_ptr<D> make_file_reader(const std::string& name, const Params& params) const {
    return std::static_pointer_cast<D>(make_erased("dataset", name, params, InterfaceOf<D>::value, true));
  }
  bool has_file_reader(const std::string& name) const;

 private:
  // The object, pointing at the interface `wanted` (checked against the entry).
  std::shared_ptr<void> make_erased(const std::string& kind, const std::string& name, const Params& params,
                                    Interface wanted, bool file_reader = false) const;
  struct Entry {
    std::shared_ptr<void> library;  // first member: destroyed last, after the
                                    // plugin-owned std::functions below
    Interface interface;
    PluginDecl decl;
    ErasedFactory factory;
    ErasedFactory file_reader;  // datasets: may be empty
  };
  class HostRegistrar;
  friend class HostRegistrar;
  void add(Registration entry, std::shared_ptr<void> library, const std::string& library_path,
           const std::string& library_version);

  std::map<std::pair<std::string, std::string>, Entry> entries_;
  std::vector<LoadedLibrary> libraries_;
  std::vector<std::unique_ptr<Registrar>> builtin_;
};

}  // namespace vexp
