#include <gtest/gtest.h>

#include <fstream>

#include "vexp/base/files.hpp"
#include "vexp/rundir/eval_file.hpp"

using namespace vexp::rundir;

namespace {
void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
}  // namespace

TEST(EvalFile, WrittenOneKeyPerLineReadBackTyped) {
  vexp::base::TempDir tmp;
  const fs::path run = tmp.path() / "run", e = run / "eval-tsn-1x1";
  fs::create_directories(e);
  EXPECT_FALSE(is_eval_dir(e));
  nlohmann::ordered_json j;
  j["format"] = kEvalFormat;
  j["top1"] = 0.5;
  j["videos"] = 2;
  j["protocol"] = {{"name", "tsn-1x1"}};
  j["per_class"] = {{{"class", 0}, {"videos", 1}}, {{"class", 1}, {"videos", 1}}};
  j["confusion"] = {{1, 0}, {1, 0}};
  j["failures"] = nlohmann::ordered_json::array();
  write_eval(e, j);
  EXPECT_TRUE(is_eval_dir(e));
  const std::string text = read_text(e / kEvalFile);
  EXPECT_EQ(text.substr(0, 32), "{\n  \"format\": \"vexp-eval-1\",\n  \"");
  EXPECT_NE(text.find("  \"confusion\": [\n    [1,0],\n    [1,0]\n  ]"), std::string::npos) << text;
  EXPECT_NE(text.find("  \"failures\": []"), std::string::npos) << text;
  const nlohmann::json back = read_eval(e);
  EXPECT_EQ(back["top1"], 0.5);
  EXPECT_EQ(back["per_class"].size(), 2u);
  EXPECT_EQ(eval_dirs_of(run), std::vector<fs::path>{e});
  fs::create_directories(run / "checkpoints");
  EXPECT_EQ(eval_dirs_of(run).size(), 1u);
}

TEST(EvalFile, RefusedInOneLineNamingTheFile) {
  vexp::base::TempDir tmp;
  const fs::path e = tmp.path();
  auto refused = [&](const std::string& text, const std::string& why) {
    write(e / kEvalFile, text);
    try {
      read_eval(e);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("eval.json"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find(why), std::string::npos) << err.what();
    }
  };
  refused("not json", "is not valid JSON");
  refused("[1]", "is not a JSON object");
  refused("{\"top1\": 1}", "'format'");
  refused("{\"format\": \"vexp-eval-1\", \"top1\": \"high\"}", "'top1' is not a number");
  refused("{\"format\": \"vexp-eval-1\", \"protocol\": 3}", "'protocol' is not an object");
  refused("{\"format\": \"vexp-eval-1\", \"confusion\": {}}", "'confusion' is not an array");
  fs::remove(e / kEvalFile);
  EXPECT_THROW(read_eval(e), Error);
}
