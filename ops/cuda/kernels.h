// Internal to ops/cuda: host-callable launchers of the kernels in ops/cuda/kernels/*.cuh. The same
// declarations serve both executions of the kernel source (ops/cuda/cuda_ns.h): namespace tribunal::cuda
// for the GPU (pointers are device pointers), tribunal::cuda_emulated for the SIMT emulation (pointers
// are host memory). Shapes are validated by the caller (ops/cuda/backend.cpp). Each launcher enqueues
// its kernel(s) and throws CudaError if a launch fails. Per-element orders: docs/numerics.md.
#pragma once

#include <cstdint>

#include "ops/broadcast.h"      // BinaryGeom, SumGeom, TernaryGeom
#include "ops/conv_elements.h"  // ConvGeom
#include "ops/cuda/cuda_ns.h"
#include "ops/movement.h"   // CopyGeom, SliceBackGeom
#include "ops/pointwise.h"  // PoolGeom

namespace tribunal::TRIBUNAL_CUDA_NS {

/// out[b, j] = table[idx[b], j] for b < batch, j < row (a copy).
void launch_gather(const float* table, const int64_t* idx, float* out, int64_t batch, int64_t row);
/// y[i] = x[i], i < n (reshape).
void launch_copy(const float* x, float* y, int64_t n);
/// to_heads: split_heads x[B·T, H·E] → y[B·H, T, E]; else merge_heads, the inverse.
void launch_heads(const float* x, float* y, int64_t b, int64_t t, int64_t h, int64_t e, bool to_heads);

/// `batch` products c_e[m×n] = op(a_e)·op(b_e) (+ bias[n]) of contiguous operands: per element one fma
/// chain over k = 0..K-1 (ops/kernels/matmul.h). A bias only with batch = 1.
void launch_matmul(const float* a, const float* b, const float* bias, float* c, int64_t m, int64_t n,
                   int64_t k, bool trans_a, bool trans_b, int64_t batch = 1);

/// y[j] = canonical sum over i < m of x[i, j], j < n.
void launch_sum_rows(const float* x, float* y, int64_t m, int64_t n);
/// sum_rows with a deliberately reordered warp fold (w = 1, 2, …, 16): NOT the contract. Only for the
/// test that shows a reordered reduction is caught (tests/cuda/test_backend_ops.cpp).
void launch_sum_rows_reordered(const float* x, float* y, int64_t m, int64_t n);

void launch_add(const float* a, const float* b, float* y, int64_t n);
void launch_relu(const float* x, float* y, int64_t n);
void launch_relu_backward(const float* x, const float* dy, float* dx, int64_t n);
/// y[i] = x[i]·s[0].
void launch_scale(const float* x, const float* s, float* y, int64_t n);
/// y[i] = a[·] op b[·] over the n output elements of g; code 0 add, 1 sub, 2 mul, 3 div.
void launch_broadcast_binary(const float* a, const float* b, float* y, const BinaryGeom& g, int code,
                             int64_t n);
/// y[j] = ±(canonical sum of the g.n sources of output j), j < rows; one warp per output element.
void launch_sum_to_shape(const float* x, float* y, const SumGeom& g, bool negate, int64_t rows);
/// y[i] = where_true(c[·]) ? a[·] : b[·] over the n output elements of g (a bit copy).
void launch_where(const float* c, const float* a, const float* b, float* y, const TernaryGeom& g, int64_t n);
/// dx[i] = where_true(c[·]) == branch ? dy[i] : +0, i < n; c's map is g.sa (g: cond against dy's shape).
void launch_where_backward(const float* c, const float* dy, float* dx, const BinaryGeom& g, bool branch,
                           int64_t n);
/// y[i] = unary32(fn, x[i], p) (ops/unary.h).
void launch_unary(const float* x, float* y, int64_t fn, float p, int64_t n);
/// dx[i] = unary_grad32(fn, x[i], y[i], dy[i], p) (ops/unary.h).
void launch_unary_backward(const float* x, const float* y, const float* dy, float* dx, int64_t fn, float p,
                           int64_t n);
/// dst[copy_dst_offset(g, i)] = src[copy_src_offset(g, i)] for every element i of g (transpose, slice,
/// one input of concat); nothing for an empty g.
void launch_strided_copy(const float* src, float* dst, const CopyGeom& g);
/// slice_backward: dx[i] = dy[slice_backward_source(g, i)], +0 where that is −1.
void launch_slice_backward(const float* dy, float* dx, const SliceBackGeom& g);
/// reduce_mean over x = [rows/inner, dim, inner]: y[r] = canonical sum along dim / float(dim), one warp
/// per output element r < rows.
void launch_reduce_mean(const float* x, float* y, int64_t dim, int64_t inner, int64_t rows);
/// reduce_mean_backward: dx[o, k, i] = dy[o, i] / float(dim) over the n elements of dx = [·, dim, inner].
void launch_reduce_mean_backward(const float* dy, float* dx, int64_t dim, int64_t inner, int64_t n);
/// expand: y[i] = x[offset(g.dims, g.sa, i)] over the n output elements (a bit copy).
void launch_expand(const float* x, float* y, const BinaryGeom& g, int64_t n);

/// loss[0] = canonical_sum(nll) / batch; nll[batch] is device scratch; labels are valid class ids.
void launch_softmax_cross_entropy(const float* z, const int64_t* labels, float* nll, float* loss,
                                  int64_t batch, int64_t classes);
/// dz[b, j] = (e[j] / s − [j == y_b]) · (dloss[0] / batch).
void launch_softmax_cross_entropy_backward(const float* z, const int64_t* labels, const float* dloss,
                                           float* dz, int64_t batch, int64_t classes);

void launch_sgd_momentum(const float* p, const float* g, const float* v, float* p2, float* v2, int64_t n,
                         float lr, float mu, float wd);
void launch_adamw(const float* p, const float* g, const float* m, const float* v, float* p2, float* m2,
                  float* v2, int64_t n, float lr, float b1, float b2, float eps, float wd, int64_t t);

/// y[p, :] = tok[ids[p], :] + pos[p mod t, :], p < rows; ids are valid token ids.
void launch_embedding(const float* tok, const float* pos, const int64_t* ids, float* y, int64_t rows,
                      int64_t t, int64_t d);
/// dtok[vocab, d] from ids[rows] and dy[rows, d] (sequential adds in p order per element).
void launch_embedding_backward(const int64_t* ids, const float* dy, float* dtok, int64_t vocab, int64_t rows,
                               int64_t d);
void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t m, int64_t d,
                       float eps);
/// stats[2m] is device scratch (per-row mean and rstd for the column sums).
void launch_layer_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                                float* dbeta, float* stats, int64_t m, int64_t d, float eps);
/// batch_norm in training mode over x = [n, c, s] (m = n·s elements per channel), one warp per channel.
void launch_batch_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t c, int64_t s,
                       int64_t m, float eps);
void launch_batch_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                                float* dbeta, int64_t c, int64_t s, int64_t m, float eps);
/// out[c] = running[c]·momentum + stat·(1 − momentum), stat 0 mean, 1 biased, 2 unbiased variance.
void launch_batch_norm_running(const float* running, const float* x, float* out, int64_t c, int64_t s,
                               int64_t m, int64_t stat, float momentum);
/// y = fma((x − mean)·rstd, γ, β) over the n elements of x = [·, c, s], one thread each.
void launch_batch_norm_inference(const float* x, const float* gamma, const float* beta, const float* mean,
                                 const float* var, float* y, int64_t c, int64_t s, int64_t n, float eps);
void launch_gelu(const float* x, float* y, int64_t n);
void launch_gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
/// rows rows of n columns, row index within its block of r rows (the causal mask's r).
void launch_softmax(const float* x, float* y, int64_t rows, int64_t r, int64_t n, bool causal, float scale);
void launch_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t r, int64_t n,
                             bool causal, float scale);
/// dropout and dropout_backward (the same mask and scale), attributes already validated.
void launch_dropout(const float* x, float* y, int64_t n, uint64_t seed, uint32_t step, uint32_t site,
                    float p);

void launch_conv2d(const float* x, const float* w, const float* b, float* y, const ConvGeom& g);
void launch_conv2d_backward_input(const float* w, const float* dy, float* dx, const ConvGeom& g);
void launch_conv2d_backward_weight(const float* x, const float* dy, float* dw, const ConvGeom& g);
/// db[o] from dy[n, o, p] (p = OH·OW).
void launch_conv2d_backward_bias(const float* dy, float* db, int64_t n, int64_t o, int64_t p);
/// x[planes, h, w] → y[planes, h/2, w/2].
void launch_max_pool2d(const float* x, float* y, int64_t planes, int64_t h, int64_t w);
void launch_max_pool2d_backward(const float* x, const float* dy, float* dx, int64_t planes, int64_t h,
                                int64_t w);
/// A general pooling window (ops/pointwise.h PoolGeom): x[planes, h, w] → y[planes, oh, ow], and its
/// gradient.
void launch_max_pool2d_general(const float* x, float* y, int64_t planes, const PoolGeom& g);
void launch_max_pool2d_general_backward(const float* x, const float* dy, float* dx, int64_t planes,
                                        const PoolGeom& g);
/// x[planes, hw] → y[planes] (canonical sum / float(hw)); dy[planes] → dx[planes, hw] = dy / float(hw).
void launch_global_avg_pool(const float* x, float* y, int64_t planes, int64_t hw);
void launch_global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw);

/// out[0] = canonical sum of x[i]·x[i].
void launch_sum_squares(const float* x, float* out, int64_t n);
/// out[0] = clip coefficient of the count sums of squares s[count].
void launch_clip_coefficient(const float* s, float* out, int64_t count, float max_norm);

}  // namespace tribunal::TRIBUNAL_CUDA_NS
