// The plugin ABI pin: sizes, field offsets and virtual-function slots of every
// type that crosses the boundary between vexp and a plugin library, recorded for
// each VEXP_PLUGIN_ABI_VERSION, with the mangled names of a few of them (their
// namespace). A layout or name change fails here until the version is
// raised in plugin_abi.h (with a line of history) and the new layout pinned below.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <typeinfo>
#include <vector>

#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"
#include "vexp/hook.hpp"
#include "vexp/layer.hpp"
#include "vexp/loss.hpp"
#include "vexp/optimizer.hpp"
#include "vexp/plugin_abi.h"
#include "vexp/registrar.hpp"
#include "vexp/transform.hpp"

namespace {

// ---- measuring ----

// Offset of a data member, measured on a value-initialised object (offsetof is
// not defined for classes that are not standard-layout, e.g. with std::function).
template <class T, class M>
size_t offset_of(M T::*member) {
  static const T object{};
  return static_cast<size_t>(reinterpret_cast<const char*>(&(object.*member)) -
                             reinterpret_cast<const char*>(&object));
}

// The vtable slot of a virtual member function (Itanium C++ ABI: a pointer to a
// virtual member holds its byte offset into the vtable, marked by a set bit).
template <class PMF>
long slot_of(PMF pmf) {
  struct Rep {
    uintptr_t ptr;
    ptrdiff_t adj;
  } rep;
  static_assert(sizeof(PMF) == sizeof(Rep), "not an Itanium pointer to member function");
  std::memcpy(&rep, &pmf, sizeof rep);
#if defined(__aarch64__) || defined(__arm__)
  if (!(rep.adj & 1)) return -1;
  return static_cast<long>(rep.ptr / sizeof(void*));
#else
  if (!(rep.ptr & 1)) return -1;
  return static_cast<long>((rep.ptr - 1) / sizeof(void*));
#endif
}

struct Line {
  std::string text;
  explicit Line(const std::string& type) : text(type) {}
  Line(const std::string& type, size_t size) : text(type + " size=" + std::to_string(size)) {}
  Line& o(const char* name, size_t offset) {
    text += std::string(" ") + name + "@" + std::to_string(offset);
    return *this;
  }
  template <class T, class M>
  Line& f(const char* name, M T::*member) {
    text += std::string(" ") + name + "@" + std::to_string(offset_of(member));
    return *this;
  }
  template <class PMF>
  Line& v(const char* name, PMF pmf) {
    text += std::string(" ") + name + "#" + std::to_string(slot_of(pmf));
    return *this;
  }
  Line& slot(const char* name, long index) {
    text += std::string(" ") + name + "#" + std::to_string(index);
    return *this;
  }
  Line& t(const char* name, const std::type_info& type) {
    text += std::string(" ") + name + "=" + type.name();
    return *this;
  }
  Line& n(const char* name, long value) {
    text += std::string(" ") + name + "=" + std::to_string(value);
    return *this;
  }
};

// One virtual method appended to T: its slot is the number of slots T has, so
// a virtual method appended to T (not only one inserted) changes the pin.
template <class T>
struct SlotProbe : T {
  virtual void vexp_abi_probe_() = 0;
};
template <class T>
long slots_of() {
  return slot_of(&SlotProbe<T>::vexp_abi_probe_);
}

std::vector<std::string> measured() {
  using namespace vexp;
  using schema::DatasetFacts;
  using schema::GraphContext;
  std::vector<Line> l;
  // The C entry point.
  l.push_back(Line("VexpPluginInfo", sizeof(VexpPluginInfo))
                  .o("abi_version", offsetof(VexpPluginInfo, abi_version))
                  .o("struct_size", offsetof(VexpPluginInfo, struct_size))
                  .o("name", offsetof(VexpPluginInfo, name))
                  .o("version", offsetof(VexpPluginInfo, version))
                  .o("build_tag", offsetof(VexpPluginInfo, build_tag))
                  .o("register_all", offsetof(VexpPluginInfo, register_all)));
  // Registration.
  l.push_back(Line("Registration", sizeof(Registration))
                  .f("interface", &Registration::interface)
                  .f("decl", &Registration::decl)
                  .f("factory", &Registration::factory)
                  .f("file_reader", &Registration::file_reader));
  l.push_back(Line("Made", sizeof(Made)).f("object", &Made::object).f("error", &Made::error));
  l.push_back(Line("ErasedFactory", sizeof(ErasedFactory)));
  l.push_back(Line("Interface", sizeof(Interface))
                  .n("Layer", static_cast<long>(Interface::Layer))
                  .n("Dataset", static_cast<long>(Interface::Dataset))
                  .n("Comm", static_cast<long>(Interface::Comm))
                  .n("Optimizer", static_cast<long>(Interface::Optimizer))
                  .n("Loss", static_cast<long>(Interface::Loss))
                  .n("ClipTransform", static_cast<long>(Interface::ClipTransform))
                  .n("BatchTransform", static_cast<long>(Interface::BatchTransform))
                  .n("Hook", static_cast<long>(Interface::Hook)));
  l.push_back(Line("Registrar", sizeof(Registrar)).v("add_entry", &Registrar::add_entry).n("slots", slots_of<Registrar>()));
  // The declaration and what its hooks take and give.
  l.push_back(Line("PluginDecl", sizeof(PluginDecl))
                  .f("kind", &PluginDecl::kind)
                  .f("name", &PluginDecl::name)
                  .f("doc", &PluginDecl::doc)
                  .f("library", &PluginDecl::library)
                  .f("library_version", &PluginDecl::library_version)
                  .f("schema", &PluginDecl::schema)
                  .f("insertion_points", &PluginDecl::insertion_points)
                  .f("infer_shape", &PluginDecl::infer_shape)
                  .f("point_shape", &PluginDecl::point_shape)
                  .f("dataset_facts", &PluginDecl::dataset_facts)
                  .f("check_data", &PluginDecl::check_data)
                  .f("head_parameters", &PluginDecl::head_parameters));
  l.push_back(Line("GraphContext", sizeof(GraphContext))
                  .f("batch", &GraphContext::batch)
                  .f("frames", &GraphContext::frames)
                  .f("classes", &GraphContext::classes));
  l.push_back(Line("DatasetFacts", sizeof(DatasetFacts)).f("clip", &DatasetFacts::clip).f("classes", &DatasetFacts::classes));
  l.push_back(Line("Shape", sizeof(Shape)));
  l.push_back(Line("Schema", sizeof(Schema)));
  l.push_back(Line("ParamSpec", sizeof(schema::ParamSpec)));
  l.push_back(Line("Params", sizeof(Params)));
  l.push_back(Line("Value", sizeof(schema::Value)));
  l.push_back(Line("Loc", sizeof(schema::Loc)));
  // Layers.
  l.push_back(Line("ForwardContext", sizeof(ForwardContext))
                  .f("batch", &ForwardContext::batch)
                  .f("frames", &ForwardContext::frames));
  // Layer derives torch::nn::Module (its slots come first and follow the torch
  // version, which the build tag pins): Layer's own slots are counted from build.
  {
    const long base = slot_of(&Layer::build);
    l.push_back(Line("Layer")
                    .slot("build", slot_of(&Layer::build) - base)
                    .slot("forward", slot_of(&Layer::forward) - base)
                    .slot("insert", slot_of(&Layer::insert) - base)
                    .n("own_slots", slots_of<Layer>() - base));
  }
  // Datasets.
  l.push_back(Line("Sample", sizeof(Sample)).f("clip", &Sample::clip).f("label", &Sample::label));
  l.push_back(Line("ItemReport", sizeof(ItemReport))
                  .f("path", &ItemReport::path)
                  .f("label", &ItemReport::label)
                  .f("listed_frames", &ItemReport::listed_frames)
                  .f("frames", &ItemReport::frames)
                  .f("error", &ItemReport::error));
  l.push_back(Line("Split", sizeof(Split)).n("Train", static_cast<long>(Split::Train)).n("Val", static_cast<long>(Split::Val)));
  l.push_back(Line("Dataset", sizeof(Dataset))
                  .v("size", &Dataset::size)
                  .v("get", &Dataset::get)
                  .v("num_classes", &Dataset::num_classes)
                  .v("class_names", &Dataset::class_names)
                  .v("views", &Dataset::views)
                  .v("get_view", &Dataset::get_view)
                  .v("skipped_samples", &Dataset::skipped_samples)
                  .v("inspect", &Dataset::inspect)
                  .v("bad_items", &Dataset::bad_items)
                  .v("set_transforms", &Dataset::set_transforms)
                  .v("default_transforms", &Dataset::default_transforms)
                  .v("file_views", &Dataset::file_views)
                  .n("slots", slots_of<Dataset>()));
  l.push_back(Line("FileViewRequest", sizeof(FileViewRequest))
                  .f("path", &FileViewRequest::path)
                  .f("clip", &FileViewRequest::clip)
                  .f("short_side", &FileViewRequest::short_side));
  l.push_back(Line("FileViews", sizeof(FileViews)).f("clips", &FileViews::clips).f("how", &FileViews::how));
  // Communication.
  l.push_back(Line("ReduceOp", sizeof(ReduceOp))
                  .n("Sum", static_cast<long>(ReduceOp::Sum))
                  .n("Avg", static_cast<long>(ReduceOp::Avg))
                  .n("Max", static_cast<long>(ReduceOp::Max)));
  l.push_back(Line("Work", sizeof(Work)).v("wait", &Work::wait).v("done", &Work::done).n("slots", slots_of<Work>()));
  l.push_back(Line("Comm", sizeof(Comm))
                  .v("name", &Comm::name)
                  .v("rank", &Comm::rank)
                  .v("size", &Comm::size)
                  .v("allreduce", &Comm::allreduce)
                  .v("broadcast", &Comm::broadcast)
                  .v("allgather", &Comm::allgather)
                  .v("barrier", &Comm::barrier)
                  .v("allreduce_async", &Comm::allreduce_async)
                  .v("set_watchdog", &Comm::set_watchdog)
                  .v("abort", &Comm::abort)
                  .n("slots", slots_of<Comm>()));
  // The training parts (since ABI 5).
  l.push_back(Line("ParamGroup", sizeof(ParamGroup))
                  .f("name", &ParamGroup::name)
                  .f("lr_mult", &ParamGroup::lr_mult)
                  .f("weight_decay", &ParamGroup::weight_decay)
                  .f("names", &ParamGroup::names)
                  .f("params", &ParamGroup::params));
  l.push_back(Line("Optimizer", sizeof(Optimizer))
                  .v("set_groups", &Optimizer::set_groups)
                  .v("step", &Optimizer::step)
                  .v("state", &Optimizer::state)
                  .v("load_state", &Optimizer::load_state)
                  .n("slots", slots_of<Optimizer>()));
  // (.t: the virtuals' signatures, so that a parameter change fails too)
  l.push_back(Line("Loss", sizeof(Loss))
                  .v("forward", &Loss::forward)
                  .v("soft_targets", &Loss::soft_targets)
                  .n("slots", slots_of<Loss>())
                  .t("forward", typeid(&Loss::forward))
                  .t("soft_targets", typeid(&Loss::soft_targets)));
  l.push_back(Line("ClipGeometry", sizeof(ClipGeometry))
                  .f("src_w", &ClipGeometry::src_w)
                  .f("src_h", &ClipGeometry::src_h)
                  .f("x", &ClipGeometry::x)
                  .f("y", &ClipGeometry::y)
                  .f("w", &ClipGeometry::w)
                  .f("h", &ClipGeometry::h)
                  .f("out_w", &ClipGeometry::out_w)
                  .f("out_h", &ClipGeometry::out_h)
                  .f("flip", &ClipGeometry::flip));
  l.push_back(Line("TransformContext", sizeof(TransformContext))
                  .f("train", &TransformContext::train)
                  .f("index", &TransformContext::index)
                  .f("view", &TransformContext::view)
                  .f("views", &TransformContext::views));
  l.push_back(Line("TransformSpec", sizeof(TransformSpec))
                  .f("type", &TransformSpec::type)
                  .f("params", &TransformSpec::params));
  l.push_back(Line("ClipTransform", sizeof(ClipTransform))
                  .v("stages", &ClipTransform::stages)
                  .v("views", &ClipTransform::views)
                  .v("check", &ClipTransform::check)
                  .v("geometry", &ClipTransform::geometry)
                  .v("pixels", &ClipTransform::pixels)
                  .n("Geometry", ClipTransform::kGeometry)
                  .n("Pixels", ClipTransform::kPixels)
                  .n("slots", slots_of<ClipTransform>()));
  l.push_back(Line("BatchContext", sizeof(BatchContext))
                  .f("step", &BatchContext::step)
                  .f("steps", &BatchContext::steps)
                  .f("epoch", &BatchContext::epoch)
                  .f("micro_batch", &BatchContext::micro_batch));
  l.push_back(Line("BatchTransform", sizeof(BatchTransform))
                  .v("apply", &BatchTransform::apply)
                  .n("slots", slots_of<BatchTransform>())
                  .t("apply", typeid(&BatchTransform::apply)));
  l.push_back(Line("HookContext", sizeof(HookContext))
                  .f("model", &HookContext::model)
                  .f("run_dir", &HookContext::run_dir)
                  .f("step", &HookContext::step)
                  .f("epoch", &HookContext::epoch)
                  .f("epoch_step", &HookContext::epoch_step)
                  .f("epochs", &HookContext::epochs)
                  .f("rank", &HookContext::rank)
                  .f("ranks", &HookContext::ranks)
                  .f("world", &HookContext::world)
                  .f("logged", &HookContext::logged)
                  .f("metrics", &HookContext::metrics)
                  .f("add_metric", &HookContext::add_metric)
                  .f("evaluate", &HookContext::evaluate)
                  .f("checkpoint", &HookContext::checkpoint)
                  .f("save_weights", &HookContext::save_weights));
  l.push_back(Line("Hook", sizeof(Hook))
                  .v("start", &Hook::start)
                  .v("after_step", &Hook::after_step)
                  .v("after_eval", &Hook::after_eval)
                  .v("at_checkpoint", &Hook::at_checkpoint)
                  .v("at_end", &Hook::at_end)
                  .v("state", &Hook::state)
                  .v("load_state", &Hook::load_state)
                  .n("slots", slots_of<Hook>()));
  // Mangled names: a type's namespace is in every symbol that names it and in its
  // type_info (what a catch across the boundary compares), so a rename is a change.
  l.push_back(Line("Names")
                  .t("PluginDecl", typeid(PluginDecl))
                  .t("ShapeError", typeid(ShapeError))
                  .t("Value", typeid(schema::Value))
                  .t("Registrar", typeid(Registrar))
                  .t("Dataset", typeid(Dataset)));
  std::vector<std::string> out;
  for (auto& line : l) out.push_back(line.text);
  return out;
}

// ---- the pins: one table per ABI version (x86-64 Linux, libstdc++) ----
const std::map<unsigned, std::vector<std::string>>& pins() {
  static const std::map<unsigned, std::vector<std::string>> p = {
      {3u,
       {
           "VexpPluginInfo size=40 abi_version@0 struct_size@4 name@8 version@16 build_tag@24 register_all@32",
           "Registration size=408 interface@0 decl@8 factory@376",
           "Made size=48 object@0 error@16",
           "ErasedFactory size=32",
           "Interface size=4 Layer=1 Dataset=2 Comm=3",
           "Registrar size=8 add_entry#2 slots=3",
           "PluginDecl size=368 kind@0 name@32 doc@64 library@96 library_version@128 schema@160 insertion_points@184 infer_shape@216 point_shape@248 dataset_facts@280 check_data@312 head_parameters@344",
           "GraphContext size=24 batch@0 frames@8 classes@16",
           "DatasetFacts size=32 clip@0 classes@24",
           "Shape size=24",
           "Schema size=24",
           "ParamSpec size=312",
           "Params size=88",
           "Value size=176",
           "Loc size=40",
           "ForwardContext size=16 batch@0 frames@8",
           "Layer build#0 forward#1 insert#2 own_slots=3",
           "Sample size=16 clip@0 label@8",
           "ItemReport size=88 path@0 label@32 listed_frames@40 frames@48 error@56",
           "Split size=4 Train=0 Val=1",
           "Dataset size=8 size#2 get#3 num_classes#4 class_names#5 views#6 get_view#7 skipped_samples#8 inspect#9 bad_items#10 slots=11",
           "ReduceOp size=4 Sum=0 Avg=1 Max=2",
           "Work size=8 wait#2 done#3 slots=4",
           "Comm size=8 name#2 rank#3 size#4 allreduce#5 broadcast#6 allgather#7 barrier#8 allreduce_async#9 set_watchdog#10 abort#11 slots=12",
           "Names PluginDecl=N4vexp3dsl10PluginDeclE ShapeError=N4vexp3dsl10ShapeErrorE Value=N4vexp3dsl5ValueE Registrar=N4vexp9RegistrarE Dataset=N4vexp7DatasetE",

       }},
      {4u,
       {
           "VexpPluginInfo size=40 abi_version@0 struct_size@4 name@8 version@16 build_tag@24 register_all@32",
           "Registration size=408 interface@0 decl@8 factory@376",
           "Made size=48 object@0 error@16",
           "ErasedFactory size=32",
           "Interface size=4 Layer=1 Dataset=2 Comm=3",
           "Registrar size=8 add_entry#2 slots=3",
           "PluginDecl size=368 kind@0 name@32 doc@64 library@96 library_version@128 schema@160 insertion_points@184 infer_shape@216 point_shape@248 dataset_facts@280 check_data@312 head_parameters@344",
           "GraphContext size=24 batch@0 frames@8 classes@16",
           "DatasetFacts size=32 clip@0 classes@24",
           "Shape size=24",
           "Schema size=24",
           "ParamSpec size=312",
           "Params size=88",
           "Value size=176",
           "Loc size=40",
           "ForwardContext size=16 batch@0 frames@8",
           "Layer build#0 forward#1 insert#2 own_slots=3",
           "Sample size=16 clip@0 label@8",
           "ItemReport size=88 path@0 label@32 listed_frames@40 frames@48 error@56",
           "Split size=4 Train=0 Val=1",
           "Dataset size=8 size#2 get#3 num_classes#4 class_names#5 views#6 get_view#7 skipped_samples#8 inspect#9 bad_items#10 slots=11",
           "ReduceOp size=4 Sum=0 Avg=1 Max=2",
           "Work size=8 wait#2 done#3 slots=4",
           "Comm size=8 name#2 rank#3 size#4 allreduce#5 broadcast#6 allgather#7 barrier#8 allreduce_async#9 set_watchdog#10 abort#11 slots=12",
           "Names PluginDecl=N4vexp6schema10PluginDeclE ShapeError=N4vexp6schema10ShapeErrorE Value=N4vexp6schema5ValueE Registrar=N4vexp9RegistrarE Dataset=N4vexp7DatasetE",

       }},
      {5u,
       {
           "VexpPluginInfo size=40 abi_version@0 struct_size@4 name@8 version@16 build_tag@24 register_all@32",
           "Registration size=408 interface@0 decl@8 factory@376",
           "Made size=48 object@0 error@16",
           "ErasedFactory size=32",
           "Interface size=4 Layer=1 Dataset=2 Comm=3 Optimizer=4 Loss=5 ClipTransform=6 BatchTransform=7 Hook=8",
           "Registrar size=8 add_entry#2 slots=3",
           "PluginDecl size=368 kind@0 name@32 doc@64 library@96 library_version@128 schema@160 insertion_points@184 infer_shape@216 point_shape@248 dataset_facts@280 check_data@312 head_parameters@344",
           "GraphContext size=24 batch@0 frames@8 classes@16",
           "DatasetFacts size=32 clip@0 classes@24",
           "Shape size=24",
           "Schema size=24",
           "ParamSpec size=312",
           "Params size=88",
           "Value size=176",
           "Loc size=40",
           "ForwardContext size=16 batch@0 frames@8",
           "Layer build#0 forward#1 insert#2 own_slots=3",
           "Sample size=16 clip@0 label@8",
           "ItemReport size=88 path@0 label@32 listed_frames@40 frames@48 error@56",
           "Split size=4 Train=0 Val=1",
           "Dataset size=8 size#2 get#3 num_classes#4 class_names#5 views#6 get_view#7 skipped_samples#8 inspect#9 bad_items#10 set_transforms#11 default_transforms#12 slots=13",
           "ReduceOp size=4 Sum=0 Avg=1 Max=2",
           "Work size=8 wait#2 done#3 slots=4",
           "Comm size=8 name#2 rank#3 size#4 allreduce#5 broadcast#6 allgather#7 barrier#8 allreduce_async#9 set_watchdog#10 abort#11 slots=12",
           "ParamGroup size=96 name@0 lr_mult@32 weight_decay@40 names@48 params@72",
           "Optimizer size=32 set_groups#2 step#3 state#4 load_state#5 slots=6",
           "Loss size=8 forward#2 soft_targets#3 slots=4 forward=MN4vexp4LossEFN2at6TensorERKS2_S4_E soft_targets=MN4vexp4LossEKFbvE",
           "ClipGeometry size=36 src_w@0 src_h@4 x@8 y@12 w@16 h@20 out_w@24 out_h@28 flip@32",
           "TransformContext size=32 train@0 index@8 view@16 views@24",
           "TransformSpec size=80 type@0 params@32",
           "ClipTransform size=8 stages#2 views#3 check#4 geometry#5 pixels#6 Geometry=1 Pixels=2 slots=7",
           "BatchContext size=32 step@0 steps@8 epoch@16 micro_batch@24",
           "BatchTransform size=8 apply#2 slots=3 apply=MN4vexp14BatchTransformEFvRN2at6TensorES3_RNS_3RngERKNS_12BatchContextEE",
           "HookContext size=272 model@0 run_dir@8 step@40 epoch@48 epoch_step@56 epochs@64 rank@72 ranks@76 world@80 logged@88 metrics@96 add_metric@144 evaluate@176 checkpoint@208 save_weights@240",
           "Hook size=8 start#2 after_step#3 after_eval#4 at_checkpoint#5 at_end#6 state#7 load_state#8 slots=9",
           "Names PluginDecl=N4vexp6schema10PluginDeclE ShapeError=N4vexp6schema10ShapeErrorE Value=N4vexp6schema5ValueE Registrar=N4vexp9RegistrarE Dataset=N4vexp7DatasetE",

       }},
      {6u,
       {
           "VexpPluginInfo size=40 abi_version@0 struct_size@4 name@8 version@16 build_tag@24 register_all@32",
           "Registration size=440 interface@0 decl@8 factory@376 file_reader@408",
           "Made size=48 object@0 error@16",
           "ErasedFactory size=32",
           "Interface size=4 Layer=1 Dataset=2 Comm=3 Optimizer=4 Loss=5 ClipTransform=6 BatchTransform=7 Hook=8",
           "Registrar size=8 add_entry#2 slots=3",
           "PluginDecl size=368 kind@0 name@32 doc@64 library@96 library_version@128 schema@160 insertion_points@184 infer_shape@216 point_shape@248 dataset_facts@280 check_data@312 head_parameters@344",
           "GraphContext size=24 batch@0 frames@8 classes@16",
           "DatasetFacts size=32 clip@0 classes@24",
           "Shape size=24",
           "Schema size=24",
           "ParamSpec size=312",
           "Params size=88",
           "Value size=176",
           "Loc size=40",
           "ForwardContext size=16 batch@0 frames@8",
           "Layer build#0 forward#1 insert#2 own_slots=3",
           "Sample size=16 clip@0 label@8",
           "ItemReport size=88 path@0 label@32 listed_frames@40 frames@48 error@56",
           "Split size=4 Train=0 Val=1",
           "Dataset size=8 size#2 get#3 num_classes#4 class_names#5 views#6 get_view#7 skipped_samples#8 inspect#9 bad_items#10 set_transforms#11 default_transforms#12 file_views#13 slots=14",
           "FileViewRequest size=64 path@0 clip@32 short_side@56",
           "FileViews size=40 clips@0 how@8",
           "ReduceOp size=4 Sum=0 Avg=1 Max=2",
           "Work size=8 wait#2 done#3 slots=4",
           "Comm size=8 name#2 rank#3 size#4 allreduce#5 broadcast#6 allgather#7 barrier#8 allreduce_async#9 set_watchdog#10 abort#11 slots=12",
           "ParamGroup size=96 name@0 lr_mult@32 weight_decay@40 names@48 params@72",
           "Optimizer size=32 set_groups#2 step#3 state#4 load_state#5 slots=6",
           "Loss size=8 forward#2 soft_targets#3 slots=4 forward=MN4vexp4LossEFN2at6TensorERKS2_S4_E soft_targets=MN4vexp4LossEKFbvE",
           "ClipGeometry size=36 src_w@0 src_h@4 x@8 y@12 w@16 h@20 out_w@24 out_h@28 flip@32",
           "TransformContext size=32 train@0 index@8 view@16 views@24",
           "TransformSpec size=80 type@0 params@32",
           "ClipTransform size=8 stages#2 views#3 check#4 geometry#5 pixels#6 Geometry=1 Pixels=2 slots=7",
           "BatchContext size=32 step@0 steps@8 epoch@16 micro_batch@24",
           "BatchTransform size=8 apply#2 slots=3 apply=MN4vexp14BatchTransformEFvRN2at6TensorES3_RNS_3RngERKNS_12BatchContextEE",
           "HookContext size=272 model@0 run_dir@8 step@40 epoch@48 epoch_step@56 epochs@64 rank@72 ranks@76 world@80 logged@88 metrics@96 add_metric@144 evaluate@176 checkpoint@208 save_weights@240",
           "Hook size=8 start#2 after_step#3 after_eval#4 at_checkpoint#5 at_end#6 state#7 load_state#8 slots=9",
           "Names PluginDecl=N4vexp6schema10PluginDeclE ShapeError=N4vexp6schema10ShapeErrorE Value=N4vexp6schema5ValueE Registrar=N4vexp9RegistrarE Dataset=N4vexp7DatasetE",

       }},
  };
  return p;
}

TEST(AbiPin, EveryCrossingTypeMatchesThePinOfThisAbiVersion) {
  const std::vector<std::string> now = measured();
  std::string table;
  for (const auto& s : now) table += "           \"" + s + "\",\n";
  auto it = pins().find(VEXP_PLUGIN_ABI_VERSION);
  ASSERT_NE(it, pins().end()) << "no layout pinned for plugin ABI " << VEXP_PLUGIN_ABI_VERSION
                              << " in sdk/tests/test_abi_pin.cpp; pin the measured one:\n"
                              << table;
  const auto& pinned = it->second;
  std::string diff;
  for (size_t i = 0; i < std::max(pinned.size(), now.size()); ++i) {
    const std::string want = i < pinned.size() ? pinned[i] : "(nothing)";
    const std::string got = i < now.size() ? now[i] : "(nothing)";
    if (got != want) diff += "  pinned:   " + want + "\n  measured: " + got + "\n";
  }
  EXPECT_EQ(diff, "") << "the plugin ABI changed without a version bump: raise VEXP_PLUGIN_ABI_VERSION in "
                         "sdk/include/vexp/plugin_abi.h (and its history), then pin the new layout:\n"
                      << table;
}

TEST(AbiPin, SlotProbeMeasuresAppendedVirtuals) {
  struct Base {
    virtual ~Base() = default;
    virtual void a() {}
  };
  struct Grown : Base {
    virtual void b() {}
  };
  EXPECT_EQ(slot_of(&Base::a), 2);  // after the two destructor entries
  EXPECT_EQ(slots_of<Base>(), 3);
  EXPECT_EQ(slots_of<Grown>(), 4);  // one appended virtual is seen
  EXPECT_EQ(slot_of(&Grown::b), 3);
}

TEST(AbiPin, PluginInfoLeadsWithVersionAndSize) {
  // The host reads these two from a plugin of any ABI; they may never move.
  EXPECT_EQ(offsetof(VexpPluginInfo, abi_version), 0u);
  EXPECT_EQ(offsetof(VexpPluginInfo, struct_size), 4u);
}

}  // namespace
