// Flat-buffer <-> named safetensors tensors for checkpoints (see io_checkpoint_tensors.h).
#include "io_checkpoint_tensors.h"

#include <set>

#include "moetrain/error.h"

namespace moetrain::io {

std::vector<int64_t> dims_of(const Shape& s) { return {s.d.begin(), s.d.begin() + s.rank}; }

namespace {

// "[2,3]" (Shape::str() trips gcc 12's -Wrestrict false positive under -Werror).
std::string dims_string(const std::vector<int64_t>& dims) {
    SafetensorsEntry e;
    e.shape = dims;
    return e.shape_str();
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
            const SafetensorsEntry* e = file.find(name);
            MT_CHECK(e, where, ": missing tensor \"", name, "\"");
            MT_CHECK(e->dtype == DType::f32, where, ": tensor \"", name, "\" has dtype ",
                     safetensors_dtype_name(e->dtype), ", expected F32");
            const std::vector<int64_t> dims = dims_of(p.shape);
            MT_CHECK(e->shape == dims, where, ": tensor \"", name, "\" has shape ",
                     e->shape_str(), ", the model expects ", dims_string(dims));
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
        MT_CHECK(e && e->numel() == p.numel() && p.offset + p.numel() <= n_flat,
                 "checkpoint file ", file.path(), ": tensor \"", prefix, p.name,
                 "\" does not fit the model");
        file.read(*e, flat.data() + p.offset);
    }
    return flat;
}

}  // namespace moetrain::io
