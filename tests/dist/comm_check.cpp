// moetrain_comm_check: runs under `mpirun -np N` and checks the communicator.
//   collectives [DEVICE]  every collective on host memory and on DEVICE tensors (default cpu)
//                         against values each rank computes itself, and within subgroups;
//                         exit 0 when all match
//   fail                  rank 1 reports an error through Communicator::abort
//   die                   rank 1 kills itself (SIGKILL) while the others wait in an all-reduce
//   hang                  rank 1 sleeps while the others wait (MOETRAIN_COMM_TIMEOUT bounds it)
//   bench                 all-reduce and all-to-all-v throughput across message sizes (rank 0
//                         prints one line per size)
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "moetrain/backend.h"
#include "moetrain/comm.h"
#include "moetrain/device.h"

using namespace moetrain;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
    if (ok) return;
    std::fprintf(stderr, "rank %d: MISMATCH in %s\n", rank, what.c_str());
    ++failures;
}

// Rank r's value for element i: distinct per rank and element, exact in float.
float val(int r, int64_t i) {
    return static_cast<float>(r * 1000 + i % 997) * 0.5f;
}

// Whether x[i] == sum over the R ranks of val(r, first + i) for every i.
bool is_rank_sum(const std::vector<float>& x, int R, int64_t first) {
    for (size_t i = 0; i < x.size(); ++i) {
        float want = 0;
        for (int r = 0; r < R; ++r) want += val(r, first + static_cast<int64_t>(i));
        if (x[i] != want) return false;
    }
    return true;
}

void host_collectives(Communicator& c) {
    const int R = c.size(), me = c.rank();
    const int64_t n = 1000;
    std::vector<float> a(n);
    for (int64_t i = 0; i < n; ++i) a[i] = me == 1 % R ? val(7, i) : -1.0f;
    c.broadcast(a.data(), n, DType::f32, 1 % R);
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= a[i] == val(7, i);
    expect(ok, "broadcast", me);

    for (int64_t i = 0; i < n; ++i) a[i] = val(me, i);
    c.all_reduce(a.data(), n, DType::f32, ReduceOp::sum);
    expect(is_rank_sum(a, R, 0), "all_reduce f32 sum", me);

    // Two non-blocking all-reduces in flight, with a blocking one between them and their waits.
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = y[i] = val(me, i);
    const int64_t ix = c.start_all_reduce(x.data(), n, DType::f32, ReduceOp::sum);
    const int64_t iy = c.start_all_reduce(y.data(), n / 2, DType::f32, ReduceOp::sum);
    float one = 1;
    c.all_reduce(&one, 1, DType::f32, ReduceOp::sum);
    c.progress();
    c.wait(iy);
    c.wait(ix);
    expect(is_rank_sum(x, R, 0) && one == static_cast<float>(R), "start_all_reduce", me);
    y.resize(n / 2);
    expect(is_rank_sum(y, R, 0), "start_all_reduce of a prefix", me);

    // Requests that progress() completes before their owner waits keep their ids: a request
    // started after them must not reuse one (mpi once reused the ids of completed requests, and
    // a wait on an old id then found no request or another one's).
    std::vector<float> p1(4, 1.0f), p2(4, 2.0f), p3(4, 3.0f);
    const int64_t i1 = c.start_all_reduce(p1.data(), 4, DType::f32, ReduceOp::sum);
    const int64_t i2 = c.start_all_reduce(p2.data(), 4, DType::f32, ReduceOp::sum);
    for (int round = 0; round < 100; ++round) {  // small messages: complete within a few
        c.progress();
        c.all_reduce(&one, 1, DType::f32, ReduceOp::max);
    }
    const int64_t i3 = c.start_all_reduce(p3.data(), 4, DType::f32, ReduceOp::sum);
    expect(i3 != i1 && i3 != i2, "a new request reuses a completed one's id before its wait", me);
    c.wait(i2);
    c.wait(i1);
    c.wait(i3);
    const auto fR = static_cast<float>(R);
    expect(p1[3] == fR && p2[3] == 2 * fR && p3[3] == 3 * fR, "requests completed by progress()",
           me);

    std::vector<int32_t> b(n);
    for (int64_t i = 0; i < n; ++i) b[i] = static_cast<int32_t>((me * 31 + i) % 50);
    c.all_reduce(b.data(), n, DType::i32, ReduceOp::max);
    ok = true;
    for (int64_t i = 0; i < n; ++i) {
        int32_t want = 0;
        for (int r = 0; r < R; ++r) want = std::max<int32_t>(want, (r * 31 + i) % 50);
        ok &= b[i] == want;
    }
    expect(ok, "all_reduce i32 max", me);

    const int64_t m = 37;  // per rank
    std::vector<float> send(m * R), recv(m);
    for (int64_t i = 0; i < m * R; ++i) send[i] = val(me, i);
    c.reduce_scatter(send.data(), recv.data(), m, DType::f32);
    expect(is_rank_sum(recv, R, me * m), "reduce_scatter", me);

    std::vector<float> mine(m), all(m * R);
    for (int64_t i = 0; i < m; ++i) mine[i] = val(me, i);
    c.all_gather(mine.data(), all.data(), m, DType::f32);
    ok = true;
    for (int r = 0; r < R; ++r)
        for (int64_t i = 0; i < m; ++i) ok &= all[r * m + i] == val(r, i);
    expect(ok, "all_gather", me);

    // all_to_all_v: rank s sends (s + d) % 3 + d elements to rank d, valued 100 s + d + k/8.
    auto cnt = [](int s, int d) { return int64_t{(s + d) % 3 + d}; };
    std::vector<int64_t> sc(R), rc(R);
    for (int d = 0; d < R; ++d) sc[d] = cnt(me, d);
    for (int s = 0; s < R; ++s) rc[s] = cnt(s, me);
    std::vector<int32_t> out, in(std::accumulate(rc.begin(), rc.end(), int64_t{0}));
    for (int d = 0; d < R; ++d)
        for (int64_t k = 0; k < sc[d]; ++k) out.push_back(100 * me + 10 * d + static_cast<int>(k));
    c.all_to_all_v(out.data(), sc, in.data(), rc, DType::i32);
    ok = true;
    size_t at = 0;
    for (int s = 0; s < R; ++s)
        for (int64_t k = 0; k < rc[s]; ++k) ok &= in[at++] == 100 * s + 10 * me + k;
    expect(ok, "all_to_all_v", me);
}

void device_collectives(Communicator& c, const std::string& spec) {
    auto dev = open_device(spec);
    const int R = c.size(), me = c.rank();
    const int64_t m = 300;
    std::vector<float> h(m * R), back(m * R);
    for (int64_t i = 0; i < m * R; ++i) h[i] = val(me, i);
    Tensor t = dev->alloc(DType::f32, {m * R}), part = dev->alloc(DType::f32, {m});
    dev->upload(t, h.data());
    c.all_reduce(*dev, t, ReduceOp::sum);
    dev->download(back.data(), t);
    expect(is_rank_sum(back, R, 0), spec + " all_reduce", me);

    dev->upload(t, h.data());
    c.reduce_scatter(*dev, t, part);
    std::vector<float> p(m);
    dev->download(p.data(), part);
    expect(is_rank_sum(p, R, me * m), spec + " reduce_scatter", me);

    c.all_gather(*dev, part, t);  // every rank's reduced part: the all-reduce again
    dev->download(back.data(), t);
    expect(is_rank_sum(back, R, 0), spec + " all_gather", me);

    // Unpadded lengths: the last shard is short (send / recv shorter than R * m). t holds the
    // rank sums S on every rank, so the reduced shards are R * S (0 past the end).
    const std::vector<float> S = back;
    const int64_t short_n = m * R - 7;
    c.reduce_scatter(*dev, t.view(0, {short_n}), part);
    dev->download(p.data(), part);
    bool tail_ok = true;
    for (int64_t i = 0; i < m; ++i) {
        const int64_t at = me * m + i;
        tail_ok &= p[i] == (at < short_n ? S[at] * static_cast<float>(R) : 0.0f);
    }
    expect(tail_ok, spec + " reduce_scatter of an unpadded buffer", me);
    dev->fill(t, -1.0f);
    c.all_gather(*dev, part, t.view(0, {short_n}));
    dev->download(back.data(), t);
    tail_ok = true;
    for (int64_t i = 0; i < m * R; ++i)
        tail_ok &= back[i] == (i < short_n ? S[i] * static_cast<float>(R) : -1.0f);
    expect(tail_ok, spec + " all_gather into an unpadded buffer", me);

    dev->upload(t, h.data());
    c.broadcast(*dev, t, R - 1);
    dev->download(back.data(), t);
    bool ok = true;
    for (int64_t i = 0; i < m * R; ++i) ok &= back[i] == val(R - 1, i);
    expect(ok, spec + " broadcast", me);

    // all_to_all_v of device tensors longer than the counts: rank s sends s + d + 1 values
    // 100 s + 10 d + k to rank d.
    std::vector<int64_t> sc(R), rc(R);
    for (int d = 0; d < R; ++d) sc[d] = me + d + 1;
    for (int s = 0; s < R; ++s) rc[s] = s + me + 1;
    std::vector<float> out;
    for (int d = 0; d < R; ++d)
        for (int64_t k = 0; k < sc[d]; ++k)
            out.push_back(static_cast<float>(100 * me + 10 * d + k));
    const int64_t nr = std::accumulate(rc.begin(), rc.end(), int64_t{0});
    Tensor ts = dev->alloc(DType::f32, {static_cast<int64_t>(out.size()) + 5}),
           tr = dev->alloc(DType::f32, {nr + 3});
    dev->upload(ts.view(0, {static_cast<int64_t>(out.size())}), out.data());
    c.all_to_all_v(*dev, ts, sc, tr, rc);
    std::vector<float> in(static_cast<size_t>(nr));
    dev->download(in.data(), tr.view(0, {nr}));
    ok = true;
    size_t at = 0;
    for (int s = 0; s < R; ++s)
        for (int64_t k = 0; k < rc[s]; ++k)
            ok &= in[at++] == static_cast<float>(100 * s + 10 * me + k);
    expect(ok, spec + " all_to_all_v", me);
}

// Subgroups as expert parallelism makes them: pairs of neighbouring ranks and the ranks of the
// same parity; an all-reduce and a device broadcast within each.
void subgroups(Communicator& c, const std::string& spec) {
    const int R = c.size(), me = c.rank();
    if (R % 2 != 0) return;
    auto dev = open_device(spec);
    const auto pair = c.subgroup(me / 2 * 2, 1, 2), parity = c.subgroup(me % 2, 2, R / 2);
    expect(pair->size() == 2 && pair->rank() == me % 2, "pair subgroup rank", me);
    expect(parity->size() == R / 2 && parity->rank() == me / 2, "parity subgroup rank", me);
    const int64_t n = 100;
    std::vector<float> a(n);
    for (int64_t i = 0; i < n; ++i) a[i] = val(me, i);
    pair->all_reduce(a.data(), n, DType::f32, ReduceOp::sum);
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= a[i] == val(me / 2 * 2, i) + val(me / 2 * 2 + 1, i);
    expect(ok, "pair all_reduce", me);
    Tensor t = dev->alloc(DType::f32, {n});
    for (int64_t i = 0; i < n; ++i) a[i] = val(me, i);
    dev->upload(t, a.data());
    parity->broadcast(*dev, t, 0);
    dev->download(a.data(), t);
    ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= a[i] == val(me % 2, i);
    expect(ok, spec + " parity broadcast", me);
}

void bench(Communicator& c) {
    using Clock = std::chrono::steady_clock;
    const int R = c.size();
    if (c.rank() == 0)
        std::printf("ranks %d\n%12s %12s %14s %14s\n", R, "bytes", "collective", "time_us",
                    "busbw_GB/s");
    for (int64_t bytes = 1024; bytes <= (int64_t{64} << 20); bytes *= 4) {
        const int64_t n = bytes / 4;
        std::vector<float> a(n, 1.0f), s(n, 1.0f), r(n);
        const int iters = bytes <= (1 << 20) ? 50 : 10;
        for (int kind = 0; kind < 2; ++kind) {
            std::vector<int64_t> cnt(R, n / R);
            auto once = [&] {
                if (kind == 0)
                    c.all_reduce(a.data(), n, DType::f32, ReduceOp::sum);
                else
                    c.all_to_all_v(s.data(), cnt, r.data(), cnt, DType::f32);
            };
            once();
            c.barrier();
            const auto t0 = Clock::now();
            for (int i = 0; i < iters; ++i) once();
            c.barrier();
            const double us =
                std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
            // Bus bandwidth as nccl-tests defines it: all-reduce moves 2 (R-1)/R of the bytes per
            // rank, all-to-all (R-1)/R.
            const double factor = (kind == 0 ? 2.0 : 1.0) * (R - 1) / R;
            if (c.rank() == 0)
                std::printf("%12lld %12s %14.1f %14.3f\n", static_cast<long long>(bytes),
                            kind == 0 ? "all_reduce" : "all_to_all_v", us,
                            static_cast<double>(bytes) * factor / us / 1e3);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "collectives";
    std::unique_ptr<Communicator> c;
    try {
        const std::string device = argc > 2 ? argv[2] : "cpu";
        c = open_communicator("auto", device.substr(0, device.find(':')));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "moetrain: error: %s\n", e.what());
        return 1;
    }
    try {
        if (mode == "collectives") {
            host_collectives(*c);
            std::string device = argc > 2 ? argv[2] : "cpu";  // a GPU per rank on a node
            if (device == "cuda") device += ":" + std::to_string(launched_local_rank());
            device_collectives(*c, device);
            subgroups(*c, device);
            int bad = failures;
            c->all_reduce(&bad, 1, DType::i32, ReduceOp::sum);
            if (c->rank() == 0)
                std::printf("%s: %d ranks, %d mismatches\n", bad ? "FAILED" : "ok", c->size(), bad);
            return bad ? 1 : 0;
        }
        if (mode == "bench") {
            bench(*c);
            return 0;
        }
        const bool victim = c->rank() == 1 % c->size();
        if (mode == "fail" && victim) c->abort("injected failure before the all-reduce");
        if (mode == "die" && victim) std::raise(SIGKILL);
        if (mode == "hang" && victim) std::this_thread::sleep_for(std::chrono::seconds(120));
        if (mode != "fail" && mode != "die" && mode != "hang") {
            std::fprintf(stderr, "moetrain_comm_check: unknown mode '%s'\n", mode.c_str());
            return 2;
        }
        float x = 1;
        c->all_reduce(&x, 1, DType::f32, ReduceOp::sum);
        return 0;
    } catch (const std::exception& e) {
        c->abort(e.what());
    }
}
