/* Per-element math shared by every backend: the CPU backend (g++), the CUDA kernels (nvcc,
 * __host__ __device__) and the OpenCL kernels (embedded into the .cl sources at build time).
 * Written in the common subset of C++, CUDA C++ and OpenCL C 1.2: plain functions, no
 * references, no templates, fixed-width integers through mt_u32 / mt_u64.
 * One formula, three backends: CPU tests exercise exactly what the device kernels compute.
 * A backend may define any mt_<fn>f macro before including this file to replace a driver's
 * imprecise built-in (e.g. an OpenCL tanh that never reaches +-1). */
#ifndef MOETRAIN_MT_MATH_H
#define MOETRAIN_MT_MATH_H

#if defined(__OPENCL_VERSION__)
#define MT_FN inline
typedef uint mt_u32;
typedef ulong mt_u64;
#define MT_F32(fn) fn /* OpenCL C overloads exp, tanh... for float */
#else
#include <math.h>
#include <stdint.h>
#if defined(__CUDACC__)
#define MT_FN __host__ __device__ inline
#else
#define MT_FN static inline
#endif
typedef uint32_t mt_u32;
typedef uint64_t mt_u64;
#define MT_F32(fn) fn##f /* the C float functions: expf, tanhf... */
#endif

#ifndef mt_expf
#define mt_expf(x) MT_F32(exp)(x)
#endif
#ifndef mt_tanhf
#define mt_tanhf(x) MT_F32(tanh)(x)
#endif
#ifndef mt_sqrtf
#define mt_sqrtf(x) MT_F32(sqrt)(x)
#endif
#ifndef mt_logf
#define mt_logf(x) MT_F32(log)(x)
#endif
#ifndef mt_sinf
#define mt_sinf(x) MT_F32(sin)(x)
#endif
#ifndef mt_cosf
#define mt_cosf(x) MT_F32(cos)(x)
#endif

/* ---- activations (MODEL.md 2) ---- */
#define MT_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define MT_GELU_K1 0.044715f

MT_FN float mt_sigmoid(float z) { return 1.0f / (1.0f + mt_expf(-z)); }
MT_FN float mt_silu(float z) { return z * mt_sigmoid(z); }
MT_FN float mt_silu_grad(float z) {
    float s = mt_sigmoid(z);
    return s * (1.0f + z * (1.0f - s));
}
MT_FN float mt_gelu(float z) {
    float u = MT_GELU_K0 * (z + MT_GELU_K1 * z * z * z);
    return 0.5f * z * (1.0f + mt_tanhf(u));
}
MT_FN float mt_gelu_grad(float z) {
    float u = MT_GELU_K0 * (z + MT_GELU_K1 * z * z * z);
    float t = mt_tanhf(u);
    float du = MT_GELU_K0 * (1.0f + 3.0f * MT_GELU_K1 * z * z);
    return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * du;
}
MT_FN float mt_relu(float z) { return z > 0.0f ? z : 0.0f; }
MT_FN float mt_relu_grad(float z) { return z > 0.0f ? 1.0f : 0.0f; }

/* ---- RoPE (MODEL.md 2): inverse frequency of pair i for head_dim hd and effective theta ---- */
/* theta_eff = rope_theta * ntk_alpha^(hd/(hd-2)) is computed once on the host in double. */
MT_FN float mt_rope_inv_freq(float theta_eff, int i, int hd) {
    return mt_expf(-(2.0f * (float)i / (float)hd) * mt_logf(theta_eff));
}
/* Rotation angle of pair i at absolute position pos (float32, as Hugging Face computes it). */
MT_FN float mt_rope_angle(float theta_eff, int i, int hd, int pos) {
    return (float)pos * mt_rope_inv_freq(theta_eff, i, hd);
}

/* ---- hash routing (MODEL.md 2) ---- */
MT_FN mt_u32 mt_mix32(mt_u32 z) {
    z ^= z >> 16;
    z *= 0x85EBCA6Bu;
    z ^= z >> 13;
    z *= 0xC2B2AE35u;
    z ^= z >> 16;
    return z;
}
MT_FN int mt_hash_expert(int token_id, int layer, int n_experts) {
    mt_u32 z = (mt_u32)token_id + 0x9E3779B9u * (mt_u32)(layer + 1);
    return (int)(mt_mix32(z) % (mt_u32)n_experts);
}

/* ---- Philox-4x32-10 (Salmon et al. 2011), counter = (c0,c1,c2,c3), key = (k0,k1) ---- */
MT_FN mt_u32 mt_mulhilo(mt_u32 a, mt_u32 b, mt_u32* hi) {
    mt_u64 p = (mt_u64)a * (mt_u64)b;
    *hi = (mt_u32)(p >> 32);
    return (mt_u32)p;
}
/* Writes 4 random words into out. */
MT_FN void mt_philox4x32_10(mt_u32 c0, mt_u32 c1, mt_u32 c2, mt_u32 c3, mt_u32 k0, mt_u32 k1,
                            mt_u32* out) {
    int r;
    for (r = 0; r < 10; ++r) {
        mt_u32 hi0, hi1;
        mt_u32 lo0 = mt_mulhilo(0xD2511F53u, c0, &hi0);
        mt_u32 lo1 = mt_mulhilo(0xCD9E8D57u, c2, &hi1);
        mt_u32 n0 = hi1 ^ c1 ^ k0;
        mt_u32 n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
/* The sampling draw of MODEL.md 7: uniform in [0,1) from Philox keyed by seed with
 * counter (step_lo, step_hi, row_lo, row_hi); 24 random bits of the first word. */
MT_FN float mt_philox_uniform(mt_u64 seed, mt_u64 step, mt_u64 row) {
    mt_u32 out[4];
    mt_philox4x32_10((mt_u32)step, (mt_u32)(step >> 32), (mt_u32)row, (mt_u32)(row >> 32),
                     (mt_u32)seed, (mt_u32)(seed >> 32), out);
    return (float)(out[0] >> 8) * (1.0f / 16777216.0f);
}

/* ---- optimizer element updates (MODEL.md 4); g is the already scaled/clipped gradient ---- */
MT_FN void mt_adamw_update(float* p, float* m, float* v, float g, float lr, float b1, float b2,
                           float eps, float wd, float bc1, float bc2) {
    float mm = b1 * (*m) + (1.0f - b1) * g;
    float vv = b2 * (*v) + (1.0f - b2) * g * g;
    *m = mm;
    *v = vv;
    float mhat = mm / bc1;
    float vhat = vv / bc2;
    *p = *p - lr * (mhat / (mt_sqrtf(vhat) + eps) + wd * (*p));
}
/* Clip coefficient from the squared global norm of the raw gradients. */
MT_FN float mt_clip_coef(float gnorm_sq, float grad_scale, float clip) {
    float n = mt_sqrtf(gnorm_sq) * grad_scale;
    return (clip > 0.0f && n > clip) ? clip / (n + 1e-6f) : 1.0f;
}

#endif /* MOETRAIN_MT_MATH_H */
