// cross_entropy, label_smoothing and soft_target_cross_entropy: the default loss
// is vexp's former at::cross_entropy_loss call bit for bit; every loss and its
// gradient equal PyTorch's (torch.nn.functional.cross_entropy, timm's
// SoftTargetCrossEntropy) computed by /usr/bin/python3 on the same numbers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/loss.hpp"

namespace {

using vexp::testing::contains;
using vexp::testing::error_of;

std::shared_ptr<vexp::Loss> make_loss(const std::string& name, std::map<std::string, vexp::schema::Value> given = {}) {
  return vexp::testing::make<vexp::Loss>("loss", name, std::move(given));
}

// Deterministic inputs without a generator the Python side would need: logits of a
// few magnitudes, labels, and soft targets (mixtures of two one-hot rows, and a
// dense row) that sum to 1.
constexpr int64_t kN = 6, kC = 5;
at::Tensor test_logits() {
  at::Tensor x = at::arange(kN * kC, at::kFloat).reshape({kN, kC});
  return (x * 0.7).sin() * 3.0 + (x * 0.13).cos();
}
at::Tensor test_labels() { return at::tensor(std::vector<int64_t>{0, 4, 2, 2, 1, 3}, at::kLong); }
at::Tensor test_soft() {
  at::Tensor y = at::one_hot(test_labels(), kC).to(at::kFloat);
  at::Tensor flipped = y.flip(0);
  at::Tensor soft = y * 0.7f + flipped * 0.3f;
  soft[5] = at::tensor(std::vector<float>{0.1f, 0.2f, 0.3f, 0.15f, 0.25f});
  return soft;
}

std::string numbers(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous().reshape({-1});
  std::ostringstream s;
  s.precision(17);
  for (int64_t i = 0; i < c.numel(); ++i) s << (i ? ", " : "") << c.data_ptr<double>()[i];
  return s.str();
}

// Runs the script with /usr/bin/python3; its stdout, or "" when Python or its
// torch is missing (the test is then skipped).
std::string python(const std::string& script) {
  char dir[] = "/tmp/vexp_loss_parity_XXXXXX";
  if (!mkdtemp(dir)) return "";
  const std::string file = std::string(dir) + "/ref.py";
  std::ofstream(file) << script;
  std::string out;
  if (FILE* p = popen(("/usr/bin/python3 " + file + " 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (pclose(p) != 0) out.clear();
  }
  std::remove(file.c_str());
  rmdir(dir);
  return out;
}

// The loss and d loss / d logits of `loss` on (logits, target), flattened.
std::vector<double> value_and_grad(vexp::Loss& loss, const at::Tensor& target) {
  at::Tensor logits = test_logits().requires_grad_(true);
  at::Tensor l = loss.forward(logits, target);
  l.backward();
  std::vector<double> v{l.item<double>()};
  at::Tensor g = logits.grad().to(at::kDouble).reshape({-1});
  for (int64_t i = 0; i < g.numel(); ++i) v.push_back(g[i].item<double>());
  return v;
}

TEST(Losses, AllTakeSoftTargets) {
  for (const char* name : {"cross_entropy", "label_smoothing", "soft_target_cross_entropy"})
    EXPECT_TRUE(make_loss(name)->soft_targets()) << name;
}

TEST(Losses, CrossEntropyIsTheFormerCallBitForBit) {
  // TrainStep computed at::cross_entropy_loss(logits.to(kFloat), labels) before the
  // loss became a plugin: the default loss is that call, value and gradient.
  auto loss = make_loss("cross_entropy");
  at::Tensor a = test_logits().requires_grad_(true), b = test_logits().requires_grad_(true);
  at::Tensor la = loss->forward(a, test_labels());
  at::Tensor lb = at::cross_entropy_loss(b, test_labels());
  EXPECT_TRUE(at::equal(la, lb));
  la.backward();
  lb.backward();
  EXPECT_TRUE(at::equal(a.grad(), b.grad()));
}

TEST(Losses, OneHotTargetsEqualLabels) {
  const at::Tensor onehot = at::one_hot(test_labels(), kC).to(at::kFloat);
  for (const char* name : {"cross_entropy", "label_smoothing", "soft_target_cross_entropy"}) {
    auto loss = make_loss(name);
    const double hard = loss->forward(test_logits(), test_labels()).item<double>();
    const double soft = loss->forward(test_logits(), onehot).item<double>();
    EXPECT_NEAR(hard, soft, 1e-6) << name;
  }
}

TEST(Losses, MatchPyTorch) {
  struct Case {
    std::string name;
    std::map<std::string, vexp::schema::Value> params;
    bool soft;
    std::string python;  // the reference's expression of x (logits) and t (target)
  };
  const std::vector<Case> cases = {
      {"cross_entropy", {}, false, "F.cross_entropy(x, t)"},
      {"cross_entropy", {}, true, "F.cross_entropy(x, t)"},
      {"label_smoothing", {}, false, "F.cross_entropy(x, t, label_smoothing=0.1)"},
      {"label_smoothing", {{"smoothing", 0.3}}, false, "F.cross_entropy(x, t, label_smoothing=0.3)"},
      {"label_smoothing", {{"smoothing", 0.2}}, true, "F.cross_entropy(x, t, label_smoothing=0.2)"},
      {"label_smoothing", {{"smoothing", 0.0}}, false, "F.cross_entropy(x, t)"},
      // timm.loss.SoftTargetCrossEntropy, written out (timm is not installed).
      {"soft_target_cross_entropy", {}, true, "torch.sum(-t * F.log_softmax(x, dim=-1), dim=-1).mean()"},
      {"soft_target_cross_entropy", {}, false,
       "torch.sum(-F.one_hot(t, x.shape[1]).float() * F.log_softmax(x, dim=-1), dim=-1).mean()"},
  };
  std::string script = "import torch\nimport torch.nn.functional as F\n";
  script += "X = torch.tensor([" + numbers(test_logits()) + "], dtype=torch.float32).reshape(" +
            std::to_string(kN) + ", " + std::to_string(kC) + ")\n";
  script += "L = torch.tensor([" + numbers(test_labels()) + "]).long()\n";
  script += "S = torch.tensor([" + numbers(test_soft()) + "], dtype=torch.float32).reshape(" + std::to_string(kN) +
            ", " + std::to_string(kC) + ")\n";
  for (const Case& c : cases) {
    script += "x = X.clone().requires_grad_(True)\nt = " + std::string(c.soft ? "S" : "L") + "\n";
    script += "l = " + c.python + "\nl.backward()\n";
    script += "print(' '.join(repr(v) for v in [l.item()] + x.grad.reshape(-1).tolist()))\n";
  }
  const std::string out = python(script);
  if (out.empty()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  std::istringstream lines(out);
  for (const Case& c : cases) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line)) << "the reference printed too few lines:\n" << out;
    std::istringstream nums(line);
    std::vector<double> ref;
    for (double v; nums >> v;) ref.push_back(v);
    auto loss = make_loss(c.name, c.params);
    const std::vector<double> got = value_and_grad(*loss, c.soft ? test_soft() : test_labels());
    ASSERT_EQ(got.size(), ref.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-6 * std::max(1.0, std::abs(ref[i])))
          << c.name << (c.soft ? " (soft targets)" : " (labels)") << (i == 0 ? ": the loss" : ": gradient element ")
          << (i == 0 ? "" : std::to_string(i - 1));
  }
}

TEST(Losses, RefuseTargetsOfAnotherShape) {
  auto loss = make_loss("label_smoothing");
  const std::string e = error_of([&] { loss->forward(test_logits(), at::zeros({kN, kC + 1})); });
  EXPECT_TRUE(contains(e, "loss 'label_smoothing': the targets [6, 6] are neither labels [6] nor probabilities of "
                          "the logits' shape [6, 5]")) << e;
  const std::string f = error_of([&] { make_loss("cross_entropy")->forward(test_logits(), at::zeros({kN + 1}, at::kLong)); });
  EXPECT_TRUE(contains(f, "loss 'cross_entropy': the targets [7]")) << f;
}

TEST(Losses, SmoothingIsBelowOne) {
  EXPECT_TRUE(contains(error_of([] { make_loss("label_smoothing", {{"smoothing", 1.0}}); }), "smoothing")) ;
  EXPECT_TRUE(contains(error_of([] { make_loss("label_smoothing", {{"smoothing", -0.1}}); }), "smoothing"));
}

}  // namespace
