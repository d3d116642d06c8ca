// One logger for the host and every plugin (plugins link vexp::sdk).
#pragma once

#include <string>

namespace vexp {
enum class LogLevel { Debug, Info, Warn, Error };
void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& m) { log(LogLevel::Info, m); }
inline void log_warn(const std::string& m) { log(LogLevel::Warn, m); }
void set_log_level(LogLevel level);
}  // namespace vexp
