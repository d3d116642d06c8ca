// Pieces shared by the subcommands.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "vexp/base/error.hpp"
#include "vexp/base/text.hpp"

#include "vexp/runtime/session.hpp"

namespace vexp::cli {

// Exit codes (docs/architecture.md#exit-codes), mapped from base::Error's kind once, in
// main.cpp: 0 success, 1 failure, 2 invalid recipe or usage / refused, 3 training
// diverged, 4 a plugin crashed with a fatal signal (plugin_host.hpp,
// install_plugin_crash_handler), 130 interrupted. Commands throw vexp::base::Error
// (base::invalid(...), base::failure(...), ...), never an exit code.
constexpr int kExitFailure = 1;
constexpr int kExitInvalid = 2;
constexpr int kExitDiverged = 3;
constexpr int kExitPluginCrash = 4;
constexpr int kExitInterrupted = 130;
// The exit code of an error's kind (a child's own code for ErrorKind::child): the one
// mapping, used by main.cpp and by a rank of `vexp eval` that ends every rank.
int exit_code(const base::Error& e);

// Options every recipe-taking command has.
struct RecipeArgs {
  std::string path;
  std::vector<std::string> sets;
  std::vector<std::string> plugin_paths;  // --plugin-path DIR (repeatable)
  bool require_data = false;  // true for commands that read the data (run, data check, bench data)
  void add_to(CLI::App* app);
  // "--plugin-path", DIR (canonical) for each folder: for the commands a command
  // starts (sweep trials, `run --nproc` ranks), so they may load what this one may.
  std::vector<std::string> plugin_path_argv() const;
};

// Adds the repeatable --plugin-path DIR option (folders of plugins to load, which
// recipes may then name in [plugins] paths) to a command that opens recipes.
void add_plugin_path_option(CLI::App* app, std::vector<std::string>& dirs);
// The folders as canonical paths (a base::Error (invalid) naming one that does not exist).
std::vector<std::string> canonical_plugin_paths(const std::vector<std::string>& dirs);
// Sets s.plugin_dirs from `dirs`, loads the default plugin folders and them, and
// prints the plugin problems as warnings.
void load_session_plugins(Session& s, const std::vector<std::string>& dirs);

// The --set KEY=VALUE texts as overrides; base::Error (invalid) naming the first bad one.
std::vector<dsl::Override> parse_sets(const std::vector<std::string>& sets);

// Four sizes written AxBxCxD (each 1 to 999999999) for the option `option`;
// base::Error (invalid) "OPTION 'TEXT': expected LAYOUT, for example EXAMPLE" otherwise.
std::vector<int64_t> parse_four_sizes(const std::string& text, const std::string& option, const std::string& layout,
                                      const std::string& example);


// base::shell_quote: one POSIX shell word, for commands printed to users.
using base::shell_quote;

// A recipe shipped with vexp (`rel` under recipes/), found from the executable:
// DATADIR/vexp/recipes of an installed vexp, the sources' recipes/ in the build tree
// (linked there by the build), whatever the current directory. base::Error (failure) when
// it is not there.
std::string shipped_recipe(const std::string& rel);

// Prints a recipe's diagnostics to stderr, then "PATH: N errors" when it is not
// valid. Returns `valid`.
bool print_recipe_diagnostics(const Session& s, const std::string& path, bool valid);

// Opens args.path through the runtime's one way (open_recipe, session.hpp): plugins
// (default folders, --plugin-path), the recipe with its --set overrides and
// args.require_data. Prints plugin folders that failed to load as warnings, the
// recipe's diagnostics, the stand-in note and "PATH: N errors"; a file that cannot be
// read is base::Error (invalid). Returns true when valid.
bool open_session(Session& s, const RecipeArgs& args);
// The same with `options` (require_data, stand-in, dataset facts; its overrides come
// before --set's, its plugin folders are replaced by --plugin-path's).
bool open_session(Session& s, const RecipeArgs& args, OpenOptions options);
// For planning (vexp run --dry-run, submit, bench --synthetic): planning_options().
bool open_session_for_planning(Session& s, const RecipeArgs& args);

// Prints the plugin problems of the default folders (as warnings).
void report_plugin_problems(const Session& s);

// Registration of each subcommand: sets a callback that may throw base::Error.
void add_check(CLI::App& app);
void add_plugins(CLI::App& app);
void add_graph(CLI::App& app);
void add_run(CLI::App& app);
void add_compare(CLI::App& app);
void add_data(CLI::App& app);
void add_bench(CLI::App& app);
void add_bench_data(CLI::App& bench);  // `vexp bench data`, registered by add_bench
void add_bench_train(CLI::App& bench);  // `vexp bench train` (cmd_bench_train.cpp)
void add_bench_op(CLI::App& bench);     // `vexp bench op` (cmd_bench_op.cpp)
void add_bench_allreduce(CLI::App& bench);  // `vexp bench allreduce` (cmd_bench_allreduce.cpp)
void add_bench_comm(CLI::App& app);  // `vexp bench comm` (creates `bench` if needed)
void add_info(CLI::App& app);
void add_predict(CLI::App& app);
void add_eval(CLI::App& app);     // cmd_eval.cpp
void add_export(CLI::App& app);
void add_sweep(CLI::App& app);    // cmd_sweep.cpp
void add_results(CLI::App& app);  // cmd_results.cpp
void add_report(CLI::App& app);   // cmd_results.cpp
void add_trust(CLI::App& app);    // cmd_trust.cpp
void add_plan(CLI::App& app);     // cmd_plan.cpp

}  // namespace vexp::cli
