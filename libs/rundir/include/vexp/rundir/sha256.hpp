// SHA-256 (FIPS 180-4), for the content hashes a run directory records (recipe
// files, plugin libraries): the same hex digest `sha256sum` prints.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace vexp::rundir {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  // The hex digest (64 lowercase characters); the object is spent afterwards.
  std::string hex();

 private:
  void block(const unsigned char* p);
  std::array<std::uint32_t, 8> h_;
  unsigned char buf_[64];
  std::size_t used_ = 0;
  std::uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);

// The digest of the regular file `path`, read in pieces (no whole-file copy), at most
// `max_bytes`. Throws rundir::Error naming the file when it is not a regular file of
// at most that size or cannot be read.
std::string sha256_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace vexp::rundir
