// The tensor side of checkpoints, independent of a live Model: write named views of a flat
// f32 buffer (ParamInfo layout) to a safetensors writer, and check / read them back from a
// file with one-line errors naming file and tensor (missing, extra, dtype, shape); the same
// for the 8-bit AdamW state, which is stored per range of the flat buffer.
#pragma once

#include <string>
#include <vector>

#include "moetrain/model.h"
#include "moetrain/safetensors.h"
#include "moetrain/train.h"

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

// Host copy of one 8-bit AdamW range (QuantizedMoments), stored as m_codes.<range>,
// v_codes.<range> (U8 [n]) and m_absmax.<range>, v_absmax.<range> (F32 [ceil(n / 256)]).
struct QuantizedHost {
    std::string range;
    std::vector<uint8_t> m_codes, v_codes;
    std::vector<float> m_absmax, v_absmax;
};

// Host copies of the non-empty ranges of a trainer's 8-bit state (waits for queued work).
std::vector<QuantizedHost> download_quantized(Device& dev,
                                              const std::vector<QuantizedMoments>& ranges);

// The flat layout the 8-bit state belongs to, "name:offset:numel,..." in offset order
// (optimizer.safetensors metadata "layout"; a resume into another layout is refused).
std::string flat_layout(const std::vector<ParamInfo>& params);

// Add the four tensors of every range (pointing into `ranges`, kept alive by the caller).
void add_quantized_tensors(SafetensorsWriter& w, const std::vector<QuantizedHost>& ranges);

// Throws unless the file holds exactly the four tensors of every non-empty range of `want`
// with their dtypes and shapes, and finite, non-negative absmax values; returns them.
std::vector<QuantizedHost> read_quantized_tensors(const SafetensorsFile& file,
                                                  const std::vector<QuantizedMoments>& want);

}  // namespace moetrain::io
