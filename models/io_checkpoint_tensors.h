// The tensor side of checkpoints, independent of a live Model: write named views of a flat
// f32 buffer (ParamInfo layout) to a safetensors writer, and check / read them back from a
// file with one-line errors naming file and tensor (missing, extra, dtype, shape).
#pragma once

#include <string>
#include <vector>

#include "moetrain/model.h"
#include "moetrain/safetensors.h"

namespace moetrain::io {

std::vector<int64_t> dims_of(const Shape& s);

// Add prefix + p.name for every p in `params`, pointing into `flat` (kept alive by the caller).
void add_flat_tensors(SafetensorsWriter& w, const std::vector<ParamInfo>& params,
                      const std::vector<float>& flat, const std::string& prefix);

// Throws unless the file holds exactly the tensors prefix + p.name for every prefix and
// param, each F32 with shape p.shape.
void check_tensors(const SafetensorsFile& file, const std::vector<ParamInfo>& params,
                   const std::vector<std::string>& prefixes);

// prefix + p.name of every param copied to a flat buffer of n_flat floats at p.offset
// (check_tensors first).
std::vector<float> read_flat_tensors(const SafetensorsFile& file,
                                     const std::vector<ParamInfo>& params,
                                     const std::string& prefix, int64_t n_flat);

}  // namespace moetrain::io
