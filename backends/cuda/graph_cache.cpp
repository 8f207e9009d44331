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
    runtime_.begin_capture();
    capturing_ = true;
    try {
        record();
    } catch (const std::exception& ex) {
        why = ex.what();
    }
    capturing_ = false;
    std::string end_why;
    void* graph = runtime_.end_capture(&end_why);
    if (graph && why.empty()) {
        e.graph = graph;
        evict_beyond_limit();
        runtime_.launch(graph);
        return StepRun::captured;
    }
    if (graph) runtime_.destroy(graph);
    e.failure = why.empty() ? (end_why.empty() ? "the runtime returned no graph" : end_why) : why;
    std::fprintf(stderr,
                 "moetrain: cuda graphs: cannot capture step '%s' (%s); it runs without graphs\n",
                 key.c_str(), e.failure.c_str());
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

}  // namespace moetrain::cuda
