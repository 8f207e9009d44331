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

MT_FN float mt_sigmoid(float z) {
    return 1.0f / (1.0f + mt_expf(-z));
}
MT_FN float mt_silu(float z) {
    return z * mt_sigmoid(z);
}
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
MT_FN float mt_relu(float z) {
    return z > 0.0f ? z : 0.0f;
}
MT_FN float mt_relu_grad(float z) {
    return z > 0.0f ? 1.0f : 0.0f;
}

/* ---- RoPE (MODEL.md 2): inverse frequency of pair i for head_dim hd and effective theta ---- */
/* theta_eff = rope_theta * ntk_alpha^(hd/(hd-2)) is computed once on the host in double. */
MT_FN float mt_rope_inv_freq(float theta_eff, int i, int hd) {
    return mt_expf(-(2.0f * (float)i / (float)hd) * mt_logf(theta_eff));
}
/* Positions a device-side offset may reach (Device::rope / kv_append pos_dev): [0, 2^30). */
#define MT_POS_LIMIT 1073741824
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

/* ---- 8-bit AdamW state (block-wise dynamic quantisation, Dettmers et al. 2021) ----
 * A moment is stored as one code byte per element, an index into a sorted 256-entry map of
 * values in [-1, 1] (m: the signed map) or [0, 1] (v: the unsigned map), times one f32 absmax
 * per block of MT_QBLOCK consecutive elements: value = map[code] * absmax. The maps are the
 * "dynamic tree" maps of bitsandbytes' create_dynamic_map(signed, max_exponent_bits = 7):
 * exponent group i = 0..6 holds F values 10^(i-6) * (0.1 + 0.9 (j + 1/2) / F), j < F, with
 * F = 2^i (signed map: each value also negated) or F = 2^(i+1) (unsigned map); plus 0 and 1.
 * Sorted ascending, the signed map runs from -0.99297 (code 0) over 0 (code 127) to 1 (code
 * 255); the unsigned map from 0 (code 0) to 1 (code 255). One table of MT_QMAP_LEN floats holds
 * the signed map at [0, 256) and the unsigned map at [256, 512). */
#define MT_QBLOCK 256
#define MT_QMAP_LEN 512
#define MT_QMAP_UNSIGNED 256 /* offset of the unsigned map in the table */
#define MT_QZERO_SIGNED 127  /* code of 0 in the signed map (the unsigned map's is 0) */

#if !defined(__OPENCL_VERSION__)
/* Host only (devices get the table uploaded): map value of `code`, computed in double and
 * rounded once to float, so every backend holds bit-identical maps. */
static inline float mt_qmap_value(int is_signed, int code) {
    static const double pow10[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    double sign = 1.0;
    int rank, base = 0, items = is_signed ? 1 : 2, group = 0;
    if (code == 255) return 1.0f;
    if (is_signed) {
        if (code == 127) return 0.0f;
        rank = code > 127 ? code - 128 : 126 - code;
        if (code < 127) sign = -1.0;
    } else {
        if (code == 0) return 0.0f;
        rank = code - 1;
    }
    while (rank >= base + items) { /* group `group` holds ranks [base, base + items) */
        base += items;
        items *= 2;
        ++group;
    }
    return (float)(sign * pow10[group] *
                   (0.1 + 0.9 * (double)(2 * (rank - base) + 1) / (2.0 * (double)items)));
}
/* Fills table[0, MT_QMAP_LEN): the signed map, then the unsigned map. */
static inline void mt_qmap_fill(float* table) {
    int c;
    for (c = 0; c < 256; ++c) {
        table[c] = mt_qmap_value(1, c);
        table[MT_QMAP_UNSIGNED + c] = mt_qmap_value(0, c);
    }
}
#endif

/* Where kernels read the map from: __constant memory in OpenCL, any pointer elsewhere. */
#if defined(__OPENCL_VERSION__)
#define MT_QMAP __constant const float*
#else
#define MT_QMAP const float*
#endif

/* Code of the map entry nearest to x (map: 256 ascending values). Binary search for the
 * largest c with map[c] <= x (0 when x lies below the map), then c + 1 when that entry is
 * strictly nearer; an exact tie keeps the lower code. Every step is a comparison or one IEEE
 * subtraction, so all backends pick the same code. */
MT_FN int mt_qmap_encode(MT_QMAP map, float x) {
    int c = 0, step;
    for (step = 128; step > 0; step >>= 1)
        if (map[c + step] <= x) c += step;
    if (c < 255 && map[c + 1] - x < x - map[c]) c += 1;
    return c;
}
/* Code of `value` in a block scaled by absmax (the code of 0 when absmax is 0). */
MT_FN int mt_quantize(MT_QMAP map, float value, float absmax) {
    return mt_qmap_encode(map, absmax > 0.0f ? value / absmax : 0.0f);
}
/* The codes of an element's new m and v in blocks scaled by m_absmax and v_absmax. When v
 * rounds to 0 (v / v_absmax below half the smallest code, ~1.6e-7), m is stored as 0 too: a
 * state with m != 0 and v = 0 would turn the next step without gradient (an expert that got
 * no tokens, an unused embedding row) into an update of m / eps. The moments of such an
 * element restart from zero instead, which keeps every update of the order of lr. */
MT_FN void mt_requantize(MT_QMAP table, float m, float v, float m_absmax, float v_absmax,
                         int* m_code, int* v_code) {
    *v_code = mt_quantize(table + MT_QMAP_UNSIGNED, v, v_absmax);
    *m_code = *v_code == 0 ? MT_QZERO_SIGNED : mt_quantize(table, m, m_absmax);
}
/* One element of the 8-bit AdamW step: m, v dequantised from their codes and block absmax
 * (table: the MT_QMAP_LEN maps), then mt_adamw_update in fp32. The new, not yet requantised
 * m and v are left in *m, *v; the caller requantises them (mt_requantize) with the block's new
 * absmax. */
MT_FN void mt_adamw8bit_update(float* p, float* m, float* v, MT_QMAP table, int m_code, int v_code,
                               float m_absmax, float v_absmax, float g, float lr, float b1,
                               float b2, float eps, float wd, float bc1, float bc2) {
    *m = table[m_code] * m_absmax;
    *v = table[MT_QMAP_UNSIGNED + v_code] * v_absmax;
    mt_adamw_update(p, m, v, g, lr, b1, b2, eps, wd, bc1, bc2);
}

#endif /* MOETRAIN_MT_MATH_H */
