#include "vexp/data/parallel.hpp"

#include <unistd.h>

#include <cstdio>

namespace vexp::data {

bool stderr_is_terminal() { return isatty(fileno(stderr)) != 0; }

namespace {
std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::string what, int64_t total, std::ostream& out, bool terminal)
    : what_(std::move(what)), total_(total), out_(out), terminal_(terminal),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::tick() {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (now - last_draw_ >= std::chrono::milliseconds(200) || done_ == total_) draw(false);
  } else if (total_ > 0 && done_ * 10 >= next_tenth_ * total_) {
    while (done_ * 10 >= next_tenth_ * total_) ++next_tenth_;
    draw(false);
  }
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || total_ == 0) return;
  finished_ = true;
  if (terminal_) {
    draw(true);
    out_ << "\n" << std::flush;
  }
}

void Progress::draw(bool final) {
  last_draw_ = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0;
  const double pct = total_ > 0 ? 100.0 * done_ / total_ : 100.0;
  std::string tail;
  if (done_ < total_ && rate > 0)
    tail = "ETA " + clock_text((total_ - done_) / rate);
  else
    tail = "took " + clock_text(elapsed);
  char nums[96];
  std::snprintf(nums, sizeof nums, "%lld/%lld %3.0f%% %.1f/s ", static_cast<long long>(done_),
                static_cast<long long>(total_), pct, rate);
  if (terminal_) {
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(kWidth * (total_ > 0 ? static_cast<double>(done_) / total_ : 1.0));
    out_ << "\r" << what_ << " [" << std::string(static_cast<size_t>(fill), '#')
         << std::string(static_cast<size_t>(kWidth - fill), '.') << "] " << nums << tail << "   " << std::flush;
  } else if (!final) {
    out_ << what_ << ": " << nums << tail << "\n" << std::flush;
  }
}

}  // namespace vexp::data
