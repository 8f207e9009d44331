// nvcc translation unit for the KV-cache append (see kv_cache.cuh).
#include "kv_cache.cuh"
