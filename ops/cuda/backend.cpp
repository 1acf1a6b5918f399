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

/// The convolution sizes from x (or dx) [N,C,H,W], w (or dw) [O,C,KH,KW], y (or dy) [N,O,OH,OW].
ConvGeom conv_geom(const Shape& x, const Shape& w, const Shape& y, const Attrs& attrs) {
  return ConvGeom{x[0], x[1], x[2], x[3], w[0], w[2], w[3], attrs.ints[0], attrs.ints[1], y[2], y[3]};
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

/// The dispatch shared by run_cuda and run_cuda_emulated.
void run(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const OpInfo& info = op_info(kind);
  const char* op = info.name;
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
  auto I = [&](size_t i) { return d_in[i].data(); };
  auto O = [&](size_t i) { return d_out[i].data(); };
  auto shape = [&](size_t i) -> const Shape& { return in[i]->shape(); };
  const int64_t n0 = in[0]->numel();

  switch (kind) {
    case OpKind::Gather: {
      const int64_t row = shape(0)[0] == 0 ? 0 : n0 / shape(0)[0];
      const DeviceBuffer<int64_t> idx = upload(attrs.ints);
      launch_gather(I(0), idx.data(), O(0), static_cast<int64_t>(attrs.ints.size()), row);
      synchronize();  // idx is freed at the end of this scope
      break;
    }
    case OpKind::Linear:
      launch_matmul(I(0), I(1), I(2), O(0), shape(0)[0], shape(1)[1], shape(0)[1], false, false);
      break;
    case OpKind::Matmul: {
      const bool ta = attrs.ints[0] != 0, tb = attrs.ints[1] != 0;
      const Shape &a = shape(0), &c = out[0]->shape();
      const int r = a.rank();
      launch_matmul(I(0), I(1), nullptr, O(0), c[r - 2], c[r - 1], ta ? a[r - 2] : a[r - 1], ta, tb,
                    r == 3 ? a[0] : 1);
      break;
    }
    case OpKind::SumRows:
      launch_sum_rows(I(0), O(0), shape(0)[0], shape(0)[1]);
      break;
    case OpKind::Add:
      launch_add(I(0), I(1), O(0), n0);
      break;
    case OpKind::Relu:
      launch_relu(I(0), O(0), n0);
      break;
    case OpKind::ReluBackward:
      launch_relu_backward(I(0), I(1), O(0), n0);
      break;
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = shape(0)[0], classes = shape(0)[1];
      const DeviceBuffer<int64_t> labels = upload(class_ids(*in[1], classes, op));
      if (kind == OpKind::SoftmaxCrossEntropy) {
        DeviceBuffer<float> nll(static_cast<size_t>(batch));
        launch_softmax_cross_entropy(I(0), labels.data(), nll.data(), O(0), batch, classes);
        synchronize();
      } else {
        launch_softmax_cross_entropy_backward(I(0), labels.data(), I(2), O(0), batch, classes);
        synchronize();
      }
      break;
    }
    case OpKind::SgdMomentum:
      launch_sgd_momentum(I(0), I(1), I(2), O(0), O(1), n0, attrs.floats[0], attrs.floats[1],
                          attrs.floats[2]);
      break;
    case OpKind::AdamW:
      launch_adamw(I(0), I(1), I(2), I(3), O(0), O(1), O(2), n0, attrs.floats[0], attrs.floats[1],
                   attrs.floats[2], attrs.floats[3], attrs.floats[4], attrs.ints[0]);
      break;
    case OpKind::Reshape:
      launch_copy(I(0), O(0), n0);
      break;
    case OpKind::Embedding: {
      const DeviceBuffer<int64_t> ids = upload(token_ids(*in[2], shape(0)[0], op));
      launch_embedding(I(0), I(1), ids.data(), O(0), out[0]->shape()[0], shape(1)[0], shape(0)[1]);
      synchronize();
      break;
    }
    case OpKind::EmbeddingBackward: {
      const DeviceBuffer<int64_t> ids = upload(token_ids(*in[0], attrs.ints[0], op));
      launch_embedding_backward(ids.data(), I(1), O(0), attrs.ints[0], shape(1)[0], shape(1)[1]);
      synchronize();
      break;
    }
    case OpKind::LayerNorm:
      launch_layer_norm(I(0), I(1), I(2), O(0), shape(0)[0], shape(0)[1], attrs.floats[0]);
      break;
    case OpKind::LayerNormBackward: {
      DeviceBuffer<float> stats(static_cast<size_t>(2 * shape(0)[0]));
      launch_layer_norm_backward(I(0), I(1), I(2), O(0), O(1), O(2), stats.data(), shape(0)[0], shape(0)[1],
                                 attrs.floats[0]);
      synchronize();
      break;
    }
    case OpKind::Gelu:
      launch_gelu(I(0), O(0), n0);
      break;
    case OpKind::GeluBackward:
      launch_gelu_backward(I(0), I(1), O(0), n0);
      break;
    case OpKind::Softmax:
      launch_softmax_op(kind, attrs, shape(0), I(0), nullptr, O(0));
      break;
    case OpKind::SoftmaxBackward:
      launch_softmax_op(kind, attrs, shape(0), I(0), I(1), O(0));
      break;
    case OpKind::SplitHeads:
    case OpKind::MergeHeads: {
      const Shape& heads = kind == OpKind::SplitHeads ? out[0]->shape() : shape(0);  // [B·H, T, E]
      launch_heads(I(0), O(0), attrs.ints[0], attrs.ints[1], attrs.ints[2], heads[2],
                   kind == OpKind::SplitHeads);
      break;
    }
    case OpKind::Dropout:
    case OpKind::DropoutBackward:
      launch_dropout_of(attrs, I(0), O(0), n0);
      break;
    case OpKind::Conv2d:
      launch_conv2d(I(0), I(1), I(2), O(0), conv_geom(shape(0), shape(1), out[0]->shape(), attrs));
      break;
    case OpKind::Conv2dBackwardInput:
      launch_conv2d_backward_input(I(0), I(1), O(0), conv_geom(out[0]->shape(), shape(0), shape(1), attrs));
      break;
    case OpKind::Conv2dBackwardWeight:
      launch_conv2d_backward_weight(I(0), I(1), O(0), conv_geom(shape(0), out[0]->shape(), shape(1), attrs));
      break;
    case OpKind::Conv2dBackwardBias:
      launch_conv2d_backward_bias(I(0), O(0), shape(0)[0], shape(0)[1], shape(0)[2] * shape(0)[3]);
      break;
    case OpKind::MaxPool2d:
      launch_max_pool2d(I(0), O(0), shape(0)[0] * shape(0)[1], shape(0)[2], shape(0)[3]);
      break;
    case OpKind::MaxPool2dBackward:
      launch_max_pool2d_backward(I(0), I(1), O(0), shape(0)[0] * shape(0)[1], shape(0)[2], shape(0)[3]);
      break;
    case OpKind::SumSquares:
      launch_sum_squares(I(0), O(0), n0);
      break;
    case OpKind::ClipCoefficient:
      launch_clip_coefficient(I(0), O(0), static_cast<int64_t>(in.size()), attrs.floats[0]);
      break;
    case OpKind::Scale:
      launch_scale(I(0), I(1), O(0), n0);
      break;
    case OpKind::Count:
      require(false, op, "not an op");
      break;
  }
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
