// The build tag's cuda part says what the build is, on the host's side and on a
// plugin's (both get VEXP_WITH_CUDA from vexp::sdk).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "vexp/build_tag.hpp"
#include "vexp/plugin_abi.h"

namespace {

// What CMake configured (-DVEXP_CUDA=ON: 1), passed by sdk/tests/CMakeLists.txt
// independently of vexp::sdk's own definition.
const std::string kConfiguredCuda = VEXP_TEST_CONFIGURED_CUDA ? "cuda=on" : "cuda=off";

TEST(PluginSdkBuildTag, HostTagCudaMatchesTheConfiguration) {
  const std::string tag = vexp::host_build_tag();  // compiled into libvexp_sdk
  EXPECT_NE(tag.find(kConfiguredCuda), std::string::npos) << tag;
  EXPECT_EQ(std::string(VEXP_BUILD_TAG), tag);      // this test's own compile agrees
}

TEST(PluginSdkBuildTag, PluginTagCudaMatchesTheConfiguration) {
  void* h = ::dlopen(VEXP_TEST_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  auto fn = reinterpret_cast<VexpPluginInfoFn>(::dlsym(h, VEXP_PLUGIN_ENTRY));
  ASSERT_NE(fn, nullptr);
  const std::string tag = fn()->build_tag;
  EXPECT_NE(tag.find(kConfiguredCuda), std::string::npos) << VEXP_TEST_PLUGIN_FILE << ": " << tag;
  EXPECT_EQ(vexp::compare_build_tags(vexp::host_build_tag(), tag), "");
  ::dlclose(h);
}

}  // namespace
