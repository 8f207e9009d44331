// A caching allocator for device memory, in plain C++ (unit-tested without a GPU). Requests are
// rounded up to a size class; a freed block goes onto its class's free list and the next
// request of that class reuses it, so once a training step has run, later steps allocate
// without calling cudaMalloc. Blocks are only ever used on the device's single stream, so a
// block freed while queued kernels still read it can be handed out again at once: stream order
// makes the next user run after them. When the raw allocator runs out of memory the cache is
// returned to it and the request retried once; after that the failure is a moetrain::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace moetrain::cuda {

// Where blocks really come from (cudaMalloc/cudaFree in the backend, malloc in tests).
class RawAllocator {
  public:
    virtual ~RawAllocator() = default;
    // nullptr when out of memory; throws moetrain::Error on any other failure.
    virtual void* allocate(size_t bytes) = 0;
    virtual void release(void* p) = 0;
};

struct AllocatorStats {
    size_t bytes_in_use = 0;  // size-class bytes handed out and not yet freed
    size_t bytes_cached = 0;  // size-class bytes on the free lists
    size_t peak_in_use = 0;
    uint64_t raw_allocations = 0;  // calls that reached the raw allocator
    uint64_t cache_hits = 0;       // requests served from a free list
    uint64_t cache_flushes = 0;    // out-of-memory retries that returned the cache
};

class CachingAllocator {
  public:
    explicit CachingAllocator(std::unique_ptr<RawAllocator> raw) : raw_(std::move(raw)) {}
    ~CachingAllocator();  // returns every cached block; blocks still in use are a caller bug
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    // The size class a request of `bytes` is served from: at least 512 bytes; below 64 MiB
    // four classes per power of two (waste < 25%); above, whole multiples of 8 MiB.
    static size_t size_class(size_t bytes);

    // A block of at least `bytes` (nullptr for 0 bytes). Throws moetrain::Error when out of
    // memory even after returning the cache.
    void* allocate(size_t bytes);
    // Returns a block from allocate() to its free list (nullptr is ignored).
    void free(void* p);
    // Returns every cached block to the raw allocator.
    void release_cached();
    AllocatorStats stats() const;

  private:
    void release_cached_locked();

    std::unique_ptr<RawAllocator> raw_;
    mutable std::mutex mu_;
    std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
    std::unordered_map<void*, size_t> in_use_;   // block -> its size class
    AllocatorStats stats_;
};

}  // namespace moetrain::cuda
