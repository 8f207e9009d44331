// The Open MPI communicator module (libmoetrain_comm_mpi.so): its entry point.
#include <cstdio>
#include <exception>

#include "mpi_comm.h"

extern "C" __attribute__((visibility("default"))) moetrain::Communicator* moetrain_comm_entry(
    int abi, const char* backend, char* err, int err_len) {
    (void)backend;  // host memory: any backend (device tensors are staged)
    if (abi != moetrain::kCommAbi) return nullptr;
    try {
        return new moetrain::MpiComm();
    } catch (const std::exception& e) {
        std::snprintf(err, static_cast<size_t>(err_len), "%s", e.what());
        return nullptr;
    }
}
