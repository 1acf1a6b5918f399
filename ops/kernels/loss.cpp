// Softmax cross-entropy with integer labels, mean over the batch (docs/numerics.md "Softmax
// cross-entropy"). Per row b of logits z[b, 0..C):
//   m    = running max over j in order (z[j] > m ? z[j] : m)
//   e[j] = exp32(z[j] − m);  s = canonical_sum(e)
//   nll  = log32(s) − (z[y] − m)
//   loss = canonical_sum(nll over rows) / B
// Backward: dz[j] = (e[j] / s − [j == y]) · (dloss / B).
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/math.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

std::vector<Shape> sce_infer_common(const char* op, std::span<const Shape> in) {
  const Shape &z = in[0], &y = in[1];
  op_require(z.rank() == 2 && z[0] >= 1 && z[1] >= 1, op, "logits must be [B ≥ 1, C ≥ 1], got " + z.str());
  op_require(y.rank() == 1 && y[0] == z[0], op, "labels must be [" + std::to_string(z[0]) + "], got " + y.str());
  return {z};
}

std::vector<Shape> sce_infer(const Attrs&, std::span<const Shape> in) {
  sce_infer_common("softmax_cross_entropy", in);
  return {Shape{}};
}

std::vector<Shape> sce_backward_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[2].rank() == 0, "softmax_cross_entropy_backward", "dloss must be a scalar, got " + in[2].str());
  return sce_infer_common("softmax_cross_entropy_backward", in);
}

// Validates the label of row b (a class id stored as float) and returns it.
int64_t label_of(const Tensor& labels, int64_t b, int64_t classes, const char* op) {
  const float l = labels[b];
  const bool ok = l >= 0.0f && l < static_cast<float>(classes) && static_cast<float>(static_cast<int64_t>(l)) == l;
  op_require(ok, op, "label " + std::to_string(l) + " of row " + std::to_string(b) + " is not a class id in [0, " +
                         std::to_string(classes) + ")");
  return static_cast<int64_t>(l);
}

// e[0..C) = exp(z − max); returns (max, canonical sum of e).
std::pair<float, float> softmax_row(const float* z, int64_t classes, float* e) {
  float m = z[0];
  for (int64_t j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  for (int64_t j = 0; j < classes; ++j) e[j] = exp32(z[j] - m);
  return {m, canonical_sum(e, classes)};
}

void nll_rows(const Tensor& z, const Tensor& labels, float* nll, int64_t b0, int64_t b1) {
  const int64_t classes = z.shape()[1];
  std::vector<float> e(static_cast<size_t>(classes));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_of(labels, b, classes, "softmax_cross_entropy");
    const float* row = z.data() + b * classes;
    auto [m, s] = softmax_row(row, classes, e.data());
    nll[b] = log32(s) - (row[y] - m);
  }
}

void sce_run(std::span<const Tensor* const> in, std::span<Tensor* const> out, ThreadPool* pool) {
  const int64_t batch = in[0]->shape()[0];
  std::vector<float> nll(static_cast<size_t>(batch));
  auto rows = [&](int64_t b0, int64_t b1) { nll_rows(*in[0], *in[1], nll.data(), b0, b1); };
  if (pool)
    pool->parallel_for(batch, rows, 16);
  else
    rows(0, batch);
  (*out[0])[0] = canonical_sum(nll.data(), batch) / static_cast<float>(batch);
}

void dlogit_rows(std::span<const Tensor* const> in, Tensor& dz, int64_t b0, int64_t b1) {
  const Tensor &z = *in[0], &labels = *in[1];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  const float scale = (*in[2])[0] / static_cast<float>(batch);
  std::vector<float> e(static_cast<size_t>(classes));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_of(labels, b, classes, "softmax_cross_entropy_backward");
    auto [m, s] = softmax_row(z.data() + b * classes, classes, e.data());
    (void)m;
    for (int64_t j = 0; j < classes; ++j)
      dz[b * classes + j] = (e[j] / s - (j == y ? 1.0f : 0.0f)) * scale;
  }
}

void sce_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  sce_run(in, out, nullptr);
}
void sce_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out, ThreadPool& pool) {
  sce_run(in, out, &pool);
}
void sce_backward_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dlogit_rows(in, *out[0], 0, in[0]->shape()[0]);
}
void sce_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                       ThreadPool& pool) {
  pool.parallel_for(in[0]->shape()[0], [&](int64_t b0, int64_t b1) { dlogit_rows(in, *out[0], b0, b1); }, 16);
}

void sce_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0])
    in_grads[0] = g.emit(OpKind::SoftmaxCrossEntropyBackward, {}, {a.inputs[0], a.inputs[1], a.out_grads[0]});
  // Labels are class ids: they have no gradient.
}

}  // namespace

const OpInfo kSoftmaxCrossEntropyOp{"softmax_cross_entropy", 2, 1, 0, 0, sce_infer, sce_reference, sce_fast, sce_vjp};
const OpInfo kSoftmaxCrossEntropyBackwardOp{"softmax_cross_entropy_backward", 3, 1, 0, 0, sce_backward_infer,
                                            sce_backward_reference, sce_backward_fast, nullptr};

}  // namespace tribunal
