/* The one C entry point every vexp plugin library exports.
 * Fields are only ever appended; `struct_size` tells the host which ones exist. */
#ifndef VEXP_PLUGIN_ABI_H
#define VEXP_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define VEXP_PLUGIN_ABI_VERSION 2u  /* 2: Dataset::bad_items */
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
