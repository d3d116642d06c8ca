#include "vexp/runtime/buckets.hpp"

#include <string>

namespace vexp {

std::vector<std::vector<size_t>> bucket_layout(const std::vector<int64_t>& numels, int64_t elem_bytes,
                                               double bucket_mb) {
  const double limit = bucket_mb * 1024.0 * 1024.0;
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> cur;
  int64_t cur_elems = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    cur.push_back(k);
    cur_elems += numels[k];
    if (static_cast<double>(cur_elems * elem_bytes) >= limit) {
      buckets.push_back(std::move(cur));
      cur.clear();
      cur_elems = 0;
    }
  }
  if (!cur.empty()) buckets.push_back(std::move(cur));
  return buckets;
}

int64_t wire_bytes_per_element(const std::string& compression) { return compression == "none" ? 4 : 2; }

}  // namespace vexp
