// Flat-buffer <-> named safetensors tensors for checkpoints (see io_checkpoint_tensors.h).
#include "io/checkpoint_tensors.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "moetrain/error.h"

namespace moetrain::io {

std::vector<int64_t> dims_of(const Shape& s) {
    return {s.d.begin(), s.d.begin() + s.rank};
}

namespace {

// "[2,3]" (Shape::str() trips gcc 12's -Wrestrict false positive under -Werror).
std::string dims_string(const std::vector<int64_t>& dims) {
    SafetensorsEntry e;
    e.shape = dims;
    return e.shape_str();
}

// The tensor `name` of `file` after checking that it exists with `dtype` and `dims` (what
// `who`, "model" or "trainer", expects); `where` names the file in the messages.
const SafetensorsEntry& expect_tensor(const SafetensorsFile& file, const std::string& where,
                                      const std::string& name, DType dtype,
                                      const std::vector<int64_t>& dims, const char* who) {
    const SafetensorsEntry* e = file.find(name);
    MT_CHECK(e, where, ": missing tensor \"", name, "\"");
    MT_CHECK(e->dtype == dtype, where, ": tensor \"", name, "\" has dtype ",
             safetensors_dtype_name(e->dtype), ", expected ", safetensors_dtype_name(dtype));
    MT_CHECK(e->shape == dims, where, ": tensor \"", name, "\" has shape ", e->shape_str(),
             ", the ", who, " expects ", dims_string(dims));
    return *e;
}

}  // namespace

void add_flat_tensors(SafetensorsWriter& w, const std::vector<ParamInfo>& params,
                      const std::vector<float>& flat, const std::string& prefix) {
    for (const ParamInfo& p : params) {
        MT_CHECK(p.offset >= 0 && p.offset + p.numel() <= static_cast<int64_t>(flat.size()),
                 "parameter \"", p.name, "\" lies outside the flat buffer");
        w.add(prefix + p.name, DType::f32, dims_of(p.shape), flat.data() + p.offset);
    }
}

void check_tensors(const SafetensorsFile& file, const std::vector<ParamInfo>& params,
                   const std::vector<std::string>& prefixes) {
    const std::string where = "checkpoint file " + file.path();
    std::set<std::string> expected;
    for (const std::string& prefix : prefixes) {
        for (const ParamInfo& p : params) {
            const std::string name = prefix + p.name;
            expected.insert(name);
            expect_tensor(file, where, name, DType::f32, dims_of(p.shape), "model");
        }
    }
    for (const SafetensorsEntry& e : file.tensors())
        MT_CHECK(expected.count(e.name), where, ": unexpected tensor \"", e.name,
                 "\" (not a parameter of this model)");
}

std::vector<float> read_flat_tensors(const SafetensorsFile& file,
                                     const std::vector<ParamInfo>& params,
                                     const std::string& prefix, int64_t n_flat) {
    std::vector<float> flat(static_cast<size_t>(n_flat));
    for (const ParamInfo& p : params) {
        const SafetensorsEntry* e = file.find(prefix + p.name);
        MT_CHECK(e && e->numel() == p.numel() && p.offset + p.numel() <= n_flat, "checkpoint file ",
                 file.path(), ": tensor \"", prefix, p.name, "\" does not fit the model");
        file.read(*e, flat.data() + p.offset);
    }
    return flat;
}

std::vector<QuantizedHost> download_quantized(Device& dev,
                                              const std::vector<QuantizedMoments>& ranges) {
    std::vector<QuantizedHost> out;
    for (const QuantizedMoments& q : ranges) {
        if (q.n == 0) continue;
        QuantizedHost h;
        h.range = q.range;
        h.m_codes.resize(static_cast<size_t>(q.m_codes.numel()));
        h.v_codes.resize(static_cast<size_t>(q.v_codes.numel()));
        h.m_absmax.resize(static_cast<size_t>(q.m_absmax.numel()));
        h.v_absmax.resize(static_cast<size_t>(q.v_absmax.numel()));
        dev.download(h.m_codes.data(), q.m_codes);
        dev.download(h.v_codes.data(), q.v_codes);
        dev.download(h.m_absmax.data(), q.m_absmax);
        dev.download(h.v_absmax.data(), q.v_absmax);
        out.push_back(std::move(h));
    }
    return out;
}

std::string flat_layout(const std::vector<ParamInfo>& params) {
    std::vector<const ParamInfo*> order;
    order.reserve(params.size());
    for (const ParamInfo& p : params) order.push_back(&p);
    std::sort(order.begin(), order.end(),
              [](const ParamInfo* a, const ParamInfo* b) { return a->offset < b->offset; });
    std::string s;
    for (const ParamInfo* p : order)
        s += (s.empty() ? "" : ",") + p->name + ":" + std::to_string(p->offset) + ":" +
             std::to_string(p->numel());
    return s;
}

void add_quantized_tensors(SafetensorsWriter& w, const std::vector<QuantizedHost>& ranges) {
    for (const QuantizedHost& q : ranges) {
        const auto n = static_cast<int64_t>(q.m_codes.size());
        const auto blocks = static_cast<int64_t>(q.m_absmax.size());
        MT_CHECK(q.v_codes.size() == q.m_codes.size() && q.v_absmax.size() == q.m_absmax.size(),
                 "8-bit AdamW range \"", q.range, "\": m and v sizes differ");
        w.add("m_codes." + q.range, DType::u8, {n}, q.m_codes.data());
        w.add("v_codes." + q.range, DType::u8, {n}, q.v_codes.data());
        w.add("m_absmax." + q.range, DType::f32, {blocks}, q.m_absmax.data());
        w.add("v_absmax." + q.range, DType::f32, {blocks}, q.v_absmax.data());
    }
}

std::vector<QuantizedHost> read_quantized_tensors(const SafetensorsFile& file,
                                                  const std::vector<QuantizedMoments>& want) {
    const std::string where = "checkpoint file " + file.path();
    std::set<std::string> expected;
    // Checks presence, dtype and shape of one tensor and reads it into `out`.
    auto read = [&](const std::string& name, DType dtype, int64_t numel, auto& out) {
        expected.insert(name);
        const SafetensorsEntry& e = expect_tensor(file, where, name, dtype, {numel}, "trainer");
        out.resize(static_cast<size_t>(numel));
        file.read(e, out.data());
    };
    std::vector<QuantizedHost> ranges;
    for (const QuantizedMoments& q : want) {
        if (q.n == 0) continue;
        QuantizedHost h;
        h.range = q.range;
        const int64_t blocks = q.m_absmax.numel();
        read("m_codes." + q.range, DType::u8, q.n, h.m_codes);
        read("v_codes." + q.range, DType::u8, q.n, h.v_codes);
        read("m_absmax." + q.range, DType::f32, blocks, h.m_absmax);
        read("v_absmax." + q.range, DType::f32, blocks, h.v_absmax);
        for (const auto* absmax : {&h.m_absmax, &h.v_absmax})
            for (size_t b = 0; b < absmax->size(); ++b)
                MT_CHECK(std::isfinite((*absmax)[b]) && (*absmax)[b] >= 0.0f, where, ": tensor \"",
                         absmax == &h.m_absmax ? "m" : "v", "_absmax.", q.range, "\" holds ",
                         (*absmax)[b], " at block ", b, " (corrupt file)");
        ranges.push_back(std::move(h));
    }
    for (const SafetensorsEntry& e : file.tensors())
        MT_CHECK(expected.count(e.name), where, ": unexpected tensor \"", e.name,
                 "\" (not part of the 8-bit AdamW state of this model)");
    return ranges;
}

}  // namespace moetrain::io
