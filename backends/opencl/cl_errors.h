// OpenCL status codes turned into moetrain::Error messages that name the code and
// what the backend was doing when it failed.
#pragma once

#include <CL/cl.h>

#include <string>

namespace moetrain::opencl {

// "CL_OUT_OF_RESOURCES", "CL_PLATFORM_NOT_FOUND_KHR", ... ("CL_UNKNOWN_ERROR" otherwise).
const char* cl_error_name(cl_int code);

// Throws moetrain::Error("OpenCL error CL_X (code) while <what>") unless code == CL_SUCCESS.
void cl_check(cl_int code, const char* what);
inline void cl_check(cl_int code, const std::string& what) {
    cl_check(code, what.c_str());
}

}  // namespace moetrain::opencl
