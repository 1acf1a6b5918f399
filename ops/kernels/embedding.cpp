// Embedding and EmbeddingBackward: token plus position embeddings of the GPT (Radford et al. 2019).
//
// Embedding: y[b·T+t, d] = tok[ids[b,t], d] + pos[t, d], one add per element, so any split over
// threads or SIMD lanes is bitwise identical to the reference loop.
// EmbeddingBackward: dtok[v, d] = +0, then dy[p, d] added for every row p with ids[p] = v in
// increasing p, one add at a time. The fast kernel splits the *output* (columns d, or vocabulary rows
// v) over threads and keeps each element's sequence of adds whole, so it too is bitwise identical.
//
// Ids are token ids stored as floats (the data pipeline's convention); anything that is not an integer
// in [0, V) — NaN, negative, fractional, ≥ V — is an OpError, thrown by the kernels (the values are not
// known to the shape rule). A throw on a worker thread reaches the caller through ThreadPool.
#include <algorithm>
#include <concepts>
#include <cstring>
#include <string>
#include <vector>

#include "ops/ids.h"
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

// Elements a thread should handle at least before another thread is worth waking (as split_range).
constexpr int64_t kGrain = int64_t{1} << 14;

// ---- Embedding: tok[V,D], pos[T,D], ids[B,T] → y[B·T, D].

std::vector<Shape> embedding_infer(const Attrs&, std::span<const Shape> in) {
  const Shape &tok = in[0], &pos = in[1], &ids = in[2];
  op_require(tok.rank() == 2 && pos.rank() == 2 && ids.rank() == 2, "embedding",
             "needs tok[V,D], pos[T,D], ids[B,T]; got " + tok.str() + ", " + pos.str() + ", " + ids.str());
  op_require(pos[1] == tok[1] && ids[1] == pos[0], "embedding",
             "sizes disagree: tok " + tok.str() + ", pos " + pos.str() + ", ids " + ids.str());
  return {Shape{ids[0] * ids[1], tok[1]}};
}

/// Rows [p0, p1) of y: y[p, :] = tok[id(p), :] + pos[p mod T, :].
void embedding_rows(std::span<const Tensor* const> in, Tensor& out, int64_t p0, int64_t p1) {
  const Tensor &tok = *in[0], &pos = *in[1], &ids = *in[2];
  const int64_t vocab = tok.shape()[0], d = tok.shape()[1], t = pos.shape()[0];
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t id = token_id(ids.data(), p, vocab, "embedding");
    const float* __restrict a = tok.data() + id * d;
    const float* __restrict b = pos.data() + (p % t) * d;
    float* __restrict y = out.data() + p * d;
    for (int64_t j = 0; j < d; ++j) y[j] = a[j] + b[j];  // independent adds: vectorizes, same bits
  }
}

void embedding_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  embedding_rows(in, *out[0], 0, out[0]->shape()[0]);
}

void embedding_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                    ThreadPool& pool) {
  const int64_t rows = out[0]->shape()[0], d = out[0]->shape()[1];
  pool.parallel_for(
      rows, [&](int64_t p0, int64_t p1) { embedding_rows(in, *out[0], p0, p1); },
      std::max<int64_t>(1, kGrain / std::max<int64_t>(1, d)));
}

// dtok = EmbeddingBackward(ids, dy); dpos[t, :] = canonical sum over b of dy[b·T+t, :], i.e. SumRows of
// dy viewed as [B, T·D]. ids are token ids: no gradient.
void embedding_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef ids = a.inputs[2], dy = a.out_grads[0];
  if (!a.needs_grad[0] && !a.needs_grad[1]) return;
  const Shape tok = g.shape(a.inputs[0]), id_shape = g.shape(ids);
  const int64_t vocab = tok[0], d = tok[1], b = id_shape[0], t = id_shape[1];
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::EmbeddingBackward, {{vocab}, {}}, {ids, dy});
  if (a.needs_grad[1]) {
    const ValueRef by_batch = g.emit(OpKind::Reshape, {{b, t * d}, {}}, {dy});
    const ValueRef summed = g.emit(OpKind::SumRows, {}, {by_batch});
    in_grads[1] = g.emit(OpKind::Reshape, {{t, d}, {}}, {summed});
  }
}

// ---- EmbeddingBackward: ids[B,T], dy[B·T,D]; ints {V} → dtok[V,D].

std::vector<Shape> embedding_backward_infer(const Attrs& attrs, std::span<const Shape> in) {
  const Shape &ids = in[0], &dy = in[1];
  const int64_t vocab = attrs.ints[0];
  op_require(vocab >= 0 && vocab < (int64_t{1} << 31), "embedding_backward",
             "V must be in [0, 2^31), got " + std::to_string(vocab));
  op_require(ids.rank() == 2 && dy.rank() == 2 && dy[0] == ids[0] * ids[1], "embedding_backward",
             "needs ids[B,T], dy[B·T,D]; got " + ids.str() + ", " + dy.str());
  return {Shape{vocab, dy[1]}};
}

void embedding_backward_reference(const Attrs&, std::span<const Tensor* const> in,
                                  std::span<Tensor* const> out) {
  const Tensor &ids = *in[0], &dy = *in[1];
  Tensor& dtok = *out[0];
  const int64_t vocab = dtok.shape()[0], d = dtok.shape()[1], rows = dy.shape()[0];
  for (int64_t i = 0; i < dtok.numel(); ++i) dtok[i] = 0.0f;
  for (int64_t p = 0; p < rows; ++p) {
    const int64_t v = token_id(ids.data(), p, vocab, "embedding_backward");
    for (int64_t j = 0; j < d; ++j) dtok[v * d + j] = dtok[v * d + j] + dy[p * d + j];
  }
}

// Columns per thread are worth splitting from this width on; narrower rows split the vocabulary.
constexpr int64_t kMinSplitColumns = 64;

void embedding_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                             ThreadPool& pool) {
  const float* ids = in[0]->data();
  const float* dy = in[1]->data();
  float* dtok = out[0]->data();
  const int64_t vocab = out[0]->shape()[0], d = out[0]->shape()[1], rows = in[1]->shape()[0];
  // Validate and convert every id first (in parallel: a bad id throws from whichever thread meets it).
  std::vector<int32_t> id(static_cast<size_t>(rows));
  pool.parallel_for(
      rows,
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p)
          id[static_cast<size_t>(p)] = static_cast<int32_t>(token_id(ids, p, vocab, "embedding_backward"));
      },
      kGrain);
  const int64_t work = (rows + vocab) * d;  // adds plus zero stores
  const int64_t parts = std::max<int64_t>(1, work / kGrain);
  if (d >= kMinSplitColumns) {
    // Columns [j0, j1) of every row: each thread runs the whole p sequence on its own columns.
    pool.parallel_for(
        d,
        [&](int64_t j0, int64_t j1) {
          const size_t w = static_cast<size_t>(j1 - j0);
          for (int64_t v = 0; v < vocab; ++v) std::fill_n(dtok + v * d + j0, w, 0.0f);
          for (int64_t p = 0; p < rows; ++p) {
            float* __restrict acc = dtok + id[static_cast<size_t>(p)] * d + j0;
            const float* __restrict g = dy + p * d + j0;
            for (size_t j = 0; j < w; ++j) acc[j] = acc[j] + g[j];
          }
        },
        std::max<int64_t>(1, d / parts));
  } else {
    // Vocabulary rows [v0, v1): each thread scans all ids in order and adds the rows it owns.
    pool.parallel_for(
        vocab,
        [&](int64_t v0, int64_t v1) {
          std::fill_n(dtok + v0 * d, static_cast<size_t>((v1 - v0) * d), 0.0f);
          for (int64_t p = 0; p < rows; ++p) {
            const int64_t v = id[static_cast<size_t>(p)];
            if (v < v0 || v >= v1) continue;
            float* __restrict acc = dtok + v * d;
            const float* __restrict g = dy + p * d;
            for (int64_t j = 0; j < d; ++j) acc[j] = acc[j] + g[j];
          }
        },
        std::max<int64_t>(1, vocab / parts));
  }
}

}  // namespace

const OpInfo kEmbeddingOp{.kind = OpKind::Embedding,
                          .name = "embedding",
                          .num_inputs = 3,
                          .num_outputs = 1,
                          .num_ints = 0,
                          .num_floats = 0,
                          .infer = embedding_infer,
                          .reference = embedding_reference,
                          .fast = embedding_fast,
                          .vjp = embedding_vjp,
                          .float64 = f64::embedding,
                          .float64_spread = Float64Spread::Exact};
const OpInfo kEmbeddingBackwardOp{.kind = OpKind::EmbeddingBackward,
                                  .name = "embedding_backward",
                                  .num_inputs = 2,
                                  .num_outputs = 1,
                                  .num_ints = 1,
                                  .num_floats = 0,
                                  .infer = embedding_backward_infer,
                                  .reference = embedding_backward_reference,
                                  .fast = embedding_backward_fast,
                                  .vjp = nullptr,
                                  .float64 = f64::embedding_backward,
                                  .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
