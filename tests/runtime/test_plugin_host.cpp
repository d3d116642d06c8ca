// The plugin host against libraries that are broken on purpose.
#include <gtest/gtest.h>

#include <string>

#include "fixture_common.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace {

std::string fixture(const std::string& name) { return std::string(VEXP_TEST_FIXTURE_DIR) + "/fixture_" + name + ".so"; }

std::string load_error(vexp::PluginHost& host, const std::string& path) {
  try {
    host.load_library(path);
  } catch (const vexp::PluginError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginHost, LoadsAGoodPluginWithItsSchema) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  const vexp::PluginDecl* d = host.find("fixture", "greeter");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kind, "fixture");
  EXPECT_EQ(d->library_version, "1.2.3");
  EXPECT_NE(d->library.find("fixture_good.so"), std::string::npos);
  ASSERT_NE(d->schema.find("who"), nullptr);
  auto obj = host.make<FixtureObject>("fixture", "greeter", vexp::dsl::make_params(d->schema, {{"who", "vexp"}}));
  EXPECT_EQ(obj->hello(), "hello vexp");
  ASSERT_EQ(host.libraries().size(), 1u);
  EXPECT_EQ(host.libraries()[0].name, "fixture_good");
}

TEST(PluginHost, LoadingTheSameLibraryTwiceIsANoOp) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  EXPECT_NO_THROW(host.load_library(fixture("good")));
  EXPECT_EQ(host.libraries().size(), 1u);
}

TEST(PluginHost, ObjectsKeepTheirLibraryLoaded) {
  std::shared_ptr<FixtureObject> obj;
  {
    vexp::PluginHost host;
    host.load_library(fixture("good"));
    obj = host.make<FixtureObject>("fixture", "greeter",
                                   vexp::dsl::make_params(host.find("fixture", "greeter")->schema, {}));
  }
  // The host is gone; the object's code (a virtual call into the .so) must still be mapped.
  EXPECT_EQ(obj->hello(), "hello world");
}

TEST(PluginHost, WrongAbiVersionIsRefusedWithBothVersions) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("bad_abi"));
  EXPECT_NE(e.find("wrong plugin ABI version"), std::string::npos) << e;
  EXPECT_NE(e.find("got version 99"), std::string::npos) << e;
  EXPECT_NE(e.find("supports version 2"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_bad_abi.so"), std::string::npos) << e;
}

TEST(PluginHost, BadBuildTagNamesBothSides) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("bad_tag"));
  EXPECT_NE(e.find("incompatible"), std::string::npos) << e;
  EXPECT_NE(e.find("torch=0.4"), std::string::npos) << e;
  EXPECT_NE(e.find(std::string("torch=") + VEXP_TAG_TORCH), std::string::npos) << e;
}

TEST(PluginHost, MissingEntryPointIsAClearError) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("no_entry"));
  EXPECT_NE(e.find("is not a vexp plugin"), std::string::npos) << e;
  EXPECT_NE(e.find("vexp_plugin_info"), std::string::npos) << e;
}

TEST(PluginHost, MissingFileIsAClearError) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("does_not_exist"));
  EXPECT_NE(e.find("cannot load plugin"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_does_not_exist.so"), std::string::npos) << e;
}

TEST(PluginHost, NonLibraryFileIsAClearError) {
  vexp::PluginHost host;
  std::string e = load_error(host, std::string(VEXP_SOURCE_DIR) + "/tests/fixtures/fixture_common.hpp");
  EXPECT_NE(e.find("cannot load plugin"), std::string::npos) << e;
}

TEST(PluginHost, ThrowingFactoryBecomesPluginErrorNamingThePlugin) {
  vexp::PluginHost host;
  host.load_library(fixture("throwing_factory"));
  try {
    host.make<FixtureObject>("fixture", "exploder", vexp::Params{});
    FAIL() << "expected PluginError";
  } catch (const vexp::PluginError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("fixture 'exploder'"), std::string::npos) << m;
    EXPECT_NE(m.find("fixture_throwing_factory.so"), std::string::npos) << m;
    EXPECT_NE(m.find("boom: the factory failed on purpose"), std::string::npos) << m;
  }
}

TEST(PluginHost, ThrowingRegistrationIsReportedAndLeavesNothing) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("throwing_register"));
  EXPECT_NE(e.find("failed to register"), std::string::npos) << e;
  EXPECT_NE(e.find("registration failed on purpose"), std::string::npos) << e;
  EXPECT_TRUE(host.libraries().empty());
}

TEST(PluginHost, DuplicateNameNamesBothLibraries) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  std::string e = load_error(host, fixture("duplicate"));
  EXPECT_NE(e.find("duplicate fixture plugin 'greeter'"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_good.so"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_duplicate.so"), std::string::npos) << e;
  // The first registration is untouched.
  EXPECT_EQ(host.make<FixtureObject>("fixture", "greeter",
                                     vexp::dsl::make_params(host.find("fixture", "greeter")->schema, {}))
                ->hello(),
            "hello world");
}

TEST(PluginHost, UnknownPluginListsKnownOnesWithDidYouMean) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  try {
    host.make<FixtureObject>("fixture", "greeterr", vexp::Params{});
    FAIL();
  } catch (const vexp::PluginError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown fixture plugin 'greeterr'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'greeter'"), std::string::npos) << m;
    EXPECT_NE(m.find("known: greeter"), std::string::npos) << m;
  }
}

TEST(PluginHost, DirectoryLoadCollectsEveryProblem) {
  vexp::PluginHost host;
  std::vector<std::string> problems;
  host.load_directory(VEXP_TEST_FIXTURE_DIR, problems);
  // good loads; duplicate (after good, alphabetical: bad_abi, bad_tag, duplicate, good...) -- one of
  // good/duplicate loses; bad_abi, bad_tag, no_entry, throwing_register fail.
  EXPECT_GE(problems.size(), 5u);
  EXPECT_NE(host.find("fixture", "greeter"), nullptr);
  EXPECT_NE(host.find("fixture", "exploder"), nullptr);
  std::vector<std::string> missing;
  host.load_directory(std::string(VEXP_TEST_FIXTURE_DIR) + "/nope", missing);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("does not exist"), std::string::npos);
}

TEST(PluginHost, BuildTagComparison) {
  EXPECT_EQ(vexp::compare_build_tags("torch=1.13;cxx11abi=1;compiler=gcc;cuda=off",
                                     "torch=1.13;cxx11abi=1;compiler=clang;cuda=off"),
            "");
  EXPECT_NE(vexp::compare_build_tags("torch=1.13;cxx11abi=1;compiler=gcc;cuda=off",
                                     "torch=1.13;cxx11abi=0;compiler=gcc;cuda=off")
                .find("cxx11abi=0"),
            std::string::npos);
  EXPECT_NE(vexp::compare_build_tags("torch=1.13;cxx11abi=1;compiler=gcc;cuda=off", "").find("(missing)"),
            std::string::npos);
}

TEST(PluginHost, BuildPluginsAllLoadCleanly) {
  vexp::PluginHost host;
  std::vector<std::string> problems;
  host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  for (const auto& p : problems) ADD_FAILURE() << p;
  for (const char* op : {"temporal_shift", "fold_time", "classifier", "segment_consensus"})
    EXPECT_NE(host.find("op", op), nullptr) << op;
  EXPECT_NE(host.find("backbone", "resnet"), nullptr);
  EXPECT_NE(host.find("dataset", "synthetic_motion"), nullptr);
  EXPECT_NE(host.find("comm", "local"), nullptr);
}

}  // namespace
