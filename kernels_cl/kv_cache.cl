/* KV-cache append (Device::kv_append): cache[b, p + t, :] = rows[b, t, :] with p = pos0 + pd[0]
 * (pd: the device-side offset, when has_pd), for elements of 4, 2 or 1 bytes (any dtype). One
 * work-item per element; a p that puts the rows outside the capacity S is reported (code 13)
 * and nothing is written. */
#define MT_KV_APPEND(name, T)                                                                    \
    __kernel void name(__global T* cache, long cache_off, __global const T* rows, long rows_off, \
                       long B, long Tn, long S, long row_len, long pos0, __global const int* pd, \
                       long pd_off, int has_pd, __global int* err, long err_off) {               \
        long i = get_global_id(0);                                                               \
        if (i >= B * Tn * row_len) return;                                                       \
        long offset = mt_dev_value(pd, pd_off, has_pd), p = pos0 + offset;                       \
        if (p < 0 || p + Tn > S) {                                                               \
            if (i == 0) mt_report(err + err_off, 13, (int)offset);                               \
            return;                                                                              \
        }                                                                                        \
        long c = i % row_len, bt = i / row_len, t = bt % Tn, b = bt / Tn;                        \
        cache[cache_off + (b * S + p + t) * row_len + c] = rows[rows_off + i];                   \
    }

MT_KV_APPEND(mt_kv_append_4, uint)
MT_KV_APPEND(mt_kv_append_2, ushort)
MT_KV_APPEND(mt_kv_append_1, uchar)
