// Every kernel family of kernels_cuda/ compiled by g++ under the SIMT harness, for the
// `cudasim` test module (the CUDA Device sources + these launchers + fake_cuda_runtime.cpp).
#include "simt.h"
// after simt.h:
#include "activations.cuh"
#include "attention.cuh"
#include "convert.cuh"
#include "elementwise.cuh"
#include "embedding.cuh"
#include "grouped_gemm.cuh"
#include "kv_cache.cuh"
#include "loss.cuh"
#include "moe_permute.cuh"
#include "norm.cuh"
#include "optimizer.cuh"
#include "reduce.cuh"
#include "rope.cuh"
#include "router.cuh"
#include "sample.cuh"
