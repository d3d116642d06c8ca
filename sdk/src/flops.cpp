#include "vexp/flops.hpp"

namespace vexp {
namespace {
thread_local double* active_counter = nullptr;
}

bool counting_macs() { return active_counter != nullptr; }
void add_macs(double macs) {
  if (active_counter) *active_counter += macs;
}

FlopCounter::FlopCounter() : previous_(active_counter) { active_counter = &total_; }
FlopCounter::~FlopCounter() {
  if (previous_) *previous_ += total_;
  active_counter = previous_;
}
double FlopCounter::macs() const { return total_; }

}  // namespace vexp
