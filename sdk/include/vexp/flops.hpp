// Counting multiply-adds from the built graph: layers report the MACs of each
// convolution / linear they run while a counter is active on this thread.
#pragma once

#include <cstdint>

namespace vexp {

// True while a FlopCounter is alive on this thread (cheap to test in forward()).
bool counting_macs();
void add_macs(double macs);

// MACs of a convolution producing `output_elements` values, each reading
// `in_channels_per_group * kernel_volume` inputs.
inline double conv_macs(int64_t output_elements, int64_t in_channels_per_group, int64_t kernel_volume) {
  return static_cast<double>(output_elements) * static_cast<double>(in_channels_per_group) *
         static_cast<double>(kernel_volume);
}

class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  double macs() const;

 private:
  double* previous_;
  double total_ = 0;
};

}  // namespace vexp
