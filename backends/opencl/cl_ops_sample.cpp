// Token sampling on the device (kernels_cl/sample.cl): greedy argmax, or softmax with
// temperature, sort, top-k / top-p and a Philox draw.
#include "cl_device.h"

namespace moetrain::opencl {

void ClDevice::sample(const Tensor& out_ids, const Tensor& logits, int64_t B, int64_t V,
                      const SampleArgs& s) {
    MT_CHECK(V > 0 && V < (int64_t{1} << 30), "sample: vocabulary size ", V, " out of range");
    MT_CHECK(s.temperature >= 0, "sample: temperature must be >= 0, got ", s.temperature);
    MT_CHECK(s.top_k >= 0, "sample: top_k must be >= 0, got ", s.top_k);
    MT_CHECK(s.top_p > 0 && s.top_p <= 1, "sample: top_p must be in (0, 1], got ", s.top_p);
    if (B == 0) return;
    DevPtr out = arg(out_ids, B, "sample: out_ids", DType::i32);
    DevPtr pl = arg(logits, B * V, "sample: logits");
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
           cl_ulong{s.step}, dev_value(s.step_dev, "sample: step_dev"));
}

}  // namespace moetrain::opencl
