// nvcc translation unit for the optimizer updates (see optimizer.cuh).
#include "optimizer.cuh"
