// An error as a value, for the caller that goes on when a call fails: it records the
// error, warns, falls back, or adds what it knows to the message and throws on.
//
//   auto q = base::attempt([&] { return slurm::query(jobs); });
//   if (!q) note = "Slurm: not reachable from here (" + q.message() + ")";
//
//   text = base::attempt([&] { return base::read_file_bounded(p); })
//              .value_or_throw("the extract-frames journal: ");
//
// base::attempt is the one place where a vexp::base::Error (or the subclass named) is
// caught for that, so no caller writes a catch block to re-word an error: words added
// around a message keep its kind (and a child's exit code), and value() throws the
// error again as it was, its type included (docs/architecture.md#errors). Anything
// else the call throws (std::bad_alloc, a torch error) passes through untouched.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "vexp/base/error.hpp"

namespace vexp::base {

// What failed, when something did: the message, its kind, and the exception itself.
class Failed {
 public:
  bool failed() const noexcept { return static_cast<bool>(raised_); }
  // The error's message, ready to print ("" when the call succeeded).
  const std::string& message() const noexcept { return message_; }
  ErrorKind kind() const noexcept { return kind_; }
  // Throws the error again as it was raised; does nothing when the call succeeded.
  void rethrow() const {
    if (raised_) std::rethrow_exception(raised_);
  }
  // Throws the error with `before` and `after` around its message, of the same kind
  // (a child's exit code kept); does nothing when the call succeeded.
  void rethrow_with(std::string_view before, std::string_view after = {}) const {
    if (raised_) throw reword(std::string(before) + message_ + std::string(after));
  }
  // Whether the call failed with an E (a subclass of the error caught).
  template <class E>
  bool is() const {
    if (!raised_) return false;
    try {
      std::rethrow_exception(raised_);
    } catch (const E&) {
      return true;
    } catch (...) {
      return false;
    }
  }
  // The error under another message, of the same kind.
  Error reword(const std::string& message) const { return Error(message, kind_).with_child_code(child_code_); }

 protected:
  Failed() = default;
  Failed(std::exception_ptr raised, const Error& e)
      : raised_(std::move(raised)), message_(e.what()), kind_(e.kind()), child_code_(e.child_code()) {}

 private:
  std::exception_ptr raised_;
  std::string message_;
  ErrorKind kind_ = ErrorKind::failure;
  int child_code_ = 0;
};

template <class T>
class Outcome : public Failed {
 public:
  explicit Outcome(T value) : value_(std::move(value)) {}
  Outcome(std::exception_ptr raised, const Error& e) : Failed(std::move(raised), e) {}
  explicit operator bool() const noexcept { return !failed(); }
  // The value; when the call failed, its error is thrown again as it was.
  T& value() & {
    rethrow();
    return *value_;
  }
  T value() && {
    rethrow();
    return std::move(*value_);
  }
  // The value, or the error thrown again with words around its message (same kind).
  T value_or_throw(std::string_view before, std::string_view after = {}) && {
    rethrow_with(before, after);
    return std::move(*value_);
  }
  // The value, or `fallback` when the call failed.
  T value_or(T fallback) && { return failed() ? std::move(fallback) : std::move(*value_); }

 private:
  std::optional<T> value_;
};

template <>
class Outcome<void> : public Failed {
 public:
  Outcome() = default;
  Outcome(std::exception_ptr raised, const Error& e) : Failed(std::move(raised), e) {}
  explicit operator bool() const noexcept { return !failed(); }
  void value() const { rethrow(); }
  void value_or_throw(std::string_view before, std::string_view after = {}) const { rethrow_with(before, after); }
};

// Calls `f` and returns its value, or the E (a vexp::base::Error by default) it threw.
template <class E = Error, class F>
auto attempt(F&& f) -> Outcome<std::invoke_result_t<F&>> {
  static_assert(std::is_base_of_v<Error, E>, "base::attempt catches vexp errors only");
  using T = std::invoke_result_t<F&>;
  try {
    if constexpr (std::is_void_v<T>) {
      f();
      return Outcome<void>();
    } else {
      return Outcome<T>(f());
    }
  } catch (const E& e) {
    return Outcome<T>(std::current_exception(), e);
  }
}

}  // namespace vexp::base
