// nvcc translation unit for RMSNorm / LayerNorm (see norm.cuh).
#include "norm.cuh"
