#include "vexp/plugin_host.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <filesystem>

#include "vexp/build_tag.hpp"
#include "vexp/dsl/schema.hpp"

namespace fs = std::filesystem;

namespace vexp {

// Collects a library's registrations; they are committed only when its
// register function succeeds, so a failing plugin leaves nothing behind.
class PluginHost::HostRegistrar final : public Registrar {
 public:
  HostRegistrar(std::shared_ptr<void> library, std::string path, std::string version)
      : library_(std::move(library)), path_(std::move(path)), version_(std::move(version)) {}

  void add_entry(PluginDecl decl, ErasedFactory factory) override {
    if (decl.name.empty()) throw std::runtime_error("a plugin registered with an empty name");
    if (decl.kind.empty()) throw std::runtime_error("plugin '" + decl.name + "' registered without a kind");
    if (!factory) throw std::runtime_error("plugin '" + decl.name + "' registered without a factory");
    for (const auto& p : pending_) {
      if (p.first.kind == decl.kind && p.first.name == decl.name)
        throw std::runtime_error(decl.kind + " '" + decl.name + "' is registered twice by the same library");
    }
    pending_.emplace_back(std::move(decl), std::move(factory));
  }

  void commit(PluginHost& host) {
    for (auto& [decl, factory] : pending_) host.add(std::move(decl), std::move(factory), library_, path_, version_);
    pending_.clear();
  }
  std::vector<std::pair<PluginDecl, ErasedFactory>> pending_;

 private:
  std::shared_ptr<void> library_;
  std::string path_;
  std::string version_;
};

namespace {

// A registrar for plugins compiled into the host: commits immediately.
class BuiltinRegistrar final : public Registrar {
 public:
  explicit BuiltinRegistrar(std::function<void(PluginDecl, ErasedFactory)> sink) : sink_(std::move(sink)) {}
  void add_entry(PluginDecl decl, ErasedFactory factory) override { sink_(std::move(decl), std::move(factory)); }

 private:
  std::function<void(PluginDecl, ErasedFactory)> sink_;
};

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

PluginHost::PluginHost() = default;

PluginHost::~PluginHost() {
  // Entries hold plugin code (std::function targets): drop them before handles.
  entries_.clear();
  builtin_.clear();
}

void PluginHost::add(PluginDecl decl, ErasedFactory factory, std::shared_ptr<void> library,
                     const std::string& library_path, const std::string& library_version) {
  auto key = std::make_pair(decl.kind, decl.name);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    throw PluginError("duplicate " + decl.kind + " plugin '" + decl.name + "': registered by '" +
                      it->second.decl.library + "' and again by '" + library_path + "'");
  }
  decl.library = library_path;
  decl.library_version = library_version;
  entries_.emplace(key, Entry{std::move(library), std::move(decl), std::move(factory)});
}

void PluginHost::load_library(const std::string& path_in) {
  std::error_code ec;
  fs::path path = fs::canonical(path_in, ec);
  if (ec) throw PluginError("cannot load plugin '" + path_in + "': " + ec.message());
  const std::string p = path.string();
  for (const auto& lib : libraries_)
    if (lib.path == p) return;

  // RTLD_NOW: unresolved symbols fail here, with a message, not at first call.
  void* handle = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw PluginError("cannot load plugin '" + p + "': " + (why ? why : "unknown dlopen error"));
  }
  std::shared_ptr<void> library(handle, [](void* h) { ::dlclose(h); });

  ::dlerror();
  void* sym = ::dlsym(handle, VEXP_PLUGIN_ENTRY);
  if (!sym) {
    throw PluginError("'" + p + "' is not a vexp plugin: it has no entry point '" VEXP_PLUGIN_ENTRY
                      "' (define one with VEXP_PLUGIN(name, version) and build with vexp_add_plugin)");
  }
  auto info_fn = reinterpret_cast<VexpPluginInfoFn>(sym);
  const VexpPluginInfo* info = info_fn();
  if (!info) throw PluginError("plugin '" + p + "': " VEXP_PLUGIN_ENTRY "() returned null");
  if (info->abi_version != VEXP_PLUGIN_ABI_VERSION) {
    throw PluginError("wrong plugin ABI version on '" + p + "': got version " +
                      std::to_string(info->abi_version) + ", vexp supports version " +
                      std::to_string(VEXP_PLUGIN_ABI_VERSION) + "; rebuild the plugin against this vexp");
  }
  if (info->struct_size < offsetof(VexpPluginInfo, register_all) + sizeof(info->register_all)) {
    throw PluginError("plugin '" + p + "' declares a plugin info of " + std::to_string(info->struct_size) +
                      " bytes, too small for ABI version 1");
  }
  const std::string name = info->name ? info->name : "";
  const std::string version = info->version ? info->version : "";
  const std::string tag = info->build_tag ? info->build_tag : "";
  if (std::string why = compare_build_tags(host_build_tag(), tag); !why.empty()) {
    throw PluginError("plugin '" + p + "' is incompatible: " + why);
  }
  if (!info->register_all) throw PluginError("plugin '" + p + "' has no register function");

  HostRegistrar registrar(library, p, version);
  char err[2048] = {0};
  int rc = info->register_all(&registrar, err, sizeof(err));
  if (rc != 0) {
    throw PluginError("plugin '" + p + "' failed to register: " + (err[0] ? err : "no message"));
  }
  // Commit all or nothing: check duplicates first.
  for (const auto& [decl, _] : registrar.pending_) {
    auto it = entries_.find({decl.kind, decl.name});
    if (it != entries_.end()) {
      throw PluginError("duplicate " + decl.kind + " plugin '" + decl.name + "': registered by '" +
                        it->second.decl.library + "' and again by '" + p + "'");
    }
  }
  registrar.commit(*this);
  libraries_.push_back(LoadedLibrary{p, name, version, tag});
}

void PluginHost::load_directory(const std::string& dir, std::vector<std::string>& problems) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::is_regular_file(dir, ec)) {
      try {
        load_library(dir);
      } catch (const std::exception& e) {
        problems.push_back(e.what());
      }
      return;
    }
    problems.push_back("plugin folder '" + dir + "' does not exist");
    return;
  }
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".so" && fs::is_regular_file(it->path())) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    try {
      load_library(f);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  }
}

std::string PluginHost::default_plugin_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&host_build_tag), &info) && info.dli_fname) {
    fs::path lib = fs::path(info.dli_fname).lexically_normal().parent_path();
    return (lib / "vexp" / "plugins").string();
  }
  return "lib/vexp/plugins";
}

void PluginHost::load_default_paths(std::vector<std::string>& problems) {
  load_directory(default_plugin_dir(), problems);
  if (const char* env = std::getenv("VEXP_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty()) load_directory(dir, problems);
  }
}

Registrar& PluginHost::builtin_registrar(const std::string& library) {
  builtin_.push_back(std::make_unique<BuiltinRegistrar>([this, library](PluginDecl decl, ErasedFactory factory) {
    add(std::move(decl), std::move(factory), nullptr, library, "builtin");
  }));
  return *builtin_.back();
}

const PluginDecl* PluginHost::find(const std::string& kind, const std::string& name) const {
  auto it = entries_.find({kind, name});
  return it == entries_.end() ? nullptr : &it->second.decl;
}

std::vector<std::string> PluginHost::names(const std::string& kind) const {
  std::vector<std::string> out;
  for (const auto& [key, _] : entries_)
    if (key.first == kind) out.push_back(key.second);
  return out;
}

std::vector<const PluginDecl*> PluginHost::all() const {
  std::vector<const PluginDecl*> out;
  for (const auto& [_, e] : entries_) out.push_back(&e.decl);
  return out;
}

std::shared_ptr<void> PluginHost::make_erased(const std::string& kind, const std::string& name,
                                              const Params& params) const {
  auto it = entries_.find({kind, name});
  if (it == entries_.end()) {
    auto known = names(kind);
    std::string msg = "unknown " + kind + " plugin '" + name + "'";
    if (auto guess = dsl::did_you_mean(name, known); !guess.empty()) msg += " (did you mean '" + guess + "'?)";
    msg += known.empty() ? "; no " + kind + " plugins are loaded" : "; known: " + join(known);
    throw PluginError(msg);
  }
  const Entry& e = it->second;
  Made made;
  try {
    made = e.factory(params);
  } catch (const std::exception& ex) {  // factories built without Registrar::add
    made.error = ex.what();
  }
  if (!made.object) {
    std::string where = e.decl.library.empty() ? "" : " (from " + file_name(e.decl.library) + ")";
    throw PluginError(kind + " '" + name + "'" + where + ": " + (made.error.empty() ? "factory failed" : made.error));
  }
  // The object keeps its library loaded: released first, then the library.
  struct Keep {
    std::shared_ptr<void> library;
    std::shared_ptr<void> object;
    ~Keep() { object.reset(); }
  };
  auto keep = std::make_shared<Keep>(Keep{e.library, made.object});
  return std::shared_ptr<void>(keep, made.object.get());
}

}  // namespace vexp
