// provenance.jsonl: the record of one invocation (vexp::rundir::Invocation) of a
// command that writes a folder of results, gathered from the session, the plan, the
// ranks and the process: `vexp run` (the trainer, in the run directory) and `vexp
// eval` (in its eval folder). Written by rank 0 when the work starts and completed
// when it ends; failing to write it is a warning, never the work's failure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "vexp/comm.hpp"
#include "vexp/rundir/provenance.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp {

// What the session does not know of the invocation.
struct InvocationFacts {
  std::vector<std::string> argv;       // the command line; empty: this process's (/proc/self/cmdline)
  std::string recipe_path;             // as given
  std::string recipe_hash;             // dsl::recipe_hash of the resolved recipe
  std::vector<std::string> overrides;  // --set KEY=VALUE, as given (apart from the recipe files)
  int64_t ranks = 1;
};

// This invocation as provenance.jsonl records it, from the session's recipe and plan
// (hosts left empty: host_names is a collective).
rundir::Invocation describe_invocation(const Session& s, const InvocationFacts& facts);

// Every rank's host name, in rank order (a collective when there are several ranks).
std::vector<std::string> host_names(Comm& comm);

// The record of this invocation in DIR/provenance.jsonl: appended by the writer (rank
// 0) when constructed (every rank constructs it: the host names are gathered from
// all), completed by finish().
class ProvenanceRecord {
 public:
  ProvenanceRecord(const std::filesystem::path& dir, bool writer, rundir::Invocation inv, Comm& comm);
  // finished | stopped | interrupted | diverged | failed; only the first call counts.
  // `weights`: a run's hooks' weights files (tag -> path relative to DIR), recorded
  // with their SHA-256 (rundir::finish_invocation).
  void finish(const std::string& outcome, const std::map<std::string, std::string>& weights = {}) noexcept;

 private:
  std::filesystem::path dir_;
  bool writer_;
  int64_t number_ = 0;
  bool done_ = false;
};

}  // namespace vexp
