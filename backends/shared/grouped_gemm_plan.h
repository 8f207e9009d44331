// The tile plan of the CUDA Device::gemm_grouped (docs/CUDA.md, "Grouped GEMM"), in the common
// subset of C++ and CUDA C++ so that the planning kernels (kernels_cuda/grouped_gemm.cuh), the
// backend's host code, the memory planner and the plain C++ tests all use the same functions.
//
// Host side (sizes only; fixed by the capacity and the group count, never by the group sizes,
// so a captured CUDA Graph stays valid for any routing):
//  - the tile height TM, a power of two;
//  - dim m: a big class of capacity / TM entries of TM rows, and remainder classes j < log2 TM
//    with one entry of 2^j rows per group: one batched GEMM per class;
//  - dim k: capacity / TM + groups padded tiles of TM rows, run in rounds of `per_round` tiles;
//  - the scratch layout of one call.
// Device side (from the group sizes, on the device): the spans of the groups (first row, rows,
// first tile) and, per batch entry, the rows of which group it covers.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MT_GROUPED_FN __host__ __device__ inline
#else
#define MT_GROUPED_FN inline
#endif

namespace moetrain::grouped {

// Largest tile height.
constexpr int64_t kMaxTile = 1024;
// Bound on the dim-k round buffers (padded operand tiles + partial products) of one round,
// unless a single tile needs more.
constexpr int64_t kRoundBudget = int64_t{64} << 20;

// TM = the largest power of two <= capacity / (spread * groups), within [1, kMaxTile]. Rows
// wasted on dummy entries and padding stay below 2 * groups * TM <= 2 * capacity / spread.
// Dim m wastes only products (spread 8: <= 1/4 of the capacity, about 1/8 typically); dim k
// also writes and reads one m x n partial product per tile, so its tiles are longer (spread 4:
// fewer, deeper partial products for up to 1/2, about 1/4 typically, wasted rows).
constexpr int64_t kSpreadM = 8, kSpreadK = 4;
MT_GROUPED_FN int64_t tile_rows(int64_t capacity, int64_t groups, int64_t spread) {
    const int64_t target = groups > 0 ? capacity / (spread * groups) : capacity;
    int64_t t = 1;
    while (t * 2 <= target && t * 2 <= kMaxTile) t *= 2;
    return t;
}

MT_GROUPED_FN int64_t log2_exact(int64_t pow2) {
    int64_t j = 0;
    while ((int64_t{1} << j) < pow2) ++j;
    return j;
}

// One group after the device-side checks: first row, rows (clamped so that no group reaches
// past the capacity) and the index of its first big (dim m) or padded (dim k) tile.
struct Span {
    int32_t row0, rows, first_tile;
};

// One batch entry: `rows` rows of group `group` from row `row0`; group -1 is a dummy entry.
struct Tile {
    int32_t group, row0, rows;
};

// Problems found in the group sizes (the first one is reported).
enum ScanError : int32_t { kScanOk = 0, kScanNegative = 1, kScanOverCapacity = 2 };
struct ScanResult {
    int64_t tiles = 0;  // big tiles (dim m) / padded tiles (dim k) of the groups
    int32_t error = kScanOk;
    int32_t value = 0;  // the negative size, or the total (clamped to int32) over the capacity
};

// Spans of `groups` groups from their raw sizes (serial: one device thread, or the host). A
// negative size counts as 0, and the rows past the capacity are dropped, so every span lies in
// [0, capacity). Tiles per group: rows / TM (round_up false: dim m's big tiles) or
// ceil(rows / TM) (round_up true: dim k's padded tiles).
MT_GROUPED_FN ScanResult scan_groups(const int32_t* sizes, int64_t groups, int64_t capacity,
                                     int64_t tile, bool round_up, Span* spans) {
    ScanResult res;
    int64_t row = 0;
    for (int64_t i = 0; i < groups; ++i) {
        int64_t r = sizes[i];
        if (r < 0) {
            if (res.error == kScanOk) {
                res.error = kScanNegative;
                res.value = sizes[i];
            }
            r = 0;
        }
        const int64_t begin = row < capacity ? row : capacity;
        const int64_t end = row + r < capacity ? row + r : capacity;
        const int64_t rows = end - begin;
        spans[i].row0 = static_cast<int32_t>(begin);
        spans[i].rows = static_cast<int32_t>(rows);
        spans[i].first_tile = static_cast<int32_t>(res.tiles);
        res.tiles += round_up ? (rows + tile - 1) / tile : rows / tile;
        row += r;
    }
    if (row > capacity && res.error == kScanOk) {
        res.error = kScanOverCapacity;
        res.value = row > 2147483647 ? 2147483647 : static_cast<int32_t>(row);
    }
    return res;
}

// Tile t of the tiled groups (t < total tiles of scan_groups with the same round_up): the
// group whose tiles [first_tile, first_tile + tiles) hold t is the last one with first_tile
// <= t (groups without tiles share their first_tile with the next group).
MT_GROUPED_FN Tile tile_of(const Span* spans, int64_t groups, int64_t tile, int64_t total,
                           int64_t t) {
    if (t >= total || groups == 0) return {-1, 0, 0};
    int64_t lo = 0, hi = groups - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (spans[mid].first_tile <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    const Span s = spans[lo];
    const int64_t skip = (t - s.first_tile) * tile;
    const int64_t rows = s.rows - skip < tile ? s.rows - skip : tile;
    return {static_cast<int32_t>(lo), static_cast<int32_t>(s.row0 + skip),
            static_cast<int32_t>(rows)};
}

// Dim m remainder class j (tiles of 2^j < TM rows): the part of group `group` (span s) that the
// binary digit j of rows mod TM stands for, after the big tiles and the higher digits.
MT_GROUPED_FN Tile remainder_tile(Span s, int32_t group, int64_t tile, int64_t j) {
    const int64_t rem = s.rows % tile;
    if (((rem >> j) & 1) == 0) return {-1, 0, 0};
    const int64_t higher = (rem >> (j + 1)) << (j + 1);
    return {group, static_cast<int32_t>(s.row0 + (s.rows - rem) + higher),
            static_cast<int32_t>(int64_t{1} << j)};
}

// Dim m entry e of the pointer arrays: the big class first (entries [0, big)), then remainder
// class j at [big + j * groups, big + (j + 1) * groups), entry big + j * groups + i for group i.
MT_GROUPED_FN Tile entry_tile(const Span* spans, int64_t groups, int64_t tile, int64_t big,
                              int64_t big_total, int64_t e) {
    if (e < big) return tile_of(spans, groups, tile, big_total, e);
    const int64_t j = (e - big) / groups, i = (e - big) % groups;
    return remainder_tile(spans[i], static_cast<int32_t>(i), tile, j);
}

// 256-byte aligned part sizes.
MT_GROUPED_FN size_t align256(size_t b) {
    return (b + 255) / 256 * 256;
}

// The host-side plan of one call: sizes from (dim, capacity, groups, m, n, ldc) and the element
// size of the operands the products read (compute dtype), plus the scratch layout. Every part
// is 256-byte aligned; absent parts are 0 bytes.
struct Plan {
    bool dim_k = false;
    int64_t capacity = 0, groups = 0, tile = 1;
    // dim m
    int64_t big = 0;      // entries of the big class: capacity / TM (the most big tiles that fit)
    int64_t classes = 0;  // remainder classes: log2 TM
    int64_t entries = 0;  // big + classes * groups
    // dim k
    int64_t tiles = 0;      // capacity / TM + groups: the most padded tiles
    int64_t per_round = 0;  // tiles per round (partial buffers)
    int64_t rounds = 0;
    // scratch parts, in this order
    size_t spans = 0, table = 0, convert_a = 0, convert_b = 0, dummy_c = 0, padded_a = 0,
           padded_b = 0, partials = 0;
    size_t total() const {
        return spans + table + convert_a + convert_b + dummy_c + padded_a + padded_b + partials;
    }
};

// m, n: the product sizes (dim m: n columns of C; dim k: each C_i is m x n). ldc: C's row
// stride (dim m). op_bytes: bytes per operand element as multiplied (4 for f32, 2 for 16-bit).
// convert_a / convert_b: elements of A / B converted to 16 bits first (dim m; 0 for none).
inline Plan make_plan(bool dim_k, int64_t capacity, int64_t groups, int64_t m, int64_t n,
                      int64_t ldc, int64_t op_bytes, int64_t convert_a, int64_t convert_b) {
    Plan p;
    p.dim_k = dim_k;
    p.capacity = capacity;
    p.groups = groups;
    p.tile = tile_rows(capacity, groups, dim_k ? kSpreadK : kSpreadM);
    p.spans = align256(static_cast<size_t>(groups) * sizeof(Span));
    if (!dim_k) {
        p.big = capacity / p.tile;
        p.classes = log2_exact(p.tile);
        p.entries = p.big + p.classes * groups;
        p.table = align256(static_cast<size_t>(3 * p.entries) * sizeof(void*));
        p.convert_a = align256(static_cast<size_t>(convert_a) * 2);
        p.convert_b = align256(static_cast<size_t>(convert_b) * 2);
        p.dummy_c = align256(static_cast<size_t>((p.tile - 1) * ldc + n) * sizeof(float));
        return p;
    }
    p.tiles = capacity / p.tile + groups;
    const int64_t per_tile =
        p.tile * (m + n) * op_bytes + m * n * static_cast<int64_t>(sizeof(float));
    int64_t fit = per_tile > 0 ? kRoundBudget / per_tile : p.tiles;
    fit = fit < 1 ? 1 : fit;
    p.per_round = fit < p.tiles ? fit : p.tiles;
    p.rounds = p.per_round > 0 ? (p.tiles + p.per_round - 1) / p.per_round : 0;
    p.table = align256(static_cast<size_t>(p.tiles) * sizeof(Tile));
    p.padded_a = align256(static_cast<size_t>(p.per_round * p.tile * m * op_bytes));
    p.padded_b = align256(static_cast<size_t>(p.per_round * p.tile * n * op_bytes));
    p.partials = align256(static_cast<size_t>(p.per_round * m * n) * sizeof(float));
    return p;
}

}  // namespace moetrain::grouped
