#include "vexp/runtime/plugin_host.hpp"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>

#include <filesystem>

#include "vexp/base/error.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/schema/schema.hpp"

namespace fs = std::filesystem;

namespace vexp {

// --- fatal signals in plugin code --------------------------------------------
namespace {

// The current activity of each thread. thread_local with the initial-exec model:
// libvexp_sdk is linked by the executable (DT_NEEDED, never dlopen'ed), so the
// variable sits in the static TLS block at a fixed offset from the thread
// pointer. Reading it from the signal handler is then a plain load (no
// __tls_get_addr, which may allocate and is not async-signal-safe), and setting
// it around each call is two stores: nothing is allocated per forward.
thread_local const PluginActivity* t_activity __attribute__((tls_model("initial-exec"))) = nullptr;

// Executable ranges of loaded plugin libraries, so that a fault in plugin code
// is recognised even where nothing marked an activity (an operator a backbone
// calls, a dataset's get on a loader thread, a backward function). Written under
// a mutex when a library is loaded or unloaded, read by the handler without one
// (atomics; a slot is cleared before its path could be reused).
struct CodeRange {
  std::atomic<uintptr_t> lo{0}, hi{0};
  std::atomic<const char*> path{nullptr};
  void* handle = nullptr;
};
constexpr int kMaxRanges = 1024;
CodeRange g_ranges[kMaxRanges];
std::atomic<int> g_range_count{0};
std::mutex g_ranges_mutex;

struct PhdrSearch {
  uintptr_t base;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
};

void add_code_ranges(void* handle, const std::string& path) {
  link_map* lm = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
  PhdrSearch search{static_cast<uintptr_t>(lm->l_addr), {}};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<PhdrSearch*>(data);
        if (static_cast<uintptr_t>(info->dlpi_addr) != s->base) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            s->ranges.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        return 1;
      },
      &search);
  if (search.ranges.empty()) return;
  const char* text = ::strdup(path.c_str());  // kept for the process: the handler may read it any time
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (const auto& [lo, hi] : search.ranges) {
    int slot = -1;
    const int n = g_range_count.load();
    for (int i = 0; i < n && slot < 0; ++i)
      if (g_ranges[i].hi.load() == 0) slot = i;  // a slot freed by an unloaded library
    if (slot < 0) {
      if (n >= kMaxRanges) return;
      slot = n;
    }
    g_ranges[slot].handle = handle;
    g_ranges[slot].path.store(text);
    g_ranges[slot].lo.store(lo);
    g_ranges[slot].hi.store(hi);
    if (slot == n) g_range_count.store(n + 1);
  }
}

void remove_code_ranges(void* handle) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (int i = 0; i < g_range_count.load(); ++i) {
    if (g_ranges[i].handle != handle) continue;
    g_ranges[i].hi.store(0);
    g_ranges[i].lo.store(0);
    g_ranges[i].handle = nullptr;
  }
}

const char* library_at(uintptr_t pc) {
  if (pc == 0) return nullptr;
  const int n = g_range_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    const uintptr_t lo = g_ranges[i].lo.load(std::memory_order_acquire);
    const uintptr_t hi = g_ranges[i].hi.load(std::memory_order_acquire);
    if (pc >= lo && pc < hi) return g_ranges[i].path.load(std::memory_order_acquire);
  }
  return nullptr;
}

uintptr_t faulting_pc(void* uctx) {
  if (!uctx) return 0;
  const auto* uc = static_cast<const ucontext_t*>(uctx);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

const int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
  }
  return "fatal signal";
}

// The line is assembled here with plain copies (async-signal-safe) and written
// with one write(2).
char g_line[2048];
size_t g_line_len = 0;
void put(const char* s) {
  while (s && *s && g_line_len + 2 < sizeof g_line) g_line[g_line_len++] = *s++;
}

std::atomic<int> g_crashing{0};

void restore_default_and_raise(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // blocked while the handler runs: delivered, with the default action, when it returns
}

void on_fatal_signal(int sig, siginfo_t* info, void* uctx) {
  // Sent by another process (kill -SEGV): not a crash of our code.
  const bool from_outside = info && info->si_code <= 0 && info->si_pid != ::getpid();
  const PluginActivity* activity = from_outside ? nullptr : t_activity;
  const char* faulting = from_outside ? nullptr : library_at(faulting_pc(uctx));
  if (!activity && !faulting) {
    restore_default_and_raise(sig);
    return;
  }
  if (g_crashing.exchange(1) != 0) {
    for (;;) ::pause();  // another thread is reporting and exiting
  }
  const char* library = faulting ? faulting : activity->library;
  g_line_len = 0;
  put("vexp: fatal: ");
  put(signal_name(sig));
  put(" in plugin library '");
  put(library);
  put("'");
  if (activity && activity->what) {
    put(" while ");
    put(activity->what);
    if (faulting && activity->library && std::strcmp(faulting, activity->library) != 0) {
      put(" (of '");
      put(activity->library);
      put("')");
    }
  }
  g_line[g_line_len++] = '\n';
  const char* p = g_line;
  size_t left = g_line_len;
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::_exit(kPluginCrashExitCode);
}

// The main thread's alternate stack: a stack overflow in plugin code still gets
// its line. (Other threads run the handler on their own stack unless they set
// one up; a null dereference or abort needs no more.)
alignas(16) char g_alt_stack[1 << 16];

// Marks a call into a library that has no open activity text yet (loading,
// registration, factories): keeps its texts alive for the duration.
struct ScopedActivity {
  std::string library, what;
  PluginActivity activity;
  std::optional<PluginActivityScope> scope;
  ScopedActivity(std::string lib, std::string w) : library(std::move(lib)), what(std::move(w)) {
    activity = PluginActivity{library.c_str(), what.c_str()};
    scope.emplace(&activity);
  }
  ScopedActivity(const ScopedActivity&) = delete;
  ScopedActivity& operator=(const ScopedActivity&) = delete;
};

}  // namespace

PluginActivityScope::PluginActivityScope(const PluginActivity* activity) noexcept : previous_(t_activity) {
  t_activity = activity;
}

PluginActivityScope::~PluginActivityScope() { t_activity = previous_; }

void install_plugin_crash_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    stack_t ss;
    std::memset(&ss, 0, sizeof ss);
    ss.ss_sp = g_alt_stack;
    ss.ss_size = sizeof g_alt_stack;
    ::sigaltstack(&ss, nullptr);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int s : kFatalSignals) sigaddset(&sa.sa_mask, s);  // no second fatal signal inside the handler
    for (int s : kFatalSignals) ::sigaction(s, &sa, nullptr);
  });
}

namespace {

// What every registration must satisfy, from a library or built in: a name, a
// kind this vexp knows, the interface that kind makes, a factory. Throws a
// sentence naming the plugin, its kind and both interfaces.
void check_registration(const Registration& r) {
  const PluginDecl& d = r.decl;
  if (d.name.empty()) throw base::failure("a plugin registered with an empty name");
  if (d.kind.empty()) throw base::failure("plugin '" + d.name + "' registered without a kind");
  const PluginKind* kind = find_plugin_kind(d.kind);
  if (!kind) {
    throw base::failure(d.kind + " '" + d.name + "': unknown plugin kind '" + d.kind +
                             "' (this vexp knows " + known_plugin_kinds() + ")");
  }
  if (kind->interface != r.interface) {
    throw base::failure(d.kind + " '" + d.name + "' is registered with a factory making " +
                             interface_name(r.interface) + ", but kind '" + d.kind + "' makes " +
                             interface_name(kind->interface) + " (register it with add_" + d.kind + ")");
  }
  if (!r.factory) throw base::failure(d.kind + " '" + d.name + "' registered without a factory");
  if (r.file_reader && r.interface != Interface::Dataset)
    throw base::failure(d.kind + " '" + d.name + "' is registered with a file reader, which only datasets have");
}

}  // namespace

// Collects a library's registrations; they are committed only when its
// register function succeeds, so a failing plugin leaves nothing behind.
class PluginHost::HostRegistrar final : public Registrar {
 public:
  HostRegistrar(std::shared_ptr<void> library, std::string path, std::string version)
      : library_(std::move(library)), path_(std::move(path)), version_(std::move(version)) {}

  void add_entry(Registration entry) override {
    check_registration(entry);
    const PluginDecl& decl = entry.decl;
    for (const auto& p : pending_) {
      if (p.decl.kind == decl.kind && p.decl.name == decl.name)
        throw base::failure(decl.kind + " '" + decl.name + "' is registered twice by the same library");
    }
    pending_.push_back(std::move(entry));
  }

  void commit(PluginHost& host) {
    for (auto& entry : pending_) host.add(std::move(entry), library_, path_, version_);
    pending_.clear();
  }
  std::vector<Registration> pending_;

 private:
  std::shared_ptr<void> library_;
  std::string path_;
  std::string version_;
};

namespace {

// A registrar for plugins compiled into the host: commits immediately.
class BuiltinRegistrar final : public Registrar {
 public:
  explicit BuiltinRegistrar(std::function<void(Registration)> sink) : sink_(std::move(sink)) {}
  void add_entry(Registration entry) override {
    check_registration(entry);
    sink_(std::move(entry));
  }

 private:
  std::function<void(Registration)> sink_;
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

void PluginHost::add(Registration entry, std::shared_ptr<void> library, const std::string& library_path,
                     const std::string& library_version) {
  PluginDecl& decl = entry.decl;
  auto key = std::make_pair(decl.kind, decl.name);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    throw PluginError("duplicate " + decl.kind + " plugin '" + decl.name + "': registered by '" +
                      it->second.decl.library + "' and again by '" + library_path + "'");
  }
  decl.library = library_path;
  decl.library_version = library_version;
  entries_.emplace(key, Entry{std::move(library), entry.interface, std::move(decl), std::move(entry.factory),
                              std::move(entry.file_reader)});
}

void PluginHost::load_library(const std::string& path_in) {
  std::error_code ec;
  fs::path path = fs::canonical(path_in, ec);
  if (ec) throw PluginError("cannot load plugin '" + path_in + "': " + ec.message());
  const std::string p = path.string();
  for (const auto& lib : libraries_)
    if (lib.path == p) return;

  // RTLD_NOW: unresolved symbols fail here, with a message, not at first call.
  // dlopen runs the library's constructors: a crash there names the library.
  void* handle = nullptr;
  {
    ScopedActivity loading(p, "loading it (dlopen, its constructors)");
    handle = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    const char* why = ::dlerror();
    throw PluginError("cannot load plugin '" + p + "': " + (why ? why : "unknown dlopen error"));
  }
  add_code_ranges(handle, p);
  std::shared_ptr<void> library(handle, [](void* h) {
    remove_code_ranges(h);
    ::dlclose(h);
  });

  ::dlerror();
  void* sym = ::dlsym(handle, VEXP_PLUGIN_ENTRY);
  if (!sym) {
    throw PluginError("'" + p + "' is not a vexp plugin: it has no entry point '" VEXP_PLUGIN_ENTRY
                      "' (define one with VEXP_PLUGIN(name, version) and build with vexp_add_plugin)");
  }
  auto info_fn = reinterpret_cast<VexpPluginInfoFn>(sym);
  const VexpPluginInfo* info = nullptr;
  {
    ScopedActivity entry(p, "reading its entry point " VEXP_PLUGIN_ENTRY);
    info = info_fn();
  }
  if (!info) throw PluginError("plugin '" + p + "': " VEXP_PLUGIN_ENTRY "() returned null");
  // abi_version and struct_size sit first in every ABI's VexpPluginInfo.
  if (info->abi_version != VEXP_PLUGIN_ABI_VERSION) {
    throw PluginError(p + ": built for vexp plugin ABI " + std::to_string(info->abi_version) +
                      ", this vexp speaks ABI " + std::to_string(VEXP_PLUGIN_ABI_VERSION) +
                      "; rebuild it against this vexp's SDK");
  }
  if (info->struct_size < sizeof(VexpPluginInfo)) {
    throw PluginError(p + ": its plugin info is " + std::to_string(info->struct_size) + " bytes, ABI " +
                      std::to_string(VEXP_PLUGIN_ABI_VERSION) + " has " + std::to_string(sizeof(VexpPluginInfo)) +
                      "; rebuild it against this vexp's SDK");
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
  int rc = 0;
  {
    ScopedActivity registering(p, "registering its plugins (register_all)");
    rc = info->register_all(&registrar, err, sizeof(err));
  }
  if (rc != 0) {
    throw PluginError("plugin '" + p + "' failed to register: " + (err[0] ? err : "no message"));
  }
  // Commit all or nothing: check duplicates first.
  for (const auto& pending : registrar.pending_) {
    const PluginDecl& decl = pending.decl;
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
  builtin_.push_back(std::make_unique<BuiltinRegistrar>(
      [this, library](Registration entry) { add(std::move(entry), nullptr, library, "builtin"); }));
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

bool PluginHost::has_file_reader(const std::string& name) const {
  auto it = entries_.find({"dataset", name});
  return it != entries_.end() && it->second.file_reader;
}

std::shared_ptr<void> PluginHost::make_erased(const std::string& kind, const std::string& name,
                                              const Params& params, Interface wanted, bool file_reader) const {
  auto it = entries_.find({kind, name});
  if (it == entries_.end()) {
    auto known = names(kind);
    std::string msg = "unknown " + kind + " plugin '" + name + "'";
    if (auto guess = dsl::did_you_mean(name, known); !guess.empty()) msg += " (did you mean '" + guess + "'?)";
    msg += known.empty() ? "; no " + kind + " plugins are loaded" : "; known: " + join(known);
    throw PluginError(msg);
  }
  const Entry& e = it->second;
  if (e.interface != wanted) {
    std::string where = e.decl.library.empty() ? "" : " (from " + file_name(e.decl.library) + ")";
    throw PluginError(kind + " '" + name + "'" + where + " makes " + interface_name(e.interface) + ", not the " +
                      interface_name(wanted) + " vexp asked for");
  }
  if (file_reader && !e.file_reader) return nullptr;  // the plugin registers no reader
  Made made;
  try {
    std::optional<ScopedActivity> creating;  // plugins compiled into the host are host code
    const char* what = file_reader ? "' (its file reader)" : "' (its factory)";
    if (e.library) creating.emplace(e.decl.library, "creating " + kind + " '" + name + what);
    made = (file_reader ? e.file_reader : e.factory)(params);
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
