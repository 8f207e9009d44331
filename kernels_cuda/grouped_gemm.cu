// nvcc translation unit for the grouped GEMM planning and dim-k kernels (see grouped_gemm.cuh).
#include "grouped_gemm.cuh"
