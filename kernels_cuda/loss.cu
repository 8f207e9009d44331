// nvcc translation unit for the cross-entropy loss (see loss.cuh).
#include "loss.cuh"
