// nvcc translation unit for the attention kernels (see attention.cuh).
#include "attention.cuh"
