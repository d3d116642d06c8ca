#include <gtest/gtest.h>
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
