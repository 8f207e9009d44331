// Names of an enum's values from one table of {value, name} pairs per enum: the name of a
// value, the value of a name, and the list of names for an error message. One table serves
// both directions, so a name cannot be spelled differently when written and when parsed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace moetrain {

template <class E>
struct EnumName {
    E value;
    const char* name;
};

// The name of `value`; `missing` when the table does not list it.
template <class E, std::size_t N>
constexpr const char* enum_name(const EnumName<E> (&table)[N], E value, const char* missing = "?") {
    for (const EnumName<E>& e : table)
        if (e.value == value) return e.name;
    return missing;
}

// The value named `name`, if the table has it.
template <class E, std::size_t N>
constexpr std::optional<E> enum_value(const EnumName<E> (&table)[N], std::string_view name) {
    for (const EnumName<E>& e : table)
        if (name == e.name) return e.value;
    return std::nullopt;
}

// "a, b, c": the table's names in its order.
template <class E, std::size_t N>
std::string enum_name_list(const EnumName<E> (&table)[N]) {
    std::string out;
    for (const EnumName<E>& e : table) {
        if (!out.empty()) out += ", ";
        out += e.name;
    }
    return out;
}

}  // namespace moetrain
