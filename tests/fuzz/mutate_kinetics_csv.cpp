// Bounded, deterministic mutation of the seed corpus through the fuzz entry point,
// for builds without libFuzzer: mutate_kinetics_csv CORPUS_DIR ITERATIONS. Any broken
// promise aborts (a failed test); the counts are printed for the record.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "vexp/base/files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}
  std::string mutate(std::string s) {
    const int rounds = 1 + pick(6);
    for (int i = 0; i < rounds; ++i) s = once(std::move(s));
    return s;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  size_t at(const std::string& s) { return static_cast<size_t>(pick(static_cast<int>(s.size()) + 1)); }
  std::string token() {
    static const std::vector<std::string> t{
        ",", "\"", "\"\"", "\n", "\r\n", "\r", "\t", std::string(1, '\0'), "..", ".", "/", "\\", "../../x",
        "\xEF\xBB\xBF", "\xff", "\x1b[2J", "99999999999", "1e9", "-1", "0.5", "59.0", "..0", " ", "is_cc",
        "label,youtube_id,time_start,time_end,split\n", "\"a,b\"", "train", std::string(300, 'n')};
    return t[static_cast<size_t>(pick(static_cast<int>(t.size())))];
  }
  std::string once(std::string s) {
    switch (pick(6)) {
      case 0: return s.insert(at(s), token());
      case 1:
        if (!s.empty()) s[at(s) % s.size()] = static_cast<char>(pick(256));
        return s;
      case 2: {
        if (s.empty()) return s;
        const size_t a = at(s) % s.size();
        return s.erase(a, static_cast<size_t>(pick(16)));
      }
      case 3: {  // repeat a slice
        if (s.empty()) return s;
        const size_t a = at(s) % s.size();
        return s.insert(at(s), s.substr(a, static_cast<size_t>(pick(64))));
      }
      case 4: return s.substr(0, at(s));
      default: return token() + s;
    }
  }
  std::mt19937 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR ITERATIONS\n", argv[0]);
    return 2;
  }
  std::vector<std::string> seeds;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) files.push_back(e.path());
  std::sort(files.begin(), files.end());  // the same order on every filesystem
  for (const auto& f : files) seeds.push_back(vexp::base::read_file_bounded(f.string(), 1 << 20));
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in '%s'\n", argv[1]);
    return 2;
  }
  const long n = std::stol(argv[2]);
  Mutator m(20261203);
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  for (long i = 0; i < n; ++i) {
    const std::string x = m.mutate(seeds[static_cast<size_t>(i) % seeds.size()]);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(x.data()), x.size());
  }
  std::printf("%zu seeds, %ld mutated inputs: no crash, every error located\n", seeds.size(), n);
  return 0;
}
