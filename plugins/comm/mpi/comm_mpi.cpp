// comm/mpi: collectives over MPI on CPU tensors (and on device memory when the
// MPI library is CUDA-aware).
//
// Every MPI call of the data path runs on one communication thread, fed by a
// queue: allreduce_async() returns at once and the reduction proceeds while the
// caller computes (the reducer launches buckets from backward hooks). The
// synchronous calls queue their work and wait for it, so calls stay ordered.
// A watchdog thread aborts the job when a collective waits longer than the
// timeout, after asking every peer (on a separate communicator) which of them
// still answers; the silent ones are named.
//
// Rank and size come from MPI (mpirun, srun --mpi=pmix, jsrun); RANK/WORLD_SIZE,
// SLURM_PROCID/SLURM_NTASKS or OMPI_COMM_WORLD_* are cross-checked against it.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "vexp/comm.hpp"
#include "vexp/registrar.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("comm mpi: ") + what + " failed: " + mpi_error(rc));
}

// Sum / max of 16-bit floats (MPI has no half type): user reduction ops.
template <class H>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<H>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
template <class H>
void half_max(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<H>(std::max(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? static_cast<int>(x) : -1;
}

// One MPI initialisation per process (MPI cannot be initialised twice).
struct MpiProcess {
  std::mutex mu;
  int users = 0;
  bool finalized = false;
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Op half_sum_op = MPI_OP_NULL, half_max_op = MPI_OP_NULL, bf16_sum_op = MPI_OP_NULL, bf16_max_op = MPI_OP_NULL;
};
MpiProcess& process() {
  static MpiProcess p;
  return p;
}

class Task {
 public:
  std::function<void()> fn;
  std::string what;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::string error;
};

class MpiWork final : public vexp::Work {
 public:
  explicit MpiWork(std::shared_ptr<Task> t) : task_(std::move(t)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(task_->mu);
    task_->cv.wait(lock, [&] { return task_->finished; });
    if (!task_->error.empty()) throw std::runtime_error(task_->error);
  }
  bool done() override {
    std::lock_guard<std::mutex> lock(task_->mu);
    return task_->finished;
  }

 private:
  std::shared_ptr<Task> task_;
};

class MpiComm final : public vexp::Comm {
 public:
  explicit MpiComm(const vexp::Params& p) : timeout_s_(p.f64("timeout_s")) {
    MpiProcess& proc = process();
    {
      std::lock_guard<std::mutex> lock(proc.mu);
      if (proc.finalized)
        throw std::runtime_error("comm mpi: MPI was already finalized in this process; create one communicator per process");
      int inited = 0;
      MPI_Initialized(&inited);
      if (!inited) {
        // libmpi's own components (Open MPI's MCA plugins) need its symbols global;
        // this plugin was opened with RTLD_LOCAL.
        for (const char* lib : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"})
          if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) break;
        int provided = 0;
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        proc.thread_level = provided;
        MPI_Op_create(&half_sum<c10::Half>, 1, &proc.half_sum_op);
        MPI_Op_create(&half_max<c10::Half>, 1, &proc.half_max_op);
        MPI_Op_create(&half_sum<c10::BFloat16>, 1, &proc.bf16_sum_op);
        MPI_Op_create(&half_max<c10::BFloat16>, 1, &proc.bf16_max_op);
      } else {
        MPI_Query_thread(&proc.thread_level);
      }
      if (proc.thread_level < MPI_THREAD_SERIALIZED)
        throw std::runtime_error("comm mpi: the MPI library gives no thread support (MPI_THREAD_SERIALIZED needed)");
      ++proc.users;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    check_environment();
    worker_ = std::thread([this] { work_loop(); });
    watchdog_ = std::thread([this] { watch_loop(); });
  }

  ~MpiComm() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    if (watchdog_.joinable()) watchdog_.join();
    MPI_Comm_free(&probe_comm_);
    MPI_Comm_free(&comm_);
    MpiProcess& proc = process();
    std::lock_guard<std::mutex> lock(proc.mu);
    if (--proc.users == 0 && !proc.finalized) {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Finalize();
      proc.finalized = true;
    }
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(at::Tensor& t, vexp::ReduceOp op) override { allreduce_async(t, op)->wait(); }

  std::shared_ptr<vexp::Work> allreduce_async(at::Tensor t, vexp::ReduceOp op) override {
    require(t, "allreduce");
    const int n = size_;
    return submit("allreduce of " + std::to_string(t.numel() * t.element_size()) + " bytes", [this, t, op, n]() mutable {
      MPI_Op mop = mpi_op(t.scalar_type(), op);
      for_chunks(t, [&](void* ptr, int count, MPI_Datatype type) {
        check(MPI_Allreduce(MPI_IN_PLACE, ptr, count, type, mop, comm_), "MPI_Allreduce");
      });
      if (op == vexp::ReduceOp::Avg) {
        if (!at::isFloatingType(t.scalar_type()))
          throw std::invalid_argument("comm mpi: average of an integer tensor");
        t.div_(n);
      }
    });
  }

  void broadcast(at::Tensor& t, int root) override {
    require(t, "broadcast");
    if (root < 0 || root >= size_)
      throw std::out_of_range("comm mpi: broadcast from root " + std::to_string(root) + " of a world of " +
                              std::to_string(size_));
    at::Tensor x = t;
    submit("broadcast", [this, x, root]() mutable {
      for_chunks(x, [&](void* ptr, int count, MPI_Datatype type) {
        check(MPI_Bcast(ptr, count, type, root, comm_), "MPI_Bcast");
      });
    })->wait();
  }

  at::Tensor allgather(const at::Tensor& t) override {
    require(t, "allgather");
    std::vector<int64_t> sizes{size_};
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
    at::Tensor out = at::empty(sizes, t.options());
    at::Tensor in = t.contiguous();
    submit("allgather", [this, in, out]() mutable {
      const int64_t bytes = in.numel() * in.element_size();
      if (bytes > INT32_MAX) throw std::invalid_argument("comm mpi: allgather of more than 2 GiB per rank");
      check(MPI_Allgather(in.data_ptr(), static_cast<int>(bytes), MPI_BYTE, out.data_ptr(), static_cast<int>(bytes),
                          MPI_BYTE, comm_),
            "MPI_Allgather");
    })->wait();
    return out;
  }

  void barrier() override {
    submit("barrier", [this] { check(MPI_Barrier(comm_), "MPI_Barrier"); })->wait();
  }

  void set_watchdog(double timeout_s, std::function<void(const std::string&)> report) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (timeout_s > 0) timeout_s_ = timeout_s;
    report_ = std::move(report);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void require(const at::Tensor& t, const char* what) const {
    if (!t.defined()) throw std::invalid_argument(std::string("comm mpi: ") + what + " of an undefined tensor");
    if (!t.is_contiguous())
      throw std::invalid_argument(std::string("comm mpi: ") + what + " needs a contiguous tensor");
    if (!t.is_cpu() && std::getenv("VEXP_MPI_CUDA_AWARE") == nullptr)
      throw std::invalid_argument(std::string("comm mpi: ") + what + " of a " + t.device().str() +
                                  " tensor; use comm 'nccl', or set VEXP_MPI_CUDA_AWARE=1 with a CUDA-aware MPI");
  }

  static MPI_Datatype mpi_type(at::ScalarType s) {
    switch (s) {
      case at::kFloat: return MPI_FLOAT;
      case at::kDouble: return MPI_DOUBLE;
      case at::kLong: return MPI_INT64_T;
      case at::kInt: return MPI_INT32_T;
      case at::kShort: return MPI_INT16_T;
      case at::kChar: return MPI_INT8_T;
      case at::kByte: return MPI_UINT8_T;
      case at::kBool: return MPI_C_BOOL;
      case at::kHalf:
      case at::kBFloat16: return MPI_UINT16_T;
      default: throw std::invalid_argument(std::string("comm mpi: unsupported dtype ") + c10::toString(s));
    }
  }

  static MPI_Op mpi_op(at::ScalarType s, vexp::ReduceOp op) {
    MpiProcess& p = process();
    const bool max = op == vexp::ReduceOp::Max;
    if (s == at::kHalf) return max ? p.half_max_op : p.half_sum_op;
    if (s == at::kBFloat16) return max ? p.bf16_max_op : p.bf16_sum_op;
    return max ? MPI_MAX : MPI_SUM;
  }

  // MPI counts are int: long tensors go in pieces.
  template <class F>
  static void for_chunks(at::Tensor& t, F&& f) {
    MPI_Datatype type = mpi_type(t.scalar_type());
    auto* base = static_cast<char*>(t.data_ptr());
    const int64_t total = t.numel(), esz = t.element_size();
    const int64_t chunk = int64_t(1) << 30;
    for (int64_t off = 0; off < total || (total == 0 && off == 0); off += chunk) {
      const int64_t n = std::min(chunk, total - off);
      f(base + off * esz, static_cast<int>(n), type);
      if (total == 0) break;
    }
  }

  std::shared_ptr<vexp::Work> submit(std::string what, std::function<void()> fn) {
    auto task = std::make_shared<Task>();
    task->fn = std::move(fn);
    task->what = std::move(what);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) throw std::runtime_error("comm mpi: communicator is shutting down");
      queue_.push_back(task);
    }
    cv_.notify_all();
    return std::make_shared<MpiWork>(task);
  }

  void work_loop() {
    for (;;) {
      std::shared_ptr<Task> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = queue_.front();
        queue_.pop_front();
        current_ = task->what;
        ++seq_;
        started_ = Clock::now();
        busy_ = true;
      }
      std::string error;
      try {
        task->fn();
      } catch (const std::exception& e) {
        error = e.what();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
      }
      {
        std::lock_guard<std::mutex> lock(task->mu);
        task->finished = true;
        task->error = error;
      }
      task->cv.notify_all();
    }
  }

  void watch_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_ || !busy_) continue;
      const double waited = std::chrono::duration<double>(Clock::now() - started_).count();
      if (waited < timeout_s_) continue;
      const std::string what = current_;
      const int64_t seq = seq_;
      auto report = report_;
      lock.unlock();
      const std::string silent = silent_ranks();
      char buf[512];
      std::snprintf(buf, sizeof buf, "%s (collective #%lld) has waited %.1f s (dist.timeout_s = %g): %s; aborting the job",
                    what.c_str(), static_cast<long long>(seq), waited, timeout_s_, silent.c_str());
      if (report) report(buf);
      else std::fprintf(stderr, "vexp: error: rank %d: %s\n", rank_, buf);
      abort(1);
    }
  }

  // Asks every peer, on the probe communicator, whether it is alive: a rank
  // stuck in the same collective answers from its own watchdog; a dead or hung
  // one does not within the grace period.
  std::string silent_ranks() {
    if (process().thread_level < MPI_THREAD_MULTIPLE) return "a peer rank died or hangs";
    std::vector<int> out(static_cast<size_t>(size_), rank_), in(static_cast<size_t>(size_), -1);
    std::vector<MPI_Request> reqs;
    std::vector<int> recv_of;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request s;
      MPI_Isend(&out[static_cast<size_t>(r)], 1, MPI_INT, r, 77, probe_comm_, &s);
      MPI_Request_free(&s);
      MPI_Request q;
      MPI_Irecv(&in[static_cast<size_t>(r)], 1, MPI_INT, r, 77, probe_comm_, &q);
      reqs.push_back(q);
      recv_of.push_back(r);
    }
    const double grace = std::min(30.0, std::max(2.0, timeout_s_));
    const auto t0 = Clock::now();
    std::vector<bool> answered(reqs.size(), false);
    while (std::chrono::duration<double>(Clock::now() - t0).count() < grace) {
      bool all = true;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (answered[i]) continue;
        int flag = 0;
        MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        if (flag) answered[i] = true;
        else all = false;
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string names;
    int count = 0;
    for (size_t i = 0; i < reqs.size(); ++i)
      if (!answered[i]) {
        names += (count++ ? ", " : "") + std::to_string(recv_of[i]);
      }
    if (count == 0) return "every rank answers, but the collective does not complete (mismatched collectives?)";
    return std::string(count == 1 ? "rank " : "ranks ") + names + (count == 1 ? " does" : " do") +
           " not respond (died or hangs)";
  }

  void check_environment() const {
    struct Pair {
      const char* rank;
      const char* size;
    };
    for (Pair e : {Pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, Pair{"PMI_RANK", "PMI_SIZE"},
                   Pair{"SLURM_PROCID", "SLURM_NTASKS"}, Pair{"RANK", "WORLD_SIZE"}}) {
      const int r = env_int(e.rank), n = env_int(e.size);
      if (n < 0) continue;
      if (n != size_ || (r >= 0 && r != rank_)) {
        throw std::runtime_error(std::string("comm mpi: the environment says rank ") + std::to_string(r) + " of " +
                                 std::to_string(n) + " (" + e.rank + "/" + e.size + ") but MPI says rank " +
                                 std::to_string(rank_) + " of " + std::to_string(size_) +
                                 ": start the ranks with mpirun, or srun --mpi=pmix under Slurm");
      }
      break;  // the launcher's own variables are authoritative
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL, probe_comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  std::function<void(const std::string&)> report_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stop_ = false, busy_ = false;
  std::string current_;
  int64_t seq_ = 0;
  Clock::time_point started_;
  std::thread worker_, watchdog_;
};

}  // namespace

VEXP_PLUGIN("comm_mpi", "0.1.0") {
  vexp::PluginDecl d("mpi",
                     "MPI collectives (mpirun / srun --mpi=pmix / jsrun); CPU tensors, or GPU with a CUDA-aware MPI");
  d.schema.real("timeout_s", 600, "Watchdog: abort when a collective waits longer (dist.timeout_s overrides)").above(0);
  registrar.add_comm(std::move(d), [](const vexp::Params& p) { return std::make_shared<MpiComm>(p); });
}
