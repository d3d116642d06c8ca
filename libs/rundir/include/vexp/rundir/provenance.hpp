// provenance.jsonl: where a run came from, one JSON record per invocation of
// `vexp run` on the run directory (a resumed or requeued run appends one). Each
// record is written when the invocation starts and completed (end time, outcome)
// when it ends, also when it fails where the process can still write.
// Fields: docs/recipes.md, "The run directory".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/rundir/files.hpp"

namespace vexp::rundir {

// The "format" of every record; a reader refuses none it knows less of (fields are
// only ever added).
inline constexpr const char* kProvenanceFormat = "vexp-provenance-1";

struct HashedFile {
  std::string path;    // absolute
  std::string sha256;  // "" when it could not be read (`error` says why)
  std::string error;
};

// A ${VAR} the recipe interpolated: its value in the environment (nullopt: not
// set) and the value the recipe received (the default of ${VAR:-default} when unset or empty).
struct Variable {
  std::string name;
  std::optional<std::string> environment;
  std::string value;
};

struct PluginRecord {
  std::string file;  // absolute path of the library
  std::string name, version, build_tag;
  std::string sha256;  // "" when it could not be read
};

struct Invocation {
  int64_t number = 0;        // 1, 2, ...: which invocation of the run directory
  std::string start, end;    // ISO 8601 UTC; end "" while it runs (or when it died without a word)
  std::string outcome;       // "" while it runs; finished | stopped | interrupted | diverged | failed
  std::string vexp_version, vexp_commit, build_tag;
  std::string vexp_tree;  // vexp_tree(): the source tree at build time, clean | dirty | unknown
  std::vector<std::string> argv;
  std::string cwd;
  std::string recipe;                     // the root recipe, absolute
  std::vector<HashedFile> recipe_files;   // the root, then its `extends` chain
  std::string recipe_hash;                // resolved.toml's hash
  std::vector<std::string> overrides;     // --set KEY=VALUE, as given, apart from the recipe files
  std::vector<Variable> variables;
  std::string dataset;
  std::map<std::string, std::string> data_roots;  // data.params KEY -> absolute path
  std::vector<HashedFile> data_files;             // data.params naming regular files (lists, classes.txt), hashed
  std::map<std::string, std::string> environment;  // run_environment(): the variables that change a run
  std::vector<std::string> hosts;                 // one per rank
  int64_t ranks = 1;
  std::string launcher;                           // "none" when started directly
  std::map<std::string, std::string> job;         // SLURM_JOB_ID and the like, when set
  std::string comm;                               // the communication backend
  std::map<std::string, std::string> libraries;   // torch, cuda, cudnn, nccl, mpi, ffmpeg
  std::vector<PluginRecord> plugins;

  nlohmann::json to_json() const;
};

// ---- the file -----------------------------------------------------------------

// Appends `inv` as the next record of DIR/provenance.jsonl (inv.number is set to
// it); the file is rewritten atomically. Returns the number.
int64_t append_invocation(const fs::path& dir, Invocation& inv);
// Completes record `number`: end time now, `outcome`, and, when there are any, the
// last weights files the run's hooks wrote (`weights`: tag -> the file, absolute,
// and its SHA-256; the ema hook's averaged weights under "ema").
// Atomic rewrite.
void finish_invocation(const fs::path& dir, int64_t number, const std::string& outcome,
                       const std::map<std::string, HashedFile>& weights = {});

// The records of DIR/provenance.jsonl, oldest first (none when there is no file);
// lines that are not JSON objects with a "format" string are skipped (counted).
struct Provenance {
  std::vector<nlohmann::json> records;
  SkippedLines skipped;
};
Provenance read_provenance(const fs::path& dir);

// A record as "key" = "text" rows, in the record's order: "vexp.version", "argv"
// (one shell-like line), "recipe.files[1].sha256", "libraries.torch", ...
std::vector<std::pair<std::string, std::string>> flatten_record(const nlohmann::json& record);

// The rows of two records that differ (either side "" where absent), leaving out
// what differs between any two invocations: number, start, end.
struct Difference {
  std::string key, a, b;
};
std::vector<Difference> differences(const nlohmann::json& a, const nlohmann::json& b);

// The rows in which several runs' last records are not all the same (invocation,
// start and end left out), for `vexp compare` and the comparison report: `last` holds
// each run's last record, null for a run without provenance.jsonl ("(not recorded)";
// a key one record lacks reads "(absent)"). Rows keep the order they first appear in.
struct RunsDifference {
  std::string key;
  std::vector<std::string> values;  // one per run
};
struct RunsDifferences {
  size_t recorded = 0;  // runs with a record
  size_t keys = 0;      // rows seen over all records
  std::vector<RunsDifference> rows;
};
RunsDifferences differences_between(const std::vector<nlohmann::json>& last);
// The same over runs already flattened into "key" = "text" rows (nullopt: a run without
// any); rows keep the order keys first appear in. `vexp compare`'s recipe keys
// (resolved.toml) use it too.
using FlatRows = std::vector<std::pair<std::string, std::string>>;
RunsDifferences differences_between(const std::vector<std::optional<FlatRows>>& runs);

// Labels that tell runs apart, one per run: its name, and where names repeat also the
// shortest tail of its folder's path that tells it from the others of that name
// ("tsm_motion (a/tsm_motion)", "tsm_motion (b/tsm_motion)"). `vexp compare` and the
// comparison report name runs the same way.
std::vector<std::string> run_labels(const std::vector<std::string>& names, const std::vector<std::string>& dirs);

// ---- what a process knows of itself (torch-free) --------------------------------

// vexp's version, the git commit it was built from and whether the source tree was
// clean then: "clean" (no tracked file changed against that commit), "dirty", or
// "unknown" (outside git, or no git); fixed by every build (libs/rundir/source_state.cmake).
const char* vexp_version();
const char* vexp_commit();
const char* vexp_tree();

std::string host_name();
// The job-id variables of the batch systems that are set: SLURM_JOB_ID,
// SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_RESTART_COUNT, PBS_JOBID, LSB_JOBID, JOB_ID, FLUX_JOB_ID.
using EnvLookup = std::function<const char*(const char*)>;
std::map<std::string, std::string> job_ids(const EnvLookup& env);
// The environment variables that change what a run does or how fast, from `environ`
// (NAME=VALUE lines): VEXP_*, OMP_*, GOMP_*, KMP_*, MKL_*, OPENBLAS_*, CUDA_* (with
// CUDA_VISIBLE_DEVICES), CUBLAS_*, CUDNN_*, NCCL_*, TORCH_*, PYTORCH_*, MALLOC_*,
// GLIBC_TUNABLES, LD_PRELOAD, LD_LIBRARY_PATH, and SLURM_* but those that name the job's
// instance rather than its shape (a name ending in ID or IDS, _PORT, _IPADDR, _HOST or
// _TIME, and SLURM_RESTART_COUNT: ids, pids, ports, addresses, times; job_ids() keeps the
// job's ids). A name that looks secret (holding TOKEN, SECRET, PASSWORD, PASSWD,
// CREDENTIAL, PRIVATE, KEY or AUTH, in any case) is recorded without its value:
// "(set; not recorded: the name looks secret)".
std::map<std::string, std::string> run_environment(const std::vector<std::string>& environ_lines);
// This process's environ as NAME=VALUE lines.
std::vector<std::string> environ_lines();

// The files mapped into this process (/proc/self/maps), real paths, each once.
std::vector<std::string> mapped_files();
std::vector<std::string> mapped_files_of(const std::string& maps_text);
// The mapped libraries named lib<stem>.* or lib<stem>-* (file names, ", " between),
// or "not loaded". Stems: "mpi", "nccl", "cudart", "cudnn", "avcodec", ...
std::string loaded_library(const std::vector<std::string>& mapped, const std::string& stem);
// mpi, nccl, cuda (cudart), cudnn and ffmpeg (libavcodec, libavformat, libavutil) from `mapped`.
std::map<std::string, std::string> loaded_libraries(const std::vector<std::string>& mapped);

// `path` made absolute against the working directory and normalised (not resolved:
// a link stays what was written).
std::string absolute_path(const std::string& path);

}  // namespace vexp::rundir
