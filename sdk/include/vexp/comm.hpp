// Communication backends (local, MPI, NCCL) behind one interface.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

namespace vexp {

enum class ReduceOp { Sum, Avg, Max };

// A pending collective.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool done() = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(at::Tensor& t, ReduceOp op) = 0;   // in place
  virtual void broadcast(at::Tensor& t, int root) = 0;      // in place
  virtual at::Tensor allgather(const at::Tensor& t) = 0;    // [size, ...t.sizes()]
  virtual void barrier() = 0;
  // Asynchronous allreduce; the default runs it at once and returns a finished Work.
  virtual std::shared_ptr<Work> allreduce_async(at::Tensor t, ReduceOp op);
  // A collective waiting longer than `timeout_s` makes the backend call `report`
  // with one sentence naming the silent rank(s), then abort every rank. Backends
  // without a watchdog (local) ignore it.
  virtual void set_watchdog(double timeout_s, std::function<void(const std::string&)> report);
  // Ends every rank of the job with `code` (the job cannot continue after one
  // rank failed). The default exits this process.
  [[noreturn]] virtual void abort(int code);
};

}  // namespace vexp
