#include "vexp/comm.hpp"

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

}  // namespace vexp
