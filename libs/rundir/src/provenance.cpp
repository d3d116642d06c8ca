#include "vexp/rundir/provenance.hpp"
#include "vexp/base/text.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "vexp/base/files.hpp"

namespace vexp::rundir {

using json = nlohmann::json;

namespace {

// One POSIX shell word: unchanged when it holds only letters, digits and
// _-+=/.,:@%, else in single quotes.
std::string shell_word(const std::string& s) {
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isalnum(c) || std::string_view("_-+=/.,:@%").find(static_cast<char>(c)) != std::string_view::npos;
      }))
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string scalar_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "(none)";
  return v.dump();
}

void flatten(const json& v, const std::string& key, std::vector<std::pair<std::string, std::string>>& out) {
  auto join = [&](const std::string& k) { return key.empty() ? k : key + "." + k; };
  if (v.is_object()) {
    for (const auto& [k, c] : v.items()) flatten(c, join(k), out);
    return;
  }
  if (v.is_array()) {
    const bool objects = !v.empty() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_object(); });
    if (!objects) {
      std::string line;
      for (const auto& e : v) line += (line.empty() ? "" : " ") + shell_word(scalar_text(e));
      out.emplace_back(key, line);
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const auto name = v[i].find("name");
      const bool named = name != v[i].end() && name->is_string() && !name->get<std::string>().empty();
      json rest = v[i];
      if (named) rest.erase("name");
      flatten(rest, named ? join(name->get<std::string>()) : key + "[" + std::to_string(i) + "]", out);
    }
    return;
  }
  out.emplace_back(key, scalar_text(v));
}

// The lines of provenance.jsonl (its text read bounded), kept whatever they hold.
std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

void write_lines(const fs::path& file, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  try {
    base::write_file_atomic(file.string(), text);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

std::optional<json> record_of(const std::string& line) {
  try {
    json j = json::parse(line);
    if (j.is_object() && j.contains("format") && j["format"].is_string()) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// A hashed file as records write it: path, sha256 and the reason it was not hashed.
json file_json(const HashedFile& f) {
  json e{{"path", f.path}, {"sha256", f.sha256}};
  if (!f.error.empty()) e["error"] = f.error;
  return e;
}

json files_json(const std::vector<HashedFile>& hashed) {
  json files = json::array();
  for (const auto& f : hashed) files.push_back(file_json(f));
  return files;
}

}  // namespace

json Invocation::to_json() const {
  json vars = json::array();
  for (const auto& v : variables)
    vars.push_back({{"name", v.name}, {"value", v.value}, {"environment", v.environment ? json(*v.environment) : json()}});
  json plugs = json::array();
  for (const auto& p : plugins)
    plugs.push_back({{"name", p.name}, {"version", p.version}, {"file", p.file}, {"sha256", p.sha256},
                     {"build_tag", p.build_tag}});
  return json{{"format", kProvenanceFormat},
              {"invocation", number},
              {"start", start},
              {"end", end},
              {"outcome", outcome},
              {"vexp", {{"version", vexp_version}, {"commit", vexp_commit}, {"tree", vexp_tree}, {"build_tag", build_tag}}},
              {"argv", argv},
              {"cwd", cwd},
              {"recipe", {{"path", recipe}, {"hash", recipe_hash}, {"files", files_json(recipe_files)}}},
              {"overrides", overrides},
              {"variables", vars},
              {"data", {{"dataset", dataset}, {"roots", data_roots}, {"files", files_json(data_files)}}},
              {"environment", environment},
              {"hosts", hosts},
              {"ranks", ranks},
              {"launcher", launcher},
              {"job", job},
              {"comm", comm},
              {"libraries", libraries},
              {"plugins", plugs}};
}

int64_t append_invocation(const fs::path& dir, Invocation& inv) {
  const fs::path file = RunDir(dir).provenance();
  std::vector<std::string> lines = lines_of(file);
  int64_t last = 0;
  for (const auto& l : lines)
    if (auto r = record_of(l)) {
      const auto n = r->find("invocation");
      if (n != r->end() && n->is_number_integer()) last = std::max(last, n->get<int64_t>());
    }
  inv.number = last + 1;
  lines.push_back(inv.to_json().dump());
  write_lines(file, lines);
  return inv.number;
}

void finish_invocation(const fs::path& dir, int64_t number, const std::string& outcome,
                       const std::map<std::string, HashedFile>& weights) {
  const fs::path file = RunDir(dir).provenance();
  std::vector<std::string> lines = lines_of(file);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    auto r = record_of(*it);
    if (!r) continue;
    const auto n = r->find("invocation");
    if (n == r->end() || !n->is_number_integer() || n->get<int64_t>() != number) continue;
    (*r)["end"] = base::utc_now();
    (*r)["outcome"] = outcome;
    if (!weights.empty()) {
      json w = json::object();
      for (const auto& [tag, f] : weights) w[tag] = file_json(f);
      (*r)["weights"] = std::move(w);
    }
    *it = r->dump();
    write_lines(file, lines);
    return;
  }
  throw Error("'" + file.string() + "' has no record of invocation " + std::to_string(number) + " to complete");
}

Provenance read_provenance(const fs::path& dir) {
  Provenance p;
  const fs::path file = RunDir(dir).provenance();
  for_each_record(file, p.skipped, [&](const std::string& line, int64_t number) {
    if (auto r = record_of(line))
      p.records.push_back(std::move(*r));
    else
      p.skipped.add(file, number, "not a JSON object with a \"format\"");
  });
  return p;
}

std::vector<std::pair<std::string, std::string>> flatten_record(const json& record) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!record.is_object()) return out;
  // The record's own order (nlohmann::json sorts keys): the keys of to_json first.
  static const char* const order[] = {"invocation", "start", "end", "outcome", "vexp", "argv", "cwd",
                                      "recipe", "overrides", "variables", "data", "environment", "hosts",
                                      "ranks", "launcher", "job", "comm", "libraries", "plugins"};
  std::set<std::string> done{"format"};
  for (const char* k : order) {
    done.insert(k);
    const auto it = record.find(k);
    if (it != record.end()) flatten(*it, k, out);
  }
  for (const auto& [k, v] : record.items())
    if (!done.count(k)) flatten(v, k, out);
  return out;
}

RunsDifferences differences_between(const std::vector<json>& last) {
  std::vector<std::optional<FlatRows>> runs(last.size());
  for (size_t i = 0; i < last.size(); ++i) {
    if (last[i].is_null()) continue;
    runs[i].emplace();
    for (auto& kv : flatten_record(last[i]))
      if (kv.first != "invocation" && kv.first != "start" && kv.first != "end") runs[i]->push_back(std::move(kv));
  }
  return differences_between(runs);
}

RunsDifferences differences_between(const std::vector<std::optional<FlatRows>>& runs) {
  RunsDifferences out;
  std::vector<std::string> keys;
  std::set<std::string> seen;
  std::vector<std::map<std::string, std::string>> rows(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i]) continue;
    ++out.recorded;
    for (const auto& [k, v] : *runs[i]) {
      rows[i][k] = v;
      if (seen.insert(k).second) keys.push_back(k);
    }
  }
  out.keys = keys.size();
  for (const auto& k : keys) {
    RunsDifference d{k, {}};
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = rows[i].find(k);
      d.values.push_back(!runs[i] ? "(not recorded)" : it == rows[i].end() ? "(absent)" : it->second);
    }
    if (!std::all_of(d.values.begin(), d.values.end(), [&](const std::string& v) { return v == d.values[0]; }))
      out.rows.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> run_labels(const std::vector<std::string>& names, const std::vector<std::string>& dirs) {
  std::vector<std::vector<std::string>> parts;  // each path's components, last first
  for (const auto& d : dirs) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(d, ec), ec);
    if (ec) p = fs::path(d).lexically_normal();
    std::vector<std::string> c;
    for (const auto& part : p)
      if (!part.empty() && part != "/" && part != ".") c.insert(c.begin(), part.string());
    parts.push_back(c);
  }
  auto tail = [&](size_t i, size_t k) {
    std::string t;
    for (size_t j = std::min(k, parts[i].size()); j-- > 0;) t += parts[i][j] + (j ? "/" : "");
    return t;
  };
  std::vector<std::string> labels(names);
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<size_t> same;
    for (size_t j = 0; j < names.size(); ++j)
      if (j != i && names[j] == names[i]) same.push_back(j);
    if (same.empty()) continue;
    size_t k = 1;
    for (; k < parts[i].size(); ++k) {
      bool unique = true;
      for (size_t j : same) unique = unique && tail(j, k) != tail(i, k);
      if (unique) break;
    }
    labels[i] += " (" + tail(i, k) + ")";
  }
  return labels;
}

std::vector<Difference> differences(const json& a, const json& b) {
  const auto fa = flatten_record(a), fb = flatten_record(b);
  auto skip = [](const std::string& k) { return k == "invocation" || k == "start" || k == "end"; };
  std::map<std::string, std::string> mb(fb.begin(), fb.end());
  std::vector<Difference> out;
  std::set<std::string> seen;
  for (const auto& [k, v] : fa) {
    seen.insert(k);
    if (skip(k)) continue;
    const auto it = mb.find(k);
    const std::string other = it == mb.end() ? "" : it->second;
    if (other != v || it == mb.end()) out.push_back({k, v, other});
  }
  for (const auto& [k, v] : fb)
    if (!seen.count(k) && !skip(k)) out.push_back({k, "", v});
  return out;
}



std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

std::map<std::string, std::string> job_ids(const EnvLookup& env) {
  std::map<std::string, std::string> out;
  for (const char* v : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT", "PBS_JOBID",
                        "LSB_JOBID", "JOB_ID", "FLUX_JOB_ID"})
    if (const char* x = env(v); x && *x) out[v] = x;
  return out;
}

namespace {

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// A SLURM_ variable that names this job's instance rather than its shape: the job,
// step, array, task and node ids (the ids of the job are in the record's `job`), pids,
// ports, addresses, hosts and times. Two runs of one recipe on Slurm differ in all of
// them, and none changes what the run does.
bool slurm_instance(const std::string& name) {
  for (const char* tail : {"ID", "IDS", "_PORT", "_IPADDR", "_HOST", "_TIME"})
    if (ends_with(name, tail)) return true;
  return name == "SLURM_RESTART_COUNT";
}

}  // namespace

std::map<std::string, std::string> run_environment(const std::vector<std::string>& environ_lines) {
  static const char* const prefixes[] = {"VEXP_",  "OMP_",  "GOMP_",  "KMP_",  "MKL_",     "OPENBLAS_", "CUDA_",
                                         "CUBLAS_", "CUDNN_", "NCCL_", "TORCH_", "PYTORCH_", "MALLOC_"};
  static const char* const names[] = {"GLIBC_TUNABLES", "LD_PRELOAD", "LD_LIBRARY_PATH"};
  // KEY covers API_KEY, APIKEY, ACCESS_KEY, SIGNING_KEY, ...: hiding a harmless value
  // (a ..._KEYS setting) is the cheaper mistake.
  static const char* const secret[] = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE", "KEY", "AUTH"};
  std::map<std::string, std::string> out;
  for (const auto& line : environ_lines) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = line.substr(0, eq);
    bool wanted = std::find(std::begin(names), std::end(names), name) != std::end(names);
    for (const char* p : prefixes) wanted = wanted || name.rfind(p, 0) == 0;
    wanted = wanted || (name.rfind("SLURM_", 0) == 0 && !slurm_instance(name));
    if (!wanted) continue;
    std::string upper = name;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    bool hidden = false;
    for (const char* s : secret) hidden = hidden || upper.find(s) != std::string::npos;
    out[name] = hidden ? "(set; not recorded: the name looks secret)" : line.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> environ_lines() {
  std::vector<std::string> out;
  for (char** e = ::environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

std::vector<std::string> mapped_files_of(const std::string& maps_text) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream in(maps_text);
  for (std::string line; std::getline(in, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (seen.insert(path).second) out.push_back(path);
  }
  return out;
}

std::vector<std::string> mapped_files() {
  // /proc files report a size of 0: read_file_bounded reads them to their end.
  try {
    return mapped_files_of(base::read_file_bounded("/proc/self/maps", 64ull << 20));
  } catch (const std::exception&) {
    return {};
  }
}

std::string loaded_library(const std::vector<std::string>& mapped, const std::string& stem) {
  const std::string prefix = "lib" + stem;
  std::vector<std::string> names;
  for (const auto& p : mapped) {
    const std::string f = fs::path(p).filename().string();
    if (f.size() <= prefix.size() || f.compare(0, prefix.size(), prefix) != 0) continue;
    const char next = f[prefix.size()];
    if (next != '.' && next != '-') continue;
    if (f.find(".so") == std::string::npos) continue;
    if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
  }
  if (names.empty()) return "not loaded";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::map<std::string, std::string> loaded_libraries(const std::vector<std::string>& mapped) {
  std::map<std::string, std::string> out;
  out["mpi"] = loaded_library(mapped, "mpi");
  out["nccl"] = loaded_library(mapped, "nccl");
  out["cuda"] = loaded_library(mapped, "cudart");
  out["cudnn"] = loaded_library(mapped, "cudnn");
  std::string ff;
  for (const char* stem : {"avcodec", "avformat", "avutil"}) {
    const std::string l = loaded_library(mapped, stem);
    if (l != "not loaded") ff += (ff.empty() ? "" : ", ") + l;
  }
  out["ffmpeg"] = ff.empty() ? "not loaded" : ff;
  return out;
}

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

}  // namespace vexp::rundir
