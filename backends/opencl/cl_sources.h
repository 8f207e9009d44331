// The OpenCL C sources embedded at build time (generated cl_sources_embedded.cpp, made by
// embed_cl_sources.cmake): a prelude (kernels_cl/driver_fixes.clh,
// backends/shared/mt_math.h, kernels_cl/float16.clh, kernels_cl/common.clh) that is prepended to
// every program, and one kernel family per kernels_cl/*.cl file.
#pragma once

#include <cstddef>

namespace moetrain::opencl {

struct ClFamilySource {
    const char* name;  // file name without .cl: "attention", "norm", ...
    const char* text;
};

extern const char* const kClPrelude[];
extern const size_t kClPreludeCount;
extern const ClFamilySource kClFamilies[];
extern const size_t kClFamilyCount;

}  // namespace moetrain::opencl
