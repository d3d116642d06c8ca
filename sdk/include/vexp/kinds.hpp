// The plugin kinds and the interface each kind's objects implement: the one
// table both sides read. Torch-free (the recipe front end reads it too).
//
// A registration carries the interface its factory makes; the host refuses one
// whose kind makes another interface (at load time) and PluginHost::make<T>
// refuses to hand out an object as an interface it does not implement.
// Both the enum values and the table are part of the plugin ABI: append only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp {

class Layer;
class Dataset;
class Comm;
class Optimizer;
class Loss;
class ClipTransform;
class BatchTransform;
class Hook;

// Which C++ interface a factory makes. The values cross the library boundary.
enum class Interface : uint32_t {
  Layer = 1,    // vexp::Layer (vexp/layer.hpp)
  Dataset = 2,  // vexp::Dataset (vexp/dataset.hpp)
  Comm = 3,     // vexp::Comm (vexp/comm.hpp)
  // since plugin ABI 5: the training parts
  Optimizer = 4,       // vexp::Optimizer (vexp/optimizer.hpp)
  Loss = 5,            // vexp::Loss (vexp/loss.hpp)
  ClipTransform = 6,   // vexp::ClipTransform (vexp/transform.hpp)
  BatchTransform = 7,  // vexp::BatchTransform (vexp/transform.hpp)
  Hook = 8,            // vexp::Hook (vexp/hook.hpp)
};

// InterfaceOf<T>::value: the id of a plugin interface. Not defined for any other
// type, so asking the host for a type that no kind makes does not compile.
template <class T>
struct InterfaceOf;
// Each interface, named once: its type and its Interface id have the same name
// (VEXP_EACH_INTERFACE(X) calls X(Name) for every one).
#define VEXP_EACH_INTERFACE(X) \
  X(Layer) X(Dataset) X(Comm) X(Optimizer) X(Loss) X(ClipTransform) X(BatchTransform) X(Hook)
#define VEXP_INTERFACE_OF(T)                           \
  template <>                                          \
  struct InterfaceOf<T> {                              \
    static constexpr Interface value = Interface::T;   \
  };
VEXP_EACH_INTERFACE(VEXP_INTERFACE_OF)
#undef VEXP_INTERFACE_OF

struct PluginKind {
  const char* kind;
  Interface interface;
};

// Every kind this vexp knows, with the interface its plugins make. A new kind is
// appended here, with its Registrar::add_<kind> call.
inline constexpr PluginKind kPluginKinds[] = {
    {"op", Interface::Layer},
    {"backbone", Interface::Layer},
    {"dataset", Interface::Dataset},
    {"comm", Interface::Comm},
    {"optimizer", Interface::Optimizer},
    {"loss", Interface::Loss},
    {"transform", Interface::ClipTransform},
    {"batch_transform", Interface::BatchTransform},
    {"hook", Interface::Hook},
};

// "vexp::Layer", ...; an id this vexp does not know reads "interface #N".
inline std::string interface_name(Interface i) {
  switch (i) {
#define VEXP_INTERFACE_CASE(T) \
  case Interface::T:           \
    return "vexp::" #T;
    VEXP_EACH_INTERFACE(VEXP_INTERFACE_CASE)
#undef VEXP_INTERFACE_CASE
  }
  return "interface #" + std::to_string(static_cast<uint32_t>(i));
}

// The kind's entry, or nullptr when this vexp does not know the kind.
inline const PluginKind* find_plugin_kind(const std::string& kind) {
  for (const auto& k : kPluginKinds)
    if (kind == k.kind) return &k;
  return nullptr;
}

// The kinds whose plugins make `i`, in table order ("op", "backbone" for Layer).
inline std::vector<std::string> kinds_making(Interface i) {
  std::vector<std::string> out;
  for (const auto& k : kPluginKinds)
    if (k.interface == i) out.emplace_back(k.kind);
  return out;
}

// "op, backbone, dataset, comm, optimizer, ..."
inline std::string known_plugin_kinds() {
  std::string out;
  for (const auto& k : kPluginKinds) out += (out.empty() ? "" : ", ") + std::string(k.kind);
  return out;
}

}  // namespace vexp
