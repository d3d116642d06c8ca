// Registration: what a plugin's register function calls. Torch-free, so plugin
// fixtures and kinds without tensors need no torch at all.
//
//   VEXP_PLUGIN("my_ops", "0.1.0") {
//     vexp::PluginDecl d("my_op", "What it does, in one line.");
//     d.schema.integer("k", 3, "Kernel size").range(1, 15);
//     registrar.add_op(std::move(d), [](const vexp::Params& p) { return std::make_shared<MyOp>(p); });
//   }
//
// One call per kind (add_op, add_backbone, add_dataset, add_comm, add_optimizer,
// add_loss, add_transform, add_batch_transform, add_hook; vexp/kinds.hpp is the table): a factory that makes the wrong interface does not compile, and
// the host refuses a raw add_entry whose interface is not what its kind makes.
#pragma once

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "vexp/build_tag.hpp"
#include "vexp/schema/catalog.hpp"
#include "vexp/kinds.hpp"
#include "vexp/plugin_abi.h"

namespace vexp {

using schema::Params;
using schema::PluginDecl;
using schema::Schema;
using schema::Shape;
using schema::ShapeError;

// A factory's result, type-erased; `object` points at the interface (Layer,
// Dataset, Comm) the registration names, never at a derived class.
struct Made {
  std::shared_ptr<void> object;
  std::string error;  // non-empty: the factory failed (object is null)
};
using ErasedFactory = std::function<Made(const Params&)>;

// One registration as it crosses the library boundary.
struct Registration {
  Interface interface = Interface::Layer;  // what `factory` makes
  PluginDecl decl;                         // decl.kind must make `interface`
  ErasedFactory factory;
  // since plugin ABI 6, datasets only: a Dataset made from the same parameters
  // without the data its lists name (no list file is read, the root need not
  // exist), used for Dataset::file_views alone (`vexp predict` on a machine without
  // the dataset). Empty: the factory's dataset reads the files.
  ErasedFactory file_reader;
};

class Registrar {
 public:
  virtual ~Registrar() = default;

  // The single ABI call every typed one below ends in. The host refuses (throws)
  // an entry whose kind it does not know or whose kind makes another interface.
  virtual void add_entry(Registration entry) = 0;

  // Typed registration, compiled into the plugin. `factory(const Params&)` returns
  // std::shared_ptr<T>, T derived from the kind's interface. Exceptions thrown by
  // the factory or the hooks are caught here, on the plugin's side, and handed over
  // as values (factory) or as vexp::schema::ShapeError / std::runtime_error (hooks).
  template <class Factory>
  void add_op(PluginDecl decl, Factory factory) {
    add_typed<Layer>("op", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_backbone(PluginDecl decl, Factory factory) {
    add_typed<Layer>("backbone", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_dataset(PluginDecl decl, Factory factory) {
    add_typed<Dataset>("dataset", std::move(decl), std::move(factory));
  }
  // since plugin ABI 6: with a file reader (Registration::file_reader), a factory
  // of the same shape whose Dataset needs only file_views to work.
  template <class Factory, class ReaderFactory>
  void add_dataset(PluginDecl decl, Factory factory, ReaderFactory file_reader) {
    add_typed<Dataset>("dataset", std::move(decl), std::move(factory), erase<Dataset>(std::move(file_reader)));
  }
  template <class Factory>
  void add_comm(PluginDecl decl, Factory factory) {
    add_typed<Comm>("comm", std::move(decl), std::move(factory));
  }
  // since plugin ABI 5: the training parts (include the interface's header)
  template <class Factory>
  void add_optimizer(PluginDecl decl, Factory factory) {
    add_typed<Optimizer>("optimizer", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_loss(PluginDecl decl, Factory factory) {
    add_typed<Loss>("loss", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_transform(PluginDecl decl, Factory factory) {
    add_typed<ClipTransform>("transform", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_batch_transform(PluginDecl decl, Factory factory) {
    add_typed<BatchTransform>("batch_transform", std::move(decl), std::move(factory));
  }
  template <class Factory>
  void add_hook(PluginDecl decl, Factory factory) {
    add_typed<Hook>("hook", std::move(decl), std::move(factory));
  }

 private:
  template <class Interface_, class Factory>
  void add_typed(const char* kind, PluginDecl decl, Factory factory, ErasedFactory file_reader = {}) {
    decl.kind = kind;
    wrap_hooks(decl);
    add_entry(Registration{InterfaceOf<Interface_>::value, std::move(decl), erase<Interface_>(std::move(factory)),
                           std::move(file_reader)});
  }

  // The factory as a value: exceptions become Made::error, on the plugin's side.
  template <class Interface_, class Factory>
  static ErasedFactory erase(Factory factory) {
    using Result = std::decay_t<decltype(factory(std::declval<const Params&>()))>;
    static_assert(std::is_convertible<Result, std::shared_ptr<Interface_>>::value,
                  "vexp plugin registration: the factory must return std::shared_ptr<T> with T derived from the "
                  "interface this kind makes (add_op, add_backbone: vexp::Layer; add_dataset: vexp::Dataset; "
                  "add_comm: vexp::Comm; add_optimizer: vexp::Optimizer; add_loss: vexp::Loss; add_transform: "
                  "vexp::ClipTransform; add_batch_transform: vexp::BatchTransform; add_hook: vexp::Hook)");
    return [factory](const Params& p) -> Made {
      try {
        std::shared_ptr<Interface_> obj = factory(p);
        if (!obj) return {nullptr, "factory returned nothing"};
        return {std::static_pointer_cast<void>(std::move(obj)), {}};
      } catch (const std::exception& e) {
        return {nullptr, e.what()};
      } catch (...) {
        return {nullptr, "unknown exception"};
      }
    };
  }

  static void wrap_hooks(PluginDecl& d) {
    if (auto f = d.infer_shape) {
      d.infer_shape = [f](const Params& p, const std::vector<Shape>& in, const schema::GraphContext& c) {
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
