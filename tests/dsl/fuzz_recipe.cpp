// libFuzzer entry: any byte string through load + validate + render must end in
// diagnostics, never in a crash, a sanitizer report or an escaping exception.
// Build: cmake -DVEXP_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ..; run: ./vexp_fuzz_recipe corpus/
#include <cstddef>
#include <cstdint>
#include <string>

#include "fake_catalog.hpp"
#include "vexp/dsl/validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vexp::dsl;
  const std::string text(reinterpret_cast<const char*>(data), size);
  LoadOptions opts;
  opts.env = [](const std::string&) { return std::optional<std::string>(); };
  Diagnostics diags;
  auto recipe = load_recipe_text(text, "fuzz.toml", opts, diags);
  if (!recipe) return 0;
  auto plan = validate(*recipe, testing::fake_catalog(), diags);
  const std::string rendered = to_toml(plan ? plan->resolved : recipe->root);
  Diagnostics again;
  if (!load_recipe_text(rendered, "again.toml", opts, again)) __builtin_trap();
  for (const auto& d : diags.items()) {
    if (d.message.empty()) __builtin_trap();
  }
  return 0;
}
