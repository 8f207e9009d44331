// open_communicator: the built-in single-process communicator, or a communicator module
// (libmoetrain_comm_<engine>.so, looked for where the backend modules are) loaded with dlopen
// only for a multi-rank launch, so a single-process run never needs an MPI or NCCL library.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "module_dirs.h"
#include "moetrain/comm.h"
#include "moetrain/error.h"

namespace moetrain {
namespace {

int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return 0;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    return (end && *end == '\0' && n > 0 && n < (1 << 24)) ? static_cast<int>(n) : 0;
}

std::unique_ptr<Communicator> load_module(const std::string& engine, const std::string& backend,
                                          int world) {
    const std::string file = "libmoetrain_comm_" + engine + ".so";
    std::string path, dirs;
    for (const std::string& d : module_search_dirs()) {
        dirs += (dirs.empty() ? "" : ", ") + d;
        if (path.empty() && access((d + "/" + file).c_str(), R_OK) == 0) path = d + "/" + file;
    }
    MT_CHECK(!path.empty(), "launched with ", world, " ranks but the ", engine,
             " communicator is not built (no ", file, " in ", dirs, ")");
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* err = dlerror();
        fail("launched with ", world, " ranks but the ", engine,
             " communicator cannot be loaded: ", err ? err : path);
    }
    using EntryFn = Communicator* (*)(int, const char*, char*, int);
    auto fn = reinterpret_cast<EntryFn>(dlsym(h, "moetrain_comm_entry"));
    MT_CHECK(fn, "communicator module ", path, " has no moetrain_comm_entry symbol");
    char err[512] = {0};
    Communicator* c = fn(kCommAbi, backend.c_str(), err, static_cast<int>(sizeof err));
    MT_CHECK(c, "the ", engine, " communicator cannot start: ",
             err[0] ? err : "module built for another communicator ABI");
    return std::unique_ptr<Communicator>(c);
}

}  // namespace

int launched_world_size() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
        if (const int n = env_int(v)) return n;
    return 1;
}

int launched_local_rank() {
    for (const char* v :
         {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
        const char* s = std::getenv(v);
        if (s && *s) return std::max(0, std::atoi(s));
    }
    return 0;
}

int launched_local_size() {
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"})
        if (const int n = env_int(v)) return n;
    return 1;
}

std::unique_ptr<Communicator> open_communicator(const std::string& engine,
                                                const std::string& backend) {
    MT_CHECK(engine == "auto" || engine == "mpi" || engine == "nccl" || engine == "single",
             "unknown communicator '", engine, "' (auto, mpi, nccl, single)");
    const int world = launched_world_size();
    if (world == 1 && engine != "nccl" && engine != "mpi") return make_single_communicator();
    if (engine == "single") fail("--comm single, but the launcher started ", world, " ranks");
    if (engine == "auto") return load_module(backend == "cuda" ? "nccl" : "mpi", backend, world);
    return load_module(engine, backend, world);
}

}  // namespace moetrain
