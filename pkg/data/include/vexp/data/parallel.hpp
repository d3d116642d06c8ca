// Threads and progress for the `vexp data` tools.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace vexp::data {

inline int default_workers() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Runs fn(i) for i in [0, n) on `workers` threads. With `stop`, no new index is
// started once it is set (the ones under way finish).
template <class Fn>
void parallel_for(int64_t n, int workers, Fn fn, const std::atomic<bool>* stop = nullptr) {
  std::atomic<int64_t> next{0};
  std::vector<std::thread> ts;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(workers, n));
  for (int64_t w = 0; w < threads; ++w)
    ts.emplace_back([&] {
      for (int64_t i; !(stop && stop->load()) && (i = next.fetch_add(1)) < n;) fn(i);
    });
  for (auto& t : ts) t.join();
}

// Progress of `total` items: on a terminal a bar redrawn in place with rate and
// ETA; otherwise a plain line at every tenth of the work. Thread-safe.
class Progress {
 public:
  Progress(std::string what, int64_t total, std::ostream& out, bool terminal);
  void tick();
  void finish();  // the last state, then a newline on a terminal

 private:
  void draw(bool final);
  std::string what_;
  int64_t total_, done_ = 0, next_tenth_ = 1;
  std::ostream& out_;
  bool terminal_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mu_;
};

// Whether stderr is a terminal (the progress bar's target).
bool stderr_is_terminal();

}  // namespace vexp::data
