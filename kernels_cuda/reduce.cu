// nvcc translation unit for the reductions (see reduce.cuh).
#include "reduce.cuh"
