#include "vexp/comm.hpp"

#include <cstdio>
#include <cstdlib>

namespace vexp {
namespace {
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};
}  // namespace

std::shared_ptr<Work> Comm::allreduce_async(at::Tensor t, ReduceOp op) {
  allreduce(t, op);
  return std::make_shared<DoneWork>();
}

void Comm::set_watchdog(double /*timeout_s*/, std::function<void(const std::string&)> /*report*/) {}

void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace vexp
