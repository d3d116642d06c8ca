// provenance.jsonl records (provenance.hpp): what a session, its plan and the process
// say of an invocation; `vexp run` (trainer_provenance.cpp) and `vexp eval` use it.
#include "vexp/runtime/provenance.hpp"

#include <torch/version.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>

#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/log.hpp"
#include "vexp/runtime/launcher.hpp"
#include "vexp/rundir/sha256.hpp"

namespace vexp {

namespace fs = std::filesystem;

namespace {

// Plugin libraries and recipe files are hashed whole; larger ones are named without a hash.
constexpr std::uint64_t kMaxHashedBytes = 4ull << 30;

// Dataset parameters that name a data root (`root`, `*_root`), made absolute: a
// relative root is relative to where the run started, which the record keeps too.
std::map<std::string, std::string> data_roots(const dsl::RecipePlan& plan) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : plan.dataset_params.values()) {
    const bool root = k == "root" || (k.size() > 5 && k.compare(k.size() - 5, 5, "_root") == 0);
    if (root && v.is_string() && !v.as_string().empty()) out[k] = rundir::absolute_path(v.as_string());
  }
  return out;
}

rundir::HashedFile hashed(const std::string& path) {
  rundir::HashedFile f;
  f.path = rundir::absolute_path(path);
  try {
    f.sha256 = rundir::sha256_file(path, kMaxHashedBytes);
  } catch (const std::exception& e) {
    f.error = e.what();
  }
  return f;
}

}  // namespace

std::vector<std::string> host_names(Comm& comm) {
  const std::string mine = rundir::host_name();
  if (comm.size() == 1) return {mine};
  constexpr int64_t kWidth = 256;
  at::Tensor t = at::zeros({kWidth}, at::kByte);
  std::memcpy(t.data_ptr<uint8_t>(), mine.data(), std::min<size_t>(mine.size(), kWidth - 1));
  const at::Tensor all = comm.allgather(t).contiguous().cpu();
  std::vector<std::string> out;
  for (int64_t r = 0; r < all.size(0); ++r) {
    const auto* p = all[r].data_ptr<uint8_t>();
    out.emplace_back(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), kWidth));
  }
  return out;
}

rundir::Invocation describe_invocation(const Session& s, const InvocationFacts& facts) {
  const dsl::RecipePlan& plan = *s.plan;
  rundir::Invocation inv;
  inv.start = base::utc_now();
  inv.vexp_version = rundir::vexp_version();
  inv.vexp_commit = rundir::vexp_commit();
  inv.vexp_tree = rundir::vexp_tree();
  inv.build_tag = host_build_tag();
  inv.argv = facts.argv.empty() ? base::own_argv() : facts.argv;
  std::error_code ec;
  inv.cwd = fs::current_path(ec).string();
  inv.recipe = rundir::absolute_path(facts.recipe_path);
  if (s.recipe) {
    for (const auto& f : s.recipe->files) inv.recipe_files.push_back(hashed(f));
    for (const auto& v : s.recipe->variables) inv.variables.push_back({v.name, v.environment, v.value});
  } else if (!facts.recipe_path.empty()) {
    inv.recipe_files.push_back(hashed(facts.recipe_path));
  }
  inv.recipe_hash = facts.recipe_hash;
  inv.overrides = facts.overrides;
  inv.dataset = plan.dataset;
  inv.data_roots = data_roots(plan);
  // Dataset parameters that name regular files (video lists, label maps such as
  // classes.txt), relative to a data root or as given, hashed: the same root with
  // another list trains something else. A relative name is looked for under the data
  // roots first, as the kinetics dataset reads it (`root` / `train_list`), so that a
  // file of that name in the working directory is never the one hashed in its place.
  for (const auto& [k, v] : plan.dataset_params.values()) {
    if (!v.is_string() || v.as_string().empty()) continue;
    std::vector<fs::path> candidates;
    if (fs::path(v.as_string()).is_relative())
      for (const auto& [rk, root] : inv.data_roots) candidates.push_back(fs::path(root) / v.as_string());
    candidates.push_back(fs::path(v.as_string()));
    for (const auto& c : candidates) {
      std::error_code fe;
      if (fs::is_regular_file(c, fe)) {
        inv.data_files.push_back(hashed(c.string()));
        break;
      }
    }
  }
  inv.environment = rundir::run_environment(rundir::environ_lines());
  inv.ranks = facts.ranks;
  const Launcher l = detect_launcher();
  inv.launcher = l.present() ? l.name : "none";
  inv.job = rundir::job_ids([](const char* v) { return std::getenv(v); });
  inv.comm = plan.comm;
  inv.libraries = rundir::loaded_libraries(rundir::mapped_files());
  inv.libraries["torch"] = TORCH_VERSION;
  for (const auto& lib : s.host.libraries()) {
    rundir::PluginRecord p{lib.path, lib.name, lib.version, lib.build_tag, ""};
    try {
      p.sha256 = rundir::sha256_file(lib.path, kMaxHashedBytes);
    } catch (const std::exception& e) {
      log_warn("provenance: " + std::string(e.what()));
    }
    inv.plugins.push_back(std::move(p));
  }
  return inv;
}

ProvenanceRecord::ProvenanceRecord(const fs::path& dir, bool writer, rundir::Invocation inv, Comm& comm)
    : dir_(dir), writer_(writer) {
  inv.hosts = host_names(comm);  // every rank takes part
  if (!writer_) return;
  try {
    number_ = rundir::append_invocation(dir_, inv);
  } catch (const std::exception& e) {
    log_warn("cannot record this invocation in '" + rundir::RunDir(dir_).provenance().string() + "': " + e.what());
  }
}

void ProvenanceRecord::finish(const std::string& outcome, const std::map<std::string, std::string>& weights) noexcept {
  if (!writer_ || number_ == 0 || done_) return;
  done_ = true;
  try {
    std::map<std::string, rundir::HashedFile> files;
    for (const auto& [tag, rel] : weights) files[tag] = hashed((dir_ / rel).string());
    rundir::finish_invocation(dir_, number_, outcome, files);
  } catch (const std::exception& e) {
    log_warn("cannot complete this invocation's record in '" + rundir::RunDir(dir_).provenance().string() +
             "': " + e.what());
  }
}

}  // namespace vexp
