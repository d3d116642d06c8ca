// What every rank of a multi-rank run must agree on, and the DDP setup. Each
// function here is a collective: every rank calls it, in the same order.
#include <cstring>
#include <functional>
#include <sstream>

#include <ATen/ATen.h>

#include "trainer_parts.hpp"
#include "vexp/base/error.hpp"

namespace vexp::trainer {

// Every rank has looked at the run directory before rank 0 writes to it, and
// agrees on the checkpoint to resume from.
void agree_on_resume_point(Comm& comm, const std::string& resume_from) {
  at::Tensor ckpt_epoch = at::full({1}, resume_from.empty() ? int64_t(-1) : int64_t(std::hash<std::string>{}(resume_from) >> 1), at::kLong);
  at::Tensor mine = ckpt_epoch.clone();
  comm.broadcast(ckpt_epoch, 0);
  if (!ckpt_epoch.equal(mine))
    throw base::failure("rank " + std::to_string(comm.rank()) + " sees another checkpoint to resume from than rank 0 ('" +
                             resume_from + "'): the run directory must be on a file system every rank shares");
}

bool agree_stop(Comm& comm, bool mine) {
  if (comm.size() == 1) return mine;
  at::Tensor t = at::full({1}, mine ? 1.0 : 0.0, at::kDouble);
  comm.allreduce(t, ReduceOp::Max);
  return t.item<double>() > 0;
}

// The distinct bad items (Dataset::bad_items) every rank has met, plus `saved`
// (from the checkpoint resumed from). A collective: every rank calls it.
std::set<std::string> all_bad_items(const Dataset& data, Comm& comm, const std::set<std::string>& saved) {
  std::set<std::string> items = saved;
  for (auto& b : data.bad_items()) items.insert(std::move(b));
  if (comm.size() == 1) return items;
  std::string joined;
  for (const auto& b : items) joined += b + '\n';
  at::Tensor len = at::full({1}, static_cast<int64_t>(joined.size()), at::kLong);
  comm.allreduce(len, ReduceOp::Max);
  const int64_t n = len.item<int64_t>();
  if (n == 0) return items;
  at::Tensor mine = at::zeros({n}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), joined.data(), joined.size());
  at::Tensor all = comm.allgather(mine).contiguous();
  const char* p = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < comm.size(); ++r) {
    std::string text(p + r * n, static_cast<size_t>(n));
    std::stringstream ss(text.c_str());  // up to the zero padding
    for (std::string line; std::getline(ss, line);)
      if (!line.empty()) items.insert(line);
  }
  return items;
}


void set_up_ddp(Run& r) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::vector<at::Tensor> state;
  for (const auto& p : r.model->named_parameters(true)) {
    named.emplace_back(p.key(), p.value());
    state.push_back(p.value());
  }
  check_same_model(*r.comm, r.recipe_hash, named);
  for (const auto& b : r.model->named_buffers(true)) state.push_back(b.value());
  // The optimizer's state (a resumed run's): rank 0's, overwritten in place, given back.
  std::map<std::string, at::Tensor> opt_state = r.rig->optimizer().state();
  for (auto& [k, v] : opt_state) state.push_back(v);
  broadcast_from_rank0(*r.comm, state);
  if (!opt_state.empty()) r.rig->optimizer().load_state(opt_state);
}

}  // namespace vexp::trainer
