// nvcc translation unit for the float format conversions (see convert.cuh).
#include "convert.cuh"
