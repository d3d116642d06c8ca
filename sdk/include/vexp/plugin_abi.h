/* The one C entry point every vexp plugin library exports.
 * Fields are only ever appended; `struct_size` tells the host which ones exist.
 * The first two fields (abi_version, struct_size) never move: the host reads them
 * from a plugin of any ABI to refuse it with both versions.
 *
 * VEXP_PLUGIN_ABI_VERSION covers this struct and every C++ type a plugin hands
 * over or is handed (registrar.hpp, kinds.hpp, schema/catalog.hpp, schema/schema.hpp,
 * schema/value.hpp, layer.hpp, dataset.hpp, comm.hpp, optimizer.hpp, loss.hpp,
 * transform.hpp, hook.hpp); sdk/tests/test_abi_pin.cpp
 * pins their sizes, field offsets and virtual slots for the current version, so a
 * layout change fails there until the version is raised and the pin updated.
 * History:
 *   1  initial
 *   2  Dataset::bad_items, PluginDecl::check_data
 *   3  typed registration (Registration, Interface), PluginDecl::head_parameters
 *   4  the schema types' namespace is vexp::schema (was vexp::dsl): same layouts,
 *      other symbol and type_info names; vexp::dsl::X stays a source alias until 6
 *   5  the training parts as plugin kinds: optimizer, loss, transform,
 *      batch_transform, hook (Interface 4-8; optimizer.hpp, loss.hpp,
 *      transform.hpp, hook.hpp, rng.hpp); Dataset::set_transforms and
 *      default_transforms appended
 *   6  Dataset::file_views (FileViewRequest, FileViews) appended;
 *      Registration::file_reader (Registrar::add_dataset's optional reader) */
#ifndef VEXP_PLUGIN_ABI_H
#define VEXP_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define VEXP_PLUGIN_ABI_VERSION 6u
#define VEXP_PLUGIN_ENTRY "vexp_plugin_info"

#ifdef __cplusplus
namespace vexp { class Registrar; }
typedef vexp::Registrar VexpRegistrar;
extern "C" {
#else
typedef struct VexpRegistrar VexpRegistrar;
#endif

/* Returns 0 on success; otherwise writes a message into err (NUL-terminated). */
typedef int (*VexpRegisterFn)(VexpRegistrar* registrar, char* err, size_t err_len);

typedef struct VexpPluginInfo {
  uint32_t abi_version;    /* VEXP_PLUGIN_ABI_VERSION the plugin was built with */
  uint32_t struct_size;    /* sizeof(VexpPluginInfo) in the plugin */
  const char* name;        /* library name, e.g. "temporal_shift" */
  const char* version;     /* plugin version, e.g. "0.1.0" */
  const char* build_tag;   /* "torch=1.13.0;cxx11abi=1;compiler=gcc-12;cuda=off" */
  VexpRegisterFn register_all;
} VexpPluginInfo;

typedef const VexpPluginInfo* (*VexpPluginInfoFn)(void);

#ifdef __cplusplus
}
#endif
#endif
