#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "vexp/base/attempt.hpp"

using namespace vexp::base;

namespace {
struct Special : Error {
  explicit Special(const std::string& m) : Error(m, ErrorKind::refused) {}
};
}  // namespace

TEST(Attempt, AValueOrTheErrorAsAValue) {
  auto ok = attempt([] { return std::string("seven"); });
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(std::move(ok).value(), "seven");

  auto bad = attempt([]() -> int { throw invalid("'a.toml': no [model]"); });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "'a.toml': no [model]");
  EXPECT_EQ(bad.kind(), ErrorKind::invalid);
  EXPECT_EQ(std::move(bad).value_or(-1), -1);

  int called = 0;
  auto done = attempt([&] { ++called; });  // a call that returns nothing
  EXPECT_TRUE(done);
  EXPECT_EQ(called, 1);
  EXPECT_NO_THROW(done.value());
}

TEST(Attempt, ValueThrowsTheErrorAgainAsItWasRaised) {
  auto bad = attempt([]() -> int { throw Special("locked by pid 7"); });
  try {
    bad.value();
    FAIL() << "value() of a failed call must throw";
  } catch (const Special& e) {  // its own type, not a copy sliced to base::Error
    EXPECT_STREQ(e.what(), "locked by pid 7");
    EXPECT_EQ(e.kind(), ErrorKind::refused);
  }
  EXPECT_TRUE(bad.is<Special>());
  EXPECT_TRUE(bad.is<Error>());
  EXPECT_FALSE(attempt([] { throw failure("x"); }).is<Special>());
  EXPECT_FALSE(attempt([] {}).is<Error>());
}

TEST(Attempt, WordsAroundAMessageKeepItsKindAndAChildsCode) {
  try {
    (void)attempt([]() -> int { throw refused("the lock is held"); }).value_or_throw("cannot run: ", "; nothing done");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot run: the lock is held; nothing done");
    EXPECT_EQ(e.kind(), ErrorKind::refused);
  }
  try {
    attempt([] { throw child_failed(42, "rank 1 failed"); }).rethrow_with("--nproc 2: ");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--nproc 2: rank 1 failed");
    EXPECT_EQ(e.kind(), ErrorKind::child);
    EXPECT_EQ(e.child_code(), 42);
  }
  // nothing is thrown when the call succeeded
  EXPECT_EQ(attempt([] { return 3; }).value_or_throw("never: "), 3);
}

TEST(Attempt, CatchesOnlyTheErrorItNames) {
  // Anything else passes through untouched: std::bad_alloc, a torch error, a plain
  // std::runtime_error, and a vexp error that is not the subclass asked for.
  EXPECT_THROW(attempt([] { throw std::runtime_error("plain"); }), std::runtime_error);
  EXPECT_THROW(attempt([] { throw std::bad_alloc(); }), std::bad_alloc);
  EXPECT_THROW(attempt<Special>([] { throw failure("not special"); }), Error);
  auto special = attempt<Special>([] { throw Special("special"); });
  EXPECT_FALSE(special);
  EXPECT_EQ(special.kind(), ErrorKind::refused);
}

TEST(Attempt, AMoveOnlyValue) {
  auto p = attempt([] { return std::make_unique<int>(5); });
  ASSERT_TRUE(p);
  EXPECT_EQ(*std::move(p).value(), 5);
}
