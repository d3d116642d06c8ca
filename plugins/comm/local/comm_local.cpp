// comm/local: the world of one process. Collectives are identities (a sum, mean or
// max over one rank is the tensor itself), so single-process runs take the same
// code path as distributed ones without a special case in the trainer.
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

#include "vexp/comm.hpp"
#include "vexp/registrar.hpp"

namespace {

void require_defined(const at::Tensor& t, const char* what) {
  if (!t.defined()) throw std::invalid_argument(std::string("comm local: ") + what + " of an undefined tensor");
}

class LocalComm final : public vexp::Comm {
 public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void allreduce(at::Tensor& t, vexp::ReduceOp /*op*/) override { require_defined(t, "allreduce"); }

  void broadcast(at::Tensor& t, int root) override {
    require_defined(t, "broadcast");
    if (root != 0)
      throw std::out_of_range("comm local: broadcast from root " + std::to_string(root) +
                              ", but the only rank is 0 (world size 1)");
  }

  at::Tensor allgather(const at::Tensor& t) override {
    require_defined(t, "allgather");
    return t.unsqueeze(0).clone();
  }

  void barrier() override {}
};

}  // namespace

VEXP_PLUGIN("comm_local", "0.1.0") {
  vexp::PluginDecl d("local", "Single process (rank 0 of 1): collectives leave tensors unchanged");
  registrar.add_comm(std::move(d), [](const vexp::Params&) { return std::make_shared<LocalComm>(); });
}
