// nvcc translation unit for RoPE (see rope.cuh).
#include "rope.cuh"
