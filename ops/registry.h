// The closed set of RepOps operators and the registry that maps each OpKind to its arity, attribute
// layout, shape rule, kernels and vector-Jacobian product (ggml-style closed op enum; docs/architecture.md).
// Each op's exact order of operations is written in docs/numerics.md; the reference kernel *is* it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/tensor.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// Every operator a step graph may contain. Closed: adding one means a new contract version.
enum class OpKind : uint8_t {
  Gather,                       ///< table[N, …], ints = row indices → out[B, …]
  Linear,                       ///< x[M,K], w[K,N], b[N] → y[M,N] = x·w + b; ints = {} or {trans_b}:
                                ///< trans_b = 1 takes w[N,K] (nn.Linear, ONNX Gemm transB) → x·wᵀ + b
  Matmul,                       ///< a, b, ints = {trans_a, trans_b} → c = op(a)·op(b)
  SumRows,                      ///< x[M,N] → y[N], y[j] = canonical_sum over i of x[i,j]
  Add,                          ///< a, b (same shape) → a + b
  Relu,                         ///< x → max(x, 0)
  ReluBackward,                 ///< x, dy → dy where x > 0 else 0
  SoftmaxCrossEntropy,          ///< logits[B,C], labels[B] → loss[] (mean over the batch)
  SoftmaxCrossEntropyBackward,  ///< logits[B,C], labels[B], dloss[] → dlogits[B,C]
  SgdMomentum,                  ///< p, g, v; floats = {lr, momentum, weight_decay} → p', v'
  AdamW,                        ///< p, g, m, v; floats = {lr, β1, β2, ε, wd}, ints = {t} → p', m', v'
  // Transformer and CNN ops. Appended, so the op bytes above and existing jobs' trajectories are unchanged.
  // Exact operation orders: docs/numerics.md, one section per op.
  Reshape,            ///< x; ints = the new shape (same element count) → a copy of x with that shape
  Embedding,          ///< tok[V,D], pos[T,D], ids[B,T] (integral floats < V) → y[B·T, D],
                      ///< y[b·T+t, :] = tok[ids[b,t], :] + pos[t, :]
  EmbeddingBackward,  ///< ids[B,T], dy[B·T,D]; ints = {V} → dtok[V,D]: row v = the rows p of dy with
                      ///< ids[p] = v added one by one in increasing p, starting from +0
  LayerNorm,          ///< x[M,D], γ[D], β[D]; floats = {ε} → y[M,D] (Ba et al. 2016), biased variance
  LayerNormBackward,  ///< x[M,D], γ[D], dy[M,D]; floats = {ε} → dx[M,D], dγ[D], dβ[D]
  Gelu,          ///< x → 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (Hendrycks & Gimpel, tanh form)
  GeluBackward,  ///< x, dy → dy · d gelu(x)/dx
  Softmax,       ///< x[…, R, N]; ints = {causal}; floats = {scale} → softmax of scale·x over the last
                 ///< axis; causal: in row r of each R×N block, entries n > r are masked (output +0)
  SoftmaxBackward,  ///< y, dy (y = Softmax's output); same attrs → dx = scale·y·(dy − Σₙ y·dy)
  SplitHeads,  ///< x[B·T, H·E]; ints = {B, T, H} → y[B·H, T, E], y[b·H+h, t, e] = x[b·T+t, h·E+e]
  MergeHeads,  ///< x[B·H, T, E]; ints = {B, T, H} → y[B·T, H·E], the inverse of SplitHeads
  Dropout,  ///< x; ints = {seed, step, site}; floats = {p} → keepᵢ ? xᵢ·(1/(1−p)) : +0, keepᵢ from
            ///< Philox (seed, Dropout, step, element site·2³² + i) (Srivastava et al. 2014)
  DropoutBackward,  ///< dy; the same attrs as the forward node → keepᵢ ? dyᵢ·(1/(1−p)) : +0
  Conv2d,  ///< x[N,C,H,W], w[O,C/G,KH,KW], b[O]; ints = {stride, pad} (G = 1, no dilation; OH = (H + 2·pad
           ///< − KH)/stride + 1) or {stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right,
           ///< dilation_h, dilation_w, G} (G divides C and O; pads < the kernel extent (KH − 1)·dilation_h +
           ///< 1; OH = (H + pad_top + pad_bottom − extent)/stride_h + 1) → y[N,O,OH,OW]; one fma chain per
           ///< output in (c, kh, kw) order over the C/G channels of its group (docs/numerics.md
           ///< "Convolution")
  Conv2dBackwardInput,   ///< w[O,C/G,KH,KW], dy[N,O,OH,OW]; ints = {the forward's…, H, W} → dx[N,C,H,W]
  Conv2dBackwardWeight,  ///< x[N,C,H,W], dy[N,O,OH,OW]; ints = {the forward's…, KH, KW} → dw[O,C/G,KH,KW]
  Conv2dBackwardBias,    ///< dy[N,O,OH,OW] → db[O], canonical sum over (n, oh, ow)
  MaxPool2d,  ///< x[N,C,H,W]; ints = {} (H and W even → y[N,C,H/2,W/2], max of each 2×2 window) or
              ///< {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right} (pads < kernel,
              ///< never chosen; OH = (H + pad_top + pad_bottom − kh)/stride_h + 1) → the max of each window
  MaxPool2dBackward,  ///< x, dy; the forward's ints → dx: each dy element goes to its window's chosen input
                      ///< (summed in window order where windows overlap), others +0
  SumSquares,         ///< x → scalar canonical sum of xᵢ·xᵢ
  ClipCoefficient,    ///< s₀ … s_{P−1} (scalars, any count ≥ 1); floats = {max_norm} →
                      ///< min(1, max_norm / (sqrt(canonical sum of s) + 1e-6)) (torch clip_grad_norm_)
  Scale,              ///< x, s[] → x·s
  // Broadcasting arithmetic (ONNX Add/Sub/Mul/Div; docs/onnx.md). Appended: the op bytes above are unchanged.
  BroadcastBinary,  ///< a, b (rank ≤ 4); ints = {op}: 0 add, 1 sub, 2 mul, 3 div → y = a op b, y's shape the
                    ///< NumPy broadcast of a's and b's; one float32 operation per element
  SumToShape,  ///< x; ints = target shape (x's shape a broadcast of it); floats = {sign ±1} → y[target],
               ///< y[j] = sign·canonical sum of the x elements broadcast from j, in increasing flat index
  // Selection (ONNX Where, Gather on axis 0; docs/numerics.md "Selection: where, gather_rows"). Appended.
  Where,  ///< cond, a, b (rank ≤ 4, NumPy-broadcast together) → y[i] = cond[·] ≠ ±0 (NaN true) ? a[·] : b[·],
          ///< a bit copy of the chosen element
  WhereBackward,  ///< cond, dy (cond broadcasts to dy); ints = {branch 0|1} → dx[dy's shape],
                  ///< dx[i] = (cond[·] true) == branch ? dy[i] : +0
  GatherRows,     ///< table[N, …rest] (rank 1..4), ids (rank 0..3; integral floats in [0, N)) →
                  ///< y[ids.shape ++ rest] (rank ≤ 4), y[p, …] = table[ids[p], …] (ONNX Gather, axis 0)
  // Elementwise functions (ONNX Neg, Reciprocal, Sqrt, Exp, Log, Tanh, Erf, Sigmoid, Sin, Cos, Pow;
  // docs/numerics.md "Elementwise functions"). Appended: the op bytes above are unchanged.
  Unary,  ///< x (rank ≤ 4); ints = {fn}; floats = {p} → y = f(x) elementwise, same shape; fn: 0 neg,
          ///< 1 reciprocal, 2 sqrt, 3 exp, 4 log, 5 tanh, 6 erf, 7 sigmoid, 8 sin, 9 cos, 10 pow (x^p);
          ///< p = 0 unless fn is pow (ops/unary.h, ops/math.h: our own functions, never libm's)
  UnaryBackward,  ///< x, y (the forward output), dy; the forward's attrs → dx = dy·f'(x) (ops/unary.h)
  // Data movement (ONNX Transpose, Slice/Split, Concat; docs/numerics.md "Data movement: transpose, slice,
  // concat"): exact copies. Appended: the op bytes above are unchanged.
  Transpose,  ///< x (rank 1..4); ints = perm (a permutation of 0..rank−1) → y, y.shape[d] =
              ///< x.shape[perm[d]], y[c₀, …] = x at coordinate perm[d] = c_d (NumPy/ONNX Transpose)
  Slice,  ///< x (rank 1..4); ints = {axis, start, end, step}, 0 ≤ start ≤ end ≤ x.shape[axis], step ≥ 1
          ///< → y, y.shape[axis] = ceil((end − start)/step), y[…, l, …] = x[…, start + l·step, …]
  SliceBackward,  ///< dy; ints = {axis, start, step, full_dim} → dx, dx.shape[axis] = full_dim:
                  ///< dx[…, start + l·step, …] = dy[…, l, …], every other element +0
  Concat,  ///< x₀ … x_{n−1} (n ≥ 1, rank 1..4, equal but on the axis); ints = {axis} → y, the
           ///< inputs one after another along the axis (ONNX Concat)
  // Mean over one axis and broadcasting to a shape (ONNX ReduceMean, Expand: RMSNorm, grouped-query
  // attention; docs/numerics.md "Mean over an axis; expand"). Appended: the op bytes above are unchanged.
  ReduceMean,  ///< x (rank 1..4); ints = {axis} → y, y.shape[axis] = 1, y = canonical sum of the N elements
               ///< along the axis, then one float32 division by float(N)
  ReduceMeanBackward,  ///< dy (x's shape with dim 1 on the axis); ints = {axis, N} → dx, dx.shape[axis] = N,
                       ///< dx[…, k, …] = dy[…, 0, …] / float(N) (one division each)
  Expand,  ///< x (rank ≤ 4); ints = the target shape (x's shape broadcasts to it) → y[target], a bit copy
           ///< of x's element broadcast to each position (NumPy broadcasting, ONNX Expand)
  // Global average pooling (ONNX GlobalAveragePool; docs/numerics.md "Global average pooling"). Appended.
  GlobalAvgPool,  ///< x[N,C,H,W] → y[N,C,1,1] = canonical sum of the plane (row-major) / float(H·W)
  GlobalAvgPoolBackward,  ///< dy[N,C,1,1]; ints = {H, W} → dx[N,C,H,W] = dy / float(H·W) everywhere
  // Batch normalization (Ioffe & Szegedy 2015; ONNX BatchNormalization; docs/numerics.md "Batch
  // normalization"). Appended: the op bytes above are unchanged.
  BatchNorm,  ///< x[N,C] | [N,C,L] | [N,C,H,W], γ[C], β[C]; floats = {ε} → y (x's shape), training mode:
              ///< each channel's M = N·spatial elements normalized as one LayerNorm row (biased variance)
  BatchNormBackward,  ///< x, γ[C], dy (x's shape); floats = {ε} → dx, dγ[C], dβ[C]
  BatchNormRunning,   ///< running[C], x; ints = {stat: 0 mean, 1 biased var, 2 unbiased var}; floats =
                      ///< {momentum} → running·momentum + stat·(1 − momentum) (ONNX's momentum); no VJP
  BatchNormInference,  ///< x, γ[C], β[C], mean[C], var[C]; floats = {ε} → fma((x − mean)·rstd, γ, β),
                       ///< rstd = 1/sqrt(var + ε) (training_mode = 0, eval()); no VJP
  Count  ///< sentinel, not an op
};

inline constexpr size_t kOpKindCount = static_cast<size_t>(OpKind::Count);

/// Attributes of one node: integers and floats whose meaning each op documents above.
struct Attrs {
  std::vector<int64_t> ints;
  std::vector<float> floats;
  bool operator==(const Attrs&) const = default;
};

/// Canonical bytes of attributes, hashed into node records:
/// u32 LE count ‖ i64 LE each ‖ u32 LE count ‖ f32 bits LE each.
std::vector<std::byte> encode_attrs(const Attrs& attrs);

/// Handle of a value in a graph being differentiated (see VjpBuilder).
using ValueRef = uint32_t;

/// What an op's VJP rule may do: add nodes to the graph under construction (engine/autodiff).
class VjpBuilder {
 public:
  virtual ~VjpBuilder() = default;
  /// Appends a node of `kind` and returns its first output.
  virtual ValueRef emit(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) = 0;
  /// Appends a node of `kind` and returns all its outputs (for multi-output backward ops).
  virtual std::vector<ValueRef> emit_all(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) = 0;
  /// The shape of a value (e.g. reshape's VJP reshapes back to its input's shape).
  virtual Shape shape(ValueRef v) const = 0;
};

/// Inputs of a VJP rule: the forward node and the gradients flowing into its outputs.
struct VjpArgs {
  const Attrs& attrs;
  std::span<const ValueRef> inputs;     ///< forward inputs
  std::span<const ValueRef> outputs;    ///< forward outputs
  std::span<const ValueRef> out_grads;  ///< d loss / d output (one per output)
  std::span<const bool> needs_grad;     ///< which inputs want a gradient
};

struct Float64Call;    // one float64 invocation (ops/float64/internal.h)
struct QuantaFactors;  // a gemm op's rounding quanta (ops/rounding_log.h)

using ShapeFn = std::vector<Shape> (*)(const Attrs&, std::span<const Shape> inputs);
using KernelFn = void (*)(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out);
using FastKernelFn = void (*)(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                              ThreadPool& pool);
/// Writes d loss / d input i into `in_grads[i]` for each input that needs one.
using VjpFn = void (*)(VjpBuilder&, const VjpArgs&, std::span<ValueRef> in_grads);
/// The op in float64 for rounding-log mode (ops/float64/float64.h run_float64), on validated inputs.
using Float64Fn = void (*)(const Float64Call&);
/// The length of each output element's fma chain of a contraction, from its attributes and input
/// shapes (already valid): what re-executing one output element costs (engine/cost.h node_work).
using FmaChainFn = uint64_t (*)(const Attrs&, std::span<const Shape> in);
/// Sets `quanta` to output 0's rounding quanta of a gemm op (ops/float64/float64.h rounding_quanta), in
/// factored form (ops/rounding_log.h), on inputs already valid for the op; quantum_bits already checked.
using QuantaFn = void (*)(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& quanta,
                          int quantum_bits);

/// How far two honest float64 executions of an op may differ before rounding (docs/numerics.md,
/// "Rounding-log mode"): what the default τ of rounding-log mode is chosen by (engine/numerics.h).
/// No enumerator is 0, so an entry that forgets it fails the registry's check.
enum class Float64Spread : uint8_t {
  Exact = 1,  ///< copies, selections and one correctly rounded IEEE-754 operation per value: none
  Sum = 2,    ///< contractions and row sums: a vendor kernel may order (and block) the sum its own way
  Libm = 3,   ///< fixed formulas with libm calls (exp, log, tanh, sqrt) or short positive sums
};

/// Everything the system knows about one op kind: its descriptor. Each op family's file
/// (ops/kernels/<family>.cpp) defines its ops' entries; ops/registry.cpp maps every OpKind to its entry
/// by a switch the compiler checks for completeness (-Werror=switch) and checks each entry's fields on
/// first use, naming the op. Backends above ops/ that add a kernel per op keep one table of their own
/// built the same way (ops/cuda/backend.cpp).
struct OpInfo {
  OpKind kind;       ///< the kind this entry describes (the registry checks op_info(k).kind == k)
  const char* name;  ///< stable snake_case name (logs, docs, verdicts)
  int num_inputs;    ///< exact count, or -1 for "one or more" (ClipCoefficient)
  int num_outputs;
  int num_ints;  ///< exact count, or -1: the shape rule checks it (Gather's indices, Linear's {trans_b})
  int num_floats;
  ShapeFn infer;       ///< validates input shapes and attrs, returns output shapes; throws OpError
  KernelFn reference;  ///< scalar reference: the contract
  FastKernelFn fast;   ///< fast kernel, bitwise identical to `reference`
  VjpFn vjp;           ///< reverse-mode rule; nullptr if the op is not differentiable
  Float64Fn float64;   ///< the op in float64 (rounding-log mode)
  Float64Spread float64_spread;
  /// Contractions (the gemm ops: linear, matmul, conv2d and its input and weight gradients) only, both
  /// or neither: the fma chain length of the dispute cost and the rounding quanta of rounding-log mode.
  FmaChainFn fma_chain = nullptr;
  QuantaFn quanta = nullptr;
  /// Output k may be written into input in_place[k]'s storage (−1: not; outputs past the third: not).
  /// Only for elementwise updates whose every kernel path reads element i of its inputs before writing
  /// element i of its outputs (the optimizers: a state tensor updated in place, Executor::run_updating).
  std::array<int8_t, 3> in_place{-1, -1, -1};
};

/// The registry entry of `kind`. Asserts kind < Count. On first use checks every entry (its kind, a
/// unique name, the shape rule, the reference, fast and float64 kernels, its Float64Spread, fma_chain and
/// quanta both or neither) and aborts naming the first op whose entry is incomplete.
const OpInfo& op_info(OpKind kind);

/// What is wrong with `info` as the entry of `kind` ("" when nothing): e.g. "op 'relu': no float64
/// kernel". The check op_info runs on every entry; exposed so tests can show it catches a gap.
std::string op_info_defect(OpKind kind, const OpInfo& info);

/// op_info(kind).name.
const char* op_name(OpKind kind);

/// Checks attribute counts and shapes for `kind` and returns the output shapes.
/// Throws OpError naming the op and what is wrong.
std::vector<Shape> infer_shapes(OpKind kind, const Attrs& attrs, std::span<const Shape> inputs);

/// Runs the reference (or the fast) kernel; outputs must already have the inferred shapes.
void run_reference(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                   std::span<Tensor* const> out);
void run_fast(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
              std::span<Tensor* const> out, ThreadPool& pool);

}  // namespace tribunal
