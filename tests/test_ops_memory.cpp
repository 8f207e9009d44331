// Op tests, memory and identity: alloc (zeroed), upload / download round trips, copy between
// views, fill of every dtype, f32 <-> bf16 <-> f16 conversion (exact bit patterns against
// dtype.h), and argument errors. Every device of test_devices().
#include <cstring>

#include "op_test_util.h"
#include "reference_ops.h"

using namespace moetrain;
using namespace moetrain::test;

TEST_CASE("ops: identity backend_name name synchronize") {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        CHECK(d.id.rfind(d.dev->backend_name() + ":", 0) == 0);
        CHECK(!d.dev->name().empty());
        d.dev->synchronize();
    }
}

TEST_CASE("ops: alloc_buffer is zeroed, upload download round trip") {
    for_each_test_device([&](Device& dev) {
        for (int64_t n : awkward_sizes()) {
            Tensor t = dev.alloc(DType::f32, Shape{n});
            auto z = from_device(dev, t);
            CHECK(std::count(z.begin(), z.end(), 0.0) == n);
            Rng rng(static_cast<uint64_t>(n));
            auto x = rng.normal(n);
            dev.upload(t, std::vector<float>(x.begin(), x.end()).data());
            check_close(from_device(dev, t), x, Tol{0, 0}, "round trip");
        }
        for (size_t bytes : {size_t{0}, size_t{1}, size_t{13}, size_t{4096}}) {
            auto buf = dev.alloc_buffer(bytes);
            REQUIRE(buf);
            CHECK(buf->bytes() == bytes);
            CHECK(buf->device() == &dev);
        }
        // An odd-sized byte buffer and a view at an offset.
        Tensor u = dev.alloc(DType::u8, Shape{13});
        std::vector<uint8_t> bytes(13);
        for (int i = 0; i < 13; ++i) bytes[i] = static_cast<uint8_t>(i * 19);
        dev.upload(u, bytes.data());
        std::vector<uint8_t> back(5);
        dev.download(back.data(), u.view(7, Shape{5}));
        CHECK(std::equal(back.begin(), back.end(), bytes.begin() + 7));
    });
}

// The largest single buffer: what planners cap their buffers to (the logits chunk). OpenCL
// reports its device's CL_DEVICE_MAX_MEM_ALLOC_SIZE and refuses one byte more in one line; the
// others are bounded by free memory only.
TEST_CASE("ops: max_buffer_bytes bounds one allocation") {
    for_each_test_device([&](Device& dev) {
        const size_t max = dev.max_buffer_bytes();
        CHECK(max >= size_t{1} << 20);
        if (dev.backend_name() == "opencl") {
            CHECK(max < SIZE_MAX);
            CHECK_THROWS_WITH_AS(dev.alloc_buffer(max + 1),
                                 doctest::Contains("exceeds the device's largest allocation"),
                                 Error);
        } else {
            CHECK(max == SIZE_MAX);
        }
    });
}

TEST_CASE("ops: copy between views") {
    for_each_test_device([&](Device& dev) {
        Rng rng(3);
        auto x = rng.normal(37);
        Tensor src = to_device(dev, x);
        Tensor dst = zeros(dev, 50);
        dev.copy(dst.view(11, Shape{20}), src.view(5, Shape{20}));
        auto got = from_device(dev, dst);
        std::vector<double> want(50, 0.0);
        std::copy(x.begin() + 5, x.begin() + 25, want.begin() + 11);
        check_close(got, want, Tol{0, 0}, "copy");
        CHECK_THROWS_AS(dev.copy(dst, dev.alloc(DType::i32, Shape{50})), Error);
    });
}

TEST_CASE("ops: fill every dtype") {
    for_each_test_device([&](Device& dev) {
        const int64_t n = 33;
        for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u8}) {
            INFO("dtype " << std::string(dtype_name(t)));
            const float value = 7.3f;
            Tensor x = dev.alloc(t, Shape{n + 2});
            dev.fill(x.view(1, Shape{n}), value);
            std::vector<uint8_t> raw(x.bytes());
            dev.download(raw.data(), x);
            const size_t es = dtype_size(t);
            auto decode = [&](size_t i) -> double {
                const uint8_t* p = raw.data() + i * es;
                uint16_t h;
                int32_t iv;
                float f;
                switch (t) {
                    case DType::f32:
                        std::memcpy(&f, p, 4);
                        return f;
                    case DType::bf16:
                        std::memcpy(&h, p, 2);
                        return bf16_to_f32(h);
                    case DType::f16:
                        std::memcpy(&h, p, 2);
                        return f16_to_f32(h);
                    case DType::i32:
                        std::memcpy(&iv, p, 4);
                        return iv;
                    case DType::u8:
                        return *p;
                }
                return 0;
            };
            CHECK(decode(0) == 0.0);
            CHECK(decode(static_cast<size_t>(n + 1)) == 0.0);
            for (int64_t i = 1; i <= n; ++i)
                REQUIRE(decode(static_cast<size_t>(i)) == ref::round_to(value, t));
        }
    });
}

TEST_CASE("ops: convert f32 bf16 f16 both ways") {
    for_each_test_device([&](Device& dev) {
        Rng rng(5);
        auto x = rng.normal(257, 3.0);
        x[0] = 0.0;
        x[1] = 1e-6;   // subnormal in f16
        x[2] = 70000;  // overflows f16
        x[3] = -1.0 / 3.0;
        Tensor f = to_device(dev, x);
        for (DType t : {DType::bf16, DType::f16}) {
            INFO("dtype " << std::string(dtype_name(t)));
            Tensor h = dev.alloc(t, Shape{257});
            dev.convert(h, f);
            std::vector<uint16_t> bits(257);
            dev.download(bits.data(), h);
            for (size_t i = 0; i < bits.size(); ++i) {
                float xi = static_cast<float>(x[i]);
                REQUIRE(bits[i] == (t == DType::bf16 ? f32_to_bf16(xi) : f32_to_f16(xi)));
            }
            Tensor back = zeros(dev, 257);
            dev.convert(back, h);
            std::vector<double> want(x.size());
            for (size_t i = 0; i < x.size(); ++i) want[i] = ref::round_to(x[i], t);
            check_close(from_device(dev, back), want, Tol{0, 0}, "convert back");
        }
        Tensor b16 = dev.alloc(DType::bf16, Shape{257}), h16 = dev.alloc(DType::f16, Shape{257});
        dev.convert(b16, f);
        dev.convert(h16, b16);  // bf16 -> f16 directly
        std::vector<uint16_t> bits(257);
        dev.download(bits.data(), h16);
        for (size_t i = 0; i < bits.size(); ++i)
            REQUIRE(bits[i] == f32_to_f16(bf16_to_f32(f32_to_bf16(static_cast<float>(x[i])))));
        CHECK_THROWS_AS(dev.convert(dev.alloc(DType::i32, Shape{257}), f), Error);
    });
}

TEST_CASE("ops: wrong arguments throw moetrain::Error") {
    for_each_test_device([&](Device& dev) {
        Tensor small = zeros(dev, 4), ints = zeros(dev, 16, DType::i32), big = zeros(dev, 16);
        CHECK_THROWS_AS(dev.add(big, small, big, 16), Error);          // too few elements
        CHECK_THROWS_AS(dev.add(big, ints, big, 16), Error);           // wrong dtype
        CHECK_THROWS_AS(dev.act_fwd(Act::relu, big, big, -1), Error);  // negative size
        CHECK_THROWS_AS(dev.add(big, Tensor{}, big, 16), Error);       // empty tensor
    });
}
