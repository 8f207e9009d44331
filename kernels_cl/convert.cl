/* f32 <-> bf16 <-> f16 conversions of whole tensors (the element conversions are the prelude's
 * float16.clh), and the operand rounding of the 16-bit GEMMs (mt_gemm_round_f32 /
 * mt_gemm_widen_f32). kind: 1 = bf16, 2 = f16. */

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
