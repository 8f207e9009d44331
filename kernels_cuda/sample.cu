// nvcc translation unit for token sampling (see sample.cuh).
#include "sample.cuh"
