// OpenCL backend specifics (the shared op tests in test_ops_*.cpp cover every op's numbers):
// device listing and selection, the persistent program-binary cache, device-side index errors
// and GEMM corner cases of CLBlast. Each test returns early with a message when this build has
// no usable OpenCL device.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/device.h"
#include "op_test_util.h"

using namespace moetrain;
namespace fs = std::filesystem;

namespace {

// The registry's status of the opencl backend, or nullptr (with a MESSAGE) when not usable.
const BackendStatus* opencl_status() {
    static std::vector<BackendStatus> all = list_backends();
    for (auto& b : all)
        if (b.name == "opencl") {
            if (b.loaded && b.reason.empty() && !b.devices.empty()) return &b;
            MESSAGE("opencl tests skipped: " << (b.reason.empty() ? "no device" : b.reason));
            return nullptr;
        }
    MESSAGE("opencl tests skipped: backend unknown to the registry");
    return nullptr;
}

Tensor upload_f32(Device& dev, const std::vector<float>& v) {
    Tensor t = dev.alloc(DType::f32, Shape{static_cast<int64_t>(v.size())});
    dev.upload(t, v.data());
    return t;
}

std::vector<float> download_f32(Device& dev, const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    dev.download(v.data(), t);
    return v;
}

// Runs one elementwise op on a fresh device (its own context and program cache) and checks it.
void add_on_fresh_device() {
    auto dev = open_device("opencl");
    Tensor a = upload_f32(*dev, {1, 2, 3}), b = upload_f32(*dev, {10, 20, 30});
    dev->add(a, a, b, 3);
    CHECK(download_f32(*dev, a) == std::vector<float>{11, 22, 33});
}

std::vector<fs::path> cache_files(const fs::path& dir, const std::string& family) {
    std::vector<fs::path> out;
    if (!fs::exists(dir)) return out;
    for (auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().rfind(family + "-", 0) == 0) out.push_back(e.path());
    return out;
}

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("opencl: list_backends shows the devices with platform, memory and compute units") {
    const BackendStatus* b = opencl_status();
    if (!b) return;
    CHECK(b->module_path.find("libmoetrain_backend_opencl.so") != std::string::npos);
    for (size_t i = 0; i < b->devices.size(); ++i) {
        const DeviceInfo& d = b->devices[i];
        MESSAGE(d.id << ": " << d.name << " | " << d.details);
        CHECK(d.id == "opencl:" + std::to_string(i));
        CHECK(!d.name.empty());
        CHECK(d.memory_bytes > 0);
        CHECK(d.details.find("platform ") != std::string::npos);
        CHECK(d.details.find("compute units") != std::string::npos);
        CHECK(d.details.find("OpenCL C") != std::string::npos);
    }
}

TEST_CASE("opencl: device selection and its errors") {
    const BackendStatus* b = opencl_status();
    if (!b) return;
    auto dev = open_device("opencl:0");
    CHECK(dev->backend_name() == "opencl");
    CHECK(dev->name().find(b->devices[0].name) != std::string::npos);
    CHECK(open_device("opencl")->name().find("(opencl:") != std::string::npos);
    std::string msg;
    try {
        open_device("opencl:" + std::to_string(b->devices.size()));
    } catch (const Error& e) {
        msg = e.what();
    }
    CHECK(msg.find("does not exist") != std::string::npos);
}

TEST_CASE("opencl: program binaries are cached on disk and a second device does not rebuild") {
    if (!opencl_status()) return;
    fs::path dir =
        fs::temp_directory_path() / ("moetrain_cl_cache_test_" + std::to_string(getpid()));
    fs::remove_all(dir);
    test::ScopedEnv env("MOETRAIN_CL_CACHE", dir.string());

    add_on_fresh_device();  // builds the elementwise family from source and stores it
    auto files = cache_files(dir, "elementwise");
    REQUIRE(files.size() == 1);
    std::string bytes = read_all(files[0]);
    CHECK(bytes.compare(0, 8, "MTCLBIN1") == 0);
    auto stamp = fs::last_write_time(files[0]);

    // A binary is only (re)written after a build from source: an untouched file and no new
    // files mean the second device loaded the binary.
    add_on_fresh_device();
    CHECK(cache_files(dir, "elementwise") == files);
    CHECK(fs::last_write_time(files[0]) == stamp);
    CHECK(read_all(files[0]) == bytes);

    // A damaged file is ignored, the program rebuilt and the file written again. (The new
    // binary need not equal the first byte for byte: PoCL's output differs between a cold and
    // a warm compiler cache.)
    const std::string damaged = "MTCLBIN1 but not a program";
    { std::ofstream(files[0], std::ios::binary | std::ios::trunc) << damaged; }
    add_on_fresh_device();  // checks the result of the kernel, so the rebuild must work
    std::string rewritten = read_all(files[0]);
    CHECK(rewritten != damaged);
    CHECK(rewritten.compare(0, 8, "MTCLBIN1") == 0);
    CHECK(rewritten.size() > damaged.size());
    fs::remove_all(dir);
}

TEST_CASE("opencl: bad device-side indices are reported as moetrain::Error naming the op") {
    if (!opencl_status()) return;
    auto dev = open_device("opencl");
    Tensor table = upload_f32(*dev, {1, 2, 3, 4, 5, 6});  // 3 rows of 2
    Tensor ids = dev->alloc(DType::i32, Shape{2});
    const int32_t bad[2] = {1, 7};
    dev->upload(ids, bad);
    Tensor out = dev->alloc(DType::f32, Shape{4});
    dev->embedding_fwd(out, table, ids, 2, 2, false);  // queued: reported at the next wait
    std::string msg;
    try {
        download_f32(*dev, out);
    } catch (const Error& e) {
        msg = e.what();
    }
    CHECK(msg.find("embedding_fwd") != std::string::npos);
    CHECK(msg.find(" 7 ") != std::string::npos);
    // The report is cleared: the device keeps working.
    const int32_t good[2] = {2, 0};
    dev->upload(ids, good);
    dev->embedding_fwd(out, table, ids, 2, 2, false);
    CHECK(download_f32(*dev, out) == std::vector<float>{5, 6, 1, 2});
    // Ops whose callers read the result at once fail in the call itself.
    Tensor idx = dev->alloc(DType::i32, Shape{2});
    const int32_t experts[2] = {0, -3};
    dev->upload(idx, experts);
    Tensor t = dev->alloc(DType::i32, Shape{8});
    CHECK_THROWS_WITH_AS(dev->moe_sort(t, t, t, idx, 2, 1, 4),
                         doctest::Contains("moe_sort: expert index"), Error);
}

TEST_CASE("opencl: gemm with beta = 0 ignores NaN in C; sub-tile and batched shapes") {
    if (!opencl_status()) return;
    auto dev = open_device("opencl");
    for (int64_t batch : {int64_t{1}, int64_t{3}}) {
        CAPTURE(batch);
        const int64_t m = 37, n = 19, k = 23;  // not multiples of any CLBlast tile
        std::vector<float> a(static_cast<size_t>(batch * m * k)),
            b(static_cast<size_t>(batch * k * n));
        for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % 13) - 6.0f;
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5) % 11) - 5.0f;
        std::vector<float> c(static_cast<size_t>(batch * m * n), NAN);
        GemmArgs g;
        g.tb = Trans::T;  // B stored as [n, k]
        g.m = m, g.n = n, g.k = k;
        g.a = upload_f32(*dev, a), g.lda = k;
        g.b = upload_f32(*dev, b), g.ldb = k;
        g.c = upload_f32(*dev, c), g.ldc = n;
        g.batch = batch, g.stride_a = m * k, g.stride_b = n * k, g.stride_c = m * n;
        dev->gemm(g);
        auto got = download_f32(*dev, g.c);
        int bad = 0;
        for (int64_t p = 0; p < batch; ++p)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    double want = 0;  // small integers: every partial sum is exact in f32
                    for (int64_t l = 0; l < k; ++l)
                        want += a[static_cast<size_t>(p * m * k + i * k + l)] *
                                b[static_cast<size_t>(p * n * k + j * k + l)];
                    bad += got[static_cast<size_t>(p * m * n + i * n + j)] != want;
                }
        CHECK(bad == 0);
    }
}
