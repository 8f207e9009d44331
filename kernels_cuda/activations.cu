// nvcc translation unit for the activations (see activations.cuh).
#include "activations.cuh"
