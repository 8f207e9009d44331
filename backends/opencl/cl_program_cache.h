// Builds the kernel programs of one OpenCL device on first use and keeps a persistent cache of
// program binaries, so a second process does not compile again. Cache files live in
// $MOETRAIN_CL_CACHE, else ~/.cache/moetrain/cl, named after the family and a 128-bit hash of
// (device identity, driver version, build options, full source text).
#pragma once

#include <CL/cl.h>

#include <map>
#include <string>

namespace moetrain::opencl {

class ProgramCache {
  public:
    // device_key identifies the device and driver (name, versions); options are the build flags.
    ProgramCache(cl_context ctx, cl_device_id dev, std::string device_key, std::string options);
    ~ProgramCache();
    ProgramCache(const ProgramCache&) = delete;
    ProgramCache& operator=(const ProgramCache&) = delete;

    // The built program of kernel family `family` (a kernels_cl/<family>.cl file).
    cl_program program(const std::string& family);

    // Directory of the persistent cache ("" when neither $MOETRAIN_CL_CACHE nor $HOME is set).
    static std::string directory();

    int built_from_source() const { return built_from_source_; }
    int loaded_from_cache() const { return loaded_from_cache_; }

  private:
    cl_program load_binary(const std::string& path, const std::string& key_hash);
    cl_program build_source(const std::string& family, const char* text);
    void store_binary(cl_program prog, const std::string& path, const std::string& key_hash);

    cl_context ctx_;
    cl_device_id dev_;
    std::string device_key_;
    std::string options_;
    std::string dir_;
    std::map<std::string, cl_program> programs_;
    int built_from_source_ = 0;
    int loaded_from_cache_ = 0;
};

}  // namespace moetrain::opencl
