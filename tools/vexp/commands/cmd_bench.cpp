// vexp bench SUBCOMMAND: benchmarks. Each subcommand registers itself on the
// `bench` group (add_bench_data below; others add their own add_bench_* calls).
#include "commands/common.hpp"

namespace vexp::cli {

void add_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (print measured figures)");
  bench->require_subcommand(1);
  add_bench_data(*bench);
  add_bench_train(*bench);
  add_bench_op(*bench);
  add_bench_allreduce(*bench);
}

}  // namespace vexp::cli
