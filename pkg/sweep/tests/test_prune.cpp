// The median pruning rule (prune_reason): its outcome must not depend on how often
// the driver polls a trial's metrics.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "vexp/sweep/directory.hpp"

namespace {

using vexp::sweep::Definition;
using vexp::sweep::prune_reason;
using Curve = std::map<int64_t, double>;

Definition loss_rule(int64_t after, int64_t min_trials) {
  Definition d;
  d.metric = "val_loss";
  d.direction = "min";
  d.prune_after = after;
  d.prune_min_trials = min_trials;
  return d;
}

TEST(SweepPrune, TwoEpochsInOnePollAreJudgedInOrder) {
  const Definition d = loss_rule(1, 1);
  const std::map<int64_t, Curve> finished{{1, {{1, 1.39}, {2, 1.38}, {3, 1.37}}}};
  // Polled once per epoch: pruned after epoch 1.
  int64_t checked = 0;
  EXPECT_EQ(prune_reason(d, {{1, 1e11}}, finished, checked).rfind("pruned after epoch 1: val_loss 1e+11", 0), 0u);
  EXPECT_EQ(checked, 1);
  // The same trial polled once after epoch 2 (a fast trial): the same decision.
  checked = 0;
  EXPECT_EQ(prune_reason(d, {{1, 1e11}, {2, 1e8}}, finished, checked).rfind("pruned after epoch 1:", 0), 0u);
  // A trial that was bad at epoch 1 only is pruned at epoch 1 either way; one that is
  // good at every epoch is kept and every epoch is judged once.
  checked = 0;
  EXPECT_EQ(prune_reason(d, {{1, 1.0}, {2, 1.0}}, finished, checked), "");
  EXPECT_EQ(checked, 2);
  EXPECT_EQ(prune_reason(d, {{1, 1e11}, {2, 1.0}}, finished, checked), "") << "epochs 1 and 2 were judged already";
  EXPECT_EQ(prune_reason(d, {{1, 1.0}, {2, 1.0}, {3, 9.0}}, finished, checked).rfind("pruned after epoch 3:", 0), 0u);
}

TEST(SweepPrune, EpochsBeforeAfterEpochsAndTooFewTrialsKeepTheTrial) {
  const std::map<int64_t, Curve> finished{{1, {{1, 1.0}, {2, 1.0}, {3, 1.0}}}, {2, {{1, 2.0}, {2, 2.0}}}};
  int64_t checked = 0;
  EXPECT_EQ(prune_reason(loss_rule(2, 1), {{1, 50.0}}, finished, checked), "") << "epoch 1 comes before after_epochs 2";
  EXPECT_EQ(prune_reason(loss_rule(2, 1), {{1, 50.0}, {2, 50.0}}, finished, checked).rfind("pruned after epoch 2:", 0),
            0u);
  // Epoch 3: one finished trial has it, two are needed.
  checked = 0;
  EXPECT_EQ(prune_reason(loss_rule(3, 2), {{1, 50.0}, {2, 50.0}, {3, 50.0}}, finished, checked), "");
  // The median of two is their mean (1.5); "max" flips the comparison.
  checked = 0;
  Definition top = loss_rule(1, 2);
  top.direction = "max";
  top.metric = "top1";
  EXPECT_EQ(prune_reason(top, {{1, 1.6}}, finished, checked), "");
  checked = 0;
  EXPECT_NE(prune_reason(top, {{1, 1.4}}, finished, checked).find("top1 1.4 is worse than the median 1.5 of 2"),
            std::string::npos);
}

}  // namespace
