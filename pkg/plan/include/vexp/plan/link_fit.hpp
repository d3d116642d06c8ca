// The intra-node link of `vexp plan --measure-local`: latency and bandwidth from
// allreduce times at several sizes. Torch-free and CLI-free, so that it is tested on
// recorded timings (tests/plan/test_link_fit.cpp) rather than on a live machine.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace vexp::plan {

struct LinkFit {
  double latency_us = 0, bandwidth_GBps = 0;
  // False when the times did not grow with size (a busy machine): the figures
  // then come from the largest and smallest sizes alone, and `how` says so.
  bool fitted = true;
  std::string how;
};

// A ring allreduce of n ranks takes t(S) = 2(n-1) latency + 2(n-1)/n S / bandwidth.
// `bytes_s`: (bytes, seconds) per size, two or more different sizes, times > 0
// (std::invalid_argument otherwise). The line t = a + b S is fitted by least
// squares on the relative error; when its slope is not positive the bandwidth is
// that of the largest size alone and the latency half the smallest size's time.
// Both figures are always finite and positive.
LinkFit fit_ring(const std::vector<std::pair<double, double>>& bytes_s, int n);

}  // namespace vexp::plan
