// Folding at import (docs/onnx.md "Folding"): the ONNX nodes whose inputs are all known constants —
// shape computations (Shape → Gather → Unsqueeze → Concat → Reshape's shape), Constant,
// ConstantOfShape, Range, Cast of constants — are evaluated once on the host, so no step graph ever
// holds them. Each fold is exact: integer arithmetic, copies, or one IEEE-754 float32 operation per
// element (Add, Sub, Mul, Div), the same on every machine; the float functions (Sqrt, Reciprocal, Exp,
// Log, Tanh, Erf, Sigmoid, Sin, Cos, Pow) use the run-time unary op's own functions (ops/unary.h) and
// MatMul of 2-D constants matmul_reference's fma chains, so a folded constant is what the op computes.
// Semantics: the ONNX operator specification (Operators.md) for opsets 13–17, multidirectional (NumPy)
// broadcasting where it says so.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "onnx/onnx_model.h"

namespace tribunal {

/// True when `op_type` is one fold_constant evaluates.
bool is_foldable(const std::string& op_type);

/// Evaluates `node` on constant inputs (inputs[i] null for an omitted optional input) and returns its
/// outputs, one per node output. `opset` selects the operator version where it matters (e.g.
/// Shape's start/end from 15). `where` prefixes every error (OnnxModel::where). Throws OnnxError for
/// an unsupported attribute, a type it cannot take (e.g. Div of int64 by 0), a bad shape, or a result
/// larger than `max_elements`.
std::vector<OnnxConstant> fold_constant(const OnnxNode& node, std::span<const OnnxConstant* const> inputs,
                                        int64_t opset, const std::string& where, uint64_t max_elements);

/// The constant of Shape applied to a tensor of shape `dims` (opset ≥ 15: `start`/`end` attributes
/// of `node`, negative counted from the end and clamped): an int64 vector. Shape folds even when its
/// input is computed at run time, since every shape is static after import.
OnnxConstant fold_shape(const OnnxNode& node, std::span<const int64_t> dims, const std::string& where);

/// NumPy broadcasting of two shapes (ONNX "multidirectional broadcasting"). Throws OnnxError
/// prefixed by `where` when they do not broadcast.
std::vector<int64_t> broadcast_dims(std::span<const int64_t> a, std::span<const int64_t> b,
                                    const std::string& where);

}  // namespace tribunal
