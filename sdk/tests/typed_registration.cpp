// Compiled (not linked) by check_typed_registration.cmake: with WRONG defined,
// add_dataset is given a factory that makes a vexp::Layer and must not compile;
// without it, the same factory through add_op must (the control). Torch-free
// (registrar.hpp declares the interfaces), so the check takes a second.
#include <memory>

#include "vexp/registrar.hpp"

void register_it(vexp::Registrar& registrar) {
  vexp::PluginDecl d;
  d.name = "identity";
  auto make_layer = [](const vexp::Params&) { return std::shared_ptr<vexp::Layer>(); };
#ifdef WRONG
  registrar.add_dataset(std::move(d), make_layer);
#else
  registrar.add_op(std::move(d), make_layer);
#endif
}
