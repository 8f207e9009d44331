// Size classes, free lists and the out-of-memory retry of the CUDA caching allocator.
#include "cuda/caching_allocator.h"

#include <cstdio>

#include "moetrain/error.h"

namespace moetrain::cuda {
namespace {
constexpr size_t kMinBlock = 512;
constexpr size_t kLargeThreshold = size_t(64) << 20;
constexpr size_t kLargeGranule = size_t(8) << 20;

std::string mib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return buf;
}
}  // namespace

CachingAllocator::~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
}

size_t CachingAllocator::size_class(size_t bytes) {
    if (bytes <= kMinBlock) return kMinBlock;
    if (bytes > kLargeThreshold) return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
    size_t pow2 = kMinBlock;
    while (pow2 * 2 < bytes) pow2 *= 2;  // pow2 < bytes <= 2 * pow2
    size_t quarter = pow2 / 4;
    return (bytes + quarter - 1) / quarter * quarter;
}

void* CachingAllocator::allocate(size_t bytes) {
    if (bytes == 0) return nullptr;
    size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        stats_.bytes_cached -= cls;
        stats_.cache_hits++;
    } else {
        p = raw_->allocate(cls);
        if (!p && stats_.bytes_cached > 0) {
            release_cached_locked();
            stats_.cache_flushes++;
            p = raw_->allocate(cls);
        }
        MT_CHECK(p, "device out of memory allocating ", mib(cls), " (", mib(stats_.bytes_in_use),
                 " in use by moetrain)");
        stats_.raw_allocations++;
    }
    in_use_[p] = cls;
    stats_.bytes_in_use += cls;
    if (stats_.bytes_in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.bytes_in_use;
    return p;
}

void CachingAllocator::free(void* p) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    MT_CHECK(it != in_use_.end(), "caching allocator: free of a block it did not hand out");
    size_t cls = it->second;
    in_use_.erase(it);
    stats_.bytes_in_use -= cls;
    free_[cls].push_back(p);
    stats_.bytes_cached += cls;
}

void CachingAllocator::release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
    for (auto& [cls, blocks] : free_)
        for (void* p : blocks) raw_->release(p);
    free_.clear();
    stats_.bytes_cached = 0;
}

AllocatorStats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

}  // namespace moetrain::cuda
