// Internal to ops/cuda: host-callable launchers of the device kernels (ops/cuda/kernels.cu). All
// pointers are device pointers; shapes are already validated by run_cuda (ops/cuda/backend.cu). Each
// launcher enqueues on the default stream and throws CudaError if the launch fails.
#pragma once

#include <cstdint>

namespace tribunal::cuda {

/// out[b, j] = table[idx[b], j] for b < batch, j < row (a copy).
void launch_gather(const float* table, const int64_t* idx, float* out, int64_t batch, int64_t row);

/// c[m×n] = op(a)·op(b) (+ bias[n]): per element one fma chain over k = 0..K-1 (ops/kernels/matmul.h).
void launch_matmul(const float* a, const float* b, const float* bias, float* c, int64_t m, int64_t n, int64_t k,
                   bool trans_a, bool trans_b);

/// y[j] = canonical sum over i < m of x[i, j], j < n.
void launch_sum_rows(const float* x, float* y, int64_t m, int64_t n);

void launch_add(const float* a, const float* b, float* y, int64_t n);
void launch_relu(const float* x, float* y, int64_t n);
void launch_relu_backward(const float* x, const float* dy, float* dx, int64_t n);

/// loss[0] = canonical_sum(nll) / batch; nll[batch] is device scratch; labels are valid class ids.
void launch_softmax_cross_entropy(const float* z, const int64_t* labels, float* nll, float* loss, int64_t batch,
                                  int64_t classes);

/// dz[b, j] = (e[j] / s − [j == y_b]) · (dloss[0] / batch).
void launch_softmax_cross_entropy_backward(const float* z, const int64_t* labels, const float* dloss, float* dz,
                                           int64_t batch, int64_t classes);

void launch_sgd_momentum(const float* p, const float* g, const float* v, float* p2, float* v2, int64_t n, float lr,
                         float mu, float wd);

void launch_adamw(const float* p, const float* g, const float* m, const float* v, float* p2, float* m2, float* v2,
                  int64_t n, float lr, float b1, float b2, float eps, float wd, int64_t t);

}  // namespace tribunal::cuda
