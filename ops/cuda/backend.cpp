// The host side of the CUDA backend — validation, device buffers, dispatch over OpKind to the
// launchers of ops/cuda/kernels.h, copies back (docs/cuda.md). Compiled twice from this one file: with
// the CUDA runtime into tribunal_ops_cuda (run_cuda, device pointers) and with TRIBUNAL_SIMT_EMULATED
// into tribunal_ops_cuda_emulated (run_cuda_emulated, host memory and the SIMT emulation).
#include "ops/cuda/backend.h"

#include <cstdint>
#include <string>
#include <vector>

#include "ops/cuda/device_buffer.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/op_launchers.h"
#include "ops/ids.h"

namespace tribunal {
namespace TRIBUNAL_CUDA_NS {
namespace {

void require(bool cond, const char* op, const std::string& what) {
  if (!cond) throw OpError(std::string(op) + ": " + what);
}

template <class T>
DeviceBuffer<T> upload(const std::vector<T>& v) {
  DeviceBuffer<T> d(v.size());
  d.upload(v.data());
  return d;
}

/// The labels of a softmax op as class ids, checked with the CPU's rule and message (ops/ids.h).
std::vector<int64_t> class_ids(const Tensor& labels, int64_t classes, const char* op) {
  std::vector<int64_t> ids(static_cast<size_t>(labels.numel()));
  for (int64_t b = 0; b < labels.numel(); ++b) ids[static_cast<size_t>(b)] = class_id(labels, b, classes, op);
  return ids;
}

/// The token ids of an embedding op, checked with the CPU's rule and message (ops/ids.h).
std::vector<int64_t> token_ids(const Tensor& ids, int64_t vocab, const char* op) {
  std::vector<int64_t> out(static_cast<size_t>(ids.numel()));
  for (int64_t p = 0; p < ids.numel(); ++p) out[static_cast<size_t>(p)] = token_id(ids.data(), p, vocab, op);
  return out;
}

/// The convolution sizes from x (or dx) [N,C,H,W], w (or dw) [O,C/G,KH,KW], y (or dy) [N,O,OH,OW] and the
/// ints in the short or general form followed by `extra` sizes (2 for the gradients).
ConvGeom conv_geom(const Shape& x, const Shape& w, const Shape& y, const Attrs& attrs, size_t extra) {
  ConvGeom g =
      conv_geom_from(attrs.ints.data(), attrs.ints.size() - extra, x[0], x[1], x[2], x[3], w[0], w[2], w[3]);
  g.oh = y[2];
  g.ow = y[3];
  return g;
}

/// x[N, C, …] of a batch norm as [n, c, s]: C channels of m = N·s elements.
struct BnView {
  int64_t c, s, m;
};
BnView bn_view(const Shape& x) {
  int64_t s = 1;
  for (int d = 2; d < x.rank(); ++d) s *= x[d];
  return {x[1], s, x[0] * s};
}

/// A general pooling's geometry from x [N,C,H,W], the pooled y (or dy) [N,C,OH,OW] and MaxPool2d's 8 ints.
PoolGeom pool_geom(const Shape& x, const Shape& y, const Attrs& a) {
  PoolGeom g;
  g.h = x[2];
  g.w = x[3];
  g.oh = y[2];
  g.ow = y[3];
  g.kh = a.ints[0];
  g.kw = a.ints[1];
  g.sh = a.ints[2];
  g.sw = a.ints[3];
  g.pt = a.ints[4];
  g.pl = a.ints[5];
  return g;
}

/// Dropout's attributes as the kernel takes them (already validated by infer_shapes).
void launch_dropout_of(const Attrs& a, const float* x, float* y, int64_t n) {
  launch_dropout(x, y, n, static_cast<uint64_t>(a.ints[0]), static_cast<uint32_t>(a.ints[1]),
                 static_cast<uint32_t>(a.ints[2]), a.floats[0]);
}

/// Softmax over the last axis of x[…, R, N]: rows, R and N.
void launch_softmax_op(OpKind kind, const Attrs& a, const Shape& s, const float* x, const float* dy,
                       float* y) {
  const int64_t n = s[s.rank() - 1], r = s[s.rank() - 2], rows = n == 0 ? 0 : s.numel() / n;
  const bool causal = a.ints[0] != 0;
  if (kind == OpKind::Softmax)
    launch_softmax(x, y, rows, r, n, causal, a.floats[0]);
  else
    launch_softmax_backward(x, dy, y, rows, r, n, causal, a.floats[0]);
}

}  // namespace

// The backend's one table of kernels: a switch over every OpKind with no default, so an op added to
// the registry without a CUDA kernel fails to compile here (-Wswitch made an error). It lives in
// ops/cuda, not in the ops' descriptors (ops/registry.h OpInfo), because ops/ knows nothing of this
// optional library above it (docs/architecture.md).
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
OpLauncher op_launcher(OpKind kind) {
  switch (kind) {
    case OpKind::Gather:
      return [](const OpLaunch& l) {
        const int64_t row = l.shape(0)[0] == 0 ? 0 : l.n0() / l.shape(0)[0];
        const DeviceBuffer<int64_t> idx = upload(l.attrs.ints);
        launch_gather(l.I(0), idx.data(), l.O(0), static_cast<int64_t>(l.attrs.ints.size()), row);
        synchronize();  // idx is freed at the end of this scope
      };
    case OpKind::Linear:
      return [](const OpLaunch& l) {
        // ints {1} (trans_b): w is [N,K], read transposed; the same chain per element.
        const bool tb = !l.attrs.ints.empty() && l.attrs.ints[0] != 0;
        launch_matmul(l.I(0), l.I(1), l.I(2), l.O(0), l.shape(0)[0], l.shape(1)[tb ? 0 : 1], l.shape(0)[1],
                      false, tb);
      };
    case OpKind::Matmul:
      return [](const OpLaunch& l) {
        const bool ta = l.attrs.ints[0] != 0, tb = l.attrs.ints[1] != 0;
        const Shape &a = l.shape(0), &c = l.out_shape(0);
        const int r = a.rank();
        launch_matmul(l.I(0), l.I(1), nullptr, l.O(0), c[r - 2], c[r - 1], ta ? a[r - 2] : a[r - 1], ta, tb,
                      r == 3 ? a[0] : 1);
      };
    case OpKind::SumRows:
      return [](const OpLaunch& l) { launch_sum_rows(l.I(0), l.O(0), l.shape(0)[0], l.shape(0)[1]); };
    case OpKind::Add:
      return [](const OpLaunch& l) { launch_add(l.I(0), l.I(1), l.O(0), l.n0()); };
    case OpKind::Relu:
      return [](const OpLaunch& l) { launch_relu(l.I(0), l.O(0), l.n0()); };
    case OpKind::ReluBackward:
      return [](const OpLaunch& l) { launch_relu_backward(l.I(0), l.I(1), l.O(0), l.n0()); };
    case OpKind::SoftmaxCrossEntropy:
      return [](const OpLaunch& l) {
        const int64_t batch = l.shape(0)[0], classes = l.shape(0)[1];
        const DeviceBuffer<int64_t> labels = upload(class_ids(*l.in[1], classes, l.op));
        DeviceBuffer<float> nll(static_cast<size_t>(batch));
        launch_softmax_cross_entropy(l.I(0), labels.data(), nll.data(), l.O(0), batch, classes);
        synchronize();
      };
    case OpKind::SoftmaxCrossEntropyBackward:
      return [](const OpLaunch& l) {
        const int64_t batch = l.shape(0)[0], classes = l.shape(0)[1];
        const DeviceBuffer<int64_t> labels = upload(class_ids(*l.in[1], classes, l.op));
        launch_softmax_cross_entropy_backward(l.I(0), labels.data(), l.I(2), l.O(0), batch, classes);
        synchronize();
      };
    case OpKind::SgdMomentum:
      return [](const OpLaunch& l) {
        const std::vector<float>& f = l.attrs.floats;
        launch_sgd_momentum(l.I(0), l.I(1), l.I(2), l.O(0), l.O(1), l.n0(), f[0], f[1], f[2]);
      };
    case OpKind::AdamW:
      return [](const OpLaunch& l) {
        const std::vector<float>& f = l.attrs.floats;
        launch_adamw(l.I(0), l.I(1), l.I(2), l.I(3), l.O(0), l.O(1), l.O(2), l.n0(), f[0], f[1], f[2], f[3],
                     f[4], l.attrs.ints[0]);
      };
    case OpKind::Reshape:
      return [](const OpLaunch& l) { launch_copy(l.I(0), l.O(0), l.n0()); };
    case OpKind::Embedding:
      return [](const OpLaunch& l) {
        const DeviceBuffer<int64_t> ids = upload(token_ids(*l.in[2], l.shape(0)[0], l.op));
        launch_embedding(l.I(0), l.I(1), ids.data(), l.O(0), l.out_shape(0)[0], l.shape(1)[0], l.shape(0)[1]);
        synchronize();
      };
    case OpKind::EmbeddingBackward:
      return [](const OpLaunch& l) {
        const int64_t vocab = l.attrs.ints[0];
        const DeviceBuffer<int64_t> ids = upload(token_ids(*l.in[0], vocab, l.op));
        launch_embedding_backward(ids.data(), l.I(1), l.O(0), vocab, l.shape(1)[0], l.shape(1)[1]);
        synchronize();
      };
    case OpKind::LayerNorm:
      return [](const OpLaunch& l) {
        launch_layer_norm(l.I(0), l.I(1), l.I(2), l.O(0), l.shape(0)[0], l.shape(0)[1], l.attrs.floats[0]);
      };
    case OpKind::LayerNormBackward:
      return [](const OpLaunch& l) {
        DeviceBuffer<float> stats(static_cast<size_t>(2 * l.shape(0)[0]));
        launch_layer_norm_backward(l.I(0), l.I(1), l.I(2), l.O(0), l.O(1), l.O(2), stats.data(),
                                   l.shape(0)[0], l.shape(0)[1], l.attrs.floats[0]);
        synchronize();
      };
    case OpKind::Gelu:
      return [](const OpLaunch& l) { launch_gelu(l.I(0), l.O(0), l.n0()); };
    case OpKind::GeluBackward:
      return [](const OpLaunch& l) { launch_gelu_backward(l.I(0), l.I(1), l.O(0), l.n0()); };
    case OpKind::Softmax:
      return [](const OpLaunch& l) {
        launch_softmax_op(OpKind::Softmax, l.attrs, l.shape(0), l.I(0), nullptr, l.O(0));
      };
    case OpKind::SoftmaxBackward:
      return [](const OpLaunch& l) {
        launch_softmax_op(OpKind::SoftmaxBackward, l.attrs, l.shape(0), l.I(0), l.I(1), l.O(0));
      };
    case OpKind::SplitHeads:
      return [](const OpLaunch& l) {  // heads: y[B·H, T, E]
        launch_heads(l.I(0), l.O(0), l.attrs.ints[0], l.attrs.ints[1], l.attrs.ints[2], l.out_shape(0)[2],
                     true);
      };
    case OpKind::MergeHeads:
      return [](const OpLaunch& l) {  // heads: x[B·H, T, E]
        launch_heads(l.I(0), l.O(0), l.attrs.ints[0], l.attrs.ints[1], l.attrs.ints[2], l.shape(0)[2], false);
      };
    case OpKind::Dropout:
    case OpKind::DropoutBackward:  // the same map of dy
      return [](const OpLaunch& l) { launch_dropout_of(l.attrs, l.I(0), l.O(0), l.n0()); };
    case OpKind::Conv2d:
      return [](const OpLaunch& l) {
        launch_conv2d(l.I(0), l.I(1), l.I(2), l.O(0),
                      conv_geom(l.shape(0), l.shape(1), l.out_shape(0), l.attrs, 0));
      };
    case OpKind::Conv2dBackwardInput:
      return [](const OpLaunch& l) {
        launch_conv2d_backward_input(l.I(0), l.I(1), l.O(0),
                                     conv_geom(l.out_shape(0), l.shape(0), l.shape(1), l.attrs, 2));
      };
    case OpKind::Conv2dBackwardWeight:
      return [](const OpLaunch& l) {
        launch_conv2d_backward_weight(l.I(0), l.I(1), l.O(0),
                                      conv_geom(l.shape(0), l.out_shape(0), l.shape(1), l.attrs, 2));
      };
    case OpKind::Conv2dBackwardBias:
      return [](const OpLaunch& l) {
        const Shape& dy = l.shape(0);
        launch_conv2d_backward_bias(l.I(0), l.O(0), dy[0], dy[1], dy[2] * dy[3]);
      };
    case OpKind::MaxPool2d:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        if (l.attrs.ints.empty())
          launch_max_pool2d(l.I(0), l.O(0), x[0] * x[1], x[2], x[3]);
        else
          launch_max_pool2d_general(l.I(0), l.O(0), x[0] * x[1], pool_geom(x, l.out_shape(0), l.attrs));
      };
    case OpKind::MaxPool2dBackward:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        if (l.attrs.ints.empty())
          launch_max_pool2d_backward(l.I(0), l.I(1), l.O(0), x[0] * x[1], x[2], x[3]);
        else
          launch_max_pool2d_general_backward(l.I(0), l.I(1), l.O(0), x[0] * x[1],
                                             pool_geom(x, l.shape(1), l.attrs));
      };
    case OpKind::GlobalAvgPool:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        launch_global_avg_pool(l.I(0), l.O(0), x[0] * x[1], x[2] * x[3]);
      };
    case OpKind::GlobalAvgPoolBackward:
      return [](const OpLaunch& l) {
        const Shape& dx = l.out_shape(0);
        launch_global_avg_pool_backward(l.I(0), l.O(0), dx[0] * dx[1], dx[2] * dx[3]);
      };
    case OpKind::BatchNorm:
      return [](const OpLaunch& l) {
        const BnView v = bn_view(l.shape(0));
        launch_batch_norm(l.I(0), l.I(1), l.I(2), l.O(0), v.c, v.s, v.m, l.attrs.floats[0]);
      };
    case OpKind::BatchNormBackward:
      return [](const OpLaunch& l) {
        const BnView v = bn_view(l.shape(0));
        launch_batch_norm_backward(l.I(0), l.I(1), l.I(2), l.O(0), l.O(1), l.O(2), v.c, v.s, v.m,
                                   l.attrs.floats[0]);
      };
    case OpKind::BatchNormRunning:
      return [](const OpLaunch& l) {
        const BnView v = bn_view(l.shape(1));
        launch_batch_norm_running(l.I(0), l.I(1), l.O(0), v.c, v.s, v.m, l.attrs.ints[0], l.attrs.floats[0]);
      };
    case OpKind::BatchNormInference:
      return [](const OpLaunch& l) {
        const BnView v = bn_view(l.shape(0));
        launch_batch_norm_inference(l.I(0), l.I(1), l.I(2), l.I(3), l.I(4), l.O(0), v.c, v.s, l.n0(),
                                    l.attrs.floats[0]);
      };
    case OpKind::SumSquares:
      return [](const OpLaunch& l) { launch_sum_squares(l.I(0), l.O(0), l.n0()); };
    case OpKind::ClipCoefficient:  // its P scalar inputs arrive packed as one device array s[P]
      return [](const OpLaunch& l) {
        launch_clip_coefficient(l.I(0), l.O(0), static_cast<int64_t>(l.in.size()), l.attrs.floats[0]);
      };
    case OpKind::Scale:
      return [](const OpLaunch& l) { launch_scale(l.I(0), l.I(1), l.O(0), l.n0()); };
    case OpKind::BroadcastBinary:
      return [](const OpLaunch& l) {
        const Shape &a = l.shape(0), &b = l.shape(1), &y = l.out_shape(0);
        const BinaryGeom g =
            binary_geom(a.dims().data(), a.rank(), b.dims().data(), b.rank(), y.dims().data(), y.rank());
        launch_broadcast_binary(l.I(0), l.I(1), l.O(0), g, static_cast<int>(l.attrs.ints[0]), y.numel());
      };
    case OpKind::SumToShape:
      return [](const OpLaunch& l) {
        const Shape &x = l.shape(0), &t = l.out_shape(0);
        const SumGeom g = sum_geom(x.dims().data(), x.rank(), t.dims().data(), t.rank());
        launch_sum_to_shape(l.I(0), l.O(0), g, l.attrs.floats[0] < 0.0f, t.numel());
      };
    case OpKind::Where:
      return [](const OpLaunch& l) {
        const Shape &c = l.shape(0), &a = l.shape(1), &b = l.shape(2), &y = l.out_shape(0);
        const TernaryGeom g = ternary_geom(c.dims().data(), c.rank(), a.dims().data(), a.rank(),
                                           b.dims().data(), b.rank(), y.dims().data(), y.rank());
        launch_where(l.I(0), l.I(1), l.I(2), l.O(0), g, y.numel());
      };
    case OpKind::WhereBackward:
      return [](const OpLaunch& l) {
        const Shape &c = l.shape(0), &dy = l.shape(1);
        const BinaryGeom g =
            binary_geom(c.dims().data(), c.rank(), dy.dims().data(), dy.rank(), dy.dims().data(), dy.rank());
        launch_where_backward(l.I(0), l.I(1), l.O(0), g, l.attrs.ints[0] == 1, dy.numel());
      };
    case OpKind::GatherRows:
      return [](const OpLaunch& l) {
        // The ids checked on the host with the CPU's rule and message (ops/ids.h), then dense.cuh's gather.
        const Shape& table = l.shape(0);
        const int64_t row = table[0] == 0 ? 0 : table.numel() / table[0];
        const DeviceBuffer<int64_t> ids = upload(token_ids(*l.in[1], table[0], l.op));
        launch_gather(l.I(0), ids.data(), l.O(0), l.shape(1).numel(), row);
        synchronize();  // ids is freed at the end of this scope
      };
    case OpKind::Unary:
      return
          [](const OpLaunch& l) { launch_unary(l.I(0), l.O(0), l.attrs.ints[0], l.attrs.floats[0], l.n0()); };
    case OpKind::UnaryBackward:
      return [](const OpLaunch& l) {
        launch_unary_backward(l.I(0), l.I(1), l.I(2), l.O(0), l.attrs.ints[0], l.attrs.floats[0], l.n0());
      };
    case OpKind::Transpose:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        launch_strided_copy(l.I(0), l.O(0), transpose_geom(x.dims().data(), x.rank(), l.attrs.ints.data()));
      };
    case OpKind::Slice:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        const int axis = static_cast<int>(l.attrs.ints[0]);
        const int64_t len = l.out_shape(0)[axis];
        // A step matters only between two positions; with one or none it is taken as 1, so no stride
        // is formed from a step beyond the axis.
        launch_strided_copy(l.I(0), l.O(0),
                            slice_geom(axis_view(x.dims().data(), x.rank(), axis), l.attrs.ints[1],
                                       len > 1 ? l.attrs.ints[3] : 1, len));
      };
    case OpKind::SliceBackward:
      return [](const OpLaunch& l) {
        const Shape& dx = l.out_shape(0);
        const int axis = static_cast<int>(l.attrs.ints[0]);
        const AxisView v = axis_view(dx.dims().data(), dx.rank(), axis);
        launch_slice_backward(
            l.I(0), l.O(0),
            SliceBackGeom{v.outer, v.dim, l.shape(0)[axis], v.inner, l.attrs.ints[1], l.attrs.ints[2]});
      };
    case OpKind::Concat:
      return [](const OpLaunch& l) {  // each input into its range of the axis; together they cover y
        const int axis = static_cast<int>(l.attrs.ints[0]);
        int64_t offset = 0;
        for (size_t k = 0; k < l.in.size(); ++k) {
          const Shape& x = l.shape(k);
          launch_strided_copy(
              l.I(k), l.O(0),
              concat_geom(axis_view(x.dims().data(), x.rank(), axis), offset, l.out_shape(0)[axis]));
          offset += x[axis];
        }
      };
    case OpKind::ReduceMean:
      return [](const OpLaunch& l) {
        const Shape& x = l.shape(0);
        const AxisView v = axis_view(x.dims().data(), x.rank(), static_cast<int>(l.attrs.ints[0]));
        launch_reduce_mean(l.I(0), l.O(0), v.dim, v.inner, l.out_shape(0).numel());
      };
    case OpKind::ReduceMeanBackward:
      return [](const OpLaunch& l) {
        const Shape& dx = l.out_shape(0);
        const AxisView v = axis_view(dx.dims().data(), dx.rank(), static_cast<int>(l.attrs.ints[0]));
        launch_reduce_mean_backward(l.I(0), l.O(0), v.dim, v.inner, dx.numel());
      };
    case OpKind::Expand:
      return [](const OpLaunch& l) {
        const Shape &x = l.shape(0), &y = l.out_shape(0);
        const BinaryGeom g =
            binary_geom(x.dims().data(), x.rank(), x.dims().data(), x.rank(), y.dims().data(), y.rank());
        launch_expand(l.I(0), l.O(0), g, y.numel());
      };
    case OpKind::Count:
      return nullptr;
  }
  return nullptr;
}
#pragma GCC diagnostic pop

/// The dispatch shared by run_cuda and run_cuda_emulated.
void run(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const OpInfo& info = op_info(kind);
  const char* op = info.name;
  const OpLauncher launch = op_launcher(kind);
  require(launch != nullptr, op, "not an op");
  if (info.num_inputs < 0)
    require(!in.empty(), op, "expects at least one input, got none");
  else
    require(in.size() == static_cast<size_t>(info.num_inputs), op,
            "expects " + std::to_string(info.num_inputs) + " inputs, got " + std::to_string(in.size()));
  require(out.size() == static_cast<size_t>(info.num_outputs), op,
          "expects " + std::to_string(info.num_outputs) + " outputs, got " + std::to_string(out.size()));
  std::vector<Shape> in_shapes;
  for (const Tensor* t : in) in_shapes.push_back(t->shape());
  const std::vector<Shape> want = infer_shapes(kind, attrs, in_shapes);
  for (size_t i = 0; i < out.size(); ++i)
    require(out[i]->shape() == want[i], op,
            "output " + std::to_string(i) + " has shape " + out[i]->shape().str() + ", expected " +
                want[i].str());

  std::vector<DeviceBuffer<float>> d_in, d_out;
  if (kind == OpKind::ClipCoefficient) {  // P scalars → one device array s[P], in input order
    std::vector<float> s;
    for (const Tensor* t : in) s.push_back((*t)[0]);
    d_in.push_back(upload(s));
  } else {
    for (const Tensor* t : in)
      d_in.push_back(DeviceBuffer<float>::of_input(t->data(), static_cast<size_t>(t->numel())));
  }
  for (Tensor* t : out)
    d_out.push_back(DeviceBuffer<float>::of_output(t->data(), static_cast<size_t>(t->numel())));
  std::vector<const float*> d_in_data;
  std::vector<float*> d_out_data;
  for (DeviceBuffer<float>& d : d_in) d_in_data.push_back(d.data());
  for (DeviceBuffer<float>& d : d_out) d_out_data.push_back(d.data());
  launch(OpLaunch{attrs, op, in, out, d_in_data, d_out_data});
  synchronize();
  for (size_t i = 0; i < out.size(); ++i) d_out[i].download(out[i]->data());
}

}  // namespace TRIBUNAL_CUDA_NS

#if defined(TRIBUNAL_SIMT_EMULATED)

void run_cuda_emulated(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                       std::span<Tensor* const> out) {
  cuda_emulated::run(kind, attrs, in, out);
}

#else

void run_cuda(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
              std::span<Tensor* const> out) {
  cuda::run(kind, attrs, in, out);
}

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = cudaGetErrorString(err);
    (void)cudaGetLastError();  // clear the sticky-free error state
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount reports 0 devices";
  return count;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp prop{};
  TRIBUNAL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
}

#endif

}  // namespace tribunal
