// Which plugin folders a recipe may load (plugin_trust.hpp, session.cpp), and the
// fatal-signal handler for plugin code (plugin_host.hpp).
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "vexp/runtime/plugin_trust.hpp"
#include "vexp/runtime/session.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/vexp_trust_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A private XDG_CONFIG_HOME (and no VEXP_PLUGIN_PATH) for the duration of a test.
struct PrivateConfig {
  TempDir dir;
  std::string old_xdg;
  bool had_xdg;
  PrivateConfig() {
    const char* x = std::getenv("XDG_CONFIG_HOME");
    had_xdg = x != nullptr;
    if (x) old_xdg = x;
    ::setenv("XDG_CONFIG_HOME", (dir.path / "config").c_str(), 1);
    ::unsetenv("VEXP_PLUGIN_PATH");
  }
  ~PrivateConfig() {
    if (had_xdg) ::setenv("XDG_CONFIG_HOME", old_xdg.c_str(), 1);
    else ::unsetenv("XDG_CONFIG_HOME");
  }
};

std::string fixture_dir(const std::string& name) { return std::string(VEXP_TEST_FIXTURE_DIR) + "/" + name; }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(PluginTrust, TrustFileRoundTripsCanonicalPathsAtomically) {
  PrivateConfig cfg;
  const std::string file = vexp::trusted_plugin_dirs_file();
  EXPECT_EQ(file, (cfg.dir.path / "config" / "vexp" / "trusted-plugin-dirs").string());
  EXPECT_TRUE(vexp::read_trusted_plugin_dirs().empty());  // no file yet
  vexp::write_trusted_plugin_dirs({"/a/b", "/c"});
  EXPECT_EQ(vexp::read_trusted_plugin_dirs(), (std::vector<std::string>{"/a/b", "/c"}));
  vexp::write_trusted_plugin_dirs({"/c"});
  EXPECT_EQ(vexp::read_trusted_plugin_dirs(), (std::vector<std::string>{"/c"}));
  for (const auto& e : fs::directory_iterator(fs::path(file).parent_path()))  // the lock file stays, empty
    EXPECT_TRUE(e.path().filename() == "trusted-plugin-dirs" || e.path().filename() == "trusted-plugin-dirs.lock")
        << "left behind: " << e.path();
}

TEST(PluginTrust, NoEntryCanForgeAnother) {
  PrivateConfig cfg;
  // Spaces at the ends, quotes, backslashes and '#' come back as they went in.
  const std::vector<std::string> odd{"/a/dir ", "/ b", "/c/\"x\"\\", "/d/#e", "/e/ü"};
  vexp::write_trusted_plugin_dirs(odd);
  EXPECT_EQ(vexp::read_trusted_plugin_dirs(), odd);
  // A newline (or any control character) cannot be stored at all.
  EXPECT_THROW(vexp::write_trusted_plugin_dirs({"/x\n/etc"}), std::runtime_error);
  EXPECT_EQ(vexp::read_trusted_plugin_dirs(), odd);  // unchanged
  EXPECT_FALSE(vexp::trust_path_problem("/x\t").empty());
  EXPECT_FALSE(vexp::trust_path_problem(std::string("/x\xff")).empty());
  EXPECT_TRUE(vexp::trust_path_problem("/a b/c ").empty());
  // The first format: one bare path per line, read as written (only a CR dropped).
  write(vexp::trusted_plugin_dirs_file(), "# old\n/one \n/two\r\nrelative\n\"/three\"\n\"broken\n");
  EXPECT_EQ(vexp::read_trusted_plugin_dirs(), (std::vector<std::string>{"/one ", "/two", "/three"}));
}

TEST(PluginTrust, ConcurrentUpdatesAllTakeEffect) {
  PrivateConfig cfg;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([i] {
      vexp::update_trusted_plugin_dirs([i](std::vector<std::string>& d) { d.push_back("/t" + std::to_string(i)); });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(vexp::read_trusted_plugin_dirs().size(), 8u);
  // A change that throws writes nothing.
  EXPECT_THROW(vexp::update_trusted_plugin_dirs([](std::vector<std::string>& d) {
                 d.clear();
                 throw std::runtime_error("no");
               }),
               std::runtime_error);
  EXPECT_EQ(vexp::read_trusted_plugin_dirs().size(), 8u);
}

TEST(PluginTrust, TrustFileThatIsNotARegularFileIsRefused) {
  PrivateConfig cfg;
  const std::string file = vexp::trusted_plugin_dirs_file();
  fs::create_directories(fs::path(file).parent_path());
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  try {
    vexp::read_trusted_plugin_dirs();
    FAIL() << "a FIFO was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
  }
  // Sessions trust nothing from it (and do not block on it).
  const auto trust = vexp::PluginTrust::current({});
  EXPECT_FALSE(trust.folders().empty());
}

TEST(PluginTrust, ComparesCanonicalPaths) {
  PrivateConfig cfg;
  TempDir t;
  fs::create_directories(t.path / "good");
  fs::create_directories(t.path / "evil" / "sub");
  write(t.path / "good" / "x.so", "");
  write(t.path / "evil" / "y.so", "");
  fs::create_symlink(t.path / "evil", t.path / "link");
  const std::string good = vexp::canonical_path((t.path / "good").string());
  vexp::write_trusted_plugin_dirs({good});
  const auto trust = vexp::PluginTrust::current({});
  auto allows = [&](const fs::path& p) { return trust.allows(vexp::canonical_path(p.string())); };
  EXPECT_TRUE(allows(t.path / "good"));
  EXPECT_TRUE(allows(t.path / "good" / "x.so"));  // a library in a trusted folder
  EXPECT_TRUE(allows(t.path / "evil" / ".." / "good"));
  EXPECT_FALSE(allows(t.path / "good" / ".." / "evil"));
  EXPECT_FALSE(allows(t.path / "link"));  // a symlink to an untrusted folder
  EXPECT_FALSE(allows(t.path / "evil" / "y.so"));
  EXPECT_FALSE(allows(t.path / "evil" / "sub"));
  EXPECT_FALSE(trust.allows(""));  // a path that does not exist
  EXPECT_TRUE(trust.allows(vexp::canonical_path(vexp::PluginHost::default_plugin_dir())));
  // --plugin-path folders are allowed too.
  const auto with_cli = vexp::PluginTrust::current({vexp::canonical_path((t.path / "link").string())});
  EXPECT_TRUE(with_cli.allows(vexp::canonical_path((t.path / "evil").string())));
}

TEST(PluginTrust, SessionRefusesAnUntrustedFolderAndLoadsNothing) {
  PrivateConfig cfg;
  TempDir t;
  fs::create_directories(t.path / "evil");
  fs::copy_file(fixture_dir("marker") + "/fixture_marker.so", t.path / "evil" / "fixture_marker.so");
  const fs::path marker = t.path / "marker";
  ::setenv("VEXP_TEST_MARKER", marker.c_str(), 1);
  write(t.path / "r.toml", "[run]\nname = \"x\"\n[plugins]\npaths = [\"evil\"]\n");
  {
    vexp::Session s;
    EXPECT_FALSE(vexp::load_recipe_and_plugins(s, (t.path / "r.toml").string(), {}));
    ASSERT_EQ(s.diags.error_count(), 1u) << s.diags.str();
    const auto& d = s.diags.items()[0];
    EXPECT_EQ(d.loc.line, 4);
    EXPECT_EQ(d.loc.col, 10);
    EXPECT_NE(d.message.find("is not trusted"), std::string::npos) << d.message;
    EXPECT_NE(d.message.find("vexp trust "), std::string::npos) << d.message;
    EXPECT_TRUE(s.host.libraries().empty());
    EXPECT_FALSE(fs::exists(marker)) << "the untrusted library's constructor ran";
  }
  {
    vexp::Session s;
    s.plugin_dirs = {vexp::canonical_path((t.path / "evil").string())};
    vexp::load_plugins(s);  // as a command does: --plugin-path folders are loaded first
    EXPECT_TRUE(vexp::load_recipe_and_plugins(s, (t.path / "r.toml").string(), {})) << s.diags.str();
    bool has_marker = false;
    for (const auto& lib : s.host.libraries()) has_marker |= lib.name == "fixture_marker";
    EXPECT_TRUE(has_marker);
    EXPECT_TRUE(fs::exists(marker));
    EXPECT_NE(s.host.find("dataset", "marker"), nullptr);
  }
  ::unsetenv("VEXP_TEST_MARKER");
}

TEST(PluginCrashDeathTest, SegfaultInRegistrationNamesTheLibraryAndExits4) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string lib = fixture_dir("crash_register") + "/fixture_crash_register.so";
  EXPECT_EXIT(
      {
        vexp::install_plugin_crash_handler();
        vexp::PluginHost host;
        host.load_library(lib);
      },
      ::testing::ExitedWithCode(vexp::kPluginCrashExitCode),
      "^vexp: fatal: SIGSEGV in plugin library '.*/fixture_crash_register.so' while registering its plugins "
      "\\(register_all\\)\n$");
}

TEST(PluginCrashDeathTest, SegfaultInAConstructorNamesTheLibraryAndExits4) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string lib = fixture_dir("crash_ctor") + "/fixture_crash_ctor.so";
  EXPECT_EXIT(
      {
        vexp::install_plugin_crash_handler();
        vexp::PluginHost host;
        host.load_library(lib);
      },
      ::testing::ExitedWithCode(vexp::kPluginCrashExitCode),
      "vexp: fatal: SIGSEGV in plugin library '.*/fixture_crash_ctor.so' while loading it");
}

TEST(PluginCrashDeathTest, AMarkedActivityIsNamedAndOtherFaultsKeepTheDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  static const vexp::PluginActivity activity{"/x/op.so", "running op 'op' of node 'n'"};
  EXPECT_EXIT(
      {
        vexp::install_plugin_crash_handler();
        vexp::PluginActivityScope scope(&activity);
        ::raise(SIGFPE);
      },
      ::testing::ExitedWithCode(4), "^vexp: fatal: SIGFPE in plugin library '/x/op.so' while running op 'op' of node 'n'\n$");
  // Outside any plugin: the default action, no line.
  EXPECT_EXIT(
      {
        vexp::install_plugin_crash_handler();
        { vexp::PluginActivityScope scope(&activity); }  // closed again
        ::raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV), "^$");
}
