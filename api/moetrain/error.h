// moetrain: the one exception type every user-caused or device error is reported with.
// The message is a single line that names the problem; the CLI prints it and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace moetrain {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}
}  // namespace detail

// Throw moetrain::Error with the concatenation of the arguments.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
    throw Error(detail::concat(args...));
}

}  // namespace moetrain

// Check a condition; on failure throw moetrain::Error with the streamed message.
#define MT_CHECK(cond, ...)                         \
    do {                                            \
        if (!(cond)) ::moetrain::fail(__VA_ARGS__); \
    } while (0)
