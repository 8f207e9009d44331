// Helpers for testing Device ops against the float64 reference (tests/reference_ops.h):
// every usable device of every backend, seeded random host data, host <-> device transfer of
// double / int32 vectors, and a tolerance check that reports the worst element.
//
// Typical use:
//   for_each_test_device([&](Device& dev) {
//       Rng rng(1);
//       auto x = rng.normal(n);                       // f32-representable doubles
//       Tensor tx = to_device(dev, x);
//       dev.act_fwd(Act::gelu, ty, tx, n);
//       ref::act_fwd(Act::gelu, want, x, n);
//       check_close(from_device(dev, ty), want, Tol{}, "gelu");
//   });
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/device.h"

namespace moetrain::test {

// ---- devices ----------------------------------------------------------------------------

struct DeviceUnderTest {
    std::string id;               // "cpu:0", "opencl:0", ...
    std::shared_ptr<Device> dev;  // opened once per test process
};

// Every available device of every backend the registry knows (cpu always; opencl / cuda when
// their modules are built and usable). The devices are opened once and shared by all tests;
// which backends / devices were skipped, and why, is printed once (doctest MESSAGE).
// MOETRAIN_TEST_DEVICES="cpu,opencl" (backend names) restricts the list, and then every backend
// it names must load and open its devices: otherwise each test fails, naming the reason.
inline std::vector<DeviceUnderTest> test_devices() {
    struct State {
        std::vector<DeviceUnderTest> devices;
        std::vector<std::string> skipped;
        std::vector<std::string> unusable;  // named in MOETRAIN_TEST_DEVICES but not usable
        bool printed = false;
    };
    static State* state = [] {
        auto* s = new State;
        const char* only = std::getenv("MOETRAIN_TEST_DEVICES");
        auto wanted = [&](const std::string& name) {
            if (!only) return true;
            std::string list = std::string(",") + only + ",";
            return list.find("," + name + ",") != std::string::npos;
        };
        for (const auto& b : list_backends()) {
            if (!wanted(b.name)) {
                s->skipped.push_back(b.name + ": excluded by MOETRAIN_TEST_DEVICES");
                continue;
            }
            if (!b.loaded || !b.reason.empty()) {
                const std::string why =
                    b.name + ": " + (b.reason.empty() ? "not loaded" : b.reason);
                (only ? s->unusable : s->skipped).push_back(why);
                continue;
            }
            for (size_t i = 0; i < b.devices.size(); ++i) {
                const auto& info = b.devices[i];
                std::string id = b.name + ":" + std::to_string(i);
                if (!info.available) {
                    (only ? s->unusable : s->skipped).push_back(id + ": " + info.reason);
                    continue;
                }
                try {
                    s->devices.push_back({id, std::shared_ptr<Device>(open_device(id))});
                } catch (const std::exception& e) {
                    (only ? s->unusable : s->skipped).push_back(id + ": open failed: " + e.what());
                }
            }
        }
        return s;
    }();
    if (!state->printed) {
        state->printed = true;
        std::string tested;
        for (auto& d : state->devices) tested += (tested.empty() ? "" : ", ") + d.id;
        MESSAGE("op tests run on: " << tested);
        for (auto& why : state->skipped) MESSAGE("op tests skip " << why);
    }
    // A backend the run asked for by name must run: a module that no longer loads (an
    // unresolved symbol, a missing library) fails every test instead of passing none.
    for (auto& why : state->unusable)
        FAIL("MOETRAIN_TEST_DEVICES names a backend that cannot run: " << why);
    return state->devices;
}

// Runs body(device) on every device of test_devices(), the device's id captured for failures.
template <class F>
void for_each_test_device(F&& body) {
    for (auto& d : test_devices()) {
        CAPTURE(d.id);
        body(*d.dev);
    }
}

// Runs body(device, rows, cols) on every test device for each [rows, cols] shape, the device's
// id and the shape captured for failures.
template <class F>
void for_each_shape(std::initializer_list<std::pair<int64_t, int64_t>> shapes, F&& body) {
    for_each_test_device([&](Device& dev) {
        for (auto [rows, cols] : shapes) {
            CAPTURE(rows);
            CAPTURE(cols);
            body(dev, rows, cols);
        }
    });
}

// Whether the device captures Device::run_recorded into graphs (cuda, and cudasim, the CUDA
// backend on the SIMT harness): eager twice, then captured, then replayed.
inline bool records_graphs(const Device& d) {
    return d.backend_name() == "cuda" || d.backend_name() == "cudasim";
}
// Sets an environment variable for the life of the object (the previous value, or none, after).
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (had_)
            setenv(name_, old_.c_str(), 1);
        else
            unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};
// Opening device `id` with the environment variable `name` set to `bad` fails in one line
// containing `message` (a backend switch read when a device opens).
inline void check_env_refused(const std::string& id, const char* name, const char* bad,
                              const char* message) {
    ScopedEnv env(name, bad);
    CHECK_THROWS_WITH_AS(open_device(id), doctest::Contains(message), Error);
}
// A second device `id` (as in DeviceUnderTest::id) opened with graphs off: the eager baseline.
inline std::unique_ptr<Device> open_without_graphs(const std::string& id) {
    DeviceOptions o;
    o.cuda_graphs = false;
    return open_device(id, o);
}

// ---- random data --------------------------------------------------------------------------

// Seeded generator; every value it returns is exactly representable in f32, so the device
// (f32) and the reference (f64) see the same inputs.
class Rng {
  public:
    explicit Rng(uint64_t seed) : gen_(seed) {}
    std::vector<double> uniform(int64_t n, double lo = -1.0, double hi = 1.0) {
        std::uniform_real_distribution<double> dist(lo, hi);
        std::vector<double> v(static_cast<size_t>(n));
        for (auto& x : v) x = static_cast<float>(dist(gen_));
        return v;
    }
    std::vector<double> normal(int64_t n, double stddev = 1.0) {
        std::normal_distribution<double> dist(0.0, stddev);
        std::vector<double> v(static_cast<size_t>(n));
        for (auto& x : v) x = static_cast<float>(dist(gen_));
        return v;
    }
    // Values on the grid {lo, lo + step, ...} (exact ties are likely when the grid is coarse).
    std::vector<double> grid(int64_t n, int lo, int hi, double step) {
        std::uniform_int_distribution<int> dist(lo, hi);
        std::vector<double> v(static_cast<size_t>(n));
        for (auto& x : v) x = static_cast<float>(dist(gen_) * step);
        return v;
    }
    std::vector<int32_t> ints(int64_t n, int32_t lo, int32_t hi) {  // inclusive range
        std::uniform_int_distribution<int32_t> dist(lo, hi);
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = dist(gen_);
        return v;
    }
    int32_t integer(int32_t lo, int32_t hi) { return ints(1, lo, hi)[0]; }

  private:
    std::mt19937_64 gen_;
};

// Sizes that catch tail-handling bugs: 1, primes, one off a power of two, a vector width +1.
inline const std::vector<int64_t>& awkward_sizes() {
    static const std::vector<int64_t> s = {1, 3, 7, 17, 31, 33, 63, 65, 127, 257, 1023, 4099};
    return s;
}

// ---- host <-> device ------------------------------------------------------------------------

// A device tensor of max(n, 1) elements holding `host` (f32 / i32); an empty host vector gives
// one zero element, so ops can be called with n = 0.
inline Tensor to_device(Device& dev, const std::vector<double>& host) {
    std::vector<float> f(host.begin(), host.end());
    Tensor t = dev.alloc(DType::f32, Shape{static_cast<int64_t>(std::max<size_t>(host.size(), 1))});
    if (!host.empty()) dev.upload(t, f.data());
    return t;
}
// GemmArgs (tensors not set) for op(A) [m,k] @ op(B) [k,n] with every leading dimension
// padded by `pad` elements and `batch` entries, each entry `gap_*` elements after the end of the
// previous one.
inline GemmArgs padded_gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                            float beta, int64_t pad, int64_t batch, int64_t gap_a = 0,
                            int64_t gap_b = 0, int64_t gap_c = 0) {
    GemmArgs g = dense_gemm(ta, tb, m, n, k);
    g.alpha = alpha;
    g.beta = beta;
    g.lda += pad;
    g.ldb += pad;
    g.ldc += pad;
    const int64_t a_rows = ta == Trans::N ? m : k, b_rows = tb == Trans::N ? k : n;
    g.batch = batch;
    g.stride_a = a_rows * g.lda + gap_a;
    g.stride_b = b_rows * g.ldb + gap_b;
    g.stride_c = m * g.ldc + gap_c;
    return g;
}

// A device tensor of `dtype` holding host (f32-representable doubles; a 16-bit dtype stores the
// dtype.h rounding of each value).
inline Tensor to_device_as(Device& dev, const std::vector<double>& host, DType dtype) {
    if (dtype == DType::f32) return to_device(dev, host);
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) {
        const auto f = static_cast<float>(host[i]);
        bits[i] = dtype == DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
    }
    Tensor t = dev.alloc(dtype, Shape{static_cast<int64_t>(std::max<size_t>(host.size(), 1))});
    if (!host.empty()) dev.upload(t, bits.data());
    return t;
}
inline Tensor to_device(Device& dev, const std::vector<int32_t>& host) {
    Tensor t = dev.alloc(DType::i32, Shape{static_cast<int64_t>(std::max<size_t>(host.size(), 1))});
    if (!host.empty()) dev.upload(t, host.data());
    return t;
}
// A zero-filled f32 / i32 device tensor of n elements.
inline Tensor zeros(Device& dev, int64_t n, DType dtype = DType::f32) {
    return dev.alloc(dtype, Shape{std::max<int64_t>(n, 1)});
}
inline std::vector<double> from_device(Device& dev, const Tensor& t) {
    MT_CHECK(t.dtype == DType::f32, "from_device(double) downloads f32 only");
    std::vector<float> f(static_cast<size_t>(t.numel()));
    dev.download(f.data(), t);
    return {f.begin(), f.end()};
}
inline std::vector<int32_t> from_device_i32(Device& dev, const Tensor& t) {
    MT_CHECK(t.dtype == DType::i32, "from_device_i32 downloads i32 only");
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    dev.download(v.data(), t);
    return v;
}

// ---- comparison ---------------------------------------------------------------------------

// |got - want| <= abs + rel * |want| for every element.
struct Tol {
    double rel = 1e-4;
    double abs = 1e-5;
};

struct CloseReport {
    bool ok = true;
    size_t worst = 0;  // index of the element with the largest err / allowed
    double got = 0, want = 0;
    double ratio = 0;  // err / allowed at the worst element (<= 1 passes)
    std::string str() const {
        std::ostringstream os;
        os.precision(9);
        os << "worst index " << worst << ": got " << got << " want " << want << " (error " << ratio
           << "x the tolerance)";
        return os.str();
    }
};

inline CloseReport compare(const std::vector<double>& got, const std::vector<double>& want,
                           Tol tol = {}) {
    CloseReport r;
    size_t n = std::min(got.size(), want.size());
    for (size_t i = 0; i < n; ++i) {
        double allowed = tol.abs + tol.rel * std::fabs(want[i]);
        double err = got[i] == want[i] ? 0.0 : std::fabs(got[i] - want[i]);
        double ratio = std::isnan(err) ? INFINITY
                       : err == 0      ? 0.0
                       : allowed == 0  ? INFINITY
                                       : err / allowed;
        if (ratio > r.ratio || i == 0) {
            r.ratio = ratio;
            r.worst = i;
            r.got = got[i];
            r.want = want[i];
        }
    }
    r.ok = r.ratio <= 1.0 && got.size() >= want.size();
    return r;
}

// CHECKs that got[0..want.size()) matches want within tol; names the worst element.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, Tol tol,
                        const std::string& what) {
    REQUIRE(got.size() >= want.size());
    CloseReport r = compare(got, want, tol);
    INFO(what << ": " << r.str());
    CHECK(r.ok);
}

// The message of the moetrain::Error call() throws, or "(no error)".
template <class F>
std::string error_message(F&& call) {
    try {
        call();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

inline void check_equal(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                        const std::string& what) {
    REQUIRE(got.size() >= want.size());
    for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i]) {
            INFO(what << ": first mismatch at index " << i << ": got " << got[i] << " want "
                      << want[i]);
            CHECK(got[i] == want[i]);
            return;
        }
}

}  // namespace moetrain::test
