// Value trees, typed parameter views and schema checks.
#include <gtest/gtest.h>

#include "vexp/schema/schema.hpp"
#include "vexp/schema/value.hpp"

namespace vexp::dsl {
namespace {

TEST(Loc, RendersFileLineColumnOrJustFile) {
  EXPECT_EQ((Loc{"recipes/a.toml", 12, 7}.str()), "recipes/a.toml:12:7");
  EXPECT_EQ((Loc{"--set run.epochs=3", 0, 0}.str()), "--set run.epochs=3");
  EXPECT_FALSE(Loc{}.known());
  EXPECT_TRUE((Loc{"a.toml", 0, 0}.known()));
}

TEST(Value, AccessorsThrowLogicErrorOnKindMismatch) {
  Value s("text");
  EXPECT_THROW(s.as_int(), std::logic_error);
  EXPECT_THROW(s.as_bool(), std::logic_error);
  EXPECT_THROW(s.as_double(), std::logic_error);
  EXPECT_THROW(s.as_table(), std::logic_error);
  EXPECT_THROW(Value(3).as_string(), std::logic_error);
  EXPECT_THROW(Value(1.5).as_int(), std::logic_error);
  EXPECT_EQ(s.as_string(), "text");
}

TEST(Value, IntReadsAsDouble) {
  EXPECT_DOUBLE_EQ(Value(3).as_double(), 3.0);
  EXPECT_DOUBLE_EQ(Value(0.25).as_double(), 0.25);
}

TEST(Value, EqualityIgnoresLocationsAndTableOrder) {
  Value a = Value::table({{"x", Value(1).at({"a.toml", 1, 1})}, {"y", Value("s")}});
  Value b = Value::table({{"y", Value("s").at({"b.toml", 9, 9})}, {"x", Value(1)}});
  EXPECT_EQ(a, b);
  b.set("x", Value(2));
  EXPECT_NE(a, b);
  EXPECT_NE(Value(1), Value(1.0));  // int and float stay distinct
  EXPECT_EQ(Value::array({Value(1), Value(2)}), Value::array({Value(1), Value(2)}));
  EXPECT_NE(Value::array({Value(1), Value(2)}), Value::array({Value(2), Value(1)}));
}

TEST(Value, TableHelpersKeepInsertionOrder) {
  Value t = Value::table();
  t.set("b", Value(1));
  t.set("a", Value(2));
  t.set("b", Value(3));  // replace keeps the position
  ASSERT_EQ(t.as_table().size(), 2u);
  EXPECT_EQ(t.as_table()[0].first, "b");
  EXPECT_EQ(t.as_table()[0].second.as_int(), 3);
  EXPECT_TRUE(t.erase("b"));
  EXPECT_FALSE(t.erase("b"));
  EXPECT_EQ(t.find("b"), nullptr);
  EXPECT_EQ(Value(1).find("a"), nullptr);
}

TEST(Value, InlineTomlRendering) {
  EXPECT_EQ(Value(8).to_toml_inline(), "8");
  EXPECT_EQ(Value(0.1).to_toml_inline(), "0.1");
  EXPECT_EQ(Value(1.0).to_toml_inline(), "1.0");
  EXPECT_EQ(Value(1e-9).to_toml_inline(), "1e-09");
  EXPECT_EQ(Value("a\"b\\c\n").to_toml_inline(), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(Value::array({Value(1), Value(2)}).to_toml_inline(), "[1, 2]");
  EXPECT_EQ(Value::table({{"op", Value("x")}, {"a b", Value(true)}}).to_toml_inline(),
            "{ op = \"x\", \"a b\" = true }");
}

TEST(Params, GettersNameMissingKeysAndConvertLists) {
  Params p({{"depth", Value(50)},
            {"lr", Value(1)},
            {"ms", Value::array({Value(20), Value(40)})},
            {"fs", Value::array({Value(1), Value(0.5)})},
            {"names", Value::array({Value("a"), Value("b")})}});
  EXPECT_EQ(p.i64("depth"), 50);
  EXPECT_DOUBLE_EQ(p.f64("lr"), 1.0);
  EXPECT_EQ(p.i64_list("ms"), (std::vector<int64_t>{20, 40}));
  EXPECT_EQ(p.f64_list("fs"), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(p.str_list("names"), (std::vector<std::string>{"a", "b"}));
  try {
    p.get("x");
    FAIL() << "expected out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "no parameter 'x'");
  }
  EXPECT_THROW(p.flag("depth"), std::logic_error);
}

ParamSpec spec_of(const Schema& s, const std::string& name) { return *s.find(name); }

TEST(Schema, CheckValueMessages) {
  Schema s;
  s.integer("n", 1, "").at_least(1);
  s.text("dir", "left", "").one_of({"bidirectional", "left", "right"});
  s.real("p", 0.5, "").range(0, 1);
  s.real("gamma", 0.1, "").above(0).at_most(1);
  Value v("abc");
  EXPECT_EQ(check_value(spec_of(s, "n"), v), "expected int, got string \"abc\"");
  v = Value(0);
  EXPECT_EQ(check_value(spec_of(s, "n"), v), "must be >= 1, got 0");
  v = Value(1);
  EXPECT_EQ(check_value(spec_of(s, "n"), v), "");
  v = Value("up");
  EXPECT_EQ(check_value(spec_of(s, "dir"), v), "must be one of \"bidirectional\", \"left\", \"right\", got \"up\"");
  v = Value(2);
  EXPECT_EQ(check_value(spec_of(s, "p"), v), "must be in [0, 1], got 2.0");
  v = Value(0.0);
  EXPECT_EQ(check_value(spec_of(s, "gamma"), v), "must be in (0, 1], got 0.0");
  v = Value(Value::table());
  EXPECT_EQ(check_value(spec_of(s, "n"), v), "expected int, got a table");
}

TEST(Schema, IntBecomesFloatWhereAFloatIsExpected) {
  Schema s;
  s.real("lr", 0.1, "");
  Value v = Value(2).at({"r.toml", 3, 1});
  EXPECT_EQ(check_value(spec_of(s, "lr"), v), "");
  ASSERT_TRUE(v.is_float());
  EXPECT_DOUBLE_EQ(v.as_double(), 2.0);
  EXPECT_EQ(v.loc().str(), "r.toml:3:1");
  Value b(true);
  EXPECT_EQ(check_value(spec_of(s, "lr"), b), "expected float, got bool true");
}

TEST(Schema, TypedTextFromSetBecomesAStringWhereAStringIsExpected) {
  Schema s;
  s.text("name", "", "");
  Value from_set = Value(123).at({"--set run.name=123", 0, 0});
  EXPECT_EQ(check_value(spec_of(s, "name"), from_set), "");
  EXPECT_EQ(from_set.as_string(), "123");
  Value from_file = Value(123).at({"r.toml", 1, 1});
  EXPECT_EQ(check_value(spec_of(s, "name"), from_file), "expected string, got int 123");
  Value typed(7);
  typed.set_typed_text("007");
  EXPECT_EQ(check_value(spec_of(s, "name"), typed), "");
  EXPECT_EQ(typed.as_string(), "007");
}

TEST(Schema, ListsCheckEveryElement) {
  Schema s;
  s.int_list("milestones", {}, "").at_least(0);
  s.real_list("scales", {1.0}, "");
  s.text_list("paths", {}, "");
  Value ok = Value::array({Value(20), Value(40)});
  EXPECT_EQ(check_value(spec_of(s, "milestones"), ok), "");
  Value bad = Value::array({Value(20), Value("x")});
  EXPECT_EQ(check_value(spec_of(s, "milestones"), bad), "element 1: expected int, got string \"x\"");
  Value negative = Value::array({Value(-1)});
  EXPECT_EQ(check_value(spec_of(s, "milestones"), negative), "element 0: must be >= 0, got -1");
  Value scalar(3);
  EXPECT_EQ(check_value(spec_of(s, "milestones"), scalar), "expected int[], got int 3");
  Value mixed = Value::array({Value(1), Value(0.5)});
  EXPECT_EQ(check_value(spec_of(s, "scales"), mixed), "");
  EXPECT_TRUE(mixed.as_array()[0].is_float());
  Value names = Value::array({Value(1)});
  EXPECT_EQ(check_value(spec_of(s, "paths"), names), "element 0: expected string, got int 1");
}

TEST(Schema, TableParamsAcceptAnyTable) {
  Schema s;
  ParamSpec t;
  t.name = "params";
  t.type = ParamType::Table;
  t.default_value = Value::table();
  s.add(t);
  Value v = Value::table({{"anything", Value(1)}});
  EXPECT_EQ(check_value(spec_of(s, "params"), v), "");
  Value w(1);
  EXPECT_EQ(check_value(spec_of(s, "params"), w), "expected a table, got int 1");
}

TEST(Schema, DuplicateNamesReplace) {
  Schema s;
  s.integer("depth", 50, "first");
  s.integer("width", 1, "");
  s.integer("depth", 18, "second");
  ASSERT_EQ(s.params().size(), 2u);
  EXPECT_EQ(s.params()[0].default_value.as_int(), 18);
  EXPECT_EQ(s.names(), (std::vector<std::string>{"depth", "width"}));
  EXPECT_STREQ(param_type_name(ParamType::IntList), "int[]");
}

TEST(Schema, MakeParamsFillsDefaultsAndNamesBadKeys) {
  Schema s;
  s.integer("depth", 50, "").one_of({18, 50});
  s.real("dropout", 0.5, "");
  s.integer("classes", 0, "").require();
  Params p = make_params(s, {{"classes", Value(10)}, {"dropout", Value(0)}});
  EXPECT_EQ(p.i64("depth"), 50);
  EXPECT_EQ(p.i64("classes"), 10);
  EXPECT_TRUE(p.get("dropout").is_float());
  auto message = [&](std::map<std::string, Value> given) {
    try {
      make_params(s, std::move(given));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message({{"classes", Value(1)}, {"depht", Value(18)}}), "unknown parameter 'depht' (did you mean 'depth'?)");
  EXPECT_EQ(message({{"classes", Value(1)}, {"depth", Value(20)}}), "parameter 'depth': must be one of 18, 50, got 20");
  EXPECT_EQ(message({}), "missing required parameter 'classes'");
}

TEST(DidYouMean, SuggestsOnlyCloseWords) {
  const std::vector<std::string> keys{"lr", "momentum", "weight_decay", "nesterov"};
  EXPECT_EQ(did_you_mean("lrr", keys), "lr");
  EXPECT_EQ(did_you_mean("momentun", keys), "momentum");
  EXPECT_EQ(did_you_mean("weightdecay", keys), "weight_decay");
  EXPECT_EQ(did_you_mean("batch", keys), "");
  EXPECT_EQ(did_you_mean("x", keys), "");
  EXPECT_EQ(did_you_mean("optm", {"run", "optim", "model"}), "optim");
}

}  // namespace
}  // namespace vexp::dsl
