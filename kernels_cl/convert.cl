/* f32 <-> bf16 <-> f16 conversions, bit-exact ports of api/moetrain/dtype.h (round to nearest
 * even, NaN preserved, f16 subnormals and overflow to Inf). No cl_khr_fp16 needed: 16-bit
 * values travel as ushort. kind: 1 = bf16, 2 = f16. Also the operand rounding of the 16-bit
 * GEMMs (mt_gemm_round_f32 / mt_gemm_widen_f32). */

inline ushort mt_f32_to_bf16(float f) {
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}
inline float mt_bf16_to_f32(ushort h) {
    return as_float((uint)h << 16);
}

inline ushort mt_f32_to_f16(float f) {
    uint x = as_uint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (ushort)(sign | 0x7e00u);
    if (absx >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
    if (absx < 0x38800000u) {
        if (absx < 0x33000000u) return (ushort)sign;
        uint mant = (absx & 0x7fffffu) | 0x800000u;
        int shift = 113 - (int)(absx >> 23) + 13;
        uint half_ = mant >> shift;
        uint rem = mant & ((1u << shift) - 1u);
        uint mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half_ & 1u))) half_++;
        return (ushort)(sign | half_);
    }
    uint h = (absx - 0x38000000u) >> 13;
    uint rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (ushort)(sign | h);
}
inline float mt_f16_to_f32(ushort h) {
    uint sign = (uint)(h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint mant = h & 0x3ffu;
    uint u;
    if (e == 0) {
        if (mant == 0) {
            u = sign;
        } else {
            int k = -1;
            do {
                k++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            u = sign | ((uint)(127 - 15 - k) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        u = sign | 0x7f800000u | (mant << 13);
    } else {
        u = sign | ((e + 112u) << 23) | (mant << 13);
    }
    return as_float(u);
}

inline float mt_half_load(ushort h, int kind) {
    return kind == 1 ? mt_bf16_to_f32(h) : mt_f16_to_f32(h);
}
inline ushort mt_half_store(float f, int kind) {
    return kind == 1 ? mt_f32_to_bf16(f) : mt_f32_to_f16(f);
}

__kernel void mt_half_to_f32(__global float* dst, long dst_off, __global const ushort* src,
                             long src_off, int from, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    dst[dst_off + i] = mt_half_load(src[src_off + i], from);
}

__kernel void mt_f32_to_half(__global ushort* dst, long dst_off, __global const float* src,
                             long src_off, int to, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    dst[dst_off + i] = mt_half_store(src[src_off + i], to);
}

__kernel void mt_half_to_half(__global ushort* dst, long dst_off, __global const ushort* src,
                              long src_off, int from, int to, long n) {
    long i = get_global_id(0);
    if (i >= n) return;
    dst[dst_off + i] = mt_half_store(mt_half_load(src[src_off + i], from), to);
}

/* GEMM operands of the 16-bit products (cl_gemm.cpp): matrices of rows x cols stored with row
 * stride ld and matrix stride `stride` are written compact (row q = matrix * rows + row of
 * dst holds cols f32 values) for CLBlast's sgemm. work-item (j, q) = column j of packed row q. */
__kernel void mt_gemm_round_f32(__global float* dst, long dst_off, __global const float* src,
                                long src_off, long rows, long cols, long ld, long stride,
                                int compute) {
    long j = get_global_id(0), q = get_global_id(1);
    if (j >= cols) return;
    float v = src[src_off + (q / rows) * stride + (q % rows) * ld + j];
    dst[dst_off + q * cols + j] = mt_half_load(mt_half_store(v, compute), compute);
}

__kernel void mt_gemm_widen_f32(__global float* dst, long dst_off, __global const ushort* src,
                                long src_off, long rows, long cols, long ld, long stride,
                                int kind) {
    long j = get_global_id(0), q = get_global_id(1);
    if (j >= cols) return;
    dst[dst_off + q * cols + j] =
        mt_half_load(src[src_off + (q / rows) * stride + (q % rows) * ld + j], kind);
}
