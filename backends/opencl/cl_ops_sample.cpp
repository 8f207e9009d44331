// Token sampling on the device (kernels_cl/sample.cl): greedy argmax, or softmax with
// temperature, sort, top-k / top-p and a Philox draw.
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::sample_impl(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                           const SampleArgs& s) {
    MT_CHECK(V > 0 && V < (int64_t{1} << 30), "sample: vocabulary size ", V, " out of range");
    if (B == 0) return;
    DevPtr out = arg(out_ids);
    DevPtr pl = arg(logits);
    if (s.temperature == 0) {
        launch("sample", "mt_sample_greedy", reduce_groups(B), out, pl, cl_long{V});
        return;
    }
    int64_t p2 = 1;
    while (p2 < V) p2 *= 2;
    size_t entries = static_cast<size_t>(B * p2);
    DevPtr keys = scratch(0, entries * sizeof(float));
    DevPtr ids = scratch(1, entries * sizeof(cl_int));
    launch("sample", "mt_sample_topp", reduce_groups(B), out, pl, keys, ids, cl_long{V},
           cl_long{p2}, s.temperature, cl_long{s.top_k}, s.top_p, cl_ulong{s.seed},
           cl_ulong{s.step}, dev_value(s.step_dev));
}

}  // namespace moetrain::opencl
