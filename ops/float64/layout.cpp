// Float64 data-movement ops and the embeddings: Gather, Reshape, SplitHeads, MergeHeads (copies to
// double), Embedding (one add per element) and EmbeddingBackward (sequential double sums by id).
// Token ids are validated by the reference's token_id (ops/ids.h): the same OpError for the same id.
#include "ops/float64/internal.h"
#include "ops/ids.h"

namespace tribunal::f64 {

/// out[b, …] = table[ints[b], …] (rows already checked by infer).
void gather(const Call& c) {
  const Tensor& t = *c.in[0];
  const int64_t row = t.shape()[0] == 0 ? 0 : t.numel() / t.shape()[0];
  double* y = c.out[0].data();
  for (size_t b = 0; b < c.attrs.ints.size(); ++b)
    for (int64_t j = 0; j < row; ++j) y[static_cast<int64_t>(b) * row + j] = t[c.attrs.ints[b] * row + j];
}

void reshape(const Call& c) {
  const float* x = c.in[0]->data();
  double* y = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) y[i] = x[i];
}

/// x[B·T, H·E] → y[B·H, T, E], y[b·H+h, t, e] = x[b·T+t, h·E+e]; `split` false runs the inverse.
void heads(const Call& c, bool split) {
  const int64_t b = c.attrs.ints[0], t = c.attrs.ints[1], h = c.attrs.ints[2];
  const int64_t e = split ? c.out_shapes[0][2] : c.in[0]->shape()[2];
  const float* x = c.in[0]->data();
  double* y = c.out[0].data();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t ti = 0; ti < t; ++ti)
        for (int64_t ei = 0; ei < e; ++ei) {
          const int64_t row_major = (bi * t + ti) * h * e + hi * e + ei, head_major = ((bi * h + hi) * t + ti) * e + ei;
          if (split)
            y[head_major] = x[row_major];
          else
            y[row_major] = x[head_major];
        }
}

void split_heads(const Call& c) { heads(c, true); }
void merge_heads(const Call& c) { heads(c, false); }

/// y[b·T+t, d] = tok[ids[b,t], d] + pos[t, d].
void embedding(const Call& c) {
  const Tensor &tok = *c.in[0], &pos = *c.in[1], &ids = *c.in[2];
  const int64_t vocab = tok.shape()[0], d = tok.shape()[1], t = pos.shape()[0];
  double* y = c.out[0].data();
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = token_id(ids.data(), p, vocab, "embedding");
    const float *a = tok.data() + id * d, *b = pos.data() + (p % t) * d;
    for (int64_t j = 0; j < d; ++j) y[p * d + j] = static_cast<double>(a[j]) + static_cast<double>(b[j]);
  }
}

/// dtok[v, :] = Σ of the rows p of dy with ids[p] = v, added in increasing p from +0.
void embedding_backward(const Call& c) {
  const Tensor &ids = *c.in[0], &dy = *c.in[1];
  const int64_t vocab = c.out_shapes[0][0], d = c.out_shapes[0][1];
  double* dtok = c.out[0].data();
  for (int64_t p = 0; p < dy.shape()[0]; ++p) {
    const int64_t v = token_id(ids.data(), p, vocab, "embedding_backward");
    for (int64_t j = 0; j < d; ++j) dtok[v * d + j] += dy[p * d + j];
  }
}

}  // namespace tribunal::f64
