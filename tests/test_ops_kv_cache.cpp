// Op tests, KV cache: kv_append writes the new rows of every sequence at row pos0 (+ the
// device-side offset pos_dev[0]) of the cache and leaves every other row alone, for 4-, 2- and
// 1-byte dtypes (f32, bf16, u8), T = 1, odd row lengths, the last rows of the cache and a
// negative device part; host-side overflow throws at once and a device offset that leaves the
// cache is reported (at once or at the next wait) with nothing written. Exact comparison
// against the float64 reference (the values are small integers, exact in every dtype).
#include <cstring>
#include <string>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

namespace {

// A device tensor of dtype holding the integer values of host (f32, bf16 or u8).
Tensor upload_as(Device& dev, const std::vector<double>& host, DType dtype) {
    if (dtype != DType::u8) return to_device_as(dev, host, dtype);
    std::vector<uint8_t> bytes(host.begin(), host.end());
    Tensor t = dev.alloc(DType::u8, Shape{static_cast<int64_t>(host.size())});
    dev.upload(t, bytes.data());
    return t;
}

// The integer values of a tensor of dtype f32, bf16 or u8.
std::vector<double> download_as(Device& dev, const Tensor& t) {
    std::vector<uint8_t> bytes(t.bytes());
    dev.download(bytes.data(), t);
    std::vector<double> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
        if (t.dtype == DType::u8) {
            out[i] = bytes[i];
        } else if (t.dtype == DType::bf16) {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            out[i] = bf16_to_f32(h);
        } else {
            float f;
            std::memcpy(&f, bytes.data() + 4 * i, 4);
            out[i] = f;
        }
    }
    return out;
}

}  // namespace

TEST_CASE("ops: kv_append host and device positions, f32 bf16 u8") {
    struct Case {
        int64_t B, T, S, row_len, pos0;
        int32_t dev;  // the device-side offset; none when kNone
    };
    constexpr int32_t kNone = -1000;
    for_each_test_device([&](Device& dev) {
        for (const Case& c :
             {Case{1, 1, 1, 1, 0, kNone}, Case{2, 3, 9, 7, 2, kNone}, Case{3, 1, 6, 33, 0, 5},
              Case{2, 4, 11, 5, 7, -2}, Case{2, 2, 40, 65, 10, 28}}) {
            CAPTURE(c.B);
            CAPTURE(c.T);
            CAPTURE(c.S);
            CAPTURE(c.row_len);
            CAPTURE(c.pos0);
            CAPTURE(c.dev);
            Rng rng(static_cast<uint64_t>(c.S * 131 + c.row_len));
            const auto cache = rng.grid(c.B * c.S * c.row_len, 0, 100, 1);
            const auto rows = rng.grid(c.B * c.T * c.row_len, 101, 200, 1);
            const Tensor pos_dev =
                c.dev == kNone ? Tensor{} : to_device(dev, std::vector<int32_t>{c.dev});
            auto want = cache;
            ref::kv_append(want, rows, c.B, c.T, c.S, c.row_len,
                           c.pos0 + (c.dev == kNone ? 0 : c.dev));
            for (DType dt : {DType::f32, DType::bf16, DType::u8}) {
                const std::string dtype = dtype_name(dt);
                CAPTURE(dtype);
                Tensor tc = upload_as(dev, cache, dt);
                dev.kv_append(tc, upload_as(dev, rows, dt), c.B, c.T, c.S, c.row_len, c.pos0,
                              pos_dev);
                CHECK(download_as(dev, tc) == want);
            }
        }
    });
}

TEST_CASE("ops: kv_append rejects overflow and mismatched dtypes, reports a bad device offset") {
    for_each_test_device([&](Device& dev) {
        const int64_t B = 2, T = 2, S = 5, row_len = 3;
        const std::vector<double> cache(B * S * row_len, 7.0), rows(B * T * row_len, 1.0);
        Tensor tc = to_device(dev, cache), tr = to_device(dev, rows);
        CHECK_THROWS_AS(dev.kv_append(tc, tr, B, T, S, row_len, 4, Tensor{}), Error);  // rows 4..5
        CHECK_THROWS_AS(
            dev.kv_append(tc, upload_as(dev, rows, DType::bf16), B, T, S, row_len, 0, Tensor{}),
            Error);
        for (int32_t offset : {int32_t{-2}, int32_t{3}}) {  // rows -1..0 and 4..5 of 0..4
            CAPTURE(offset);
            Tensor pd = to_device(dev, std::vector<int32_t>{offset});
            CHECK_THROWS_AS((dev.kv_append(tc, tr, B, T, S, row_len, 1, pd), dev.synchronize()),
                            Error);
            CHECK(from_device(dev, tc) == cache);
        }
    });
}
