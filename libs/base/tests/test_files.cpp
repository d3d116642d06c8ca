#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <fstream>
#include <vector>

#include "vexp/base/files.hpp"

using namespace vexp::base;
namespace fs = std::filesystem;

namespace {
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Files, ReadsRegularFilesWithinTheLimit) {
  TempDir t("vexp_test");
  const std::string p = (t.path() / "a.txt").string();
  std::ofstream(p) << "hello";
  EXPECT_EQ(read_file_bounded(p, 5), "hello");
  EXPECT_NE(message_of([&] { read_file_bounded(p, 4); }).find("is 5 bytes, more than the 4 bytes"), std::string::npos);
}

TEST(Files, ChunksComeAfterTheSizeAtOpen) {
  TempDir t("vexp_test");
  const std::string p = (t.path() / "big.bin").string();
  const std::string body(200000, 'x');  // more than one 64 KiB chunk
  std::ofstream(p, std::ios::binary) << body;
  std::vector<std::string> events;
  std::string joined;
  const auto n = read_file_chunks(
      p, body.size(),
      [&](std::string_view piece) {
        events.push_back("chunk");
        joined.append(piece);
      },
      [&](std::uint64_t size) { events.push_back("size " + std::to_string(size)); });
  EXPECT_EQ(n, body.size());
  EXPECT_EQ(joined, body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front(), "size 200000");
  EXPECT_EQ(std::count(events.begin(), events.end(), std::string("size 200000")), 1);
  // read_file_bounded reserves from that size: one allocation for the whole file.
  const std::string whole = read_file_bounded(p, body.size());
  EXPECT_EQ(whole, body);
  EXPECT_LE(whole.capacity(), body.size() + 64);
}

TEST(Files, RefusesFifosDevicesAndFoldersWithoutBlocking) {
  TempDir t("vexp_test");
  const std::string fifo = (t.path() / "metrics.jsonl").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(message_of([&] { read_file_bounded(fifo); }), "'" + fifo + "' is a FIFO, not a regular file");
  EXPECT_NE(message_of([] { read_file_bounded("/dev/zero"); }).find("a character device"), std::string::npos);
  fs::create_symlink("/dev/urandom", t.path() / "resolved.toml");
  EXPECT_NE(message_of([&] { read_file_bounded((t.path() / "resolved.toml").string()); }).find("a character device"),
            std::string::npos);
  EXPECT_NE(message_of([&] { read_file_bounded(t.path().string()); }).find("a directory"), std::string::npos);
  EXPECT_NE(regular_file_problem(fifo, 10).find("a FIFO"), std::string::npos);
  EXPECT_NE(message_of([&] { read_file_bounded((t.path() / "missing").string()); }).find("No such file"), std::string::npos);
}

TEST(Files, AFileReadForAPurposeIsNamedByIt) {
  TempDir t("vexp_test");
  const std::string missing = (t.path() / "none.txt").string();
  EXPECT_EQ(message_of([&] { read_file_bounded(missing, kMaxTextFileBytes, "the video list"); }),
            "cannot read the video list '" + missing + "': No such file or directory");
  EXPECT_EQ(message_of([&] { read_file_bounded(t.path().string(), kMaxTextFileBytes, "the label map"); }),
            "the label map '" + t.path().string() + "' is a directory, not a regular file");
  const std::string big = (t.path() / "big.txt").string();
  std::ofstream(big) << "0123456789";
  EXPECT_EQ(message_of([&] { read_file_bounded(big, 4, "the journal"); }),
            "the journal '" + big + "' is 10 bytes, more than the 4 bytes vexp reads from such a file");
  EXPECT_EQ(read_file_bounded(big, 64, "the journal"), "0123456789");
  // without a purpose, as before
  EXPECT_EQ(message_of([&] { read_file_bounded(missing); }), "cannot read '" + missing + "': No such file or directory");
  EXPECT_EQ(read_file_or_empty(missing), "");
  EXPECT_EQ(read_file_or_empty(big), "0123456789");
}

TEST(Files, PathComponents) {
  EXPECT_EQ(path_component_problem("abseiling"), "");
  EXPECT_EQ(path_component_problem("playing guitar"), "");
  EXPECT_NE(path_component_problem(""), "");
  EXPECT_NE(path_component_problem("."), "");
  EXPECT_NE(path_component_problem(".."), "");
  EXPECT_NE(path_component_problem("../../x"), "");
  EXPECT_NE(path_component_problem("a/b"), "");
  EXPECT_NE(path_component_problem("a\tb"), "");
  EXPECT_NE(path_component_problem(std::string("a\0b", 3)), "");
  EXPECT_NE(path_component_problem(std::string(256, 'a')), "");
}

TEST(Files, WithinAndSameFile) {
  TempDir t("vexp_test");
  fs::create_directories(t.path() / "out" / "train");
  EXPECT_TRUE(is_within(t.path() / "out", t.path() / "out" / "train" / "x"));
  EXPECT_FALSE(is_within(t.path() / "out", t.path() / "out" / ".." / "x"));
  EXPECT_FALSE(is_within(t.path() / "out", t.path() / "outside"));
  fs::create_symlink(t.path(), t.path() / "out" / "up");
  EXPECT_FALSE(is_within(t.path() / "out", t.path() / "out" / "up" / "y"));
  std::ofstream(t.path() / "a") << "x";
  fs::create_hard_link(t.path() / "a", t.path() / "b");
  EXPECT_TRUE(same_file(t.path() / "a", t.path() / "out" / ".." / "b"));
  EXPECT_TRUE(same_file(t.path() / "new", t.path() / "out" / ".." / "new"));
  EXPECT_FALSE(same_file(t.path() / "a", t.path() / "c"));
}

TEST(Files, TempDirIsPrivateAndRemoved) {
  fs::path p;
  {
    TempDir t("vexp_test");
    p = t.path();
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::ofstream(p / "f") << "x";
  }
  EXPECT_FALSE(fs::exists(p));
}

TEST(Files, AtomicWriteReplacesAndRefusesSpecialFiles) {
  TempDir t("vexp_test");
  const std::string p = (t.path() / "summary.json").string();
  write_file_atomic(p, "one");
  write_file_atomic(p, "two");
  EXPECT_EQ(read_file_bounded(p), "two");
  const std::string fifo = (t.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(message_of([&] { write_file_atomic(fifo, "x"); }).find("a FIFO"), std::string::npos);
  int others = 0;
  for (const auto& e : fs::directory_iterator(t.path())) others += e.path().filename() != "summary.json" && e.path().filename() != "fifo";
  EXPECT_EQ(others, 0);
  // A folder that does not exist: one sentence naming the file, nothing written.
  const std::string lost = (t.path() / "no/such/dir/x").string();
  EXPECT_NE(message_of([&] { write_file_atomic(lost, "x"); }).find("cannot write '" + lost + "'"), std::string::npos);
  EXPECT_FALSE(fs::exists(t.path() / "no"));
}

TEST(Files, TempDirUnderAGivenParent) {
  TempDir outer("vexp_test");
  fs::path inner_path;
  {
    TempDir inner("measure", outer.path().string());
    inner_path = inner.path();
    EXPECT_EQ(inner_path.parent_path(), outer.path());
    EXPECT_EQ(inner_path.filename().string().rfind("measure_", 0), 0u) << inner_path;
    EXPECT_TRUE(fs::is_directory(inner_path));
  }
  EXPECT_FALSE(fs::exists(inner_path));
  EXPECT_NE(message_of([&] { TempDir bad("x", (outer.path() / "missing").string()); }).find("missing"),
            std::string::npos);
}

// Appends never follow a link nor write to a file with another name (issue #36 item 1).
TEST(Files, AppendRefusesSymbolicAndHardLinks) {
  TempDir t("vexp_test");
  const std::string victim = (t.path() / "bashrc").string();
  write_file_atomic(victim, "keep\n");
  const std::string sym = (t.path() / "log.txt").string(), hard = (t.path() / "jobs.jsonl").string();
  ASSERT_EQ(::symlink(victim.c_str(), sym.c_str()), 0);
  ASSERT_EQ(::link(victim.c_str(), hard.c_str()), 0);
  try {
    append_file(sym, "x\n");
    FAIL() << "appended through a symbolic link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a symbolic link"), std::string::npos) << e.what();
  }
  try {
    append_file(hard, "x\n");
    FAIL() << "appended to a hard link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than one name"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_bounded(victim), "keep\n");
  const std::string own = (t.path() / "own.txt").string();
  append_file(own, "a\n");
  append_file(own, "b\n");
  EXPECT_EQ(read_file_bounded(own), "a\nb\n");
  const std::string fifo = (t.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(open_append_fd(fifo.c_str()), -1);  // without blocking
  EXPECT_EQ(errno, EINVAL);
}

// What a process read is known by device and inode (issue #36 item 4).
TEST(Files, InputsAreKnownThroughLinks) {
  TempDir t("vexp_test");
  const std::string in = (t.path() / "recipe.toml").string();
  write_file_atomic(in, "x = 1\n");
  const std::string hard = (t.path() / "hard.toml").string(), sym = (t.path() / "sym.toml").string();
  ASSERT_EQ(::link(in.c_str(), hard.c_str()), 0);
  ASSERT_EQ(::symlink(in.c_str(), sym.c_str()), 0);
  EXPECT_EQ(read_as_input(hard), "");
  read_file_bounded(in);
  EXPECT_EQ(read_as_input(in), in);
  EXPECT_EQ(read_as_input(hard), in);
  EXPECT_EQ(read_as_input(sym), in);
  EXPECT_EQ(read_as_input((t.path() / "new.toml").string()), "");
}
