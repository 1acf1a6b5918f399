// run_cuda: the host side of the CUDA backend — validation, device buffers, dispatch over OpKind to the
// launchers of ops/cuda/kernels.cu, copies back (docs/cuda.md). Plain C++ against the CUDA runtime API.
#include "ops/cuda/backend.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/cuda/device_buffer.h"
#include "ops/cuda/kernels.h"

namespace tribunal {
namespace {

void require(bool cond, const char* op, const std::string& what) {
  if (!cond) throw OpError(std::string(op) + ": " + what);
}

/// The labels of a softmax op as class ids, checked with the CPU's rule and message (ops/kernels/loss.cpp).
std::vector<int64_t> class_ids(const Tensor& labels, int64_t classes, const char* op) {
  std::vector<int64_t> ids(static_cast<size_t>(labels.numel()));
  for (int64_t b = 0; b < labels.numel(); ++b) {
    const float l = labels[b];
    const bool ok = l >= 0.0f && l < static_cast<float>(classes) && static_cast<float>(static_cast<int64_t>(l)) == l;
    require(ok, op, "label " + std::to_string(l) + " of row " + std::to_string(b) + " is not a class id in [0, " +
                        std::to_string(classes) + ")");
    ids[static_cast<size_t>(b)] = static_cast<int64_t>(l);
  }
  return ids;
}

cuda::DeviceBuffer<int64_t> upload_ints(const std::vector<int64_t>& v) {
  cuda::DeviceBuffer<int64_t> d(v.size());
  d.upload(v.data());
  return d;
}

}  // namespace

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

void run_cuda(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const OpInfo& info = op_info(kind);
  const char* op = info.name;
  require(in.size() == static_cast<size_t>(info.num_inputs), op,
          "expects " + std::to_string(info.num_inputs) + " inputs, got " + std::to_string(in.size()));
  require(out.size() == static_cast<size_t>(info.num_outputs), op,
          "expects " + std::to_string(info.num_outputs) + " outputs, got " + std::to_string(out.size()));
  std::vector<Shape> in_shapes;
  for (const Tensor* t : in) in_shapes.push_back(t->shape());
  const std::vector<Shape> want = infer_shapes(kind, attrs, in_shapes);
  for (size_t i = 0; i < out.size(); ++i)
    require(out[i]->shape() == want[i], op,
            "output " + std::to_string(i) + " has shape " + out[i]->shape().str() + ", expected " + want[i].str());

  std::vector<cuda::DeviceBuffer<float>> d_in, d_out;
  for (const Tensor* t : in) {
    d_in.emplace_back(static_cast<size_t>(t->numel()));
    d_in.back().upload(t->data());
  }
  for (const Tensor* t : out) d_out.emplace_back(static_cast<size_t>(t->numel()));
  auto I = [&](size_t i) { return d_in[i].data(); };
  auto O = [&](size_t i) { return d_out[i].data(); };

  switch (kind) {
    case OpKind::Gather: {
      const Tensor& table = *in[0];
      const int64_t row = table.shape()[0] == 0 ? 0 : table.numel() / table.shape()[0];
      const cuda::DeviceBuffer<int64_t> idx = upload_ints(attrs.ints);
      cuda::launch_gather(I(0), idx.data(), O(0), static_cast<int64_t>(attrs.ints.size()), row);
      TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());  // idx is freed at the end of this scope
      break;
    }
    case OpKind::Linear: {
      const Shape &x = in[0]->shape(), &w = in[1]->shape();
      cuda::launch_matmul(I(0), I(1), I(2), O(0), x[0], w[1], x[1], false, false);
      break;
    }
    case OpKind::Matmul: {
      const bool ta = attrs.ints[0] != 0, tb = attrs.ints[1] != 0;
      const Shape &a = in[0]->shape(), &c = out[0]->shape();
      require(a.rank() == 2, op, "batched (rank-3) matmul has no CUDA kernel yet (docs/cuda.md)");
      cuda::launch_matmul(I(0), I(1), nullptr, O(0), c[0], c[1], ta ? a[0] : a[1], ta, tb);
      break;
    }
    case OpKind::SumRows:
      cuda::launch_sum_rows(I(0), O(0), in[0]->shape()[0], in[0]->shape()[1]);
      break;
    case OpKind::Add:
      cuda::launch_add(I(0), I(1), O(0), in[0]->numel());
      break;
    case OpKind::Relu:
      cuda::launch_relu(I(0), O(0), in[0]->numel());
      break;
    case OpKind::ReluBackward:
      cuda::launch_relu_backward(I(0), I(1), O(0), in[0]->numel());
      break;
    case OpKind::SoftmaxCrossEntropy: {
      const int64_t batch = in[0]->shape()[0], classes = in[0]->shape()[1];
      const cuda::DeviceBuffer<int64_t> labels = upload_ints(class_ids(*in[1], classes, op));
      cuda::DeviceBuffer<float> nll(static_cast<size_t>(batch));
      cuda::launch_softmax_cross_entropy(I(0), labels.data(), nll.data(), O(0), batch, classes);
      TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());
      break;
    }
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = in[0]->shape()[0], classes = in[0]->shape()[1];
      const cuda::DeviceBuffer<int64_t> labels = upload_ints(class_ids(*in[1], classes, op));
      cuda::launch_softmax_cross_entropy_backward(I(0), labels.data(), I(2), O(0), batch, classes);
      TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());
      break;
    }
    case OpKind::SgdMomentum:
      cuda::launch_sgd_momentum(I(0), I(1), I(2), O(0), O(1), in[0]->numel(), attrs.floats[0], attrs.floats[1],
                                attrs.floats[2]);
      break;
    case OpKind::AdamW:
      cuda::launch_adamw(I(0), I(1), I(2), I(3), O(0), O(1), O(2), in[0]->numel(), attrs.floats[0],
                         attrs.floats[1], attrs.floats[2], attrs.floats[3], attrs.floats[4], attrs.ints[0]);
      break;
    case OpKind::Count:
      require(false, op, "not an op");
      break;
    default:
      // The transformer and CNN ops (after AdamW in the enum) have CPU kernels only so far.
      require(false, op, "no CUDA kernel yet (docs/cuda.md)");
  }
  TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());
  for (size_t i = 0; i < out.size(); ++i) d_out[i].download(out[i]->data());
}

}  // namespace tribunal
