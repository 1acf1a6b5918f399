// Reverse-mode autodiff (engine/autodiff.h) checked against finite differences, and the step graph
// (engine/step.h) checked to be a pure function with the documented node order.
//
// How the finite differences are made robust: the float graph's own loss is too coarse to
// difference (a float loss has ~1e-7 relative rounding, so with h = 1e-3 the quotient carries
// ~1e-4 of noise, and a larger h adds O(h²) truncation and crosses ReLU kinks). Instead the forward
// part of the graph is re-evaluated by a float64 interpreter written here (independent of the
// kernels), and central differences with h = 1e-6 are taken on that: truncation ~h² ≈ 1e-12,
// rounding ~1e-16/h ≈ 1e-10. Two further checks make this a test of the graph and not of the
// interpreter: the interpreter's loss must match the executor's float loss, and no ReLU input may lie
// within 1e-4 of its kink (where a difference quotient would straddle it). The autodiff gradients are
// float, so they are compared with 2e-6 absolute + 2e-5 relative tolerance: their own rounding error
// is ~1e-7 here (gradients of order 0.01..2), so the margin is ~10×, while a gradient wrong by 0.01%
// (e.g. a missed 1/B or an accumulation that drops a small term) still fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autodiff.h"
#include "engine/executor.h"
#include "engine/graph.h"
#include "engine/job.h"
#include "engine/model.h"
#include "engine/step.h"
#include "onnx/lower.h"
#include "ops/math.h"
#include "ops/thread_pool.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

constexpr double kFdStep = 1e-6;
constexpr double kGradAbsTol = 2e-6;
constexpr double kGradRelTol = 2e-5;
constexpr double kKinkMargin = 1e-4;

Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(s);
  for (float& v : t.values()) v = dist(rng);
  return t;
}

Tensor random_labels(int64_t batch, int64_t classes, std::mt19937& rng) {
  Tensor t(Shape{batch});
  for (int64_t b = 0; b < batch; ++b) t[b] = static_cast<float>(rng() % static_cast<uint32_t>(classes));
  return t;
}

/// Row-major coordinates of flat index i over `s`, and back.
std::vector<int64_t> coords(int64_t i, const Shape& s) {
  std::vector<int64_t> c(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[static_cast<size_t>(d)] = i % s[d];
    i /= s[d];
  }
  return c;
}

int64_t flat(const std::vector<int64_t>& c, const Shape& s) {
  int64_t i = 0;
  for (int d = 0; d < s.rank(); ++d) i = i * s[d] + c[static_cast<size_t>(d)];
  return i;
}

/// Float64 interpreter of a graph's first `nodes` nodes, for the forward ops the tests use.
/// `inputs[v]` gives the value of each State/Data value v (others empty).
struct F64Forward {
  const StepGraph& g;
  double min_relu_margin = std::numeric_limits<double>::infinity();  ///< smallest |ReLU input| seen

  double loss(std::vector<std::vector<double>> val, size_t nodes, ValueId loss_value) {
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].source == ValueSource::Constant) {
        const Tensor& c = g.constants[g.values[v].index];
        val[v].assign(c.values().begin(), c.values().end());
      }
    for (size_t n = 0; n < nodes; ++n) {
      const Node& node = g.nodes[n];
      auto in = [&](size_t i) -> const std::vector<double>& { return val[node.inputs[i]]; };
      auto shape = [&](size_t i) -> const Shape& { return g.values[node.inputs[i]].shape; };
      std::vector<double>& out = val[node.outputs[0]];
      switch (node.op) {
        case OpKind::Linear:
        case OpKind::Matmul: {
          const bool linear = node.op == OpKind::Linear;
          // Linear's ints are {} or {trans_b}; Matmul's {trans_a, trans_b}.
          const bool ta = !linear && node.attrs.ints[0];
          const bool tb = linear ? !node.attrs.ints.empty() && node.attrs.ints[0] : node.attrs.ints[1] != 0;
          const int64_t m = ta ? shape(0)[1] : shape(0)[0], k = ta ? shape(0)[0] : shape(0)[1];
          const int64_t n_ = tb ? shape(1)[0] : shape(1)[1];
          out.assign(static_cast<size_t>(m * n_), 0.0);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n_; ++j) {
              double s = linear ? in(2)[static_cast<size_t>(j)] : 0.0;
              for (int64_t p = 0; p < k; ++p)
                s += in(0)[static_cast<size_t>(ta ? p * m + i : i * k + p)] *
                     in(1)[static_cast<size_t>(tb ? j * k + p : p * n_ + j)];
              out[static_cast<size_t>(i * n_ + j)] = s;
            }
          break;
        }
        case OpKind::Add:
          out.resize(in(0).size());
          for (size_t i = 0; i < out.size(); ++i) out[i] = in(0)[i] + in(1)[i];
          break;
        case OpKind::Reshape:
          out = in(0);
          break;
        case OpKind::BroadcastBinary: {
          // NumPy broadcasting, written out here independently of ops/broadcast.h: output coordinates
          // right-aligned onto each input, a dim of 1 reading its one element.
          const Shape& y = g.values[node.outputs[0]].shape;
          auto source = [&](const Shape& s, int64_t i) {
            int64_t off = 0, stride = 1;
            for (int d = y.rank() - 1; d >= 0; --d) {
              const int64_t c = i % y[d];
              i /= y[d];
              const int ds = d - (y.rank() - s.rank());
              if (ds < 0) continue;
              if (s[ds] != 1) off += c * stride;
              stride *= s[ds];
            }
            return static_cast<size_t>(off);
          };
          out.resize(static_cast<size_t>(y.numel()));
          for (int64_t i = 0; i < y.numel(); ++i) {
            const double a = in(0)[source(shape(0), i)], z = in(1)[source(shape(1), i)];
            const int64_t op = node.attrs.ints[0];
            out[static_cast<size_t>(i)] = op == 0 ? a + z : op == 1 ? a - z : op == 2 ? a * z : a / z;
          }
          break;
        }
        case OpKind::Where: {
          // cond ≠ ±0 (NaN true) picks a, else b; NumPy broadcasting as for BroadcastBinary above.
          const Shape& y = g.values[node.outputs[0]].shape;
          auto source = [&](const Shape& s, int64_t i) {
            int64_t off = 0, stride = 1;
            for (int d = y.rank() - 1; d >= 0; --d) {
              const int64_t c = i % y[d];
              i /= y[d];
              const int ds = d - (y.rank() - s.rank());
              if (ds < 0) continue;
              if (s[ds] != 1) off += c * stride;
              stride *= s[ds];
            }
            return static_cast<size_t>(off);
          };
          out.resize(static_cast<size_t>(y.numel()));
          for (int64_t i = 0; i < y.numel(); ++i) {
            const double c = in(0)[source(shape(0), i)];
            out[static_cast<size_t>(i)] =
                c != 0.0 || std::isnan(c) ? in(1)[source(shape(1), i)] : in(2)[source(shape(2), i)];
          }
          break;
        }
        case OpKind::ReduceMean: {
          // The mean along the axis, in double.
          const Shape& x = shape(0);
          const int axis = static_cast<int>(node.attrs.ints[0]);
          int64_t outer = 1, inner = 1;
          for (int d = 0; d < axis; ++d) outer *= x[d];
          for (int d = axis + 1; d < x.rank(); ++d) inner *= x[d];
          const int64_t n = x[axis];
          out.assign(static_cast<size_t>(outer * inner), 0.0);
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
              double sum = 0.0;
              for (int64_t k = 0; k < n; ++k) sum += in(0)[static_cast<size_t>((o * n + k) * inner + i)];
              out[static_cast<size_t>(o * inner + i)] = sum / static_cast<double>(n);
            }
          break;
        }
        case OpKind::Expand: {
          // NumPy broadcasting of x to the target: y's coordinates right-aligned, x's dims of 1 repeat.
          const Shape& y = g.values[node.outputs[0]].shape;
          out.resize(static_cast<size_t>(y.numel()));
          for (int64_t i = 0; i < y.numel(); ++i) {
            int64_t rem = i, off = 0, stride = 1;
            for (int d = y.rank() - 1; d >= 0; --d) {
              const int64_t c = rem % y[d];
              rem /= y[d];
              const int ds = d - (y.rank() - shape(0).rank());
              if (ds < 0) continue;
              if (shape(0)[ds] != 1) off += c * stride;
              stride *= shape(0)[ds];
            }
            out[static_cast<size_t>(i)] = in(0)[static_cast<size_t>(off)];
          }
          break;
        }
        case OpKind::GatherRows: {
          // y[p, :] = table[ids[p], :].
          const int64_t row = shape(0).numel() / shape(0)[0];
          out.clear();
          for (double id : in(1))
            for (int64_t j = 0; j < row; ++j)
              out.push_back(in(0)[static_cast<size_t>(static_cast<int64_t>(id) * row + j)]);
          break;
        }
        case OpKind::Unary: {
          // The functions themselves, in double (ops/unary.h's codes).
          const int64_t fn = node.attrs.ints[0];
          const double p = node.attrs.floats[0];
          out.resize(in(0).size());
          for (size_t i = 0; i < out.size(); ++i) {
            const double x = in(0)[i];
            const double fns[] = {-x,          1.0 / x,      std::sqrt(x),  std::exp(x),
                                  std::log(x), std::tanh(x), std::erf(x),   1.0 / (1.0 + std::exp(-x)),
                                  std::sin(x), std::cos(x),  std::pow(x, p)};
            out[i] = fns[fn];
          }
          break;
        }
        case OpKind::Transpose:
        case OpKind::Slice:
        case OpKind::SliceBackward:
        case OpKind::Concat: {
          // Data movement by coordinates, written out here independently of ops/kernels/movement.cpp.
          const Shape& y = g.values[node.outputs[0]].shape;
          const std::vector<int64_t>& a = node.attrs.ints;
          out.assign(static_cast<size_t>(y.numel()), 0.0);
          if (node.op == OpKind::Transpose || node.op == OpKind::Slice) {
            for (int64_t i = 0; i < y.numel(); ++i) {
              const std::vector<int64_t> yc = coords(i, y);
              std::vector<int64_t> xc = yc;
              if (node.op == OpKind::Transpose)
                for (size_t d = 0; d < yc.size(); ++d) xc[static_cast<size_t>(a[d])] = yc[d];
              else
                xc[static_cast<size_t>(a[0])] = a[1] + yc[static_cast<size_t>(a[0])] * a[3];
              out[static_cast<size_t>(i)] = in(0)[static_cast<size_t>(flat(xc, shape(0)))];
            }
          } else {  // scatter each input: slice_backward's dy at start + l·step, concat's at its offset
            int64_t offset = 0;
            for (size_t k = 0; k < node.inputs.size(); ++k) {
              for (int64_t i = 0; i < shape(k).numel(); ++i) {
                std::vector<int64_t> c = coords(i, shape(k));
                int64_t& p = c[static_cast<size_t>(a[0])];
                p = node.op == OpKind::Concat ? p + offset : a[1] + p * a[2];
                out[static_cast<size_t>(flat(c, y))] = in(k)[static_cast<size_t>(i)];
              }
              offset += shape(k)[static_cast<int>(a[0])];
            }
          }
          break;
        }
        case OpKind::MaxPool2d: {
          // The general window (8 ints), written out here: the first maximum of the window's elements
          // of x row by row (the inputs are distinct, so no tie and no NaN).
          const auto& v = node.attrs.ints;
          const Shape& x = shape(0);
          const Shape& y = g.values[node.outputs[0]].shape;
          out.assign(static_cast<size_t>(y.numel()), 0.0);
          for (int64_t pl = 0; pl < x[0] * x[1]; ++pl)
            for (int64_t r = 0; r < y[2]; ++r)
              for (int64_t s = 0; s < y[3]; ++s) {
                double best = -std::numeric_limits<double>::infinity();
                for (int64_t i = r * v[2] - v[4]; i < r * v[2] - v[4] + v[0]; ++i)
                  for (int64_t j = s * v[3] - v[5]; j < s * v[3] - v[5] + v[1]; ++j)
                    if (i >= 0 && i < x[2] && j >= 0 && j < x[3])
                      best = std::max(best, in(0)[static_cast<size_t>((pl * x[2] + i) * x[3] + j)]);
                out[static_cast<size_t>((pl * y[2] + r) * y[3] + s)] = best;
              }
          break;
        }
        case OpKind::Conv2d: {
          // Cross-correlation written out here from ONNX Conv's definition: ints {stride, pad} or
          // {sh, sw, pt, pl, pb, pr, dh, dw, groups}; y[n,o,r,s] = b[o] + Σ over the channels c of o's
          // group, i, j of w[o, c, i, j]·x[n, group·Cg + c, r·sh + i·dh − pt, s·sw + j·dw − pl].
          const auto& v = node.attrs.ints;
          const bool general = v.size() == 9;
          const int64_t sh = v[0], sw = general ? v[1] : v[0], pt = general ? v[2] : v[1],
                        pl = general ? v[3] : v[1], dh = general ? v[6] : 1, dw = general ? v[7] : 1;
          const Shape &x = shape(0), &w = shape(1);
          const Shape& y = g.values[node.outputs[0]].shape;
          const int64_t cg = w[1], og = w[0] / (general ? v[8] : 1);
          out.assign(static_cast<size_t>(y.numel()), 0.0);
          for (int64_t n_ = 0; n_ < y[0]; ++n_)
            for (int64_t o = 0; o < y[1]; ++o)
              for (int64_t r = 0; r < y[2]; ++r)
                for (int64_t s = 0; s < y[3]; ++s) {
                  double acc = in(2)[static_cast<size_t>(o)];
                  for (int64_t c = 0; c < cg; ++c)
                    for (int64_t i = 0; i < w[2]; ++i)
                      for (int64_t j = 0; j < w[3]; ++j) {
                        const int64_t hh = r * sh + i * dh - pt, ww = s * sw + j * dw - pl;
                        if (hh < 0 || hh >= x[2] || ww < 0 || ww >= x[3]) continue;
                        acc += in(1)[static_cast<size_t>(((o * cg + c) * w[2] + i) * w[3] + j)] *
                               in(0)[static_cast<size_t>(((n_ * x[1] + o / og * cg + c) * x[2] + hh) * x[3] +
                                                         ww)];
                      }
                  out[static_cast<size_t>(((n_ * y[1] + o) * y[2] + r) * y[3] + s)] = acc;
                }
          break;
        }
        case OpKind::GlobalAvgPool: {
          const Shape& x = shape(0);
          const int64_t hw = x[2] * x[3];
          out.assign(static_cast<size_t>(x[0] * x[1]), 0.0);
          for (int64_t pl = 0; pl < x[0] * x[1]; ++pl) {
            for (int64_t i = 0; i < hw; ++i)
              out[static_cast<size_t>(pl)] += in(0)[static_cast<size_t>(pl * hw + i)];
            out[static_cast<size_t>(pl)] /= static_cast<double>(hw);
          }
          break;
        }
        case OpKind::BatchNorm: {
          // Each channel c of x[N, C, …] over its N·S elements: (x − mean)/sqrt(biased var + ε)·γ + β.
          const Shape& x = shape(0);
          const int64_t n = x[0], c = x[1], sp = x.numel() / (n * c);
          const double eps = node.attrs.floats[0], m = static_cast<double>(n * sp);
          out.resize(in(0).size());
          auto at = [&](int64_t ch, int64_t k) {
            return static_cast<size_t>(((k / sp) * c + ch) * sp + k % sp);
          };
          for (int64_t ch = 0; ch < c; ++ch) {
            double mean = 0.0, var = 0.0;
            for (int64_t k = 0; k < n * sp; ++k) mean += in(0)[at(ch, k)];
            mean /= m;
            for (int64_t k = 0; k < n * sp; ++k) var += (in(0)[at(ch, k)] - mean) * (in(0)[at(ch, k)] - mean);
            var /= m;
            for (int64_t k = 0; k < n * sp; ++k)
              out[at(ch, k)] =
                  (in(0)[at(ch, k)] - mean) / std::sqrt(var + eps) * in(1)[static_cast<size_t>(ch)] +
                  in(2)[static_cast<size_t>(ch)];
          }
          break;
        }
        case OpKind::Relu:
          out.resize(in(0).size());
          for (size_t i = 0; i < out.size(); ++i) {
            min_relu_margin = std::min(min_relu_margin, std::fabs(in(0)[i]));
            out[i] = in(0)[i] > 0.0 ? in(0)[i] : 0.0;
          }
          break;
        case OpKind::SoftmaxCrossEntropy: {
          const int64_t batch = shape(0)[0], classes = shape(0)[1];
          double total = 0.0;
          for (int64_t b = 0; b < batch; ++b) {
            const double* z = in(0).data() + b * classes;
            double mx = z[0];
            for (int64_t j = 1; j < classes; ++j) mx = std::max(mx, z[j]);
            double s = 0.0;
            for (int64_t j = 0; j < classes; ++j) s += std::exp(z[j] - mx);
            total += mx + std::log(s) - z[static_cast<int64_t>(in(1)[static_cast<size_t>(b)])];
          }
          out.assign(1, total / static_cast<double>(batch));
          break;
        }
        default:
          FAIL("the float64 interpreter has no rule for op " << op_name(node.op));
      }
    }
    return val[loss_value][0];
  }
};

/// A graph under test: its forward part, the values differentiated and their bound tensors.
struct GradProblem {
  StepGraph g;
  std::vector<ValueId> wrt;
  std::vector<Tensor> state, data;  // bound to g.state_inputs / g.data_inputs, in order
  ValueId loss = 0;
  size_t forward_nodes = 0;

  const Tensor& bound(ValueId v) const {
    const Value& val = g.values[v];
    return val.source == ValueSource::State ? state[val.index] : data[val.index];
  }
};

/// Appends the backward pass, runs everything with the reference kernels and compares every element of
/// every gradient with the float64 central difference.
void check_gradients(GradProblem& pb) {
  pb.forward_nodes = pb.g.nodes.size();
  GraphBuilder b(pb.g);
  const std::vector<ValueId> grads = append_backward(b, pb.loss, pb.wrt);
  REQUIRE(grads.size() == pb.wrt.size());
  CHECK(pb.g.nodes.size() > pb.forward_nodes);  // the backward really appended nodes

  ThreadPool pool(1);
  Executor exec(pool, /*reference=*/true);
  std::vector<Tensor*> state;
  std::vector<const Tensor*> data;
  for (Tensor& t : pb.state) state.push_back(&t);
  for (const Tensor& t : pb.data) data.push_back(&t);
  exec.run(pb.g, state, data);

  std::vector<std::vector<double>> base(pb.g.values.size());
  for (ValueId v : pb.g.state_inputs)
    base[v].assign(pb.bound(v).values().begin(), pb.bound(v).values().end());
  for (ValueId v : pb.g.data_inputs) base[v].assign(pb.bound(v).values().begin(), pb.bound(v).values().end());

  F64Forward f64{pb.g};
  const double loss64 = f64.loss(base, pb.forward_nodes, pb.loss);
  const float loss32 = exec.value(pb.loss)[0];
  INFO("float loss " << loss32 << ", float64 loss " << loss64);
  // The interpreter computes the same function as the graph (else its differences mean nothing).
  REQUIRE(std::fabs(loss32 - loss64) <= 1e-6 * std::max(1.0, std::fabs(loss64)));
  REQUIRE(f64.min_relu_margin > kKinkMargin);

  for (size_t w = 0; w < pb.wrt.size(); ++w) {
    const ValueId v = pb.wrt[w];
    const Tensor& grad = exec.value(grads[w]);
    CAPTURE(pb.g.values[v].name);
    REQUIRE(grad.shape() == pb.g.values[v].shape);
    int64_t bad = 0;
    double max_err = 0.0, max_grad = 0.0;
    std::string first;
    for (size_t i = 0; i < base[v].size(); ++i) {
      std::vector<std::vector<double>> plus = base, minus = base;
      plus[v][i] += kFdStep;
      minus[v][i] -= kFdStep;
      const double fd =
          (f64.loss(plus, pb.forward_nodes, pb.loss) - f64.loss(minus, pb.forward_nodes, pb.loss)) /
          (2.0 * kFdStep);
      const double got = grad[static_cast<int64_t>(i)];
      const double err = std::fabs(got - fd);
      max_err = std::max(max_err, err);
      max_grad = std::max(max_grad, std::fabs(fd));
      if (err > kGradAbsTol + kGradRelTol * std::fabs(fd) && bad++ == 0)
        first = "element " + std::to_string(i) + ": autodiff " + std::to_string(got) +
                ", finite difference " + std::to_string(fd);
    }
    INFO(first);
    INFO("max |error| " << max_err << " for max |gradient| " << max_grad);
    CHECK(bad == 0);
    // A gradient that is identically zero would pass trivially; the problems are built so none is.
    CHECK(max_grad > 1e-3);
  }
  REQUIRE(f64.min_relu_margin > kKinkMargin);  // also over every perturbed evaluation
}

/// An MLP (build_forward) with softmax cross-entropy, differentiated w.r.t. its parameters and x.
GradProblem mlp_problem(std::vector<int64_t> widths, int64_t batch, uint64_t seed) {
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  ModelSpec model;
  model.widths = widths;
  std::vector<ValueId> params;
  const std::vector<ParamSpec> specs = model_params(model);
  for (size_t i = 0; i < specs.size(); ++i) {
    params.push_back(b.add_state(specs[i].name, specs[i].shape));
    pb.state.emplace_back(specs[i].shape);
    init_param(seed, static_cast<uint32_t>(i), specs[i], pb.state.back());
  }
  const ValueId x = b.add_data("x", Shape{batch, widths.front()});
  const ValueId y = b.add_data("y", Shape{batch});
  pb.data.push_back(random_tensor(Shape{batch, widths.front()}, rng));
  pb.data.push_back(random_labels(batch, widths.back(), rng));
  const ValueId logits = build_forward(b, model, params, {}, x).logits;
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt = params;
  pb.wrt.push_back(x);  // inputs get gradients too (dy·wᵀ through every layer)
  return pb;
}

}  // namespace

TEST_CASE("autodiff of an MLP 5-4-3 + softmax cross-entropy matches float64 finite differences") {
  GradProblem pb = mlp_problem({5, 4, 3}, 6, 11);
  check_gradients(pb);
}

TEST_CASE("autodiff of a deeper MLP 7-6-5-4 matches float64 finite differences") {
  GradProblem pb = mlp_problem({7, 6, 5, 4}, 9, 3);
  check_gradients(pb);
}

TEST_CASE("autodiff accumulates the gradients of values used more than once") {
  // h is used twice by one node (Add(h, h)); r feeds four nodes (la, lb, lc, ld); the weight wa feeds
  // three (la and ld as a Linear weight, lc as a Matmul operand). Each extra use is one more gradient
  // contribution that the autodiff must sum, and wb is used transposed (Matmul trans_b).
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(17);
  const int64_t batch = 5, in = 4, hid = 6, out = 3;
  auto param = [&](const std::string& name, Shape s) {
    pb.state.push_back(random_tensor(s, rng, -0.8f, 0.8f));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId w0 = param("w0", Shape{in, hid}), b0 = param("b0", Shape{hid});
  const ValueId wa = param("wa", Shape{hid, out}), ba = param("ba", Shape{out});
  const ValueId wb = param("wb", Shape{out, hid}), bb = param("bb", Shape{out});  // used transposed
  const ValueId x = b.add_data("x", Shape{batch, in});
  const ValueId y = b.add_data("y", Shape{batch});
  pb.data.push_back(random_tensor(Shape{batch, in}, rng));
  pb.data.push_back(random_labels(batch, out, rng));

  const ValueId h = b.add_node(OpKind::Linear, {}, {x, w0, b0}, "h").front();
  const ValueId d = b.add_node(OpKind::Add, {}, {h, h}, "h+h").front();
  const ValueId r = b.add_node(OpKind::Relu, {}, {d}, "r").front();
  const ValueId la = b.add_node(OpKind::Linear, {}, {r, wa, ba}, "la").front();
  const ValueId lb = b.add_node(OpKind::Matmul, {{0, 1}, {}}, {r, wb}, "lb").front();  // r·wbᵀ
  const ValueId lc = b.add_node(OpKind::Matmul, {{0, 0}, {}}, {r, wa}, "lc").front();  // r·wa again
  const ValueId s1 = b.add_node(OpKind::Add, {}, {la, lb}, "la+lb").front();
  const ValueId s2 = b.add_node(OpKind::Add, {}, {s1, lc}, "logits").front();
  // A fourth use of r and a third of wa, with its own bias bb.
  const ValueId lbias = b.add_node(OpKind::Linear, {}, {r, wa, bb}, "ld").front();
  const ValueId logits = b.add_node(OpKind::Add, {}, {s2, lbias}, "logits2").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt.push_back(x);
  check_gradients(pb);

  // The accumulation is one Add node in the backward part per extra use (Add's own VJP passes the
  // gradient through without a node): h 1, r 3, wa 2.
  size_t backward_adds = 0;
  for (size_t n = pb.forward_nodes; n < pb.g.nodes.size(); ++n)
    backward_adds += pb.g.nodes[n].op == OpKind::Add;
  CHECK(backward_adds == 6);
}

TEST_CASE("autodiff through linear with trans_b (nn.Linear's w[N,K]) matches float64 finite differences") {
  // x[5,4] → linear{1}(w0[6,4]) → relu → linear{1}(w1[3,6]) → loss: the imported-Gemm layout, its
  // gradients in w's own [N,K] layout; a third layer with trans_b = 0 spelled out mixes both forms.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(31);
  const int64_t batch = 5, in = 4, hid = 6, out = 3;
  auto param = [&](const std::string& name, Shape s) {
    pb.state.push_back(random_tensor(s, rng, -0.8f, 0.8f));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId w0 = param("w0", Shape{hid, in}), b0 = param("b0", Shape{hid});
  const ValueId w1 = param("w1", Shape{out, hid}), b1 = param("b1", Shape{out});
  const ValueId w2 = param("w2", Shape{out, out}), b2 = param("b2", Shape{out});
  const ValueId x = b.add_data("x", Shape{batch, in});
  const ValueId y = b.add_data("y", Shape{batch});
  pb.data.push_back(random_tensor(Shape{batch, in}, rng));
  pb.data.push_back(random_labels(batch, out, rng));
  const ValueId h = b.add_node(OpKind::Linear, {{1}, {}}, {x, w0, b0}, "h").front();
  const ValueId r = b.add_node(OpKind::Relu, {}, {h}, "r").front();
  const ValueId z = b.add_node(OpKind::Linear, {{1}, {}}, {r, w1, b1}, "z").front();
  const ValueId logits = b.add_node(OpKind::Linear, {{0}, {}}, {z, w2, b2}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt.push_back(x);
  check_gradients(pb);
}

TEST_CASE("autodiff through broadcast_binary (all four ops, broadcast and reused inputs) matches float64") {
  // RMSNorm-like: ((x·γ[4] + β[1,1,4]) / s[2,3,1] − c[]) · x, reshaped to logits [6, 4]. The
  // gradients of γ, β, s and c are sum_to_shape reductions of broadcast gradients; x is used twice.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(17);
  auto param = [&](const std::string& name, Shape s, float lo, float hi) {
    pb.state.push_back(random_tensor(s, rng, lo, hi));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId gamma = param("gamma", Shape{4}, -1.0f, 1.0f),
                beta = param("beta", Shape{1, 1, 4}, -1.0f, 1.0f);
  const ValueId s = param("s", Shape{2, 3, 1}, 0.5f, 1.5f), c = param("c", Shape{}, -1.0f, 1.0f);
  const ValueId x = b.add_data("x", Shape{2, 3, 4});
  const ValueId y = b.add_data("y", Shape{6});
  pb.data.push_back(random_tensor(Shape{2, 3, 4}, rng));
  pb.data.push_back(random_labels(6, 4, rng));
  auto bin = [&](int64_t op, ValueId l, ValueId r, const char* name) {
    return b.add_node(OpKind::BroadcastBinary, {{op}, {}}, {l, r}, name).front();
  };
  const ValueId h = bin(1, bin(3, bin(0, bin(2, x, gamma, "xg"), beta, "plus"), s, "div"), c, "minus");
  const ValueId hx = bin(2, h, x, "times_x");
  const ValueId logits = b.add_node(OpKind::Reshape, {{6, 4}, {}}, {hx}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt.push_back(x);
  check_gradients(pb);
  int reductions = 0;
  for (const Node& n : pb.g.nodes) reductions += n.op == OpKind::SumToShape ? 1 : 0;
  // One per broadcast input (γ; β; s with sign −1; c with sign −1); none where a gradient already has
  // its input's shape [2, 3, 4].
  CHECK(reductions == 4);
}

TEST_CASE("autodiff through gather_rows and where (GPT-2's embedding and masked_fill) matches float64") {
  // wte[5,4] gathered by ids[2,3] (repeated ids, one row never used) → h[2,3,4]; where(mask[1,3,1], h,
  // fill[4]) → [2,3,4], mask true at t = 0 (1) and t = 2 (NaN), false at t = 1; scaled by x and reshaped
  // to logits [6,4]. wte's gradient is embedding_backward of where_backward's kept rows; fill's the sum of
  // where_backward's other rows over [2,3].
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(23);
  auto param = [&](const std::string& name, Shape s) {
    pb.state.push_back(random_tensor(s, rng, -1.0f, 1.0f));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId wte = param("wte", Shape{5, 4}), fill = param("fill", Shape{4});
  const ValueId ids = b.add_data("ids", Shape{2, 3});
  const ValueId mask = b.add_data("mask", Shape{1, 3, 1});
  const ValueId x = b.add_data("x", Shape{2, 3, 4});
  const ValueId y = b.add_data("y", Shape{6});
  pb.data.push_back(Tensor(Shape{2, 3}, std::vector<float>{0, 3, 3, 1, 3, 4}));
  pb.data.push_back(Tensor(Shape{1, 3, 1}, std::vector<float>{1.0f, 0.0f, std::nanf("")}));
  pb.data.push_back(random_tensor(Shape{2, 3, 4}, rng, 0.5f, 2.0f));
  pb.data.push_back(random_labels(6, 4, rng));
  const ValueId h = b.add_node(OpKind::GatherRows, {}, {wte, ids}, "h").front();
  const ValueId masked = b.add_node(OpKind::Where, {}, {mask, h, fill}, "masked").front();
  const ValueId scaled = b.add_node(OpKind::BroadcastBinary, {{2}, {}}, {masked, x}, "scaled").front();
  const ValueId logits = b.add_node(OpKind::Reshape, {{6, 4}, {}}, {scaled}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt.push_back(x);
  check_gradients(pb);
  int where_backward = 0, sums = 0, embedding_backward = 0;
  for (size_t n = pb.forward_nodes; n < pb.g.nodes.size(); ++n) {
    where_backward += pb.g.nodes[n].op == OpKind::WhereBackward ? 1 : 0;
    sums += pb.g.nodes[n].op == OpKind::SumToShape ? 1 : 0;
    embedding_backward += pb.g.nodes[n].op == OpKind::EmbeddingBackward ? 1 : 0;
  }
  // One where_backward per branch; one sum_to_shape (fill's, h already has the output's shape); one
  // embedding_backward; the mask and ids get none.
  CHECK(where_backward == 2);
  CHECK(sums == 1);
  CHECK(embedding_backward == 1);
}

TEST_CASE("autodiff through unary (every function code, pow's paths) matches float64") {
  // a = x·w; logits = Σ over branches f(u) with u = a, or exp(a) > 0 where f needs a positive input
  // (reciprocal, sqrt, log, non-integer pow), or sigmoid(a) for log; all reused values of a.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(23);
  pb.state.push_back(random_tensor(Shape{6, 4}, rng, -1.0f, 1.0f));
  const ValueId w = b.add_state("w", Shape{6, 4});
  pb.wrt.push_back(w);
  const ValueId x = b.add_data("x", Shape{6, 4});
  const ValueId y = b.add_data("y", Shape{6});
  pb.data.push_back(random_tensor(Shape{6, 4}, rng));
  pb.data.push_back(random_labels(6, 4, rng));
  int names = 0;
  auto label = [&](char c) {  // appended, not "f" + string: GCC 12's -Wrestrict misfires on the latter
    std::string s(1, c);
    s += std::to_string(names++);
    return s;
  };
  auto un = [&](int64_t fn, float p, ValueId v) {
    return b.add_node(OpKind::Unary, {{fn}, {p}}, {v}, label('f')).front();
  };
  auto add = [&](ValueId l, ValueId r) {
    return b.add_node(OpKind::BroadcastBinary, {{0}, {}}, {l, r}, label('s')).front();
  };
  const ValueId a = b.add_node(OpKind::BroadcastBinary, {{2}, {}}, {x, w}, "a").front();
  const ValueId pos = un(3, 0.0f, a), sig = un(7, 0.0f, a);
  ValueId sum = un(0, 0.0f, a);
  for (const auto& [fn, p, v] : std::vector<std::tuple<int64_t, float, ValueId>>{{1, 0.0f, pos},
                                                                                 {2, 0.0f, pos},
                                                                                 {4, 0.0f, sig},
                                                                                 {5, 0.0f, a},
                                                                                 {6, 0.0f, a},
                                                                                 {8, 0.0f, a},
                                                                                 {9, 0.0f, a},
                                                                                 {10, 2.0f, a},
                                                                                 {10, 3.0f, a},
                                                                                 {10, 1.5f, pos},
                                                                                 {10, -0.5f, pos},
                                                                                 {10, 0.5f, pos}})
    sum = add(sum, un(fn, p, v));
  const ValueId logits = b.add_node(OpKind::Reshape, {{6, 4}, {}}, {sum}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt.push_back(x);
  check_gradients(pb);
  int backward = 0;
  for (const Node& n : pb.g.nodes) backward += n.op == OpKind::UnaryBackward ? 1 : 0;
  CHECK(backward == 15);  // one per unary node
}

TEST_CASE("autodiff through transpose, slice, slice_backward and concat matches float64") {
  // An exported attention block's plumbing: slices of x (a step-2 slice of the last axis and a
  // step-1 slice of the middle one, as ONNX Split lowers), a transpose, a concat with a parameter,
  // a broadcast product, slice_backward as a forward op (its own VJP is a slice), and a rank-4
  // transpose before the logits. x is read by two slices, so its gradient is a sum of two scatters.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(23);
  auto param = [&](const std::string& name, Shape s) {
    pb.state.push_back(random_tensor(s, rng));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId x = param("x", Shape{2, 3, 4}), e = param("e", Shape{2, 1, 2}), z = param("z", Shape{8, 2});
  const ValueId y = b.add_data("y", Shape{14});
  pb.data.push_back(random_labels(14, 4, rng));
  auto one = [&](OpKind op, std::vector<int64_t> ints, std::vector<ValueId> in, const char* name) {
    return b.add_node(op, {std::move(ints), {}}, std::move(in), name).front();
  };
  const ValueId even = one(OpKind::Slice, {2, 0, 4, 2}, {x}, "even");          // [2, 3, 2]
  const ValueId mid = one(OpKind::Slice, {1, 1, 3, 1}, {x}, "mid");            // [2, 2, 4]
  const ValueId midt = one(OpKind::Transpose, {0, 2, 1}, {mid}, "mid_t");      // [2, 4, 2]
  const ValueId cat = one(OpKind::Concat, {1}, {even, midt, e}, "cat");        // [2, 8, 2]
  const ValueId h = one(OpKind::BroadcastBinary, {2}, {cat, z}, "scaled");     // [2, 8, 2]
  const ValueId wide = one(OpKind::SliceBackward, {2, 1, 2, 4}, {h}, "wide");  // [2, 8, 4]
  const ValueId r4 = one(OpKind::Reshape, {2, 4, 2, 4}, {wide}, "r4");
  const ValueId t4 = one(OpKind::Transpose, {2, 0, 3, 1}, {r4}, "t4");  // [2, 2, 4, 4]
  // Rows 1 to 14 of the 16 are the logits: a slice on the loss's path, whose VJP leaves rows 0 and 15 +0.
  const ValueId rows = one(OpKind::Reshape, {16, 4}, {t4}, "rows");
  const ValueId logits = one(OpKind::Slice, {0, 1, 15, 1}, {rows}, "logits");
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  check_gradients(pb);
  int scatters = 0, slices = 0;
  for (const Node& n : pb.g.nodes) {
    scatters += n.op == OpKind::SliceBackward ? 1 : 0;
    slices += n.op == OpKind::Slice ? 1 : 0;
  }
  // Backward: one slice_backward per forward slice (3), one slice per differentiated concat input (3:
  // even, mid_t, e) and slice_backward's VJP (1); forward: 1 and 3.
  CHECK(scatters == 1 + 3);
  CHECK(slices == 3 + 3 + 1);
}

TEST_CASE(
    "autodiff through an RMSNorm (pow, reduce_mean, sqrt, reciprocal) and a GQA expand matches float64") {
  // A Llama block's normalization x·(1/sqrt(mean(x², -1)))·w as torch exports it, then one key head
  // repeated for two query heads (k[:, None].expand(...).reshape(...)): reduce_mean_backward and the
  // expand's sum_to_shape carry the gradients back to x and w.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(31);
  auto param = [&](const std::string& name, Shape s) {
    pb.state.push_back(random_tensor(s, rng));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId x = param("x", Shape{2, 3, 4}), w = param("w", Shape{4});
  const ValueId y = b.add_data("y", Shape{12});
  pb.data.push_back(random_labels(12, 4, rng));
  auto one = [&](OpKind op, Attrs attrs, std::vector<ValueId> in, const char* name) {
    return b.add_node(op, std::move(attrs), std::move(in), name).front();
  };
  const ValueId sq = one(OpKind::Unary, {{10}, {2.0f}}, {x}, "pow");
  const ValueId ms = one(OpKind::ReduceMean, {{2}, {}}, {sq}, "mean");  // [2, 3, 1]
  const ValueId rms = one(OpKind::Unary, {{2}, {0.0f}}, {ms}, "sqrt");
  const ValueId inv = one(OpKind::Unary, {{1}, {0.0f}}, {rms}, "reciprocal");
  const ValueId nx = one(OpKind::BroadcastBinary, {{2}, {}}, {x, inv}, "normed");
  const ValueId nw = one(OpKind::BroadcastBinary, {{2}, {}}, {nx, w}, "scaled");   // [2, 3, 4]
  const ValueId kv = one(OpKind::Reshape, {{2, 1, 3, 4}, {}}, {nw}, "kv");         // one kv head
  const ValueId rep = one(OpKind::Expand, {{2, 2, 3, 4}, {}}, {kv}, "repeat_kv");  // two query heads
  const ValueId logits = one(OpKind::Reshape, {{12, 4}, {}}, {rep}, "logits");
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  check_gradients(pb);
  int means = 0, sums = 0;
  for (const Node& n : pb.g.nodes) {
    means += n.op == OpKind::ReduceMeanBackward ? 1 : 0;
    sums += n.op == OpKind::SumToShape ? 1 : 0;
  }
  CHECK(means == 1);
  CHECK(sums >= 2);  // expand's VJP, and the broadcast products' reductions to inv's and w's shapes
}

TEST_CASE(
    "autodiff through ResNet's stem max pool (3×3, stride 2, pad 1) and global_avg_pool matches float64") {
  // x [2, 3, 7, 6] → max_pool2d {3,3,2,2,1,1,1,1} → [2, 3, 4, 3] (overlapping windows: an element can be
  // chosen twice or more, its gradient a sum) → a per-channel scale → global_avg_pool → [2, 3] logits.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(31);
  const Shape xs{2, 3, 7, 6};
  Tensor x(xs);
  std::vector<int> order(static_cast<size_t>(xs.numel()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < xs.numel(); ++i)
    x[i] = 0.05f * static_cast<float>(order[static_cast<size_t>(i)] - 126);
  pb.state.push_back(x);
  const ValueId xv = b.add_state("x", xs);
  pb.state.push_back(random_tensor(Shape{1, 3, 1, 1}, rng, 0.5f, 2.0f));
  const ValueId sv = b.add_state("s", Shape{1, 3, 1, 1});
  pb.wrt = {xv, sv};
  const ValueId y = b.add_data("y", Shape{2});
  pb.data.push_back(random_labels(2, 3, rng));
  const ValueId pooled = b.add_node(OpKind::MaxPool2d, {{3, 3, 2, 2, 1, 1, 1, 1}, {}}, {xv}, "pool").front();
  CHECK(pb.g.values[pooled].shape == Shape{2, 3, 4, 3});
  const ValueId scaled = b.add_node(OpKind::BroadcastBinary, {{2}, {}}, {pooled, sv}, "scaled").front();
  const ValueId avg = b.add_node(OpKind::GlobalAvgPool, {}, {scaled}, "avg").front();
  const ValueId logits = b.add_node(OpKind::Reshape, {{2, 3}, {}}, {avg}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  check_gradients(pb);
  int pool_backward = 0, avg_backward = 0;
  for (const Node& n : pb.g.nodes) {
    if (n.op == OpKind::MaxPool2dBackward) {
      ++pool_backward;
      CHECK(n.attrs.ints == std::vector<int64_t>{3, 3, 2, 2, 1, 1, 1, 1});  // the forward's window
    }
    avg_backward += n.op == OpKind::GlobalAvgPoolBackward ? 1 : 0;
  }
  CHECK(pool_backward == 1);
  CHECK(avg_backward == 1);
}

TEST_CASE("autodiff through batch_norm in training mode (ResNet's BatchNormalization) matches float64") {
  // x [4, 3, 2, 3] → batch_norm(γ, β) over each channel's 4·2·3 = 24 elements → [4, 18] logits: the VJP
  // emits one batch_norm_backward for x, γ and β together.
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(37);
  auto param = [&](const std::string& name, Shape s, float lo, float hi) {
    pb.state.push_back(random_tensor(s, rng, lo, hi));
    const ValueId v = b.add_state(name, s);
    pb.wrt.push_back(v);
    return v;
  };
  const ValueId x = param("x", Shape{4, 3, 2, 3}, -2.0f, 2.0f), gamma = param("gamma", Shape{3}, 0.5f, 1.5f),
                beta = param("beta", Shape{3}, -0.5f, 0.5f);
  const ValueId y = b.add_data("y", Shape{4});
  pb.data.push_back(random_labels(4, 18, rng));
  const ValueId bn = b.add_node(OpKind::BatchNorm, {{}, {1e-5f}}, {x, gamma, beta}, "bn").front();
  const ValueId logits = b.add_node(OpKind::Reshape, {{4, 18}, {}}, {bn}, "logits").front();
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  check_gradients(pb);
  int backward = 0;
  for (const Node& n : pb.g.nodes) backward += n.op == OpKind::BatchNormBackward ? 1 : 0;
  CHECK(backward == 1);
}

TEST_CASE(
    "autodiff through an imported depthwise and a grouped, dilated Conv (grouped_cnn.onnx) matches float64") {
  // tools/onnx_export.py's GroupedCnn, exported by torch: Conv(groups 4 = C, dilation 2, stride (1, 2),
  // padding (2, 1)) → Conv(groups 2, dilation (2, 1), kernel 3×2, padding 1) → GlobalAveragePool →
  // Flatten, imported and lowered (onnx/lower.cpp map_conv) to conv2d's general form; the gradients of
  // every weight, bias and the input against float64 finite differences.
  const std::filesystem::path path = testing::source_dir() / "tests/fixtures/onnx/grouped_cnn.onnx";
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ModelSpec m;
  m.kind = ModelKind::Onnx;
  m.onnx = import_onnx(std::as_bytes(std::span(bytes)), path.filename().string());
  GradProblem pb;
  GraphBuilder b(pb.g);
  std::mt19937 rng(37);
  const std::vector<ParamSpec> specs = model_params(m);
  REQUIRE(specs.size() == 4);  // two weights, two biases
  std::vector<ValueId> params;
  for (const ParamSpec& spec : specs) params.push_back(b.add_state(spec.name, spec.shape));
  pb.state = onnx_param_tensors(*m.onnx);
  CHECK(pb.state[0].shape() == Shape{4, 1, 3, 3});  // depthwise: C/G = 1 channel per filter
  CHECK(pb.state[2].shape() == Shape{6, 2, 3, 2});
  const ValueId x = b.add_data("x", Shape{2, 4, 9, 9});
  pb.data.push_back(random_tensor(Shape{2, 4, 9, 9}, rng));
  const ValueId y = b.add_data("y", Shape{2});
  pb.data.push_back(random_labels(2, 6, rng));
  const ValueId logits = build_forward(b, m, params, {}, x).logits;  // no buffers
  REQUIRE(pb.g.values[logits].shape == Shape{2, 6});
  pb.loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();
  pb.g.loss = pb.loss;
  pb.wrt = params;
  pb.wrt.push_back(x);
  check_gradients(pb);
  // ONNX's pads [top, left, bottom, right] and dilations land in the general form; each gradient node
  // carries the forward's nine ints and the two sizes.
  std::vector<std::vector<int64_t>> convs, inputs, weights;
  for (const Node& n : pb.g.nodes) {
    if (n.op == OpKind::Conv2d) convs.push_back(n.attrs.ints);
    if (n.op == OpKind::Conv2dBackwardInput) inputs.push_back(n.attrs.ints);
    if (n.op == OpKind::Conv2dBackwardWeight) weights.push_back(n.attrs.ints);
  }
  const std::vector<int64_t> depthwise{1, 2, 2, 1, 2, 1, 2, 2, 4}, grouped{1, 1, 1, 1, 1, 1, 2, 1, 2};
  CHECK(convs == std::vector<std::vector<int64_t>>{depthwise, grouped});
  CHECK(std::count(inputs.begin(), inputs.end(), std::vector<int64_t>{1, 1, 1, 1, 1, 1, 2, 1, 2, 9, 4}) == 1);
  CHECK(std::count(inputs.begin(), inputs.end(), std::vector<int64_t>{1, 2, 2, 1, 2, 1, 2, 2, 4, 9, 9}) == 1);
  CHECK(std::count(weights.begin(), weights.end(), std::vector<int64_t>{1, 1, 1, 1, 1, 1, 2, 1, 2, 3, 2}) ==
        1);
  CHECK(std::count(weights.begin(), weights.end(), std::vector<int64_t>{1, 2, 2, 1, 2, 1, 2, 2, 4, 3, 3}) ==
        1);
}

TEST_CASE("append_backward rejects what it cannot differentiate") {
  StepGraph g;
  GraphBuilder b(g);
  const ValueId w = b.add_state("w", Shape{3, 2});
  const ValueId bias = b.add_state("b", Shape{2});
  const ValueId unused = b.add_state("unused", Shape{2});
  const ValueId table = b.add_state("table", Shape{8, 3});
  const ValueId y = b.add_data("y", Shape{4});
  const ValueId x = b.add_node(OpKind::Gather, {{0, 2, 4, 6}, {}}, {table}, "x").front();
  const ValueId logits = b.add_node(OpKind::Linear, {}, {x, w, bias}, "logits").front();
  const ValueId loss = b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, y}, "loss").front();

  SUBCASE("a parameter that does not influence the loss") {
    const std::vector<ValueId> wrt{w, unused};
    CHECK_THROWS_AS(append_backward(b, loss, wrt), OpError);
  }
  SUBCASE("a parameter behind an op without a VJP rule (gather)") {
    const std::vector<ValueId> wrt{table};
    CHECK_THROWS_AS(append_backward(b, loss, wrt), OpError);
  }
  SUBCASE("a non-scalar loss") {
    const std::vector<ValueId> wrt{w};
    CHECK_THROWS_AS(append_backward(b, logits, wrt), OpError);
  }
  SUBCASE("the parameters that do influence it are fine") {
    const std::vector<ValueId> wrt{w, bias};
    std::vector<ValueId> grads;
    CHECK_NOTHROW(grads = append_backward(b, loss, wrt));
    REQUIRE(grads.size() == 2);
    CHECK(g.values[grads[0]].shape == Shape{3, 2});
    CHECK(g.values[grads[1]].shape == Shape{2});
    CHECK(g.values[grads[0]].name == "grad/w");
  }
}

namespace {

JobSpec small_job(OptimizerKind opt) {
  JobSpec job;
  job.model.widths = {5, 4, 3};
  job.seed = 9;
  job.steps = 10;
  job.batch_size = 4;
  job.stride = 5;
  job.optimizer.kind = opt;
  return job;
}

void check_same_graph(const StepGraph& a, const StepGraph& b) {
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    CAPTURE(n);
    CHECK(a.nodes[n].op == b.nodes[n].op);
    CHECK(a.nodes[n].attrs == b.nodes[n].attrs);
    CHECK(a.nodes[n].inputs == b.nodes[n].inputs);
    CHECK(a.nodes[n].outputs == b.nodes[n].outputs);
  }
  REQUIRE(a.values.size() == b.values.size());
  for (size_t v = 0; v < a.values.size(); ++v) {
    CAPTURE(v);
    CHECK(a.values[v].name == b.values[v].name);
    CHECK(a.values[v].shape == b.values[v].shape);
    CHECK(a.values[v].source == b.values[v].source);
    CHECK(a.values[v].index == b.values[v].index);
    CHECK(a.values[v].slot == b.values[v].slot);
  }
  REQUIRE(a.constants.size() == b.constants.size());
  for (size_t c = 0; c < a.constants.size(); ++c) {
    CHECK(a.constants[c].shape() == b.constants[c].shape());
    const auto ab = a.constants[c].bytes(), bb = b.constants[c].bytes();
    CHECK(std::equal(ab.begin(), ab.end(), bb.begin(), bb.end()));
  }
  CHECK(a.state_inputs == b.state_inputs);
  CHECK(a.state_outputs == b.state_outputs);
  CHECK(a.data_inputs == b.data_inputs);
  CHECK(a.loss == b.loss);
}

}  // namespace

TEST_CASE("build_step_graph is a pure function of (job, data shape, t, batch)") {
  const DataShape data{20, 5, 3};
  const std::vector<int64_t> batch{3, 17, 0, 3};
  for (OptimizerKind opt : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
    CAPTURE(static_cast<int>(opt));
    const JobSpec job = small_job(opt);
    const StepGraph a = build_step_graph(job, data, 7, batch);
    const StepGraph b = build_step_graph(job, data, 7, batch);
    check_same_graph(a, b);

    // And it does depend on its arguments: the batch is in the gathers' attributes; for AdamW the step
    // is in the optimizer's attributes (t = step + 1) and in the next-step constant.
    const std::vector<int64_t> other_batch{3, 17, 0, 4};
    const StepGraph c = build_step_graph(job, data, 7, other_batch);
    CHECK(c.nodes[0].attrs != a.nodes[0].attrs);
    const StepGraph d = build_step_graph(job, data, 8, batch);
    CHECK(d.constants.back()[0] != a.constants.back()[0]);
    if (opt == OptimizerKind::AdamW) {
      CHECK(a.nodes.back().attrs.ints == std::vector<int64_t>{8});
      CHECK(d.nodes.back().attrs.ints == std::vector<int64_t>{9});
    }
  }
}

TEST_CASE("build_step_graph orders its nodes: gathers, forward, loss, backward, then the optimizer") {
  const DataShape data{20, 5, 3};
  const std::vector<int64_t> batch{1, 2, 3, 4};
  for (OptimizerKind opt : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
    CAPTURE(static_cast<int>(opt));
    const JobSpec job = small_job(opt);
    const StepGraph g = build_step_graph(job, data, 0, batch);
    const StateLayout layout = state_layout(job);
    const size_t params = layout.num_params;
    REQUIRE(params == 4);
    REQUIRE(g.nodes.size() > 2 + 3 + 1 + params);

    // Gathers of the inputs and the labels, with the batch as their indices.
    for (size_t n = 0; n < 2; ++n) {
      CHECK(g.nodes[n].op == OpKind::Gather);
      CHECK(g.nodes[n].attrs.ints == batch);
      CHECK(g.nodes[n].inputs == std::vector<ValueId>{g.data_inputs[n]});
    }
    // Forward of 5-4-3: Linear, Relu, Linear; then the loss.
    CHECK(g.nodes[2].op == OpKind::Linear);
    CHECK(g.nodes[2].inputs[0] == g.nodes[0].outputs[0]);
    CHECK(g.nodes[3].op == OpKind::Relu);
    CHECK(g.nodes[4].op == OpKind::Linear);
    CHECK(g.nodes[5].op == OpKind::SoftmaxCrossEntropy);
    CHECK(g.nodes[5].outputs[0] == g.loss);
    CHECK(g.nodes[5].inputs == std::vector<ValueId>{g.nodes[4].outputs[0], g.nodes[1].outputs[0]});

    // Backward: only VJP-produced ops, between the loss and the optimizer.
    const size_t first_opt = g.nodes.size() - params;
    CHECK(first_opt > 6);
    for (size_t n = 6; n < first_opt; ++n) {
      CAPTURE(n);
      const OpKind k = g.nodes[n].op;
      CHECK((k == OpKind::Matmul || k == OpKind::SumRows || k == OpKind::ReluBackward ||
             k == OpKind::SoftmaxCrossEntropyBackward || k == OpKind::Add));
    }
    CHECK(g.nodes[6].op == OpKind::SoftmaxCrossEntropyBackward);

    // Optimizer: one node per parameter, in parameter order, updating that parameter with a gradient
    // computed by the backward part, and producing its next value and slots.
    const OpKind want = opt == OptimizerKind::AdamW ? OpKind::AdamW : OpKind::SgdMomentum;
    for (size_t p = 0; p < params; ++p) {
      CAPTURE(p);
      const Node& node = g.nodes[first_opt + p];
      CHECK(node.op == want);
      CHECK(node.inputs[0] == g.state_inputs[p]);
      const Value& grad = g.values[node.inputs[1]];
      CHECK(grad.source == ValueSource::Node);
      CHECK(grad.index >= 6);
      CHECK(grad.index < first_opt);
      CHECK(grad.shape == layout.shapes[p]);
      CHECK(g.state_outputs[p] == node.outputs[0]);
    }
    // No optimizer node anywhere else.
    for (size_t n = 0; n < first_opt; ++n) CHECK(g.nodes[n].op != want);
    // The next state's loss is this step's loss.
    CHECK(g.state_outputs.back() == g.loss);
  }
}
