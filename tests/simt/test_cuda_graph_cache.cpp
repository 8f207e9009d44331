// Host-side unit tests of the CUDA graph bookkeeping (backends/cuda/graph_cache.h) with a fake
// runtime: warm-up, capture, replay, the eager fallback when a capture fails (the work still
// runs exactly once), graphs off, nesting, and least-recently-used eviction.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/graph_cache.h"

using moetrain::StepRun;
using moetrain::cuda::GraphCache;
using moetrain::cuda::GraphRuntime;

namespace {

// Records what the cache asked for; a "graph" is a number; captures can be made to fail.
class FakeGraphRuntime final : public GraphRuntime {
  public:
    bool capturing = false, fail_end = false, fail_begin = false, fail_launch = false;
    int next = 1;
    std::vector<std::string> calls;
    std::set<long> live;
    void begin_capture() override {
        CHECK_FALSE(capturing);
        if (fail_begin) throw std::runtime_error("cudaStreamBeginCapture: not permitted");
        capturing = true;
        calls.push_back("begin");
    }
    void* end_capture(std::string* why) override {
        CHECK(capturing);
        capturing = false;
        calls.push_back("end");
        if (fail_end) {
            *why = "capture invalidated";
            return nullptr;
        }
        live.insert(next);
        // A fake graph handle: the number itself, never dereferenced.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        return reinterpret_cast<void*>(static_cast<long>(next++));
    }
    void launch(void* g) override {
        CHECK(live.count(reinterpret_cast<long>(g)));
        if (fail_launch) throw std::runtime_error("cudaGraphLaunch: launch failure");
        calls.push_back("launch " + std::to_string(reinterpret_cast<long>(g)));
    }
    void destroy(void* g) override {
        CHECK(live.erase(reinterpret_cast<long>(g)) == 1);
        calls.push_back("destroy " + std::to_string(reinterpret_cast<long>(g)));
    }
};

// A cache without warm-up over a runtime whose `fail` step fails, and the number of times the
// record ran.
struct FailingRuntime {
    FakeGraphRuntime rt;
    GraphCache cache{rt, true, 0};
    int work = 0;
    explicit FailingRuntime(bool FakeGraphRuntime::*fail) { rt.*fail = true; }
    StepRun run(const std::string& key) {
        return cache.run(key, [this] { ++work; });
    }
};

}  // namespace

TEST_CASE("cuda graphs: two eager warm-up runs, one capture, then replays") {
    FakeGraphRuntime rt;
    int records = 0;
    {
        GraphCache cache(rt, true);
        auto record = [&] { ++records; };
        CHECK(cache.run("step", record) == StepRun::eager);
        CHECK(cache.run("step", record) == StepRun::eager);
        CHECK(records == 2);
        CHECK(rt.calls.empty());
        CHECK(cache.run("step", record) == StepRun::captured);
        CHECK(records == 3);  // recorded once, under capture
        CHECK(rt.calls == std::vector<std::string>{"begin", "end", "launch 1"});
        for (int i = 0; i < 3; ++i) CHECK(cache.run("step", record) == StepRun::replayed);
        CHECK(records == 3);
        CHECK(rt.calls.size() == 6);
        CHECK(cache.graphs() == 1);
        // Another key warms up on its own.
        CHECK(cache.run("other", record) == StepRun::eager);
        CHECK(records == 4);
    }
    CHECK(rt.live.empty());  // the destructor destroyed every graph
}

TEST_CASE("cuda graphs: a record that cannot be captured runs eagerly, exactly once per call") {
    FakeGraphRuntime rt;
    GraphCache cache(rt, true, 1);
    int work = 0;
    auto record = [&](bool capturing_now) {
        if (capturing_now) throw std::runtime_error("download inside a captured CUDA graph");
        ++work;
    };
    CHECK(cache.run("k", [&] { record(cache.capturing()); }) == StepRun::eager);
    CHECK(work == 1);
    // The capture attempt throws inside the record: the capture is ended and discarded, the
    // record re-runs eagerly (its captured part never ran), and the key stays eager.
    CHECK(cache.run("k", [&] { record(cache.capturing()); }) == StepRun::eager);
    CHECK(work == 2);
    CHECK(cache.failure("k") == "download inside a captured CUDA graph");
    CHECK(rt.calls == std::vector<std::string>{"begin", "end", "destroy 1"});
    CHECK_FALSE(rt.capturing);
    CHECK(cache.run("k", [&] { record(cache.capturing()); }) == StepRun::eager);
    CHECK(work == 3);
    CHECK(rt.calls.size() == 3);  // no second attempt
    CHECK(cache.graphs() == 0);
}

TEST_CASE("cuda graphs: a capture the runtime invalidates falls back with its reason") {
    FailingRuntime f(&FakeGraphRuntime::fail_end);
    CHECK(f.run("k") == StepRun::eager);
    CHECK(f.work == 2);  // once under the failed capture (discarded), once for real
    CHECK(f.cache.failure("k") == "capture invalidated");
}

TEST_CASE("cuda graphs: an error in the record itself still reaches the caller") {
    FakeGraphRuntime rt;
    GraphCache cache(rt, true, 0);
    CHECK_THROWS_WITH_AS(cache.run("k", [] { throw std::runtime_error("bad op argument"); }),
                         "bad op argument", std::runtime_error);
    CHECK_FALSE(rt.capturing);
}

TEST_CASE("cuda graphs: off means always eager, nested records join the outer capture") {
    FakeGraphRuntime rt;
    GraphCache off(rt, false);
    int work = 0;
    for (int i = 0; i < 5; ++i) CHECK(off.run("k", [&] { ++work; }) == StepRun::eager);
    CHECK(work == 5);
    CHECK(rt.calls.empty());

    GraphCache on(rt, true, 0);
    StepRun inner = StepRun::replayed;
    CHECK(on.run("outer", [&] { inner = on.run("inner", [&] { ++work; }); }) == StepRun::captured);
    CHECK(inner == StepRun::eager);
    CHECK(on.graphs() == 1);
}

TEST_CASE("cuda graphs: the least recently used graph is evicted beyond the limit") {
    FakeGraphRuntime rt;
    GraphCache cache(rt, true, 0, 2);
    auto nop = [] {};
    CHECK(cache.run("a", nop) == StepRun::captured);  // graph 1
    CHECK(cache.run("b", nop) == StepRun::captured);  // graph 2
    CHECK(cache.run("a", nop) == StepRun::replayed);  // b is now the oldest
    CHECK(cache.run("c", nop) == StepRun::captured);  // graph 3 evicts b's graph 2
    CHECK(cache.graphs() == 2);
    CHECK(rt.live == std::set<long>{1, 3});
    CHECK(cache.run("a", nop) == StepRun::replayed);
    CHECK(cache.run("b", nop) == StepRun::captured);  // captured again (warm-up 0)
}

TEST_CASE("cuda graphs: a stream that cannot begin a capture runs the key eagerly") {
    FailingRuntime f(&FakeGraphRuntime::fail_begin);
    CHECK(f.run("k") == StepRun::eager);
    CHECK(f.work == 1);
    CHECK(f.cache.failure("k") == "cudaStreamBeginCapture: not permitted");
    CHECK(f.run("k") == StepRun::eager);  // no second attempt
    CHECK(f.work == 2);
}

TEST_CASE("cuda graphs: a failed first launch propagates and the graph is never replayed") {
    FailingRuntime f(&FakeGraphRuntime::fail_launch);
    CHECK_THROWS_WITH(f.run("k"), "cudaGraphLaunch: launch failure");
    CHECK(f.rt.live.empty());
    CHECK(f.cache.graphs() == 0);
    f.rt.fail_launch = false;
    CHECK(f.run("k") == StepRun::eager);
    CHECK(f.work == 2);
}

TEST_CASE("cuda graphs: keys without graphs are forgotten beyond the key limit") {
    FakeGraphRuntime rt;
    GraphCache cache(rt, true, 0, 2);
    CHECK(cache.run("kept", [] {}) == StepRun::captured);
    for (int i = 0; i < 200; ++i) cache.run("once " + std::to_string(i), [] {});
    CHECK(cache.keys() <= GraphCache::kMaxEntries);
    CHECK(cache.graphs() == 2);
}
