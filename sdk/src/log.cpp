#include "vexp/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace vexp {
namespace {
std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = spdlog::stderr_color_mt("vexp");
    lg->set_pattern("[%H:%M:%S] %^%l%$ %v");
    return lg;
  }();
  return l;
}
}  // namespace

void log(LogLevel level, const std::string& message) {
  switch (level) {
    case LogLevel::Debug: logger()->debug(message); break;
    case LogLevel::Info: logger()->info(message); break;
    case LogLevel::Warn: logger()->warn(message); break;
    case LogLevel::Error: logger()->error(message); break;
  }
}

void set_log_level(LogLevel level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info,
                                                  spdlog::level::warn, spdlog::level::err};
  logger()->set_level(map[static_cast<int>(level)]);
}

}  // namespace vexp
