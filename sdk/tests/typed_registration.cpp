// Compiled (not linked) by check_typed_registration.cmake: with WRONG defined,
// add_dataset is given a factory that makes a Layer and must not compile; without
// it, the same factory through add_op must (the control).
#include <memory>

#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace {
struct Identity : vexp::Layer {
  at::Tensor forward(const std::vector<at::Tensor>& in, const vexp::ForwardContext&) override { return in.at(0); }
};
}  // namespace

void register_it(vexp::Registrar& registrar) {
  vexp::PluginDecl d;
  d.name = "identity";
#ifdef WRONG
  registrar.add_dataset(std::move(d), [](const vexp::Params&) { return std::make_shared<Identity>(); });
#else
  registrar.add_op(std::move(d), [](const vexp::Params&) { return std::make_shared<Identity>(); });
#endif
}
