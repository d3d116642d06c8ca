#include "vexp/slurm/settings.hpp"

#include <cctype>

#include "vexp/base/text.hpp"

namespace vexp::slurm {

std::string name_problem(const std::string& v) {
  if (v.empty()) return "is empty";
  for (unsigned char ch : v)
    if (!std::isalnum(ch) && ch != '_' && ch != '-' && ch != '.')
      return "holds '" + base::printable(std::string(1, static_cast<char>(ch))) +
             "' (a name has only letters, digits and ._-)";
  return "";
}

std::string time_problem(const std::string& v) {
  return time_seconds(v) ? "" : "is not a Slurm time limit (MINUTES, MINUTES:SECONDS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)";
}

std::optional<int64_t> time_seconds(const std::string& v) {
  // sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
  std::vector<int64_t> parts;
  int64_t days = -1;
  std::string cur;
  auto take = [&](std::string& t) -> bool {
    if (t.empty() || t.size() > 9) return false;
    for (char ch : t)
      if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
    parts.push_back(std::stoll(t));
    t.clear();
    return true;
  };
  for (char ch : v) {
    if (ch == '-') {
      if (days >= 0 || !parts.empty() || !take(cur)) return std::nullopt;
      days = parts.back();
      parts.clear();
    } else if (ch == ':') {
      if (!take(cur)) return std::nullopt;
    } else {
      cur += ch;
    }
  }
  if (!take(cur) || parts.size() > 3) return std::nullopt;
  if (days >= 0) {
    int64_t h = parts[0], m = parts.size() > 1 ? parts[1] : 0, s = parts.size() > 2 ? parts[2] : 0;
    return ((days * 24 + h) * 60 + m) * 60 + s;
  }
  if (parts.size() == 1) return parts[0] * 60;
  if (parts.size() == 2) return parts[0] * 60 + parts[1];
  return (parts[0] * 60 + parts[1]) * 60 + parts[2];
}

std::string time_lead_problem(const std::string& time, int64_t signal_lead_s, const std::string& lead_of) {
  if (time.empty()) return "";
  const std::optional<int64_t> limit = time_seconds(time);
  if (!limit || *limit > signal_lead_s) return "";
  return "is " + std::to_string(*limit) + " s, not longer than " + (lead_of.empty() ? "" : lead_of + "'s ") +
         "signal_lead_s = " + std::to_string(signal_lead_s) +
         " (the run is told to stop that long before the limit)";
}

std::vector<SettingProblem> settings_problems(const Settings& s, const std::string& lead_of) {
  std::vector<SettingProblem> out;
  auto bad = [&](const char* key, const std::string& why) { out.push_back({key, why}); };
  for (auto [key, v] : {std::pair<const char*, const std::string*>{"partition", &s.partition},
                        {"account", &s.account}})
    if (!v->empty())
      if (auto why = name_problem(*v); !why.empty()) bad(key, why);
  if (!s.time.empty()) {
    if (auto why = time_problem(s.time); !why.empty()) bad("time", why);
    if (auto why = time_lead_problem(s.time, s.signal_lead_s, lead_of); !why.empty()) bad("time", why);
  }
  if (!s.backend.empty())
    if (auto why = name_problem(s.backend); !why.empty()) bad("backend", why);
  // These become lines of a shell script: one value, one line.
  for (auto [key, list] : {std::pair<const char*, const std::vector<std::string>*>{"launcher", &s.launcher},
                           {"sbatch", &s.sbatch},
                           {"setup", &s.setup}})
    for (const auto& v : *list)
      if (base::has_control(v)) {
        bad(key, "holds a newline or control character (\"" + base::printable(v, 60) + "\")");
        break;
      }
  if (s.launcher.empty()) bad("launcher", "is empty (default: [\"srun\", \"--mpi=pmix\"])");
  for (const auto& w : s.launcher)
    if (w.empty()) {
      bad("launcher", "has an empty word");
      break;
    }
  for (const auto& o : s.sbatch)
    if (o.size() < 2 || o[0] != '-') {
      bad("sbatch", "holds \"" + base::printable(o, 60) + "\", not an sbatch option (\"--qos=high\")");
      break;
    }
  return out;
}

const ChoiceField kChoiceFields[3] = {{"time", &Choices::time, &Settings::time},
                                      {"partition", &Choices::partition, &Settings::partition},
                                      {"account", &Choices::account, &Settings::account}};

std::string apply_choices(Settings& s, const Choices& c, const std::string& lead_of) {
  for (const auto& f : kChoiceFields)
    if (!(c.*f.choice).empty()) s.*f.setting = c.*f.choice;
  for (const auto& p : settings_problems(s, lead_of))
    for (const auto& f : kChoiceFields)
      if (p.key == f.key && !(c.*f.choice).empty())
        return "--" + p.key + " '" + base::printable(c.*f.choice, 60) + "' " + p.why;
  return "";
}

std::string choices_words(const Choices& c) {
  std::string out;
  for (const auto& f : kChoiceFields)
    if (!(c.*f.choice).empty()) out += (out.empty() ? "--" : " --") + std::string(f.key) + " " + base::shell_quote(c.*f.choice);
  return out;
}

}  // namespace vexp::slurm
