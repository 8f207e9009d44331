// GraphCache (graph_cache.h): warm-up, capture, replay and the eager fallback per key.
#include "cuda/graph_cache.h"

#include <cstdio>
#include <exception>

namespace moetrain::cuda {

GraphCache::GraphCache(GraphRuntime& runtime, bool enabled, int warmup, size_t max_graphs)
    : runtime_(runtime), enabled_(enabled), warmup_(warmup), max_graphs_(max_graphs) {}

GraphCache::~GraphCache() {
    for (auto& [key, e] : entries_)
        if (e.graph) runtime_.destroy(e.graph);
}

size_t GraphCache::graphs() const {
    size_t n = 0;
    for (const auto& [key, e] : entries_) n += e.graph != nullptr;
    return n;
}

std::string GraphCache::failure(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? std::string{} : it->second.failure;
}

StepRun GraphCache::run(const std::string& key, const std::function<void()>& record) {
    if (!enabled_ || capturing_) {  // a record inside a record is part of the outer capture
        record();
        return StepRun::eager;
    }
    if (!entries_.count(key)) prune_entries();
    Entry& e = entries_[key];
    e.last_use = ++clock_;
    if (e.graph) {
        runtime_.launch(e.graph);
        return StepRun::replayed;
    }
    if (!e.failure.empty() || e.eager_runs < warmup_) {
        record();
        ++e.eager_runs;
        return StepRun::eager;
    }
    return capture(key, e, record);
}

StepRun GraphCache::capture(const std::string& key, Entry& e, const std::function<void()>& record) {
    std::string why;
    try {
        runtime_.begin_capture();
    } catch (const std::exception& ex) {
        return fall_back(key, e, ex.what(), record);
    }
    capturing_ = true;
    try {
        record();
    } catch (const std::exception& ex) {
        why = ex.what();
    } catch (...) {  // not an error we report: leave capture mode, then let it propagate
        capturing_ = false;
        std::string ignored;
        if (void* g = runtime_.end_capture(&ignored)) runtime_.destroy(g);
        throw;
    }
    capturing_ = false;
    std::string end_why;
    void* graph = runtime_.end_capture(&end_why);
    if (!graph || !why.empty()) {
        if (graph) runtime_.destroy(graph);
        if (why.empty()) why = end_why.empty() ? "the runtime returned no graph" : end_why;
        return fall_back(key, e, why, record);
    }
    try {
        runtime_.launch(graph);
    } catch (...) {  // a launch error is a real CUDA error: never retry this graph
        runtime_.destroy(graph);
        e.failure = "cudaGraphLaunch failed";
        throw;
    }
    e.graph = graph;
    evict_beyond_limit();
    return StepRun::captured;
}

StepRun GraphCache::fall_back(const std::string& key, Entry& e, const std::string& why,
                              const std::function<void()>& record) {
    e.failure = why;
    std::fprintf(stderr,
                 "moetrain: cuda graphs: cannot capture step '%s' (%s); it runs without graphs\n",
                 key.c_str(), why.c_str());
    // Nothing captured ran: do the work now (an error the record raises propagates).
    record();
    ++e.eager_runs;
    return StepRun::eager;
}

void GraphCache::evict_beyond_limit() {
    while (graphs() > max_graphs_) {
        Entry* oldest = nullptr;
        for (auto& [key, e] : entries_)
            if (e.graph && (!oldest || e.last_use < oldest->last_use)) oldest = &e;
        runtime_.destroy(oldest->graph);
        oldest->graph = nullptr;
        oldest->eager_runs = 0;  // a later use warms up and captures again
    }
}

void GraphCache::prune_entries() {
    while (entries_.size() >= kMaxEntries) {  // forget the oldest key that holds no graph
        auto oldest = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (!it->second.graph &&
                (oldest == entries_.end() || it->second.last_use < oldest->second.last_use))
                oldest = it;
        if (oldest == entries_.end()) return;
        entries_.erase(oldest);
    }
}

}  // namespace moetrain::cuda
