#include <gtest/gtest.h>

#include <fstream>

#include "vexp/base/files.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/rundir/sha256.hpp"

using namespace vexp::rundir;

// FIPS 180-4 / NIST example values.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesEqualWhole) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += std::to_string(i * 7919) + ",";
  Sha256 s;
  for (size_t i = 0; i < text.size(); i += 37) s.update(std::string_view(text).substr(i, 37));
  EXPECT_EQ(s.hex(), sha256_hex(text));
}

TEST(Sha256, FileAndRefusals) {
  vexp::base::TempDir tmp;
  const auto f = tmp.path() / "f.txt";
  std::ofstream(f) << "abc";
  EXPECT_EQ(sha256_file(f.string(), 1 << 20), sha256_hex("abc"));
  EXPECT_THROW(sha256_file(f.string(), 2), vexp::base::Error);                   // larger than allowed
  EXPECT_THROW(sha256_file(tmp.path().string(), 1 << 20), vexp::base::Error);   // a folder
  EXPECT_THROW(sha256_file((tmp.path() / "nope").string(), 1 << 20), vexp::base::Error);
}
