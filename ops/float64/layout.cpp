// Float64 embeddings: Embedding (one add per element) and EmbeddingBackward (sequential double sums
// by id).
// Token ids are validated by the reference's token_id (ops/ids.h): the same OpError for the same id.
#include "ops/float64/internal.h"
#include "ops/ids.h"

namespace tribunal::f64 {

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
