// comm/nccl: collectives with NCCL on CUDA tensors (CPU tensors are staged
// through device memory). Needs only the CUDA runtime and NCCL, not a CUDA
// libtorch: the default build compiles it (outside the plugin folder) wherever
// nvcc and NCCL are found, and a test loads it; -DVEXP_CUDA=ON installs it.
//
// Bootstrap: under an MPI launcher (mpirun, srun --mpi=pmix, jsrun) and when
// built with MPI, rank/size come from MPI and rank 0's ncclUniqueId is
// MPI_Bcast; otherwise rank/size come from RANK/WORLD_SIZE (or SLURM_PROCID/
// SLURM_NTASKS) and rank 0 writes the id to the file `rendezvous` (on a file
// system every rank sees), which the others poll for up to timeout_s.
// Device: local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK)
// modulo the visible devices.
//
// Streams: collectives run on the plugin's own non-blocking stream, ordered
// after the work already queued on the legacy default stream (libtorch's
// default) by an event; wait() makes the default stream wait for the collective.
#include <cuda_runtime.h>
#include <nccl.h>
#ifdef VEXP_NCCL_WITH_MPI
#include <mpi.h>
#endif

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <ATen/ATen.h>

#include "vexp/comm.hpp"
#include "vexp/registrar.hpp"

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("comm nccl: ") + what + ": " + cudaGetErrorString(e));
}
void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("comm nccl: ") + what + ": " + ncclGetErrorString(r));
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v && *v) return std::atoi(v);
  }
  return fallback;
}

bool under_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

ncclDataType_t nccl_type(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
#if NCCL_MAJOR > 2 || (NCCL_MAJOR == 2 && NCCL_MINOR >= 10)
    case at::kBFloat16: return ncclBfloat16;
#endif
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte:
    case at::kBool: return ncclUint8;
    default: throw std::invalid_argument(std::string("comm nccl: unsupported dtype ") + c10::toString(s));
  }
}

class NcclWork final : public vexp::Work {
 public:
  NcclWork(cudaEvent_t ev, std::function<void()> after) : ev_(ev), after_(std::move(after)) {}
  ~NcclWork() override { cudaEventDestroy(ev_); }
  void wait() override {
    cuda_check(cudaStreamWaitEvent(0, ev_, 0), "cudaStreamWaitEvent");
    if (after_) {
      cuda_check(cudaEventSynchronize(ev_), "cudaEventSynchronize");
      after_();
      after_ = nullptr;
    }
  }
  bool done() override { return cudaEventQuery(ev_) == cudaSuccess; }

 private:
  cudaEvent_t ev_;
  std::function<void()> after_;  // copy a staged CPU tensor back
};

class NcclComm final : public vexp::Comm {
 public:
  explicit NcclComm(const vexp::Params& p) : timeout_s_(p.f64("timeout_s")) {
    int devices = 0;
    const cudaError_t probe = cudaGetDeviceCount(&devices);
    if (probe != cudaSuccess || devices == 0)
      throw std::runtime_error(std::string("comm nccl: no CUDA device visible (") +
                               (probe != cudaSuccess ? cudaGetErrorString(probe) : "0 devices") +
                               "); use dist.backend = \"mpi\" on CPU machines");
    ncclUniqueId id;
    bool via_mpi = false;
#ifdef VEXP_NCCL_WITH_MPI
    if (under_mpi_launcher()) {
      int inited = 0;
      MPI_Initialized(&inited);
      if (!inited) {
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
        owns_mpi_ = true;
      }
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      via_mpi = true;
    }
#endif
    if (!via_mpi) {
      rank_ = env_int({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, 0);
      size_ = env_int({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, 1);
      if (size_ > 1) id = file_rendezvous(p.str("rendezvous"));
      else nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    }
    device_ = env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}, 0) % devices;
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }

  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
#ifdef VEXP_NCCL_WITH_MPI
    if (owns_mpi_) {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Finalize();
    }
#endif
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(at::Tensor& t, vexp::ReduceOp op) override { allreduce_async(t, op)->wait(); }

  std::shared_ptr<vexp::Work> allreduce_async(at::Tensor t, vexp::ReduceOp op) override {
    require(t, "allreduce");
    at::Tensor dev = staged(t);
    const ncclRedOp_t nop = op == vexp::ReduceOp::Max ? ncclMax : op == vexp::ReduceOp::Avg ? avg_op() : ncclSum;
    order_after_default_stream();
    nccl_check(ncclAllReduce(dev.data_ptr(), dev.data_ptr(), static_cast<size_t>(dev.numel()),
                             nccl_type(dev.scalar_type()), nop, comm_, stream_),
               "ncclAllReduce");
    return finish(t, dev);
  }

  void broadcast(at::Tensor& t, int root) override {
    require(t, "broadcast");
    at::Tensor dev = staged(t);
    order_after_default_stream();
    nccl_check(ncclBroadcast(dev.data_ptr(), dev.data_ptr(), static_cast<size_t>(dev.numel()),
                             nccl_type(dev.scalar_type()), root, comm_, stream_),
               "ncclBroadcast");
    finish(t, dev)->wait();
  }

  at::Tensor allgather(const at::Tensor& t) override {
    require(t, "allgather");
    at::Tensor in = staged(t.contiguous());
    std::vector<int64_t> sizes{size_};
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
    at::Tensor out = at::empty(sizes, in.options());
    order_after_default_stream();
    nccl_check(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                             nccl_type(in.scalar_type()), comm_, stream_),
               "ncclAllGather");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return t.is_cuda() ? out : out.to(at::kCPU);
  }

  void barrier() override {
    at::Tensor one = at::ones({1}, at::kInt);
    allreduce(one, vexp::ReduceOp::Sum);
  }

 private:
  void require(const at::Tensor& t, const char* what) const {
    if (!t.defined()) throw std::invalid_argument(std::string("comm nccl: ") + what + " of an undefined tensor");
    if (!t.is_contiguous()) throw std::invalid_argument(std::string("comm nccl: ") + what + " needs a contiguous tensor");
  }

  at::Tensor staged(const at::Tensor& t) const {
    if (t.is_cuda()) return t;
    return t.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_)));
  }

  ncclRedOp_t avg_op() const {
#if NCCL_MAJOR > 2 || (NCCL_MAJOR == 2 && NCCL_MINOR >= 10)
    return ncclAvg;
#else
    throw std::invalid_argument("comm nccl: average needs NCCL >= 2.10");
#endif
  }

  void order_after_default_stream() {
    cudaEvent_t ev;
    cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ev, 0), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(stream_, ev, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ev);
  }

  std::shared_ptr<vexp::Work> finish(const at::Tensor& t, const at::Tensor& dev) {
    cudaEvent_t ev;
    cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(ev, stream_), "cudaEventRecord");
    std::function<void()> after;
    if (!t.is_cuda()) {
      at::Tensor host = t, d = dev;
      after = [host, d]() mutable { host.copy_(d.to(at::kCPU)); };
    }
    return std::make_shared<NcclWork>(ev, std::move(after));
  }

  ncclUniqueId file_rendezvous(const std::string& path) {
    if (path.empty())
      throw std::invalid_argument(
          "comm nccl: WORLD_SIZE > 1 without an MPI launcher: set dist.params.rendezvous to a file path every rank sees");
    ncclUniqueId id;
    if (rank_ == 0) {
      nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      // A temporary of a name nobody can guess (mkstemp: created, never a planted
      // link followed), then a rename: the other ranks never read half an id.
      std::string tmp = path + ".XXXXXX";
      const int fd = ::mkstemp(tmp.data());
      bool ok = fd >= 0 && ::write(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id);
      if (fd >= 0) ok = ::close(fd) == 0 && ok;
      if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        if (fd >= 0) ::unlink(tmp.c_str());
        throw std::runtime_error("comm nccl: cannot write the rendezvous file '" + path + "'");
      }
      return id;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in && in.read(reinterpret_cast<char*>(&id), sizeof id)) return id;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s_)
        throw std::runtime_error("comm nccl: rank 0 did not write the rendezvous file '" + path + "' within " +
                                 std::to_string(timeout_s_) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  int rank_ = 0, size_ = 1, device_ = 0;
  double timeout_s_;
  bool owns_mpi_ = false;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

VEXP_PLUGIN("comm_nccl", "0.1.0") {
  vexp::PluginDecl d("nccl", "NCCL collectives on CUDA tensors; bootstrapped over MPI or a rendezvous file");
  d.schema.text("rendezvous", "", "File for rank 0's NCCL id when not launched by MPI (shared file system)");
  d.schema.real("timeout_s", 600, "How long ranks wait for the rendezvous file").above(0);
  registrar.add_comm(std::move(d), [](const vexp::Params& p) { return std::make_shared<NcclComm>(p); });
}
