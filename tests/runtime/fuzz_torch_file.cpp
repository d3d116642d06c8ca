// A bounded, deterministic mutation driver for the .pt / .pth reader: real checkpoints
// and state dicts (tests/fixtures/torch_files, plus two vexp checkpoints written here)
// mutated N times with a fixed seed, each mutant read as vexp reads checkpoints and
// weights. Every mutant must load or be refused in one line; a crash, an exception
// that is not std::exception, or a refusal for want of memory (the seeds are a few KB:
// nothing in them may ask for more) fails the run. ctest runs it under `ulimit -v`.
//
//   vexp_fuzz_torch_file SEED_DIR [ITERATIONS] [RNG_SEED]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "torch_file_builder.hpp"
#include "vexp/base/files.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace fs = std::filesystem;

namespace {

struct Seed {
  std::string name, bytes;
  // For zip seeds: the records, to mutate one and zip again with valid CRCs.
  std::vector<std::pair<std::string, std::string>> records;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Seeds are trusted files of the tree: libtorch's reader may split them into records.
std::vector<std::pair<std::string, std::string>> records_of(const fs::path& p) {
  std::vector<std::pair<std::string, std::string>> out;
  caffe2::serialize::PyTorchStreamReader reader(p.string());
  for (const auto& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;  // the writer adds its own
    at::DataPtr data;
    size_t size = 0;
    std::tie(data, size) = reader.getRecord(name);
    out.emplace_back(name, std::string(static_cast<const char*>(data.get()), size));
  }
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void bytes(std::string& s) {
    const size_t rounds = 1 + below(6);
    for (size_t r = 0; r < rounds && !s.empty(); ++r) {
      const size_t at = below(s.size());
      switch (below(8)) {
        case 0: s[at] = static_cast<char>(s[at] ^ (1 << below(8))); break;
        case 1: s[at] = static_cast<char>(kBytes[below(sizeof kBytes)]); break;
        case 2: {  // a 4- or 8-byte little-endian integer: sizes, offsets, counts
          static const uint64_t ints[] = {0, 1, 0x7f, 0xff, 0x7fff, 0xffff, 0x7fffffff, 0xffffffff, 0x80000000,
                                          0x7fffffffffffffffull, 0xffffffffffffffffull, 1ull << 40};
          const uint64_t v = ints[below(sizeof ints / sizeof ints[0])];
          const size_t n = below(2) ? 4 : 8;
          for (size_t k = 0; k < n && at + k < s.size(); ++k) s[at + k] = static_cast<char>((v >> (8 * k)) & 0xff);
          break;
        }
        case 3: s.resize(at); break;
        case 4: s.insert(at, 1 + below(16), static_cast<char>(kBytes[below(sizeof kBytes)])); break;
        case 5: s.erase(at, 1 + below(16)); break;
        case 6: {  // a copy of another stretch of the file
          const size_t from = below(s.size()), n = std::min<size_t>(1 + below(64), s.size() - from);
          s.insert(at, s.substr(from, n));
          break;
        }
        default: s[at] = static_cast<char>(kOpcodes[below(sizeof kOpcodes - 1)]); break;
      }
    }
  }

 private:
  static constexpr unsigned char kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 'P', 'K', '.', '(', ')'};
  static constexpr char kOpcodes[] = "(.012NIJKLMRXTUBChjgqrpQ}])dlteasucb\x80\x81\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d"
                                     "\x8e\x8f\x90\x91\x92\x93\x94\x95\x96";
  std::mt19937_64 rng_;
};

constexpr unsigned char Mutator::kBytes[];
constexpr char Mutator::kOpcodes[];

// Reads `path` as vexp reads checkpoints and weights. "" when it loads, else the reason.
std::string read_like_vexp(const std::string& path) {
  try {
    vexp::PyRef root = vexp::load_torch_file(path);
    if (vexp::is_checkpoint(root)) {
      vexp::Checkpoint c = vexp::checkpoint_from(root, path);
      for (auto& [k, t] : c.model) (void)t.sum();  // touch every tensor: views must stay in their storage
      return "";
    }
    try {
      for (auto& [k, t] : vexp::find_state_dict(root, path)) (void)t.sum();
    } catch (const std::runtime_error&) {
      (void)vexp::find_tensor(root, path).sum();  // a clip, as `vexp predict --input` reads it
    }
    return "";
  } catch (const std::exception& e) {
    std::string m = e.what();
    return m.empty() ? std::string("(empty message)") : m;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SEED_DIR [ITERATIONS] [RNG_SEED]\n", argv[0]);
    return 2;
  }
  const long iterations = argc > 2 ? std::atol(argv[2]) : 3000;
  const uint64_t rng_seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 20261203;
  vexp::base::TempDir tmp("vexp_fuzz_torch_file");
  const fs::path dir = tmp.path();

  // Two vexp checkpoints: the current writer's, and libtorch's pickle_save (earlier vexps).
  vexp::Checkpoint c;
  c.model["features.w"] = at::arange(12, at::kFloat).view({3, 4});
  c.model["features.n"] = at::tensor(int64_t(5));
  c.optimizer["features.w"] = at::ones({3, 4});
  c.meta_json = R"({"epoch": 1})";
  vexp::save_checkpoint((dir / "vexp_ckpt.pt").string(), c);
  {
    c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
    c10::Dict<std::string, at::Tensor> model;
    model.insert("features.w", at::arange(6, at::kFloat));
    root.insert(c10::IValue(std::string("format")), c10::IValue(std::string("vexp-checkpoint-1")));
    root.insert(c10::IValue(std::string("model")), model);
    root.insert(c10::IValue(std::string("optimizer")), c10::Dict<std::string, at::Tensor>());
    root.insert(c10::IValue(std::string("meta")), c10::IValue(std::string("{}")));
    const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(root));
    vexp::base::write_file_atomic((dir / "old_ckpt.pt").string(), std::string(bytes.begin(), bytes.end()));
  }
  std::vector<fs::path> files{dir / "vexp_ckpt.pt", dir / "old_ckpt.pt"};
  for (const auto& e : fs::directory_iterator(argv[1]))
    if (e.path().extension() == ".pt" || e.path().extension() == ".pth") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Seed> seeds;
  int failures = 0;
  for (const auto& f : files) {
    Seed s{f.filename().string(), slurp(f), {}};
    if (s.bytes.rfind("PK", 0) == 0) s.records = records_of(f);
    const std::string why = read_like_vexp(f.string());
    if (!why.empty()) {
      std::fprintf(stderr, "FAIL: seed %s does not load: %s\n", s.name.c_str(), why.c_str());
      ++failures;
    }
    seeds.push_back(std::move(s));
  }

  Mutator m(rng_seed);
  const std::string path = (dir / "mutant.pth").string();
  long loaded = 0, refused = 0;
  std::map<std::string, long> reasons;
  for (long i = 0; i < iterations; ++i) {
    const Seed& seed = seeds[m.below(seeds.size())];
    std::string bytes;
    const size_t how = seed.records.empty() ? 0 : m.below(3);
    if (how == 0) {
      bytes = seed.bytes;
      m.bytes(bytes);
    } else {
      // One record changed, zipped again with valid CRCs: the pickle (or a storage's
      // size) itself is what the reader meets.
      auto records = seed.records;
      size_t r = 0;
      for (size_t k = 0; k < records.size(); ++k)
        if (records[k].first == "data.pkl") r = k;
      if (how == 2) r = m.below(records.size());
      m.bytes(records[r].second);
      bytes = vexp::test::torch_zip(records);
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;  // no fsync: thousands of files
    const std::string why = read_like_vexp(path);
    if (why.empty()) {
      ++loaded;
      continue;
    }
    ++refused;
    const bool one_line = why.find('\n') == std::string::npos;
    const bool named = why.find("mutant.pth") != std::string::npos;
    const bool memory = why.find("alloc") != std::string::npos || why.find("out of memory") != std::string::npos;
    if (!one_line || !named || memory) {
      std::fprintf(stderr, "FAIL: iteration %ld (seed %s): %s\n", i, seed.name.c_str(), why.c_str());
      const fs::path kept = dir / ("failure_" + std::to_string(i) + ".pth");
      vexp::base::write_file_atomic(kept.string(), bytes);
      tmp.keep();
      std::fprintf(stderr, "  the mutant is kept as %s\n", kept.c_str());
      ++failures;
    }
    // The kind of reason: its words up to the first quote or digit.
    const size_t colon = why.find(": ");
    std::string kind = colon == std::string::npos ? why : why.substr(colon + 2);
    kind = kind.substr(0, kind.find_first_of("'0123456789"));
    ++reasons[kind];
  }
  std::printf("%ld executions over %zu seeds (rng seed %llu): %ld loaded, %ld refused, %d failures\n", iterations,
              seeds.size(), static_cast<unsigned long long>(rng_seed), loaded, refused, failures);
  std::vector<std::pair<long, std::string>> top;
  for (const auto& [k, n] : reasons) top.emplace_back(n, k);
  std::sort(top.rbegin(), top.rend());
  for (size_t k = 0; k < top.size() && k < 15; ++k) std::printf("  %6ld  %s\n", top[k].first, top[k].second.c_str());
  return failures ? 1 : 0;
}
