// Registration: what a plugin's register function calls. Torch-free, so plugin
// fixtures and kinds without tensors need no torch at all.
//
//   VEXP_PLUGIN("my_ops", "0.1.0") {
//     vexp::dsl::PluginDecl d;
//     d.name = "my_op"; d.doc = "What it does, in one line.";
//     d.schema.integer("k", 3, "Kernel size").range(1, 15);
//     registrar.add<vexp::Layer>("op", std::move(d),
//                                [](const vexp::Params& p) { return std::make_shared<MyOp>(p); });
//   }
#pragma once

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "vexp/build_tag.hpp"
#include "vexp/dsl/catalog.hpp"
#include "vexp/plugin_abi.h"

namespace vexp {

using dsl::Params;
using dsl::PluginDecl;
using dsl::Schema;
using dsl::Shape;
using dsl::ShapeError;

// A factory's result, type-erased so that adding a kind never changes the ABI.
struct Made {
  std::shared_ptr<void> object;
  std::string error;  // non-empty: the factory failed (object is null)
};
using ErasedFactory = std::function<Made(const Params&)>;

class Registrar {
 public:
  virtual ~Registrar() = default;

  // The single ABI-stable call: registers a plugin of any kind.
  virtual void add_entry(PluginDecl decl, ErasedFactory factory) = 0;

  // Convenience compiled into the plugin: exceptions thrown by the factory or the
  // hooks are caught here, on the plugin's side, and handed over as values
  // (factory) or as vexp::dsl::ShapeError / std::runtime_error (hooks).
  template <class Interface, class Factory>
  void add(const std::string& kind, PluginDecl decl, Factory factory) {
    decl.kind = kind;
    wrap_hooks(decl);
    ErasedFactory erased = [factory](const Params& p) -> Made {
      try {
        std::shared_ptr<Interface> obj = factory(p);
        if (!obj) return {nullptr, "factory returned nothing"};
        return {std::static_pointer_cast<void>(obj), {}};
      } catch (const std::exception& e) {
        return {nullptr, e.what()};
      } catch (...) {
        return {nullptr, "unknown exception"};
      }
    };
    add_entry(std::move(decl), std::move(erased));
  }

 private:
  static void wrap_hooks(PluginDecl& d) {
    if (auto f = d.infer_shape) {
      d.infer_shape = [f](const Params& p, const std::vector<Shape>& in, const dsl::GraphContext& c) {
        try { return f(p, in, c); }
        catch (const ShapeError&) { throw; }
        catch (const std::exception& e) { throw ShapeError(e.what()); }
        catch (...) { throw ShapeError("unknown exception in shape inference"); }
      };
    }
    if (auto f = d.point_shape) {
      d.point_shape = [f](const Params& p, const std::string& point, const Shape& in) {
        try { return f(p, point, in); }
        catch (const ShapeError&) { throw; }
        catch (const std::exception& e) { throw ShapeError(e.what()); }
        catch (...) { throw ShapeError("unknown exception in shape inference"); }
      };
    }
    if (auto f = d.insertion_points) {
      d.insertion_points = [f](const Params& p) {
        try { return f(p); }
        catch (const std::exception& e) { throw std::runtime_error(e.what()); }
        catch (...) { throw std::runtime_error("unknown exception listing insertion points"); }
      };
    }
    if (auto f = d.check_data) {
      d.check_data = [f](const Params& p) {
        try { f(p); }
        catch (const std::exception& e) { throw std::runtime_error(e.what()); }
        catch (...) { throw std::runtime_error("unknown exception checking the data"); }
      };
    }
    if (auto f = d.dataset_facts) {
      d.dataset_facts = [f](const Params& p) {
        try { return f(p); }
        catch (const std::exception& e) { throw std::runtime_error(e.what()); }
        catch (...) { throw std::runtime_error("unknown exception in dataset facts"); }
      };
    }
  }
};

namespace detail {
template <void (*Register)(Registrar&)>
int register_trampoline(Registrar* r, char* err, size_t err_len) {
  auto fail = [&](const char* msg) {
    if (err && err_len) {
      std::strncpy(err, msg, err_len - 1);
      err[err_len - 1] = '\0';
    }
    return 1;
  };
  try {
    Register(*r);
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown exception during registration");
  }
}
}  // namespace detail

}  // namespace vexp

#define VEXP_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

// Defines the library's entry point and opens the body of its register function,
// in which `registrar` (a vexp::Registrar&) is in scope.
#define VEXP_PLUGIN(NAME, VERSION)                                                     \
  static void vexp_register_all_(::vexp::Registrar& registrar);                         \
  VEXP_PLUGIN_EXPORT const VexpPluginInfo* vexp_plugin_info() {                         \
    static const VexpPluginInfo info{VEXP_PLUGIN_ABI_VERSION,                           \
                                     static_cast<uint32_t>(sizeof(VexpPluginInfo)),     \
                                     NAME, VERSION, VEXP_BUILD_TAG,                     \
                                     &::vexp::detail::register_trampoline<&vexp_register_all_>}; \
    return &info;                                                                       \
  }                                                                                     \
  static void vexp_register_all_(::vexp::Registrar& registrar)
