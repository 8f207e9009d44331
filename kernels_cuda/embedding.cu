// nvcc translation unit for the embedding kernels (see embedding.cuh).
#include "embedding.cuh"
