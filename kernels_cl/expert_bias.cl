/* The expert-bias update of MODEL.md 2 in float64 (needs cl_khr_fp64; the host refuses a
 * device without it): c_mean = sum_e counts[e] / E, b_e = fp32(double(b_e) + rate *
 * sign(c_mean - c_e)). One work-group; every work-item sums the E counts itself (E is small),
 * so no reduction order can differ. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void mt_expert_bias_update(__global float* bias, long bias_off, __global const int* counts,
                                    long counts_off, int E, double rate) {
    int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
    double sum = 0.0;
    for (int e = 0; e < E; ++e) sum += (double)counts[counts_off + e];
    double mean = sum / (double)E;
    for (int e = lid; e < E; e += lsz) {
        double d = mean - (double)counts[counts_off + e];
        double sign = d > 0.0 ? 1.0 : (d < 0.0 ? -1.0 : 0.0);
        bias[bias_off + e] = (float)((double)bias[bias_off + e] + rate * sign);
    }
}
