// Gather: batch assembly. out[b, …] = table[ints[b], …]. A pure copy, so any implementation is exact.
#include <cstring>

#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

std::vector<Shape> gather_infer(const Attrs& attrs, std::span<const Shape> in) {
  const Shape& t = in[0];
  op_require(t.rank() >= 1, "gather", "the table must have rank ≥ 1, got " + t.str());
  for (size_t b = 0; b < attrs.ints.size(); ++b)
    op_require(attrs.ints[b] >= 0 && attrs.ints[b] < t[0], "gather",
               "index " + std::to_string(attrs.ints[b]) + " at position " + std::to_string(b) +
                   " is outside the table's " + std::to_string(t[0]) + " rows");
  std::vector<int64_t> d(t.dims().begin(), t.dims().end());
  d[0] = static_cast<int64_t>(attrs.ints.size());
  return {Shape(std::span<const int64_t>(d))};
}

int64_t row_size(const Tensor& t) {
  return t.shape()[0] == 0 ? 0 : t.numel() / t.shape()[0];
}

void gather_reference(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const int64_t row = row_size(*in[0]);
  for (size_t b = 0; b < attrs.ints.size(); ++b)
    for (int64_t j = 0; j < row; ++j)
      (*out[0])[static_cast<int64_t>(b) * row + j] = (*in[0])[attrs.ints[b] * row + j];
}

void gather_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 ThreadPool&) {
  const int64_t row = row_size(*in[0]);
  for (size_t b = 0; b < attrs.ints.size(); ++b)
    std::memcpy(out[0]->data() + static_cast<int64_t>(b) * row, in[0]->data() + attrs.ints[b] * row,
                static_cast<size_t>(row) * sizeof(float));
}

}  // namespace

const OpInfo kGatherOp{.kind = OpKind::Gather,
                       .name = "gather",
                       .num_inputs = 1,
                       .num_outputs = 1,
                       .num_ints = -1,
                       .num_floats = 0,
                       .infer = gather_infer,
                       .reference = gather_reference,
                       .fast = gather_fast,
                       .vjp = nullptr,
                       .float64 = f64::selected<OpKind::Gather>,
                       .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
