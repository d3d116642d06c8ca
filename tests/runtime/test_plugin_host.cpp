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
  const vexp::PluginDecl* d = host.find("dataset", "greeter");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kind, "dataset");
  EXPECT_EQ(d->library_version, "1.2.3");
  EXPECT_NE(d->library.find("fixture_good.so"), std::string::npos);
  ASSERT_NE(d->schema.find("who"), nullptr);
  auto obj = host.make<vexp::Dataset>("dataset", "greeter", vexp::dsl::make_params(d->schema, {{"who", "vexp"}}));
  EXPECT_EQ(obj->class_names(), std::vector<std::string>{"hello vexp"});
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
  std::shared_ptr<vexp::Dataset> obj;
  {
    vexp::PluginHost host;
    host.load_library(fixture("good"));
    obj = host.make<vexp::Dataset>("dataset", "greeter",
                                   vexp::dsl::make_params(host.find("dataset", "greeter")->schema, {}));
  }
  // The host is gone; the object's code (a virtual call into the .so) must still be mapped.
  EXPECT_EQ(obj->class_names(), std::vector<std::string>{"hello world"});
}

TEST(PluginHost, WrongAbiVersionIsRefusedWithBothVersions) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("bad_abi"));
  EXPECT_EQ(e, fixture("bad_abi") + ": built for vexp plugin ABI 99, this vexp speaks ABI " +
                   std::to_string(VEXP_PLUGIN_ABI_VERSION) + "; rebuild it against this vexp's SDK");
  EXPECT_TRUE(host.libraries().empty());
}

TEST(PluginHost, PluginOfAnOlderAbiIsRefusedInOneLine) {
  ASSERT_EQ(VEXP_PLUGIN_ABI_VERSION, 6u);  // the fixture exports ABI 5, the one before
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("old_abi"));
  EXPECT_EQ(e, fixture("old_abi") +
                   ": built for vexp plugin ABI 5, this vexp speaks ABI 6; rebuild it against this vexp's SDK");
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_TRUE(host.libraries().empty());
}

TEST(PluginHost, DatasetRegisteredAsAnOpIsRefusedAtLoad) {
  vexp::PluginHost host;
  std::string e = load_error(host, fixture("wrong_interface"));
  EXPECT_EQ(e, "plugin '" + fixture("wrong_interface") +
                   "' failed to register: op 'impostor' is registered with a factory making vexp::Dataset, but "
                   "kind 'op' makes vexp::Layer (register it with add_op)");
  EXPECT_EQ(host.find("op", "impostor"), nullptr);
  EXPECT_TRUE(host.libraries().empty());
}

TEST(PluginHost, UnknownKindIsRefusedNamingTheKnownOnes) {
  vexp::PluginHost host;
  vexp::Registration r;
  r.interface = vexp::Interface::Layer;
  r.decl.kind = "fixture";
  r.decl.name = "thing";
  r.factory = [](const vexp::Params&) { return vexp::Made{}; };
  try {
    host.builtin_registrar("test").add_entry(std::move(r));
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "fixture 'thing': unknown plugin kind 'fixture' (this vexp knows op, backbone, dataset, comm, optimizer, loss, transform, batch_transform, hook)");
  }
  EXPECT_EQ(host.find("fixture", "thing"), nullptr);
}

TEST(PluginHost, MakeRefusesAnInterfaceTheEntryDoesNotMake) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  bool factory_ran = false;
  vexp::PluginDecl d;
  d.name = "probe";
  host.builtin_registrar("test").add_comm(d, [&factory_ran](const vexp::Params&) -> std::shared_ptr<vexp::Comm> {
    factory_ran = true;
    return nullptr;
  });
  try {
    host.make<vexp::Layer>("dataset", "greeter", vexp::Params{});
    FAIL() << "expected PluginError";
  } catch (const vexp::PluginError& e) {
    EXPECT_STREQ(e.what(), "dataset 'greeter' (from fixture_good.so) makes vexp::Dataset, not the vexp::Layer vexp asked for");
  }
  EXPECT_THROW(host.make<vexp::Dataset>("comm", "probe", vexp::Params{}), vexp::PluginError);
  EXPECT_FALSE(factory_ran);  // refused before the factory runs
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
    host.make<vexp::Dataset>("dataset", "exploder", vexp::Params{});
    FAIL() << "expected PluginError";
  } catch (const vexp::PluginError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("dataset 'exploder'"), std::string::npos) << m;
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
  EXPECT_NE(e.find("duplicate dataset plugin 'greeter'"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_good.so"), std::string::npos) << e;
  EXPECT_NE(e.find("fixture_duplicate.so"), std::string::npos) << e;
  // The first registration is untouched.
  EXPECT_EQ(host.make<vexp::Dataset>("dataset", "greeter",
                                      vexp::dsl::make_params(host.find("dataset", "greeter")->schema, {}))
                ->class_names(),
            std::vector<std::string>{"hello world"});
}

TEST(PluginHost, UnknownPluginListsKnownOnesWithDidYouMean) {
  vexp::PluginHost host;
  host.load_library(fixture("good"));
  try {
    host.make<vexp::Dataset>("dataset", "greeterr", vexp::Params{});
    FAIL();
  } catch (const vexp::PluginError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown dataset plugin 'greeterr'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'greeter'"), std::string::npos) << m;
    EXPECT_NE(m.find("known: greeter"), std::string::npos) << m;
  }
}

TEST(PluginHost, DirectoryLoadCollectsEveryProblem) {
  vexp::PluginHost host;
  std::vector<std::string> problems;
  host.load_directory(VEXP_TEST_FIXTURE_DIR, problems);
  // Alphabetical: bad_abi, bad_tag, duplicate, good, ... -- one of good/duplicate
  // loses; bad_abi, bad_tag, no_entry, old_abi, throwing_register, wrong_interface fail.
  EXPECT_EQ(problems.size(), 7u);
  EXPECT_NE(host.find("dataset", "greeter"), nullptr);
  EXPECT_NE(host.find("dataset", "exploder"), nullptr);
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

// Registrar::add_dataset's third factory: the file reader, made apart from the
// dataset (its own factory never runs for it), from the same parameters; datasets
// only; a dataset without one has none.
TEST(PluginHost, FileReadersAreDatasetsOnlyAndMadeApartFromTheFactory) {
  vexp::PluginHost host;
  int datasets = 0, readers = 0;
  vexp::PluginDecl d;
  d.name = "lists";
  d.schema.text("who", "world", "Whom to greet");
  host.builtin_registrar("test").add_dataset(
      d,
      [&datasets](const vexp::Params& p) {
        ++datasets;
        return std::make_shared<FixtureDataset>("dataset " + p.str("who"));
      },
      [&readers](const vexp::Params& p) {
        ++readers;
        return std::make_shared<FixtureDataset>("reader " + p.str("who"));
      });
  d.name = "plain";
  host.builtin_registrar("test").add_dataset(d, [](const vexp::Params&) { return std::make_shared<FixtureDataset>("plain"); });
  EXPECT_TRUE(host.has_file_reader("lists"));
  EXPECT_FALSE(host.has_file_reader("plain"));
  EXPECT_FALSE(host.has_file_reader("nothing"));
  vexp::Params p = vexp::schema::make_params(d.schema, {{"who", vexp::schema::Value("you")}});
  auto reader = host.make_file_reader("lists", p);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->class_names(), std::vector<std::string>{"reader you"});
  EXPECT_EQ(readers, 1);
  EXPECT_EQ(datasets, 0);
  EXPECT_EQ(host.make<vexp::Dataset>("dataset", "lists", p)->class_names(), std::vector<std::string>{"dataset you"});
  EXPECT_EQ(datasets, 1);
  EXPECT_EQ(host.make_file_reader("plain", p), nullptr);
  // The default Dataset::file_views reads no file.
  EXPECT_FALSE(reader->file_views({"/no/such.mp4", {4, 3, 8, 8}, 0}).clips.defined());
  EXPECT_THROW(host.make_file_reader("nothing", p), vexp::PluginError);
  // Another kind with a reader is refused at registration.
  vexp::Registration r;
  r.interface = vexp::Interface::Layer;
  r.decl.kind = "op";
  r.decl.name = "reader_op";
  r.factory = [](const vexp::Params&) { return vexp::Made{}; };
  r.file_reader = r.factory;
  try {
    host.builtin_registrar("test").add_entry(std::move(r));
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "op 'reader_op' is registered with a file reader, which only datasets have");
  }
}

}  // namespace
