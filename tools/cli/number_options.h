// The one way the CLI declares a numeric option. The text is read strictly and checked against
// the option's range before CLI11 converts it, so that no value wraps, saturates, changes sign
// or is not finite (docs/RELIABILITY.md, "Linear parsers and checked numbers"):
// - integers: an optional '-' and decimal digits, nothing else (no '+', hex, octal, exponent,
//   spaces); no overflow; within [lo, hi];
// - reals: a decimal number ("-1.5", "3e-4", ".5"): finite ("inf", "nan", hex floats and
//   values beyond the double range are refused), within the range.
// The range shows in --help after the type ("INT:[1, 2147483647]"); tests/cli/
// option_range_tests.py walks every command's --help, and fails on an INT / UINT / FLOAT
// option declared any other way.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace moetrain::cli {

// Checks an integer text against [lo, hi] and rewrites it in canonical decimal.
CLI::Validator integer_in(int64_t lo, uint64_t hi);

template <class T>
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, T& value,
                            const std::string& help, T lo, T hi = std::numeric_limits<T>::max()) {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    static_assert(sizeof(T) <= 8);
    return cmd->add_option(name, value, help)
        ->transform(integer_in(static_cast<int64_t>(lo), static_cast<uint64_t>(hi)));
}

// A range of reals; an open end excludes its bound. Both ends are finite.
struct RealRange {
    double lo = std::numeric_limits<double>::lowest();
    double hi = std::numeric_limits<double>::max();
    bool lo_open = false, hi_open = false;
};
RealRange positive_real(double hi = std::numeric_limits<double>::max());      // (0, hi]
RealRange non_negative_real(double hi = std::numeric_limits<double>::max());  // [0, hi]

// Checks a real text against `range`.
CLI::Validator real_in(const RealRange& range);

CLI::Option* add_real_option(CLI::App* cmd, const std::string& name, double& value,
                             const std::string& help, const RealRange& range);

// Thread counts: at most 4 per hardware thread (at least 64), naming the machine's count.
CLI::Validator thread_count_check();

}  // namespace moetrain::cli
