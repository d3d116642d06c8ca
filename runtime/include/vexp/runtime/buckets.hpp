// The reducer's gradient buckets, torch-free: which parameters share a bucket and
// in which order the buckets are launched. The Reducer (reducer.hpp) lays out its
// buffers with it and `vexp plan` models the allreduce with it, so both see one layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp {

// Parameters in registration order with `numels[k]` elements each, sent as
// `elem_bytes`-byte values: buckets filled in reverse registration order (the
// order backward produces gradients), a bucket closed as soon as it holds at least
// `bucket_mb` MiB. Returns each bucket's parameter indices in fill order; bucket 0
// is launched first.
std::vector<std::vector<size_t>> bucket_layout(const std::vector<int64_t>& numels, int64_t elem_bytes,
                                               double bucket_mb);

// Bytes per gradient element on the wire: 4 (none), 2 (fp16, bf16).
int64_t wire_bytes_per_element(const std::string& compression);

}  // namespace vexp
