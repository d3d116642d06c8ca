// A small plugin catalog for the dsl tests: declarations only, with shape hooks
// for the datasets, comms and a downsample op; resnet, temporal_shift and the heads
// ops (fold_time, classifier, segment_consensus) are the plugins' own torch-free declarations.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "vexp/schema/catalog.hpp"

namespace vexp::dsl::testing {

class FakeCatalog : public PluginCatalog {
 public:
  FakeCatalog();
  const PluginDecl* find(const std::string& kind, const std::string& name) const override;
  std::vector<std::string> names(const std::string& kind) const override;
  void add(PluginDecl decl);

 private:
  std::map<std::pair<std::string, std::string>, PluginDecl> decls_;
};

const FakeCatalog& fake_catalog();

// A valid TSM quickstart recipe (synthetic_motion, resnet18, temporal_shift rewrite).
extern const char* const kQuickstart;

// A fresh directory under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` to `name` (creating folders) and returns the full path.
  std::string write(const std::string& name, const std::string& text) const;
  std::string path(const std::string& name = "") const;

 private:
  std::filesystem::path dir_;
};

}  // namespace vexp::dsl::testing
