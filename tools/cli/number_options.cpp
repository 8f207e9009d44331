// Strict reading of numeric option values (number_options.h).
#include "number_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace moetrain::cli {
namespace {

std::string real_text(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Digits after position `i`, at least one; returns the position after them.
size_t digits(const std::string& s, size_t i) {
    while (i < s.size() && is_digit(s[i])) ++i;
    return i;
}

}  // namespace

CLI::Validator integer_in(int64_t lo, uint64_t hi) {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return CLI::Validator(
        [lo, hi, range](std::string& in) -> std::string {
            const bool negative = !in.empty() && in[0] == '-';
            const size_t start = negative ? 1 : 0;
            if (in.size() == start || digits(in, start) != in.size())
                return "must be a decimal integer in " + range + ", not '" + in + "'";
            uint64_t magnitude = 0;
            bool overflow = false;
            for (size_t i = start; i < in.size(); ++i) {
                const auto d = static_cast<uint64_t>(in[i] - '0');
                overflow = overflow || magnitude > (UINT64_MAX - d) / 10;
                if (!overflow) magnitude = magnitude * 10 + d;
            }
            const auto value = static_cast<__int128>(magnitude) * (negative ? -1 : 1);
            if (overflow || value < lo || value > static_cast<__int128>(hi))
                return "must be in " + range + ", not " + in;
            in = (negative && magnitude != 0 ? "-" : "") + std::to_string(magnitude);
            return "";
        },
        range);
}

RealRange positive_real(double hi) {
    return RealRange{0.0, hi, true, false};
}

RealRange non_negative_real(double hi) {
    return RealRange{0.0, hi, false, false};
}

CLI::Validator real_in(const RealRange& r) {
    const bool unbounded_hi = r.hi == std::numeric_limits<double>::max();
    const std::string range =
        std::string(r.lo_open ? "(" : "[") + real_text(r.lo) + ", " +
        (unbounded_hi ? std::string("finite)") : real_text(r.hi) + (r.hi_open ? ")" : "]"));
    return CLI::Validator(
        [r, range](std::string& in) -> std::string {
            // -?(digits[.digits]|.digits)([eE][-+]?digits)?
            std::string bad = "must be a finite number in " + range + ", not '" + in + "'";
            size_t i = !in.empty() && in[0] == '-' ? 1 : 0;
            const size_t int_end = digits(in, i);
            size_t end = int_end;
            if (end < in.size() && in[end] == '.') end = digits(in, end + 1);
            if (end == i || (end == i + 1 && in[i] == '.')) return bad;
            if (end < in.size() && (in[end] == 'e' || in[end] == 'E')) {
                size_t e = end + 1;
                if (e < in.size() && (in[e] == '-' || in[e] == '+')) ++e;
                const size_t exp_end = digits(in, e);
                if (exp_end == e) return bad;
                end = exp_end;
            }
            if (end != in.size()) return bad;
            errno = 0;
            const double v = std::strtod(in.c_str(), nullptr);
            if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1.0))
                return "must be a finite number in " + range + ", not " + in;
            const bool below = r.lo_open ? !(v > r.lo) : !(v >= r.lo);
            const bool above = r.hi_open ? !(v < r.hi) : !(v <= r.hi);
            if (below || above) return "must be in " + range + ", not " + in;
            return "";
        },
        range);
}

CLI::Option* add_real_option(CLI::App* cmd, const std::string& name, double& value,
                             const std::string& help, const RealRange& range) {
    return cmd->add_option(name, value, help)->transform(real_in(range));
}

// More OpenMP threads than a few per hardware thread only slow a run down, and very large
// counts crash the OpenMP runtime while it creates them: bound the count with one line.
CLI::Validator thread_count_check() {
    const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    const long limit = std::max(64L, 4 * cores);
    return CLI::Validator(
        [limit, cores](std::string& in) -> std::string {
            long long v = 0;
            if (!CLI::detail::lexical_cast(in, v)) return "must be an integer, not '" + in + "'";
            if (v > limit)
                return "at most " + std::to_string(limit) + " on this machine (" +
                       std::to_string(cores) + " hardware threads), not " + in;
            return "";
        },
        "<= 4 x hardware threads");
}

}  // namespace moetrain::cli
