// The single-process communicator: one rank, so every collective leaves or copies the data.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "moetrain/comm.h"
#include "moetrain/error.h"

namespace moetrain {
namespace {

class SingleComm final : public Communicator {
  public:
    std::string engine() const override { return "single"; }
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void broadcast(void*, int64_t, DType, int root) override {
        MT_CHECK(root == 0, "broadcast: root ", root, " outside the 1 rank");
    }
    void all_reduce(void*, int64_t, DType, ReduceOp) override {}
    void reduce_scatter(const void* send, void* recv, int64_t n, DType t) override {
        copy(recv, send, n, t);
    }
    void all_gather(const void* send, void* recv, int64_t n, DType t) override {
        copy(recv, send, n, t);
    }
    void all_to_all_v(const void* send, const std::vector<int64_t>& sc, void* recv,
                      const std::vector<int64_t>& rc, DType t) override {
        MT_CHECK(sc.size() == 1 && rc.size() == 1 && sc[0] == rc[0],
                 "all_to_all_v: one rank sends to itself what it receives");
        copy(recv, send, sc[0], t);
    }
    void barrier() override {}
    std::unique_ptr<Communicator> subgroup(int first, int stride, int count) override {
        subgroup_position(0, 1, first, stride, count);
        return std::make_unique<SingleComm>();
    }
    [[noreturn]] void abort(const std::string& message) override {
        std::fflush(stdout);
        std::fprintf(stderr, "moetrain: error: %s\n", message.c_str());
        std::exit(1);
    }

  private:
    static void copy(void* dst, const void* src, int64_t n, DType t) {
        if (n > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(t));
    }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() {
    return std::make_unique<SingleComm>();
}

}  // namespace moetrain
