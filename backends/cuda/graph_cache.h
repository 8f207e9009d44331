// The bookkeeping behind Device::run_recorded on CUDA (plain C++, no CUDA headers, so it is
// unit-tested without a GPU): per key, the first `warmup` calls run the record eagerly (buffers,
// scratch and cuBLAS state settle), the next one captures it into a graph and launches it, and
// later calls replay the graph. A capture that fails (the record downloaded, synchronized or
// allocated, or the runtime refused) is discarded and its key runs eagerly from then on, with
// one line on stderr saying why; the record is re-run eagerly right away, so the call still
// does its work. At most `max_graphs` graphs are kept (least recently used evicted), and at
// most kMaxEntries keys are remembered (the oldest without a graph forgotten first).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "moetrain/device.h"

namespace moetrain::cuda {

// What the cache needs from the runtime (cuda_graphs.cpp: the CUDA runtime; tests: fakes).
class GraphRuntime {
  public:
    virtual ~GraphRuntime() = default;
    virtual void begin_capture() = 0;  // throws moetrain::Error if the stream cannot capture
    // Ends the capture and instantiates it: the executable graph, or nullptr with *why set.
    // Must leave the stream out of capture mode even when the capture was invalidated.
    virtual void* end_capture(std::string* why) = 0;
    virtual void launch(void* graph) = 0;
    virtual void destroy(void* graph) = 0;
};

class GraphCache {
  public:
    GraphCache(GraphRuntime& runtime, bool enabled, int warmup = 2, size_t max_graphs = 8);
    ~GraphCache();
    GraphCache(const GraphCache&) = delete;
    GraphCache& operator=(const GraphCache&) = delete;

    static constexpr size_t kMaxEntries = 64;

    StepRun run(const std::string& key, const std::function<void()>& record);

    bool enabled() const { return enabled_; }
    bool capturing() const { return capturing_; }
    size_t graphs() const;                           // executable graphs held
    size_t keys() const { return entries_.size(); }  // keys remembered
    std::string failure(
        const std::string& key) const;  // why `key` cannot be captured ("" if it can)

  private:
    struct Entry {
        int eager_runs = 0;
        void* graph = nullptr;
        std::string failure;
        uint64_t last_use = 0;
    };
    StepRun capture(const std::string& key, Entry& e, const std::function<void()>& record);
    // Marks `key` uncapturable (said once on stderr) and runs the record eagerly.
    StepRun fall_back(const std::string& key, Entry& e, const std::string& why,
                      const std::function<void()>& record);
    void evict_beyond_limit();
    void prune_entries();  // before a new key: keep at most kMaxEntries - 1 others

    GraphRuntime& runtime_;
    bool enabled_;
    int warmup_;
    size_t max_graphs_;
    bool capturing_ = false;
    uint64_t clock_ = 0;
    std::unordered_map<std::string, Entry> entries_;
};

}  // namespace moetrain::cuda
