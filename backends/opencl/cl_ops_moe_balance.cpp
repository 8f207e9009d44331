// MoE load control: capacity admission in slot-then-token priority order (and the shares of the
// data-parallel admission offsets), the expert-count accumulator and the float64 expert-bias
// update (kernels_cl/moe_balance.cl, kernels_cl/expert_bias.cl).
#include <algorithm>

#include "cl_device.h"
#include "cl_device_query.h"

namespace moetrain::opencl {
namespace {
constexpr int64_t kCapacityChunk = 256;  // priority positions per counting chunk
}

void ClDevice::moe_capacity_impl(const Tensor& kept_idx, const Tensor& counts,
                                 const Tensor& topk_idx, const Tensor& offsets, int64_t N,
                                 int64_t k, int64_t E, int64_t capacity) {
    MT_CHECK(E > 0 && E <= 65536, "moe_capacity: n_experts ", E, " out of range");
    const int64_t slots = N * k;
    DevPtr pcounts = arg(counts);
    DevPtr pkept = arg(kept_idx);
    DevPtr pidx = arg(topk_idx);
    DevPtr poff = arg(offsets);
    const int64_t chunks = std::max<int64_t>(1, (slots + kCapacityChunk - 1) / kCapacityChunk);
    DevPtr hist = scratch(0, static_cast<size_t>(chunks * E) * sizeof(cl_int));
    const cl_int e32 = static_cast<cl_int>(E), k32 = static_cast<cl_int>(k);
    launch("moe_balance", "mt_capacity_count", items2(E, chunks, 64), hist, pidx, cl_long{N}, k32,
           cl_long{kCapacityChunk}, e32, error_word());
    // counts = the pre-drop totals; hist = the selections of each expert before each chunk.
    launch("moe_balance", "mt_capacity_offsets", items(E, 64), pcounts, hist, cl_long{chunks}, e32);
    launch("moe_balance", "mt_capacity_admit", items2(E, chunks, 64), pkept, hist, pidx, poff,
           cl_int{!offsets.empty()}, cl_long{N}, k32, cl_long{kCapacityChunk}, e32,
           cl_long{capacity});
    check_device_error();  // a bad expert index must fail here, like moe_sort's
}

void ClDevice::moe_capacity_shares_impl(const Tensor& shares, const Tensor& topk_idx, int64_t N,
                                        int64_t k, int64_t E, int64_t rank, int64_t ranks) {
    MT_CHECK(E > 0 && E <= 65536, "moe_capacity_shares: n_experts ", E, " out of range");
    DevPtr pshares = arg(shares);
    DevPtr pidx = arg(topk_idx);
    // One counting chunk per slot: hist[j, e] = this rank's selections of e in slot j.
    DevPtr hist = scratch(0, static_cast<size_t>(k * E) * sizeof(cl_int));
    const cl_int e32 = static_cast<cl_int>(E), k32 = static_cast<cl_int>(k);
    launch("moe_balance", "mt_capacity_count", items2(E, k, 64), hist, pidx, cl_long{N}, k32,
           cl_long{std::max<int64_t>(N, 1)}, e32, error_word());
    launch("moe_balance", "mt_capacity_shares", items(E, 64), pshares, hist, k32, e32,
           cl_long{rank}, cl_long{ranks});
    check_device_error();  // a bad expert index fails here, like moe_capacity's
}

void ClDevice::add_counts_impl(const Tensor& acc, const Tensor& counts, int64_t n) {
    if (n == 0) return;
    launch("moe_balance", "mt_add_counts", items(n), arg(acc), arg(counts), cl_long{n});
}

void ClDevice::expert_bias_update_impl(const Tensor& bias, const Tensor& counts, int64_t E,
                                       double rate) {
    MT_CHECK(E <= (int64_t{1} << 24), "expert_bias_update: n_experts ", E, " out of range");
    MT_CHECK(device_string(dev_, CL_DEVICE_EXTENSIONS).find("cl_khr_fp64") != std::string::npos,
             "opencl: moe.bias_update_rate needs a device with cl_khr_fp64 (the float64 update "
             "of docs/MODEL.md 2); ",
             name_, " has none");
    launch("expert_bias", "mt_expert_bias_update", reduce_groups(1), arg(bias), arg(counts),
           static_cast<cl_int>(E), cl_double{rate});
}

}  // namespace moetrain::opencl
