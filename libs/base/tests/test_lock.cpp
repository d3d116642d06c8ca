#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vexp/base/files.hpp"
#include "vexp/base/lock.hpp"

using namespace vexp::base;

TEST(DirLock, SecondHolderIsRefusedAndNamesTheFirst) {
  TempDir t("vexp_test");
  const std::string dir = t.path().string();
  {
    DirLock a(dir, "vexp run");
    EXPECT_TRUE(a.held());
    try {
      DirLock b(dir, "vexp run");
      FAIL() << "second lock taken";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("is in use by vexp run (pid " + std::to_string(::getpid())), std::string::npos) << m;
    }
    EXPECT_NE(DirLock::holder(dir).find("vexp run"), std::string::npos);
  }
  EXPECT_EQ(DirLock::holder(dir), "");
  DirLock c(dir, "vexp sweep");
  EXPECT_TRUE(c.held());
}

TEST(DirLock, ReleasedWhenTheHolderDies) {
  TempDir t("vexp_test");
  const std::string dir = t.path().string();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    DirLock a(dir, "child");
    char c = 'x';
    (void)!::write(pipefd[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(pipefd[0], &c, 1), 1);
  EXPECT_THROW(DirLock(dir, "parent"), Error);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  DirLock b(dir, "parent");
  EXPECT_TRUE(b.held());
}

// A lock file planted as a hard link to another file (a checkpoint, a file outside
// the folder) is refused before anything is written: the lock would truncate it.
TEST(DirLock, HardLinkedLockFileIsRefusedAndTheVictimKept) {
  TempDir t("vexp_test");
  const std::string dir = t.path().string();
  const std::string victim = (t.path() / "victim.pt").string();
  write_file_atomic(victim, "precious bytes");
  ASSERT_EQ(::link(victim.c_str(), (t.path() / DirLock::kFileName).c_str()), 0);
  try {
    DirLock a(dir, "vexp run");
    FAIL() << "a hard-linked lock file was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 names (a hard link to another file)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_bounded(victim), "precious bytes");
}

TEST(DirLock, SymlinkAndFifoLockFilesAreRefusedWithoutBlocking) {
  TempDir t("vexp_test");
  const std::string victim = (t.path() / "victim").string();
  write_file_atomic(victim, "keep");
  const std::string a = (t.path() / "a").string(), b = (t.path() / "b").string();
  ASSERT_EQ(::mkdir(a.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(b.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(victim.c_str(), (a + "/" + DirLock::kFileName).c_str()), 0);
  ASSERT_EQ(::mkfifo((b + "/" + DirLock::kFileName).c_str(), 0644), 0);
  try {
    DirLock l(a, "vexp run");
    FAIL() << "a symlinked lock file was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a symbolic link"), std::string::npos) << e.what();
  }
  try {
    DirLock l(b, "vexp run");
    FAIL() << "a FIFO lock file was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a FIFO, not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_bounded(victim), "keep");
}
