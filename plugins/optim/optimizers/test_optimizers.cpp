// optim/optimizers: sgd, adamw and lamb made through the real plugin host, against
// libtorch's torch::optim::SGD and AdamW (PyTorch's own parity, with LAMB's Python
// reference, is tests/parity/parity.py's `optimizers`), their state round trip and
// their refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include "plugin_testing.hpp"
#include "vexp/optimizer.hpp"

namespace {

using vexp::testing::contains;
using vexp::testing::error_of;

std::shared_ptr<vexp::Optimizer> make(const std::string& name, std::map<std::string, vexp::schema::Value> given = {}) {
  return vexp::testing::make<vexp::Optimizer>("optimizer", name, std::move(given));
}

vexp::schema::Value list(std::vector<double> v) {
  vexp::schema::Value::Array a;
  for (double x : v) a.emplace_back(x);
  return vexp::schema::Value::array(std::move(a));
}

// Two parameters, one loss per step from fresh inputs, the same on both sides.
struct Pair {
  torch::Tensor a, b, ra, rb;
  explicit Pair(uint64_t seed) {
    torch::manual_seed(seed);
    a = torch::randn({5, 4}, torch::requires_grad());
    b = torch::randn({4}, torch::requires_grad());
    ra = a.detach().clone().requires_grad_(true);
    rb = b.detach().clone().requires_grad_(true);
  }
  void backward() {
    auto x = torch::randn({3, 5});
    ((x.matmul(a) + b).pow(2).sum()).backward();
    ((x.matmul(ra) + rb).pow(2).sum()).backward();
  }
  void zero() {
    for (auto* t : {&a, &b, &ra, &rb}) t->mutable_grad().zero_();
  }
};

void sgd_against_torch(double momentum, bool nesterov, double wd) {
  Pair p(3);
  auto ours = make("sgd", {{"momentum", momentum}, {"nesterov", nesterov}});
  ours->set_groups({vexp::ParamGroup{"all", 1.0, wd, {"a", "b"}, {p.a, p.b}}});
  torch::optim::SGD ref({p.ra, p.rb},
                        torch::optim::SGDOptions(0.1).momentum(momentum).nesterov(nesterov).weight_decay(wd));
  for (int step = 0; step < 4; ++step) {
    p.backward();
    double lr = 0.1 / (step + 1);
    ours->step(lr);
    static_cast<torch::optim::SGDOptions&>(ref.param_groups()[0].options()).lr(lr);
    ref.step();
    p.zero();
  }
  EXPECT_TRUE(torch::allclose(p.a, p.ra, 1e-6, 1e-7)) << (p.a - p.ra).abs().max();
  EXPECT_TRUE(torch::allclose(p.b, p.rb, 1e-6, 1e-7)) << (p.b - p.rb).abs().max();
}

TEST(OptimSgd, MatchesTorchPlain) { sgd_against_torch(0.0, false, 0.0); }
TEST(OptimSgd, MatchesTorchMomentumAndDecay) { sgd_against_torch(0.9, false, 1e-2); }
TEST(OptimSgd, MatchesTorchNesterov) { sgd_against_torch(0.9, true, 1e-4); }

TEST(OptimSgd, GroupMultipliersScaleTheStep) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  auto sgd = make("sgd", {{"momentum", 0.0}});
  sgd->set_groups({{"w", 1.0, 0.0, {"w"}, {w}}, {"v", 5.0, 0.0, {"v"}, {v}}});
  (w.sum() + v.sum()).backward();
  {
    torch::NoGradGuard g;
    sgd->step(0.1);
  }
  EXPECT_NEAR(w[0].item<double>(), 0.9, 1e-7);
  EXPECT_NEAR(v[0].item<double>(), 0.5, 1e-7);
}

TEST(OptimSgd, LarsScalesEachWeightByItsTrustRatio) {
  // One step without momentum: w -= lr * eta |w| / (|g| + wd |w|) * (g + wd w) for a
  // weight (dim > 1); a bias (dim 1) is stepped plainly.
  auto w = torch::full({2, 2}, 2.0, torch::requires_grad());  // |w| = 4
  auto b = torch::full({2}, 1.0, torch::requires_grad());
  auto sgd = make("sgd", {{"momentum", 0.0}, {"lars", true}, {"lars_eta", 0.5}});
  sgd->set_groups({{"all", 1.0, 0.25, {"w", "b"}, {w, b}}});
  (w.sum() * 3 + b.sum()).backward();  // g = 3 everywhere: |g| = 6
  sgd->step(0.1);
  const double local = 0.5 * 4 / (6 + 0.25 * 4);  // 2/7
  EXPECT_NEAR(w[0][0].item<double>(), 2.0 - 0.1 * local * (3 + 0.25 * 2), 1e-6);
  EXPECT_NEAR(b[0].item<double>(), 1.0 - 0.1 * (1 + 0.25 * 1), 1e-6);
}

// The momentum buffers are the state, by parameter name (what checkpoints of every
// SGD run hold), and a fresh optimizer given them continues bit for bit.
TEST(OptimSgd, StateIsTheMomentumByParameterNameAndResumesExactly) {
  Pair p(5), q(5);
  auto one = make("sgd", {{"momentum", 0.9}});
  one->set_groups({{"all", 1.0, 1e-3, {"a", "b"}, {p.a, p.b}}});
  auto two = make("sgd", {{"momentum", 0.9}});
  two->set_groups({{"all", 1.0, 1e-3, {"a", "b"}, {q.a, q.b}}});
  torch::manual_seed(11);
  p.backward();
  torch::manual_seed(11);
  q.backward();
  one->step(0.1);
  two->step(0.1);
  const auto st = one->state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_TRUE(st.count("a") && st.count("b"));
  // A checkpoint's copy (contiguous, CPU) into a new optimizer over q's parameters.
  auto resumed = make("sgd", {{"momentum", 0.9}});
  resumed->set_groups({{"all", 1.0, 1e-3, {"a", "b"}, {q.a, q.b}}});
  std::map<std::string, at::Tensor> copy;
  for (const auto& [k, v] : two->state()) copy[k] = v.clone();
  resumed->load_state(copy);
  p.zero();
  q.zero();
  torch::manual_seed(12);
  p.backward();
  torch::manual_seed(12);
  q.backward();
  one->step(0.05);
  resumed->step(0.05);
  EXPECT_TRUE(torch::equal(p.a, q.a));
  EXPECT_TRUE(torch::equal(p.b, q.b));
}

void adamw_against_torch(bool amsgrad, double wd) {
  Pair p(7);
  auto ours = make("adamw", {{"betas", list({0.8, 0.95})}, {"eps", 1e-6}, {"amsgrad", amsgrad}});
  ours->set_groups({vexp::ParamGroup{"all", 1.0, wd, {"a", "b"}, {p.a, p.b}}});
  torch::optim::AdamW ref({p.ra, p.rb}, torch::optim::AdamWOptions(1e-2)
                                            .betas(std::make_tuple(0.8, 0.95))
                                            .eps(1e-6)
                                            .weight_decay(wd)
                                            .amsgrad(amsgrad));
  for (int step = 0; step < 6; ++step) {
    p.backward();
    const double lr = 1e-2 / (step + 1);
    ours->step(lr);
    static_cast<torch::optim::AdamWOptions&>(ref.param_groups()[0].options()).lr(lr);
    ref.step();
    p.zero();
  }
  EXPECT_TRUE(torch::allclose(p.a, p.ra, 1e-5, 1e-7)) << (p.a - p.ra).abs().max();
  EXPECT_TRUE(torch::allclose(p.b, p.rb, 1e-5, 1e-7)) << (p.b - p.rb).abs().max();
  EXPECT_FALSE(torch::equal(p.a, p.ra.detach() * 0));  // it trained
}

TEST(OptimAdamW, MatchesTorch) { adamw_against_torch(false, 0.0); }
TEST(OptimAdamW, MatchesTorchWithDecoupledDecay) { adamw_against_torch(false, 0.1); }
TEST(OptimAdamW, MatchesTorchAmsgrad) { adamw_against_torch(true, 0.05); }

TEST(OptimAdamW, FirstStepIsSignTimesLrAndDecayIsDecoupled) {
  // Step 1: m/(1-b1) = g, sqrt(v/(1-b2)) = |g|: w -= lr * sign(g) (eps aside); the decay
  // multiplies w by 1 - lr wd first, whatever the gradient.
  auto w = torch::tensor({1.0, -2.0, 3.0}, torch::requires_grad());
  auto opt = make("adamw", {{"eps", 1e-12}});
  opt->set_groups({{"g", 2.0, 0.5, {"w"}, {w}}});
  (w * torch::tensor({4.0, -1.0, 0.5})).sum().backward();
  opt->step(0.01);  // group lr 0.02
  const auto expect = torch::tensor({1.0, -2.0, 3.0}) * (1 - 0.02 * 0.5) - 0.02 * torch::tensor({1.0, -1.0, 1.0});
  EXPECT_TRUE(torch::allclose(w, expect, 1e-6, 1e-9)) << w;
  EXPECT_EQ(opt->state().at("step/w").item<int64_t>(), 1);
}

TEST(OptimAdamW, AParameterWithoutAGradientIsNotStepped) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  auto opt = make("adamw");
  opt->set_groups({{"g", 1.0, 0.1, {"w", "v"}, {w, v}}});
  w.sum().backward();  // v has no gradient
  opt->step(0.1);
  EXPECT_TRUE(torch::equal(v, torch::ones({2})));  // not even decayed (as torch.optim)
  const auto st = opt->state();
  EXPECT_EQ(st.size(), 3u);  // w's moments and step only
  EXPECT_FALSE(st.count("step/v"));
}

// Moments and step counts round trip (as a checkpoint keeps them: contiguous CPU
// copies) and the resumed optimizer continues bit for bit; a channels-last weight
// gets channels-last moments back.
TEST(OptimAdamW, StateResumesExactlyBesideItsParameters) {
  for (const char* name : {"adamw", "lamb"}) {
    torch::manual_seed(1);
    auto w0 = torch::randn({4, 3, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
    auto b0 = torch::randn({4});
    auto w1 = w0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
    auto w2 = w0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
    ASSERT_TRUE(w2.is_contiguous(at::MemoryFormat::ChannelsLast));
    std::map<std::string, vexp::schema::Value> given;
    if (std::string(name) == "adamw") given["amsgrad"] = true;
    auto one = make(name, given), two = make(name, given);
    one->set_groups({{"w", 1.0, 0.01, {"w"}, {w1}}, {"b", 2.0, 0.0, {"b"}, {b1}}});
    two->set_groups({{"w", 1.0, 0.01, {"w"}, {w2}}, {"b", 2.0, 0.0, {"b"}, {b2}}});
    auto train = [](vexp::Optimizer& o, torch::Tensor& w, torch::Tensor& b, int seed, double lr) {
      torch::manual_seed(seed);
      // Elementwise products, not a convolution: libtorch's CPU conv2d backward sums
      // over the batch in a thread-dependent order, and the test needs the same
      // gradients for both optimizers.
      auto x = torch::randn({4, 3, 3, 3}), y = torch::randn({4});
      ((w * x).pow(2).mean() + (b * y).pow(2).mean()).backward();
      o.step(lr);
      w.mutable_grad().zero_();
      b.mutable_grad().zero_();
    };
    train(*one, w1, b1, 2, 0.01);
    train(*two, w2, b2, 2, 0.01);
    std::map<std::string, at::Tensor> ckpt;
    for (const auto& [k, v] : two->state()) ckpt[k] = v.contiguous().clone();
    auto resumed = make(name, given);
    resumed->set_groups({{"w", 1.0, 0.01, {"w"}, {w2}}, {"b", 2.0, 0.0, {"b"}, {b2}}});
    resumed->load_state(ckpt);
    const auto st = resumed->state();
    EXPECT_TRUE(st.at("exp_avg/w").is_contiguous(at::MemoryFormat::ChannelsLast)) << name;
    EXPECT_EQ(st.at("step/b").item<int64_t>(), 1) << name;
    for (int s = 3; s < 6; ++s) {
      train(*one, w1, b1, s, 0.01 / s);
      train(*resumed, w2, b2, s, 0.01 / s);
    }
    EXPECT_TRUE(torch::equal(w1, w2)) << name;
    EXPECT_TRUE(torch::equal(b1, b2)) << name;
    EXPECT_EQ(resumed->state().at("step/w").item<int64_t>(), 4) << name;
  }
}

TEST(OptimAdamW, RefusesStateItDoesNotKnow) {
  auto w = torch::ones({2, 2}, torch::requires_grad());
  auto opt = make("adamw");
  opt->set_groups({{"g", 1.0, 0.0, {"w"}, {w}}});
  // An SGD checkpoint's momentum buffer.
  EXPECT_TRUE(contains(error_of([&] { opt->load_state({{"w", torch::zeros({2, 2})}}); }),
                       "'w' is not state of the adamw optimizer (a checkpoint of another optimizer?)"));
  EXPECT_TRUE(contains(error_of([&] { opt->load_state({{"exp_avg/x", torch::zeros({2, 2})}}); }),
                       "adamw optimizer state 'exp_avg/x' names no trainable parameter of this model"));
  EXPECT_TRUE(contains(error_of([&] {
                         opt->load_state({{"exp_avg/w", torch::zeros({3})},
                                          {"exp_avg_sq/w", torch::zeros({2, 2})},
                                          {"step/w", torch::tensor(int64_t(1))}});
                       }),
                       "adamw optimizer state 'exp_avg/w' has shape [3] but parameter 'w' has [2, 2]"));
  EXPECT_TRUE(contains(error_of([&] { opt->load_state({{"exp_avg/w", torch::zeros({2, 2})}}); }),
                       "adamw optimizer state of parameter 'w' is incomplete"));
  // amsgrad's maximum is not state of a plain adamw.
  EXPECT_TRUE(contains(error_of([&] { opt->load_state({{"max_exp_avg_sq/w", torch::zeros({2, 2})}}); }),
                       "'max_exp_avg_sq/w' is not state of the adamw optimizer"));
  auto sgd = make("sgd");
  sgd->set_groups({{"g", 1.0, 0.0, {"w"}, {w}}});
  EXPECT_TRUE(contains(error_of([&] { sgd->load_state({{"exp_avg/w", torch::zeros({2, 2})}}); }),
                       "sgd optimizer state 'exp_avg/w' names no trainable parameter of this model"));
}

TEST(OptimAdamW, BetasAreTwoNumbers) {
  EXPECT_TRUE(contains(error_of([&] { make("adamw", {{"betas", list({0.9})}}); }),
                       "'betas' in [optim]: expected two numbers [beta1, beta2], got 1"));
  EXPECT_TRUE(contains(error_of([&] { make("lamb", {{"betas", list({0.9, 0.99, 0.999})}}); }),
                       "expected two numbers [beta1, beta2], got 3"));
}

TEST(OptimSet, AParameterInTwoGroupsIsRefused) {
  auto w = torch::ones({2}, torch::requires_grad());
  for (const char* name : {"sgd", "adamw", "lamb"}) {
    auto opt = make(name);
    EXPECT_TRUE(contains(error_of([&] { opt->set_groups({{"a", 1.0, 0.0, {"w"}, {w}}, {"b", 1.0, 0.0, {"w"}, {w}}}); }),
                         "parameter 'w' is in two groups"))
        << name;
  }
}

// LAMB's rule written out once more in double precision, for one tensor.
struct LambRef {
  double b1, b2, eps, wd;
  bool bias_correction, adapt, clip;
  torch::Tensor m, v;
  int t = 0;
  void step(torch::Tensor& w, const torch::Tensor& g, double lr) {
    if (!m.defined()) m = torch::zeros_like(w), v = torch::zeros_like(w);
    ++t;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double c1 = bias_correction ? 1 - std::pow(b1, t) : 1, c2 = bias_correction ? 1 - std::pow(b2, t) : 1;
    torch::Tensor u = (m / c1) / ((v / c2).sqrt() + eps) + wd * w;
    double r = 1;
    if (wd != 0 || adapt) {
      const double wn = w.norm().item<double>(), un = u.norm().item<double>();
      r = wn > 0 && un > 0 ? wn / un : 1.0;
      if (clip) r = std::min(r, 1.0);
    }
    w = w - lr * r * u;
  }
};

void lamb_against_reference(double wd, bool adapt, bool clip, bool bias_correction) {
  torch::manual_seed(21);
  auto w = torch::randn({6, 5}, torch::dtype(torch::kDouble)).requires_grad_(true);
  auto z = torch::zeros({5}, torch::dtype(torch::kDouble)).requires_grad_(true);  // |w| = 0: ratio 1
  torch::Tensor rw = w.detach().clone(), rz = z.detach().clone();
  auto opt = make("lamb", {{"always_adapt", adapt}, {"trust_clip", clip}, {"bias_correction", bias_correction}});
  opt->set_groups({{"g", 1.0, wd, {"w", "z"}, {w, z}}});
  LambRef refw{0.9, 0.999, 1e-6, wd, bias_correction, adapt, clip, {}, {}};
  LambRef refz = refw;
  for (int s = 0; s < 5; ++s) {
    auto x = torch::randn({3, 6}, torch::dtype(torch::kDouble));
    ((x.matmul(w) + z).pow(2).sum()).backward();
    const torch::Tensor gw = w.grad().clone(), gz = z.grad().clone();
    const double lr = 0.05 / (s + 1);
    opt->step(lr);
    refw.step(rw, gw, lr);
    refz.step(rz, gz, lr);
    w.mutable_grad().zero_();
    z.mutable_grad().zero_();
  }
  EXPECT_TRUE(torch::allclose(w, rw, 1e-10, 1e-12)) << (w - rw).abs().max();
  EXPECT_TRUE(torch::allclose(z, rz, 1e-10, 1e-12)) << (z - rz).abs().max();
}

TEST(OptimLamb, MatchesItsRuleWithWeightDecay) { lamb_against_reference(0.01, false, false, true); }
TEST(OptimLamb, NoDecayNoAdaptationUnlessAlwaysAdapt) {
  lamb_against_reference(0.0, false, false, true);
  lamb_against_reference(0.0, true, false, true);
}
TEST(OptimLamb, TrustClipAndNoBiasCorrection) { lamb_against_reference(0.1, false, true, false); }

TEST(OptimDecl, EveryOptimizerIsListedWithItsParameters) {
  auto& host = vexp::testing::host();
  const auto names = host.names("optimizer");
  EXPECT_EQ(names, (std::vector<std::string>{"adamw", "lamb", "sgd"}));
  const vexp::PluginDecl* sgd = host.find("optimizer", "sgd");
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->schema.names(), (std::vector<std::string>{"lars", "lars_eta", "momentum", "nesterov"}));
  EXPECT_EQ(host.find("optimizer", "adamw")->schema.names(), (std::vector<std::string>{"betas", "eps", "amsgrad"}));
}

}  // namespace
