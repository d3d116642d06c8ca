// provenance.jsonl: the record of this invocation of `vexp run` (the one way of
// provenance.hpp, which `vexp eval` shares), from the run's options.
#include "trainer_parts.hpp"

namespace vexp::trainer {

rundir::Invocation describe_invocation(const Run& r, const Session& s) {
  InvocationFacts f;
  f.argv = r.opt.argv;
  f.recipe_path = r.opt.recipe_path;
  f.recipe_hash = r.recipe_hash;
  f.overrides = r.opt.overrides;
  f.ranks = r.ranks;
  return vexp::describe_invocation(s, f);
}

}  // namespace vexp::trainer
