// CTest cuda.comm_nccl: loads comm_nccl.so through the plugin host (its ABI
// entry, build tag and schema), then creates the communicator.
//  * No CUDA device visible: creating it must fail with the one-line error that
//    tells CPU users what to do; exit 77 (reported as skipped: the collectives
//    themselves were not exercised).
//  * A device visible: a one-rank allreduce / broadcast / allgather of CPU
//    tensors (staged through device memory) must return the right values.
#include <cstdio>
#include <exception>
#include <string>

#include <ATen/ATen.h>

#include "vexp/comm.hpp"
#include "vexp/runtime/plugin_host.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_comm_nccl PATH/comm_nccl.so\n");
    return 2;
  }
  vexp::PluginHost host;
  try {
    host.load_library(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  const vexp::PluginDecl* decl = host.find("comm", "nccl");
  if (!decl) {
    std::fprintf(stderr, "FAIL: %s registers no comm/nccl\n", argv[1]);
    return 1;
  }
  for (const char* key : {"rendezvous", "timeout_s"})
    if (!decl->schema.find(key)) {
      std::fprintf(stderr, "FAIL: comm/nccl has no parameter '%s'\n", key);
      return 1;
    }
  std::shared_ptr<vexp::Comm> comm;
  try {
    comm = host.make<vexp::Comm>("comm", "nccl", vexp::dsl::make_params(decl->schema));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("no CUDA device visible") != std::string::npos &&
        what.find("dist.backend = \"mpi\"") != std::string::npos && what.find('\n') == std::string::npos) {
      std::printf("comm_nccl.so loads and registers comm/nccl; without a device it says: %s\n", what.c_str());
      return 77;
    }
    std::fprintf(stderr, "FAIL: unexpected error: %s\n", what.c_str());
    return 1;
  }
  if (!at::hasCUDA()) {
    std::printf("a CUDA device is visible but this libtorch has no CUDA: collectives not exercised\n");
    return 77;
  }
  try {
    at::Tensor t = at::arange(6, at::kFloat);
    comm->allreduce(t, vexp::ReduceOp::Sum);
    at::Tensor b = at::full({3}, 4.0);
    comm->broadcast(b, 0);
    at::Tensor g = comm->allgather(at::ones({2}));
    comm->barrier();
    const bool ok = comm->size() == 1 && t.equal(at::arange(6, at::kFloat)) && b.equal(at::full({3}, 4.0)) &&
                    g.sizes() == at::IntArrayRef({1, 2});
    std::printf("comm/nccl on %d rank(s): %s\n", comm->size(), ok ? "ok" : "WRONG RESULTS");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
