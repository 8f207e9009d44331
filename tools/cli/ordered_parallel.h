// Runs independent jobs on a pool of threads and hands their results to the caller in job
// order, holding at most `window` finished-but-unconsumed results (bounded memory however many
// jobs there are). `tokenize` and `tokenizer bench` encode text pieces this way.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace moetrain::cli {

// work(i) -> T runs on `threads` threads for i in [0, count); consume(i, T&&) runs on the
// calling thread for i = 0, 1, ... in order. An exception from work(i) is rethrown when job i's
// turn comes (so the error reported is the first in job order, whatever the timing); one from
// consume stops the pool. One thread runs everything inline.
template <typename T, typename Work, typename Consume>
void ordered_parallel(size_t count, int threads, size_t window, Work work, Consume consume) {
    if (threads <= 1 || count <= 1) {
        for (size_t i = 0; i < count; ++i) consume(i, work(i));
        return;
    }
    struct Slot {
        std::optional<T> value;
        std::exception_ptr error;
        bool done = false;
    };
    std::vector<Slot> slots(count);
    std::mutex mu;
    std::condition_variable cv;
    size_t next = 0, consumed = 0;
    bool stop = false;
    auto worker = [&] {
        for (;;) {
            size_t i;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return stop || next >= count || next < consumed + window; });
                if (stop || next >= count) return;
                i = next++;
            }
            Slot result;
            try {
                result.value.emplace(work(i));
            } catch (...) {
                result.error = std::current_exception();
            }
            std::lock_guard lock(mu);
            slots[i].value = std::move(result.value);
            slots[i].error = result.error;
            slots[i].done = true;
            cv.notify_all();
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    auto join = [&] {
        {
            std::lock_guard lock(mu);
            stop = true;
        }
        cv.notify_all();
        for (auto& th : pool) th.join();
    };
    try {
        for (size_t i = 0; i < count; ++i) {
            Slot s;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return slots[i].done; });
                s = std::move(slots[i]);
                slots[i] = Slot{};
            }
            if (s.error) std::rethrow_exception(s.error);
            consume(i, std::move(*s.value));
            {
                std::lock_guard lock(mu);
                consumed = i + 1;
            }
            cv.notify_all();
        }
    } catch (...) {
        join();
        throw;
    }
    join();
}

}  // namespace moetrain::cli
