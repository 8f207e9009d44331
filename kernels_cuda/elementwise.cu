// nvcc translation unit for the element-wise kernels (see elementwise.cuh).
#include "elementwise.cuh"
