// Small typed wrappers around clGetDeviceInfo / clGetPlatformInfo.
#pragma once

#include <CL/cl.h>

#include <string>

#include "cl_errors.h"

namespace moetrain::opencl {

template <typename T>
T device_info(cl_device_id dev, cl_device_info what) {
    T v{};
    cl_check(clGetDeviceInfo(dev, what, sizeof(T), &v, nullptr), "querying an OpenCL device");
    return v;
}

inline std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
    return s;
}

// A string property through clGetDeviceInfo / clGetPlatformInfo (both have this shape).
template <typename Obj, typename Info>
std::string info_string(cl_int (*query)(Obj, Info, size_t, void*, size_t*), Obj obj, Info what,
                        const char* doing) {
    size_t size = 0;
    cl_check(query(obj, what, 0, nullptr, &size), doing);
    std::string s(size, '\0');
    cl_check(query(obj, what, size, s.data(), nullptr), doing);
    return trimmed(s);
}

inline std::string device_string(cl_device_id dev, cl_device_info what) {
    return info_string(clGetDeviceInfo, dev, what, "querying an OpenCL device");
}

inline std::string platform_string(cl_platform_id p, cl_platform_info what) {
    return info_string(clGetPlatformInfo, p, what, "querying an OpenCL platform");
}

}  // namespace moetrain::opencl
