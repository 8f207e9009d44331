// nvcc translation unit for the MoE router kernels (see router.cuh).
#include "router.cuh"
