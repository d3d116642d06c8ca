// hooks/ema through the real plugin host: the average against a hand computation
// (timm ModelEmaV3's rule: the first update copies, then e + (1 - d)(w - e), the
// warmup ramp), every / start_step, buffers, state, the points' work.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include "plugin_testing.hpp"
#include "vexp/hook.hpp"

namespace {

using vexp::schema::Value;

// A model of one parameter [3], a float buffer [2] and an integer buffer.
struct Model {
  std::shared_ptr<torch::nn::Module> m = std::make_shared<torch::nn::Module>();
  at::Tensor w, mean, count;
  Model() {
    w = m->register_parameter("w", at::zeros({3}));
    mean = m->register_buffer("mean", at::zeros({2}));
    count = m->register_buffer("count", at::zeros({}, at::kLong));
  }
  // The weights after a step: w, mean and count set.
  void set(std::vector<double> wv, std::vector<double> mv, int64_t c) {
    c10::NoGradGuard no_grad;
    w.copy_(at::tensor(wv, at::kDouble).to(at::kFloat));
    mean.copy_(at::tensor(mv, at::kDouble).to(at::kFloat));
    count.fill_(c);
  }
};

vexp::HookContext ctx_of(const Model& m, int64_t step) {
  vexp::HookContext c;
  c.model = m.m.get();
  c.step = step;
  return c;
}

std::shared_ptr<vexp::Hook> ema(std::map<std::string, Value> p) {
  return vexp::testing::make<vexp::Hook>("hook", "ema", std::move(p));
}

std::vector<double> values(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

void expect_near(const at::Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  const auto g = values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << what << "[" << i << "]";
}

TEST(HookEma, IsListedWithItsParameters) {
  const vexp::PluginDecl* d = vexp::testing::host().find("hook", "ema");
  ASSERT_NE(d, nullptr);
  for (const char* k : {"decay", "every", "start_step", "warmup", "warmup_gamma", "warmup_power", "buffers", "evaluate",
                        "name"})
    EXPECT_NE(d->schema.find(k), nullptr) << k;
}

TEST(HookEma, FirstUpdateCopiesThenAveragesAtTheDecay) {
  Model m;
  auto h = ema({{"decay", Value(0.75)}});
  m.set({1, 2, 3}, {0.5, 0.5}, 1);
  h->start(ctx_of(m, 0));  // e = the starting weights
  expect_near(h->state().at("w"), {1, 2, 3}, 0, "start");
  m.set({5, 6, 7}, {1.5, 2.5}, 2);
  h->after_step(ctx_of(m, 1));  // step 1: decay 0, a copy
  expect_near(h->state().at("w"), {5, 6, 7}, 0, "step 1");
  expect_near(h->state().at("mean"), {1.5, 2.5}, 0, "step 1 mean");
  // By hand: e = d e + (1 - d) w, d = 0.75 (exact in binary: these are exact).
  std::vector<double> e{5, 6, 7}, em{1.5, 2.5};
  const std::vector<std::vector<double>> ws{{9, 2, -1}, {13, 6, 3}, {1, 1, 1}};
  for (size_t s = 0; s < ws.size(); ++s) {
    m.set(ws[s], {2.0 * static_cast<double>(s), 1.0}, static_cast<int64_t>(3 + s));
    h->after_step(ctx_of(m, static_cast<int64_t>(2 + s)));
    for (size_t i = 0; i < 3; ++i) e[i] = 0.75 * e[i] + 0.25 * ws[s][i];
    em = {0.75 * em[0] + 0.25 * 2.0 * static_cast<double>(s), 0.75 * em[1] + 0.25};
    expect_near(h->state().at("w"), e, 0, "step " + std::to_string(2 + s));
    expect_near(h->state().at("mean"), em, 0, "mean, step " + std::to_string(2 + s));
    // The integer buffer (num_batches_tracked) is copied, never averaged.
    EXPECT_EQ(h->state().at("count").item<int64_t>(), static_cast<int64_t>(3 + s));
  }
}

TEST(HookEma, DecayMatchesAHandComputationOnRandomWeights) {
  Model m;
  auto h = ema({{"decay", Value(0.9)}});
  at::manual_seed(3);
  h->start(ctx_of(m, 0));
  std::vector<double> e;
  for (int64_t step = 1; step <= 20; ++step) {
    const at::Tensor w = at::randn({3});
    m.set(values(w), {0, 0}, step);
    h->after_step(ctx_of(m, step));
    const auto wv = values(w);
    if (step == 1) e = wv;
    else
      for (size_t i = 0; i < 3; ++i) e[i] = 0.9 * e[i] + 0.1 * wv[i];
    expect_near(h->state().at("w"), e, 1e-6, "step " + std::to_string(step));
  }
}

TEST(HookEma, WarmupRampsTheDecayAsTimm) {
  // decay_t = min(decay, 1 - (1 + n / gamma)^-power), n = step - 1 (timm's
  // get_decay with update_after_step 0); step 1 copies.
  for (double power : {2.0 / 3.0, 0.75}) {
    Model m;
    auto h = ema({{"decay", Value(0.6)}, {"warmup", Value(true)}, {"warmup_gamma", Value(2.0)},
                  {"warmup_power", Value(power)}});
    h->start(ctx_of(m, 0));
    std::vector<double> e;
    for (int64_t step = 1; step <= 12; ++step) {
      const double wv = static_cast<double>(step * step);
      m.set({wv, -wv, 1}, {0, 0}, 0);
      h->after_step(ctx_of(m, step));
      const double n = static_cast<double>(step - 1);
      const double d = step == 1 ? 0.0 : std::min(0.6, 1.0 - std::pow(1.0 + n / 2.0, -power));
      if (step == 1) e = {wv, -wv, 1};
      else e = {d * e[0] + (1 - d) * wv, d * e[1] - (1 - d) * wv, 1};
      expect_near(h->state().at("w"), e, 1e-4, "power " + std::to_string(power) + " step " + std::to_string(step));
    }
  }
}

TEST(HookEma, EveryAndStartStepChooseTheUpdates) {
  Model m;
  auto h = ema({{"decay", Value(0.5)}, {"every", Value(int64_t(3))}, {"start_step", Value(int64_t(2))}});
  h->start(ctx_of(m, 0));
  std::vector<double> e{0, 0, 0};
  for (int64_t step = 1; step <= 9; ++step) {
    const double wv = static_cast<double>(step);
    m.set({wv, wv, wv}, {0, 0}, 0);
    h->after_step(ctx_of(m, step));
    // Updates after steps 3, 6, 9; the one after step 3 (= start_step + 1) copies.
    if (step == 3) e = {3, 3, 3};
    if (step == 6 || step == 9)
      for (auto& x : e) x = 0.5 * x + 0.5 * wv;
    expect_near(h->state().at("w"), e, 0, "step " + std::to_string(step));
  }
}

TEST(HookEma, BuffersCopyWhenAsked) {
  Model m;
  auto h = ema({{"decay", Value(0.5)}, {"buffers", Value("copy")}});
  h->start(ctx_of(m, 0));
  m.set({2, 2, 2}, {4, 4}, 1);
  h->after_step(ctx_of(m, 1));
  m.set({4, 4, 4}, {8, 6}, 2);
  h->after_step(ctx_of(m, 2));
  expect_near(h->state().at("w"), {3, 3, 3}, 0, "w");
  expect_near(h->state().at("mean"), {8, 6}, 0, "mean, copied");
}

TEST(HookEma, StateContinuesInAnotherHook) {
  // A resumed run: a new hook given the state continues as the first one would.
  Model m;
  auto a = ema({{"decay", Value(0.8)}});
  a->start(ctx_of(m, 0));
  for (int64_t s = 1; s <= 3; ++s) {
    m.set({double(s), 1, 2}, {double(s), 0}, s);
    a->after_step(ctx_of(m, s));
  }
  auto b = ema({{"decay", Value(0.8)}});
  std::map<std::string, at::Tensor> saved;
  for (const auto& [k, v] : a->state()) saved[k] = v.clone();
  b->load_state(saved);
  b->start(ctx_of(m, 3));  // does not re-initialise from the weights
  for (int64_t s = 4; s <= 6; ++s) {
    m.set({double(s) * 3, 1, 2}, {0, double(s)}, s);
    a->after_step(ctx_of(m, s));
    b->after_step(ctx_of(m, s));
  }
  for (const auto& [k, v] : a->state()) EXPECT_TRUE(at::equal(v, b->state().at(k))) << k;
  // A state of another model is refused when the hook starts.
  auto c = ema({});
  c->load_state({{"w", at::zeros({4})}, {"mean", at::zeros({2})}, {"count", at::zeros({}, at::kLong)}});
  EXPECT_NE(vexp::testing::error_of([&] { c->start(ctx_of(m, 0)); }).find("another shape"), std::string::npos);
}

TEST(HookEma, EvaluatesAndSavesUnderItsName) {
  Model m;
  auto h = ema({{"decay", Value(0.5)}, {"name", Value("ema_slow")}});
  h->start(ctx_of(m, 0));
  m.set({2, 2, 2}, {0, 0}, 0);
  h->after_step(ctx_of(m, 1));
  vexp::HookContext c = ctx_of(m, 1);
  std::map<std::string, at::Tensor> evaluated;
  std::map<std::string, double> added;
  c.evaluate = [&](const std::map<std::string, at::Tensor>& w) {
    evaluated = w;
    return std::map<std::string, double>{{"top1", 0.25}, {"top5", 0.75}, {"val_loss", 1.5}};
  };
  c.add_metric = [&](const std::string& n, double v) { added[n] = v; };
  h->after_eval(c);
  EXPECT_EQ(added, (std::map<std::string, double>{{"ema_slow_top1", 0.25}, {"ema_slow_top5", 0.75}, {"ema_slow_loss", 1.5}}));
  ASSERT_EQ(evaluated.size(), 3u);
  expect_near(evaluated.at("w"), {2, 2, 2}, 0, "evaluated");
  std::string tag;
  c.save_weights = [&](const std::string& t, const std::map<std::string, at::Tensor>& w) {
    tag = t;
    EXPECT_EQ(w.size(), 3u);
    return std::string("x");
  };
  h->at_checkpoint(c);
  EXPECT_EQ(tag, "ema_slow");
  // evaluate = false: no evaluation.
  auto q = ema({{"evaluate", Value(false)}});
  q->start(ctx_of(m, 0));
  added.clear();
  q->after_eval(c);
  EXPECT_TRUE(added.empty());
}

TEST(HookEma, RefusesANameThatIsNotAWord) {
  const std::string m = vexp::testing::error_of([] { ema({{"name", Value("a/b")}}); });
  EXPECT_NE(m.find("name: 'a/b' is not a name of letters, digits and '_'"), std::string::npos) << m;
}

}  // namespace
