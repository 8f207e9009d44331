// nvcc translation unit for the MoE token permutation (see moe_permute.cuh).
#include "moe_permute.cuh"
