// Lowering an ONNX graph onto RepOps nodes (onnx/lower.h, docs/onnx.md). One pass over the nodes in
// the file's order, keeping for every ONNX value either its constant (folded at import) or the
// RepOps value that computes it at run time.
#include "onnx/lower.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "onnx/const_eval.h"

namespace tribunal {
namespace {

constexpr int32_t kOnnxFloat = 1;

/// An ONNX value during lowering.
struct Val {
  bool is_const = false;
  OnnxConstant c;                  ///< is_const: its value
  bool float_initializer = false;  ///< is_const: a float initializer (a parameter when read at run time)
  uint32_t initializer_index = 0;  ///< its position in initializer_order()
  LoweredRef ref;                  ///< !is_const: the RepOps value
  Shape shape;                     ///< !is_const: its shape
  /// !is_const: int64 token ids fed at run time (a graph input on text data), carried as a float tensor
  /// of integers; only a Gather reads them (as gather_rows' ids).
  bool index = false;
  /// !is_const: the 2-D transpose of `ref` (shape: `shape`), not yet emitted: a MatMul reads it as
  /// trans_a/trans_b (torch exports nn.Linear on [B, T, K] as MatMul(x, Transpose(W))); any other
  /// reader gets a transpose node, emitted once.
  bool lazy_transpose = false;
  /// !is_const: the ONNX dims of a value of rank above RepOps' 4 (Llama's GQA repeat, k[:, :, None]
  /// before its expand); `ref` holds its elements flat, [numel], in row-major order. Only a reshape or an
  /// expand reads it (map_expand collapses the axes it treats alike, so the copy runs at rank ≤ 4).
  std::vector<int64_t> wide;
};

constexpr int32_t kOnnxInt64 = 7;

std::string dims_str(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Lowerer {
 public:
  Lowerer(const OnnxModel& model, const LowerOptions& options, bool discover)
      : m_(model), opt_(options), discover_(discover) {
    for (size_t i = 0; i < model.params().size(); ++i)
      param_index_[model.params()[i]] = static_cast<uint32_t>(i);
    find_differentiable();
  }

  LoweredGraph run() {
    bind_initializers();
    bind_inputs();
    for (const OnnxNode& node : m_.nodes()) lower_node(node);
    std::vector<std::string> wanted = opt_.outputs;
    if (wanted.empty())
      for (const auto& o : m_.outputs()) wanted.push_back(o.name);
    for (const std::string& name : wanted) {
      if (std::none_of(m_.outputs().begin(), m_.outputs().end(),
                       [&](const auto& o) { return o.name == name; }))
        throw OnnxError(
            fmt::format("{}: '{}' is not a graph output (outputs: {})", m_.source(), name, output_names()));
      const Val& v = value(name, nullptr);
      if (v.is_const && !v.float_initializer && v.c.type != OnnxConstant::Type::Float32)
        throw OnnxError(
            fmt::format("{}: graph output '{}' is an int64 constant, not a float tensor", m_.source(), name));
      g_.outputs.push_back(runtime(name, nullptr));
      g_.output_shapes.push_back(shape_of(name));
    }
    g_.params_used.assign(used_.begin(), used_.end());
    if (opt_.training) {
      g_.buffer_updates.resize(m_.buffers().size());
      for (size_t k = 0; k < m_.buffers().size(); ++k) {
        auto it = buffer_updates_.find(static_cast<uint32_t>(k));
        if (it == buffer_updates_.end())  // find_onnx_buffers admits only a training-mode BN's inputs
          throw OnnxError(fmt::format("{}: buffer '{}' is not updated by the lowered graph", m_.source(),
                                      m_.buffers()[k]));
        g_.buffer_updates[k] = it->second;
      }
    }
    return std::move(g_);
  }

 private:
  using Mapper = void (Lowerer::*)(const OnnxNode&);

  // ---- values ----

  /// The values a gradient of some graph output can reach, walking the nodes backwards through the
  /// inputs an output depends on differentiably. A float initializer outside this set is a buffer,
  /// not a weight: GPT-2's causal-mask buffer only feeds Slice → Equal → Where's condition, so it
  /// folds at import instead of being trained (docs/onnx.md "Parameters").
  void find_differentiable() {
    for (const auto& o : m_.outputs()) differentiable_.insert(o.name);
    const auto& nodes = m_.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const OnnxNode& node = *it;
      if (std::none_of(node.outputs.begin(), node.outputs.end(),
                       [&](const std::string& o) { return differentiable_.count(o) != 0; }))
        continue;
      for (size_t i = 0; i < node.inputs.size(); ++i)
        if (!node.inputs[i].empty() && differentiable_input(node, i)) differentiable_.insert(node.inputs[i]);
    }
  }

  /// Whether `node`'s float outputs depend differentiably on its input `i` (not on a shape, indices,
  /// axes, a ratio or a condition).
  static bool differentiable_input(const OnnxNode& node, size_t i) {
    static const std::set<std::string> none = {
        "Shape", "Size", "Equal", "Less",   "Greater", "LessOrEqual", "GreaterOrEqual",  "Not",
        "And",   "Or",   "Xor",   "ArgMax", "ArgMin",  "Range",       "ConstantOfShape", "NonZero"};
    static const std::set<std::string> first_only = {
        "Gather", "Reshape", "Expand",  "Tile",   "Unsqueeze", "Squeeze", "Slice",
        "Split",  "Pad",     "Dropout", "Resize", "ReduceSum", "TopK",    "GatherElements"};
    if (none.count(node.op_type)) return false;
    if (first_only.count(node.op_type)) return i == 0;
    if (node.op_type == "Where") return i != 0;
    if (node.op_type == "BatchNormalization") return i <= 2;  // the running statistics are buffers
    if (node.op_type == "Cast") {
      auto to = node.attributes.find("to");
      return to != node.attributes.end() && to->second.i == kOnnxFloat;
    }
    return true;
  }

  void bind_initializers() {
    const auto& order = m_.initializer_order();
    const auto& buffers = m_.buffers();
    for (size_t i = 0; i < order.size(); ++i) {
      const auto buffer = std::find(buffers.begin(), buffers.end(), order[i]);
      if (buffer != buffers.end()) {  // state the step reads and updates (map_batch_norm)
        Val v;
        v.ref = {LoweredRef::Kind::Buffer, static_cast<uint32_t>(buffer - buffers.begin()), 0};
        v.shape = Shape(std::span<const int64_t>(m_.initializers().at(order[i]).dims));
        vals_[order[i]] = std::move(v);
        continue;
      }
      Val v;
      v.is_const = true;
      v.c = m_.initializers().at(order[i]);
      v.float_initializer = v.c.type == OnnxConstant::Type::Float32 && differentiable_.count(order[i]) != 0;
      v.initializer_index = static_cast<uint32_t>(i);
      vals_[order[i]] = std::move(v);
    }
  }

  void bind_inputs() {
    for (const auto& [name, c] : opt_.constant_inputs) {
      if (!declared_input(name))
        throw OnnxError(fmt::format("{}: '{}' is not a graph input", m_.source(), name));
      Val v;
      v.is_const = true;
      v.c = c;
      vals_[name] = std::move(v);
    }
    for (size_t i = 0; i < opt_.inputs.size(); ++i) {
      std::string name = opt_.inputs[i].name;
      if (name.empty()) {
        if (m_.inputs().size() != 1)
          throw OnnxError(
              fmt::format("{}: the model has {} graph inputs; the job must name the one fed with the data "
                          "(model.input)",
                          m_.source(), m_.inputs().size()));
        name = m_.inputs()[0].name;
      }
      const OnnxValueInfo* info = declared_input(name);
      if (!info)
        throw OnnxError(
            fmt::format("{}: '{}' is not a graph input (inputs: {})", m_.source(), name, input_names()));
      if (info->elem_type != kOnnxFloat && info->elem_type != kOnnxInt64)
        throw OnnxError(
            fmt::format("{}: graph input '{}' holds {}; the importer feeds float tensors and int64 "
                        "token ids only",
                        m_.source(), name, onnx_type_name(info->elem_type)));
      const Shape& given = opt_.inputs[i].shape;
      Val v;
      v.ref = {LoweredRef::Kind::Input, static_cast<uint32_t>(i), 0};
      v.shape = given;
      v.index = info->elem_type == kOnnxInt64;  // token ids: the data holds them as integral floats
      vals_[name] = v;
      // The data set's rows against the declared per-sample shape: reshape when only the layout differs.
      if (!info->dims.empty() && given.rank() >= 1) {
        std::vector<int64_t> want{given[0]};
        bool fixed = true;
        for (size_t d = 1; d < info->dims.size(); ++d) {
          fixed = fixed && info->dims[d] >= 0;
          want.push_back(info->dims[d]);
        }
        const std::vector<int64_t> have(given.dims().begin(), given.dims().end());
        if (fixed && want != have) {
          int64_t n = 1;
          for (int64_t d : want) n *= d;
          if (n != given.numel())
            throw OnnxError(fmt::format("{}: graph input '{}' is declared {} per batch, the data gives {}",
                                        m_.source(), name, dims_str(info->dims), given.str()));
          Val reshaped = emit_one(OpKind::Reshape, Attrs{want, {}}, {v.ref}, name + ".reshape", nullptr);
          reshaped.index = v.index;
          vals_[name] = reshaped;
        }
      }
    }
  }

  const OnnxValueInfo* declared_input(const std::string& name) const { return m_.input(name); }

  std::string input_names() const {
    std::string s;
    for (const auto& in : m_.inputs()) s += (s.empty() ? "" : ", ") + in.name;
    return s;
  }
  std::string output_names() const {
    std::string s;
    for (const auto& o : m_.outputs()) s += (s.empty() ? "" : ", ") + o.name;
    return s;
  }

  /// The value `name` (an error naming `node` when it is not defined).
  const Val& value(const std::string& name, const OnnxNode* node) const {
    auto it = vals_.find(name);
    if (it == vals_.end()) {
      const std::string where = node ? m_.where(*node) : m_.source() + ": ";
      if (declared_input(name))
        throw OnnxError(
            fmt::format("{}reads graph input '{}', which the job does not feed (model.input names the "
                        "one the data goes to)",
                        where, name));
      throw OnnxError(
          fmt::format("{}reads '{}', which no supported node produced (an optional output the "
                      "importer does not compute?)",
                      where, name));
    }
    return it->second;
  }

  bool is_const(const std::string& name, const OnnxNode* node) const { return value(name, node).is_const; }

  /// The constant value of input `name` (a Reshape's shape, a Dropout's ratio): refused when it is
  /// computed at run time.
  const OnnxConstant& constant(const std::string& name, const OnnxNode& node, const char* role) const {
    const Val& v = value(name, &node);
    if (!v.is_const)
      throw OnnxError(fmt::format("{}its {} '{}' is computed at run time; the importer needs it constant",
                                  m_.where(node), role, name));
    return v.c;
  }

  /// The dims of a value, constant or not.
  std::vector<int64_t> dims_of(const std::string& name, const OnnxNode* node) const {
    const Val& v = value(name, node);
    if (v.is_const) return v.c.dims;
    if (!v.wide.empty()) return v.wide;
    return {v.shape.dims().begin(), v.shape.dims().end()};
  }

  Shape shape_of(const std::string& name) const {
    const auto dims = dims_of(name, nullptr);
    return Shape(std::span<const int64_t>(dims));
  }

  /// The RepOps value of input `name`: a run-time value, a parameter (a float initializer) or a
  /// graph constant (a float constant the step only reads).
  LoweredRef runtime(const std::string& name, const OnnxNode* node) {
    value(name, node);  // throws, naming the node, when undefined
    Val& v = vals_.at(name);
    if (v.index)
      throw OnnxError(
          fmt::format("{}reads the int64 token ids '{}' as a float tensor; the importer reads "
                      "run-time int64 values only as Gather indices",
                      node ? m_.where(*node) : m_.source() + ": ", name));
    if (!v.wide.empty())
      throw OnnxError(
          fmt::format("{}reads '{}' of rank {}; RepOps tensors have rank ≤ {} (only a Reshape or "
                      "an Expand may read a wider value)",
                      node ? m_.where(*node) : m_.source() + ": ", name, v.wide.size(), kMaxRank));
    if (v.lazy_transpose) {  // emitted on first use by an op other than MatMul
      v = emit_one(OpKind::Transpose, Attrs{{1, 0}, {}}, {v.ref}, name, node);
      return v.ref;
    }
    if (!v.is_const) return v.ref;
    const std::string where = node ? m_.where(*node) : m_.source() + ": ";
    if (v.c.dims.size() > static_cast<size_t>(kMaxRank))
      throw OnnxError(fmt::format("{}'{}' has rank {}; RepOps tensors have rank ≤ {}", where, name,
                                  v.c.dims.size(), kMaxRank));
    if (v.c.type != OnnxConstant::Type::Float32)
      throw OnnxError(
          fmt::format("{}reads the int64 constant '{}' {} as a float tensor; the importer does not "
                      "convert integer tensors",
                      where, name, dims_str(v.c.dims)));
    if (v.float_initializer) {
      used_.insert(v.initializer_index);
      if (discover_) return {LoweredRef::Kind::Param, v.initializer_index, 0};
      // By the initializer's own name: `name` may be an alias (an Identity of it, which torch's export
      // writes where two modules share one tensor).
      const std::string& initializer = m_.initializer_order().at(v.initializer_index);
      auto it = param_index_.find(initializer);
      if (it == param_index_.end())
        throw OnnxError(
            fmt::format("{}reads initializer '{}' at run time, which is not among the model's parameters",
                        where, initializer));
      return {LoweredRef::Kind::Param, it->second, 0};
    }
    // A float constant (a Constant node, a folded value): one graph constant per name.
    auto cached = constant_refs_.find(name);
    if (cached != constant_refs_.end()) return cached->second;
    const Shape shape(std::span<const int64_t>(v.c.dims));
    g_.constants.emplace_back(shape, std::span<const float>(v.c.floats));
    const LoweredRef ref{LoweredRef::Kind::Constant, static_cast<uint32_t>(g_.constants.size() - 1), 0};
    constant_refs_[name] = ref;
    return ref;
  }

  /// Appends a RepOps node; shapes come from the op registry. Returns its outputs as values.
  std::vector<Val> emit(OpKind op, Attrs attrs, std::vector<LoweredRef> inputs, const std::string& name,
                        const OnnxNode* node) {
    std::vector<Shape> in_shapes;
    for (const LoweredRef& r : inputs) in_shapes.push_back(ref_shape(r));
    LoweredNode n;
    n.op = op;
    n.inputs = std::move(inputs);
    n.name = name;
    try {
      n.outputs = infer_shapes(op, attrs, in_shapes);
    } catch (const OpError& e) {
      throw OnnxError(fmt::format("{}{}", node ? m_.where(*node) : m_.source() + ": ", e.what()));
    }
    n.attrs = std::move(attrs);
    std::vector<Val> out;
    for (size_t s = 0; s < n.outputs.size(); ++s) {
      Val v;
      v.ref = {LoweredRef::Kind::Node, static_cast<uint32_t>(g_.nodes.size()), static_cast<uint32_t>(s)};
      v.shape = n.outputs[s];
      out.push_back(v);
    }
    g_.nodes.push_back(std::move(n));
    return out;
  }

  Val emit_one(OpKind op, Attrs attrs, std::vector<LoweredRef> inputs, const std::string& name,
               const OnnxNode* node) {
    return emit(op, std::move(attrs), std::move(inputs), name, node).front();
  }

  Shape ref_shape(const LoweredRef& r) const {
    switch (r.kind) {
      case LoweredRef::Kind::Input:
        return opt_.inputs.at(r.index).shape;
      case LoweredRef::Kind::Param: {
        const std::string& name = discover_ ? m_.initializer_order().at(r.index) : m_.params().at(r.index);
        const auto& dims = m_.initializers().at(name).dims;
        return Shape(std::span<const int64_t>(dims));
      }
      case LoweredRef::Kind::Buffer: {
        const auto& dims = m_.initializers().at(m_.buffers().at(r.index)).dims;
        return Shape(std::span<const int64_t>(dims));
      }
      case LoweredRef::Kind::Constant:
        return g_.constants.at(r.index).shape();
      case LoweredRef::Kind::Node:
        return g_.nodes.at(r.index).outputs.at(r.slot);
    }
    return {};
  }

  void define(const OnnxNode& node, size_t slot, Val v) {
    if (slot < node.outputs.size() && !node.outputs[slot].empty()) vals_[node.outputs[slot]] = std::move(v);
  }

  // ---- attributes ----

  static const OnnxAttribute* attr(const OnnxNode& node, const char* name) {
    auto it = node.attributes.find(name);
    return it == node.attributes.end() ? nullptr : &it->second;
  }
  int64_t attr_int(const OnnxNode& node, const char* name, int64_t fallback) const {
    const OnnxAttribute* a = attr(node, name);
    if (!a) return fallback;
    if (a->kind != OnnxAttribute::Kind::Int)
      throw OnnxError(fmt::format("{}attribute {} is not an integer", m_.where(node), name));
    return a->i;
  }
  float attr_float(const OnnxNode& node, const char* name, float fallback) const {
    const OnnxAttribute* a = attr(node, name);
    if (!a) return fallback;
    if (a->kind != OnnxAttribute::Kind::Float)
      throw OnnxError(fmt::format("{}attribute {} is not a float", m_.where(node), name));
    return a->f;
  }
  std::vector<int64_t> attr_ints(const OnnxNode& node, const char* name,
                                 std::vector<int64_t> fallback) const {
    const OnnxAttribute* a = attr(node, name);
    if (!a) return fallback;
    if (a->kind != OnnxAttribute::Kind::Ints)
      throw OnnxError(fmt::format("{}attribute {} is not a list of integers", m_.where(node), name));
    return a->ints;
  }
  [[noreturn]] void unsupported(const OnnxNode& node, const std::string& what) const {
    throw OnnxError(fmt::format("{}{} is not supported", m_.where(node), what));
  }
  /// Refuses every attribute of `node` outside `known`.
  void only_attributes(const OnnxNode& node, std::initializer_list<const char*> known) const {
    for (const auto& entry : node.attributes) {  // no structured binding: clang cannot capture one
      const std::string& name = entry.first;
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return name == k; }))
        unsupported(node, fmt::format("attribute '{}'", name));
    }
  }
  const std::string& input(const OnnxNode& node, size_t i) const {
    static const std::string none;
    return i < node.inputs.size() ? node.inputs[i] : none;
  }

  // ---- the nodes ----

  void lower_node(const OnnxNode& node) {
    static const std::map<std::string, Mapper> mappers = {
        {"Add", &Lowerer::map_add},
        {"Conv", &Lowerer::map_conv},
        {"Sub", &Lowerer::map_sub},
        {"Mul", &Lowerer::map_mul},
        {"Div", &Lowerer::map_div},
        {"Dropout", &Lowerer::map_dropout},
        {"BatchNormalization", &Lowerer::map_batch_norm},
        {"Flatten", &Lowerer::map_flatten},
        {"Gemm", &Lowerer::map_gemm},
        {"Identity", &Lowerer::map_identity},
        {"MatMul", &Lowerer::map_matmul},
        {"MaxPool", &Lowerer::map_maxpool},
        {"GlobalAveragePool", &Lowerer::map_global_average_pool},
        {"Relu", &Lowerer::map_relu},
        {"Reshape", &Lowerer::map_reshape},
        {"Gather", &Lowerer::map_gather},
        {"Transpose", &Lowerer::map_transpose},
        {"Slice", &Lowerer::map_slice},
        {"Split", &Lowerer::map_split},
        {"Concat", &Lowerer::map_concat},
        {"Where", &Lowerer::map_where},
        {"Softmax", &Lowerer::map_softmax},
        {"LayerNormalization", &Lowerer::map_layer_norm},
        {"Pow", &Lowerer::map_pow},
        {"Cast", &Lowerer::map_cast},
        {"Unsqueeze", &Lowerer::map_unsqueeze},
        {"Squeeze", &Lowerer::map_squeeze},
        {"Neg", &Lowerer::map_unary},
        {"Reciprocal", &Lowerer::map_unary},
        {"Sqrt", &Lowerer::map_unary},
        {"Exp", &Lowerer::map_unary},
        {"Log", &Lowerer::map_unary},
        {"Tanh", &Lowerer::map_unary},
        {"Erf", &Lowerer::map_unary},
        {"Sigmoid", &Lowerer::map_unary},
        {"Sin", &Lowerer::map_unary},
        {"Cos", &Lowerer::map_unary},
        {"ReduceMean", &Lowerer::map_reduce_mean},
        {"Expand", &Lowerer::map_expand},
    };
    if (node.op_type == "Shape") {  // every shape is static after import: Shape always folds
      define(node, 0, const_val(fold_shape(node, dims_of(input(node, 0), &node), m_.where(node))));
      return;
    }
    if (is_foldable(node.op_type) && all_inputs_foldable(node)) {
      std::vector<const OnnxConstant*> in;
      for (const std::string& name : node.inputs)
        in.push_back(name.empty() ? nullptr : &value(name, &node).c);
      auto out = fold_constant(node, in, m_.opset(), m_.where(node), uint64_t{1} << 29);
      for (size_t s = 0; s < out.size(); ++s) define(node, s, const_val(std::move(out[s])));
      return;
    }
    auto it = mappers.find(node.op_type);
    if (it == mappers.end()) {
      if (is_foldable(node.op_type))
        throw OnnxError(
            fmt::format("{}the op is supported only on constant inputs (folded at import), and input "
                        "'{}' is computed at run time",
                        m_.where(node), first_runtime_input(node)));
      throw OnnxError(fmt::format("{}op type {} is not supported (supported: {})", m_.where(node),
                                  node.op_type, fmt::join(onnx_supported_ops(), ", ")));
    }
    (this->*it->second)(node);
  }

  /// Every present input a constant that no parameter is among: float initializers are weights,
  /// which stay run-time values even through a Reshape or an Identity, so training updates them.
  bool all_inputs_foldable(const OnnxNode& node) const {
    for (const std::string& name : node.inputs) {
      if (name.empty()) continue;
      const Val& v = value(name, &node);
      if (!v.is_const || v.float_initializer) return false;
    }
    return true;
  }
  std::string first_runtime_input(const OnnxNode& node) const {
    for (const std::string& name : node.inputs)
      if (!name.empty() && !value(name, &node).is_const) return name;
    for (const std::string& name : node.inputs)
      if (!name.empty()) return name;
    return "";
  }

  static Val const_val(OnnxConstant c) {
    Val v;
    v.is_const = true;
    v.c = std::move(c);
    return v;
  }

  void map_identity(const OnnxNode& node) { vals_[node.outputs.at(0)] = value(input(node, 0), &node); }

  void map_relu(const OnnxNode& node) {
    only_attributes(node, {});
    define(node, 0, emit_one(OpKind::Relu, {}, {runtime(input(node, 0), &node)}, node.name, &node));
  }

  // Add of equal shapes stays RepOps `add` (the graphs lowered before broadcast_binary existed keep
  // their nodes); Add of other shapes, and every Sub, Mul and Div, is `broadcast_binary` with ONNX's
  // multidirectional (NumPy) broadcasting. Shapes that do not broadcast are refused by its shape rule,
  // naming both shapes.
  void map_add(const OnnxNode& node) {
    only_attributes(node, {});
    const auto a = dims_of(input(node, 0), &node), b = dims_of(input(node, 1), &node);
    if (a != b) return map_binary(node, 0);
    define(node, 0,
           emit_one(OpKind::Add, {}, {runtime(input(node, 0), &node), runtime(input(node, 1), &node)},
                    node.name, &node));
  }
  void map_sub(const OnnxNode& node) { map_binary(node, 1); }
  void map_mul(const OnnxNode& node) { map_binary(node, 2); }
  void map_div(const OnnxNode& node) { map_binary(node, 3); }
  /// broadcast_binary with op `code` (0 add, 1 sub, 2 mul, 3 div) of the node's two inputs.
  void map_binary(const OnnxNode& node, int64_t code) {
    only_attributes(node, {});
    if (node.inputs.size() != 2 || input(node, 0).empty() || input(node, 1).empty())
      unsupported(node, fmt::format("{} inputs (two expected)", node.inputs.size()));
    define(node, 0,
           emit_one(OpKind::BroadcastBinary, {{code}, {}},
                    {runtime(input(node, 0), &node), runtime(input(node, 1), &node)}, node.name, &node));
  }

  // Gemm: Y = alpha·op(A)·op(B) + beta·C. RepOps Linear computes x·w + b (w[K,N]) or, with ints {1},
  // x·wᵀ + b (w[N,K], nn.Linear's layout), so alpha = beta = 1 and transA = 0 map exactly.
  void map_gemm(const OnnxNode& node) {
    only_attributes(node, {"alpha", "beta", "transA", "transB"});
    if (attr_float(node, "alpha", 1.0f) != 1.0f) unsupported(node, "alpha ≠ 1");
    if (attr_int(node, "transA", 0) != 0) unsupported(node, "transA = 1");
    const int64_t trans_b = attr_int(node, "transB", 0);
    const LoweredRef a = runtime(input(node, 0), &node), b = runtime(input(node, 1), &node);
    const std::string& c_name = input(node, 2);
    if (c_name.empty()) {
      define(node, 0, emit_one(OpKind::Matmul, Attrs{{0, trans_b}, {}}, {a, b}, node.name, &node));
      return;
    }
    if (attr_float(node, "beta", 1.0f) != 1.0f) unsupported(node, "beta ≠ 1");
    const auto b_dims = dims_of(input(node, 1), &node);
    const int64_t n = b_dims.size() == 2 ? b_dims[trans_b ? 0 : 1] : -1;
    auto c_dims = dims_of(c_name, &node);
    LoweredRef c = runtime(c_name, &node);
    if (c_dims.size() == 2 && c_dims[0] == 1) {  // C[1, N]: the same bias as C[N]
      c = emit_one(OpKind::Reshape, Attrs{{c_dims[1]}, {}}, {c}, node.name + ".bias", &node).ref;
      c_dims = {c_dims[1]};
    }
    if (c_dims.size() != 1 || c_dims[0] != n)
      unsupported(node, fmt::format("C of shape {} (a bias [N] or [1, N], N = {})", dims_str(c_dims), n));
    const Attrs attrs = trans_b ? Attrs{{1}, {}} : Attrs{};
    define(node, 0, emit_one(OpKind::Linear, attrs, {a, b, c}, node.name, &node));
  }

  // MatMul with NumPy semantics for the shapes RepOps runs: [M,K]·[K,N]; rows of any leading shape
  // times one matrix, [..., K]·[K,N] → Reshape [rows, K] · [K,N] → Reshape [..., N]; and equal batch
  // dims, [..., M,K]·[..., K,N] → Reshape [batch, M, K] (·) [batch, K, N] → Reshape [..., M, N]. A
  // pending 2-D Transpose operand (map_transpose) becomes the product's trans_a/trans_b.
  void map_matmul(const OnnxNode& node) {
    only_attributes(node, {});
    const auto a = dims_of(input(node, 0), &node), b = dims_of(input(node, 1), &node);
    const auto [ra, ta] = matmul_operand(input(node, 0), node);
    const auto [rb, tb] = matmul_operand(input(node, 1), node);
    const auto product = [](std::span<const int64_t> d) {
      int64_t n = 1;
      for (int64_t v : d) n *= v;
      return n;
    };
    if (a.size() == 2 && b.size() == 2) {
      define(node, 0, emit_one(OpKind::Matmul, Attrs{{ta, tb}, {}}, {ra, rb}, node.name, &node));
      return;
    }
    if (a.size() > 2 && b.size() == 2) {
      const int64_t rows = product(std::span(a).first(a.size() - 1));
      const Val flat =
          emit_one(OpKind::Reshape, Attrs{{rows, a.back()}, {}}, {ra}, node.name + ".rows", &node);
      const Val prod = emit_one(OpKind::Matmul, Attrs{{0, tb}, {}}, {flat.ref, rb}, node.name, &node);
      std::vector<int64_t> out(a.begin(), a.end() - 1);
      out.push_back(b[1]);
      define(node, 0, emit_one(OpKind::Reshape, Attrs{out, {}}, {prod.ref}, node.name + ".out", &node));
      return;
    }
    if (a.size() == b.size() && a.size() >= 3 && std::equal(a.begin(), a.end() - 2, b.begin())) {
      if (a.size() == 3) {
        define(node, 0, emit_one(OpKind::Matmul, Attrs{{0, 0}, {}}, {ra, rb}, node.name, &node));
        return;
      }
      const int64_t batch = product(std::span(a).first(a.size() - 2));
      const size_t r = a.size();
      const Val a3 =
          emit_one(OpKind::Reshape, Attrs{{batch, a[r - 2], a[r - 1]}, {}}, {ra}, node.name + ".a", &node);
      const Val b3 =
          emit_one(OpKind::Reshape, Attrs{{batch, b[r - 2], b[r - 1]}, {}}, {rb}, node.name + ".b", &node);
      const Val prod = emit_one(OpKind::Matmul, Attrs{{0, 0}, {}}, {a3.ref, b3.ref}, node.name, &node);
      std::vector<int64_t> out(a.begin(), a.end() - 1);
      out.push_back(b[r - 1]);
      define(node, 0, emit_one(OpKind::Reshape, Attrs{out, {}}, {prod.ref}, node.name + ".out", &node));
      return;
    }
    unsupported(node, fmt::format("MatMul of {} and {} (supported: [M,K]·[K,N], [...,K]·[K,N] and "
                                  "[...,M,K]·[...,K,N] with equal batch dims)",
                                  dims_str(a), dims_str(b)));
  }

  // Conv → RepOps Conv2d: 2-D, one group, no dilation, one stride and one padding for both axes.
  /// ONNX Conv (2-D) onto OpKind::Conv2d: the short form {stride, pad} where one stride, one padding
  /// on every side, no dilation and one group describe the node (the bytes of jobs lowered before
  /// the general form existed), else the general form of nine ints (ops/registry.h). auto_pad VALID,
  /// SAME_UPPER and SAME_LOWER are lowered to explicit pads.
  void map_conv(const OnnxNode& node) {
    only_attributes(node, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    const OnnxAttribute* pad_mode = attr(node, "auto_pad");
    const std::string mode = pad_mode ? pad_mode->s : "NOTSET";
    if (mode != "NOTSET" && mode != "VALID" && mode != "SAME_UPPER" && mode != "SAME_LOWER")
      unsupported(node, fmt::format("auto_pad = {}", mode));
    const auto x = dims_of(input(node, 0), &node);
    const auto w = dims_of(input(node, 1), &node);
    if (w.size() != 4 || x.size() != 4)
      unsupported(node, fmt::format("a {}-D convolution (2-D only)", static_cast<int64_t>(w.size()) - 2));
    const int64_t group = attr_int(node, "group", 1);
    if (group < 1 || x[1] != w[1] * group || w[0] % group != 0)
      unsupported(node,
                  fmt::format("group = {} with an input of shape {} and weights {} (needs C = group·W[1] "
                              "and group dividing W[0])",
                              group, dims_str(x), dims_str(w)));
    const auto kernel = attr_ints(node, "kernel_shape", {w[2], w[3]});
    if (kernel != std::vector<int64_t>{w[2], w[3]})
      unsupported(node, fmt::format("kernel_shape {} differing from the weight's {}", dims_str(kernel),
                                    dims_str(std::vector<int64_t>{w[2], w[3]})));
    const auto strides = attr_ints(node, "strides", {1, 1});
    const auto dilations = attr_ints(node, "dilations", {1, 1});
    auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
    if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
      unsupported(node, fmt::format("strides {}, dilations {}, pads {} (2-D only)", dims_str(strides),
                                    dims_str(dilations), dims_str(pads)));
    int64_t extent[2];
    for (size_t a = 0; a < 2; ++a) {
      if (strides[a] < 1 || dilations[a] < 1)
        unsupported(
            node, fmt::format("strides {}, dilations {} (each ≥ 1)", dims_str(strides), dims_str(dilations)));
      extent[a] = (w[a + 2] - 1) * dilations[a] + 1;
    }
    if (mode == "VALID") pads = {0, 0, 0, 0};
    if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      // Output ⌈H/stride⌉, as ONNX's shape inference: the odd pad goes at the end (UPPER) or the start
      // (LOWER). Each pad is below the kernel extent, as (⌈H/s⌉ − 1)·s < H.
      for (size_t a = 0; a < 2; ++a) {
        const int64_t out = (x[a + 2] + strides[a] - 1) / strides[a];
        const int64_t total = std::max<int64_t>(0, (out - 1) * strides[a] + extent[a] - x[a + 2]);
        const int64_t small = total / 2, large = total - small;
        pads[a] = mode == "SAME_UPPER" ? small : large;
        pads[a + 2] = mode == "SAME_UPPER" ? large : small;
      }
    }
    for (size_t a = 0; a < 2; ++a)
      if (pads[a] < 0 || pads[a + 2] < 0 || pads[a] >= extent[a] || pads[a + 2] >= extent[a])
        unsupported(node, fmt::format("pads {} with a kernel extent {}×{} (each pad ≥ 0 and smaller than its "
                                      "dilated kernel side)",
                                      dims_str(pads), extent[0], extent[1]));
    LoweredRef bias;
    if (input(node, 2).empty()) {  // no bias: a +0 bias adds nothing (x + 0 = x, and −0 + +0 = +0 as RepOps'
                                   // chain starts)
      bias = zero_constant(w[0]);
    } else {
      bias = runtime(input(node, 2), &node);
    }
    const bool short_form = group == 1 && dilations == std::vector<int64_t>{1, 1} &&
                            strides[0] == strides[1] &&
                            std::all_of(pads.begin(), pads.end(), [&](int64_t p) { return p == pads[0]; });
    Attrs attrs;
    if (short_form)
      attrs.ints = {strides[0], pads[0]};
    else
      attrs.ints = {strides[0], strides[1],   pads[0],      pads[1], pads[2],
                    pads[3],    dilations[0], dilations[1], group};
    define(
        node, 0,
        emit_one(OpKind::Conv2d, attrs,
                 {runtime(input(node, 0), &node), runtime(input(node, 1), &node), bias}, node.name, &node));
  }

  LoweredRef zero_constant(int64_t n) { return add_constant(Tensor(Shape{n})); }

  LoweredRef add_constant(Tensor t) {
    g_.constants.push_back(std::move(t));
    return {LoweredRef::Kind::Constant, static_cast<uint32_t>(g_.constants.size() - 1), 0};
  }

  /// A constant's values as a float tensor: int64 values (a Gather's indices, a Where's condition) are
  /// converted exactly, so they must lie within ±2²⁴.
  LoweredRef float_constant(const OnnxConstant& c, const OnnxNode& node, const char* role) {
    if (c.dims.size() > static_cast<size_t>(kMaxRank))
      unsupported(node, fmt::format("a {} of rank {} (RepOps tensors have rank ≤ {})", role, c.dims.size(),
                                    kMaxRank));
    Tensor t(Shape(std::span<const int64_t>(c.dims)));
    if (c.type == OnnxConstant::Type::Float32) {
      std::copy(c.floats.begin(), c.floats.end(), t.values().begin());
    } else {
      for (size_t i = 0; i < c.ints.size(); ++i) {
        if (c.ints[i] < -(int64_t{1} << 24) || c.ints[i] > (int64_t{1} << 24))
          unsupported(node,
                      fmt::format("a {} value {} (outside ±2^24, not exact as float)", role, c.ints[i]));
        t[static_cast<int64_t>(i)] = static_cast<float>(c.ints[i]);
      }
    }
    return add_constant(std::move(t));
  }

  // MaxPool → RepOps MaxPool2d: 2-D, floor mode, no dilation. The 2×2 window with stride 2, no padding
  // and even H, W lowers to ints {} (the bytes the built-in CNN's pooling has always had); any other
  // window to the general form {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right}
  // (ONNX's pads are [top, left, bottom, right]; padding is −inf, never chosen).
  void map_maxpool(const OnnxNode& node) {
    only_attributes(
        node, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
    const OnnxAttribute* pad_mode = attr(node, "auto_pad");
    const std::string mode = pad_mode ? pad_mode->s : "NOTSET";
    if (mode != "NOTSET" && mode != "VALID" && mode != "SAME_UPPER" && mode != "SAME_LOWER")
      unsupported(node, fmt::format("auto_pad = {}", mode));
    // The Indices output is left undefined: a node reading it is refused there (storage_order only
    // changes Indices).
    const auto x = dims_of(input(node, 0), &node);
    if (x.size() != 4)
      unsupported(node, fmt::format("an input of shape {} (MaxPool needs [N, C, H, W])", dims_str(x)));
    const auto kernel = attr_ints(node, "kernel_shape", {});
    const auto strides = attr_ints(node, "strides", {1, 1});
    auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
    const auto dilations = attr_ints(node, "dilations", {1, 1});
    if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
      unsupported(node, fmt::format("kernel_shape {}, strides {}, pads {} (a 2-D window only)",
                                    dims_str(kernel), dims_str(strides), dims_str(pads)));
    if (dilations != std::vector<int64_t>{1, 1})
      unsupported(node, fmt::format("dilations {} (only 1)", dims_str(dilations)));
    if (attr_int(node, "ceil_mode", 0) != 0) unsupported(node, "ceil_mode = 1 (only floor mode)");
    if (mode == "VALID") pads = {0, 0, 0, 0};
    if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      // Output ⌈H/stride⌉, as ONNX's shape inference: the odd pad goes at the end (UPPER) or the start
      // (LOWER). A total pad is below the kernel side, as (⌈H/s⌉ − 1)·s < H.
      for (size_t a = 0; a < 2; ++a) {
        if (strides[a] < 1 || kernel[a] < 1) break;  // refused below
        const int64_t out = (x[a + 2] + strides[a] - 1) / strides[a];
        const int64_t total = std::max<int64_t>(0, (out - 1) * strides[a] + kernel[a] - x[a + 2]);
        const int64_t small = total / 2, large = total - small;
        pads[a] = mode == "SAME_UPPER" ? small : large;
        pads[a + 2] = mode == "SAME_UPPER" ? large : small;
      }
    }
    for (size_t a = 0; a < 2; ++a) {
      if (kernel[a] < 1 || kernel[a] > 8 || strides[a] < 1 || pads[a] < 0 || pads[a + 2] < 0 ||
          pads[a] >= kernel[a] || pads[a + 2] >= kernel[a])
        unsupported(node, fmt::format("kernel_shape {}, strides {}, pads {} (kernel sides 1..8, strides ≥ 1, "
                                      "each pad ≥ 0 and smaller than its kernel side)",
                                      dims_str(kernel), dims_str(strides), dims_str(pads)));
      if (x[a + 2] + pads[a] + pads[a + 2] < kernel[a])
        unsupported(node, fmt::format("an input of shape {} smaller than the padded {} window", dims_str(x),
                                      dims_str(kernel)));
    }
    const bool legacy = kernel == std::vector<int64_t>{2, 2} && strides == std::vector<int64_t>{2, 2} &&
                        pads == std::vector<int64_t>{0, 0, 0, 0} && x[2] % 2 == 0 && x[3] % 2 == 0;
    Attrs attrs;
    if (!legacy)
      attrs.ints = {kernel[0], kernel[1], strides[0], strides[1], pads[0], pads[1], pads[2], pads[3]};
    define(node, 0, emit_one(OpKind::MaxPool2d, attrs, {runtime(input(node, 0), &node)}, node.name, &node));
  }

  // GlobalAveragePool → RepOps GlobalAvgPool: x[N, C, H, W] → [N, C, 1, 1], canonical sum / float(H·W).
  void map_global_average_pool(const OnnxNode& node) {
    only_attributes(node, {});
    const auto x = dims_of(input(node, 0), &node);
    if (x.size() != 4 || x[2] < 1 || x[3] < 1)
      unsupported(node, fmt::format("an input of shape {} (GlobalAveragePool needs [N, C, H, W], H, W ≥ 1)",
                                    dims_str(x)));
    define(node, 0, emit_one(OpKind::GlobalAvgPool, {}, {runtime(input(node, 0), &node)}, node.name, &node));
  }

  void map_flatten(const OnnxNode& node) {
    only_attributes(node, {"axis"});
    const auto d = dims_of(input(node, 0), &node);
    int64_t axis = attr_int(node, "axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(d.size());
    if (axis < 0 || axis > static_cast<int64_t>(d.size()))
      unsupported(node, fmt::format("axis {} for rank {}", attr_int(node, "axis", 1), d.size()));
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
      (i < axis ? outer : inner) *= d[static_cast<size_t>(i)];
    reshape_to(node, {outer, inner});
  }

  void map_reshape(const OnnxNode& node) {
    only_attributes(node, {"allowzero"});
    const OnnxConstant& target = constant(input(node, 1), node, "shape");
    if (target.type != OnnxConstant::Type::Int64 || target.dims.size() != 1)
      unsupported(node, "a shape input that is not a 1-D int64 tensor");
    const auto d = dims_of(input(node, 0), &node);
    const bool allow_zero = attr_int(node, "allowzero", 0) != 0;
    std::vector<int64_t> out;
    int64_t known = 1, infer_at = -1, total = 1;
    for (int64_t x : d) total *= x;
    for (size_t i = 0; i < target.ints.size(); ++i) {
      int64_t v = target.ints[i];
      if (v == 0 && !allow_zero) {
        if (i >= d.size())
          unsupported(node,
                      fmt::format("shape {} copying a dimension the input lacks", dims_str(target.ints)));
        v = d[i];
      }
      if (v == -1) {
        if (infer_at >= 0) unsupported(node, fmt::format("shape {} with two −1", dims_str(target.ints)));
        infer_at = static_cast<int64_t>(i);
        out.push_back(1);
        continue;
      }
      if (v < 0) unsupported(node, fmt::format("shape {}", dims_str(target.ints)));
      known *= v;
      out.push_back(v);
    }
    if (infer_at >= 0) {
      if (known == 0 || total % known != 0)
        unsupported(node, fmt::format("shape {} for {} elements", dims_str(target.ints), total));
      out[static_cast<size_t>(infer_at)] = total / known;
    }
    reshape_to(node, out);
  }

  void reshape_to(const OnnxNode& node, std::vector<int64_t> dims) {
    const Val& in = value(input(node, 0), &node);
    if (!in.index && (dims.size() > static_cast<size_t>(kMaxRank) || !in.wide.empty())) {
      // A wide value in or out (Val::wide): the row-major elements are the same either way.
      const LoweredRef x = in.wide.empty() ? runtime(input(node, 0), &node) : in.ref;
      define(node, 0, reshaped(x, std::move(dims), node.name, node));
      return;
    }
    if (dims.size() > static_cast<size_t>(kMaxRank))
      unsupported(node,
                  fmt::format("a result of rank {} (RepOps tensors have rank ≤ {})", dims.size(), kMaxRank));
    if (in.index) {  // token ids keep being ids through a view (Hugging Face's input_ids.view(-1, T))
      Val out = emit_one(OpKind::Reshape, Attrs{std::move(dims), {}}, {in.ref}, node.name, &node);
      out.index = true;
      define(node, 0, out);
      return;
    }
    define(node, 0,
           emit_one(OpKind::Reshape, Attrs{std::move(dims), {}}, {runtime(input(node, 0), &node)}, node.name,
                    &node));
  }

  /// `x` as a value of ONNX dims `dims`: a reshape to them, or, above rank 4, to the flat [numel] of a
  /// wide value.
  Val reshaped(LoweredRef x, std::vector<int64_t> dims, const std::string& name, const OnnxNode& node) {
    if (dims.size() <= static_cast<size_t>(kMaxRank))
      return emit_one(OpKind::Reshape, Attrs{std::move(dims), {}}, {x}, name, &node);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    Val v = emit_one(OpKind::Reshape, Attrs{{n}, {}}, {x}, name, &node);
    v.wide = std::move(dims);
    return v;
  }

  // Dropout(data, ratio, training_mode): RepOps Dropout when the step trains and the node is in
  // training mode with a ratio > 0; an identity otherwise (ONNX: inference mode passes data through).
  void map_dropout(const OnnxNode& node) {
    only_attributes(node, {"seed"});
    // The mask output (torch always names it) is left undefined: a node reading it is refused there.
    float ratio = 0.5f;
    if (!input(node, 1).empty()) {
      const OnnxConstant& r = constant(input(node, 1), node, "ratio");
      if (r.type != OnnxConstant::Type::Float32 || r.elements() != 1)
        unsupported(node, "a ratio that is not a float scalar");
      ratio = r.floats[0];
    }
    bool training_mode = false;
    if (!input(node, 2).empty()) {
      const OnnxConstant& t = constant(input(node, 2), node, "training_mode");
      training_mode =
          t.elements() == 1 && (t.type == OnnxConstant::Type::Int64 ? t.ints[0] != 0 : t.floats[0] != 0.0f);
    }
    if (!(ratio >= 0.0f && ratio < 1.0f)) unsupported(node, fmt::format("ratio {} (outside [0, 1))", ratio));
    if (!opt_.training || !training_mode || ratio == 0.0f) {
      vals_[node.outputs.at(0)] = value(input(node, 0), &node);
      return;
    }
    const Attrs attrs{
        {static_cast<int64_t>(opt_.seed), opt_.step, dropout_site_++ * opt_.shards + opt_.shard}, {ratio}};
    define(node, 0, emit_one(OpKind::Dropout, attrs, {runtime(input(node, 0), &node)}, node.name, &node));
  }

  // BatchNormalization (Ioffe & Szegedy 2015; ONNX BatchNormalization-15) over the channel axis 1 of
  // x [N, C, …] (rank 2–4). In a training step, a training-mode node normalizes by the batch's
  // statistics (RepOps BatchNorm) and its outputs 1 and 2 are the running mean and variance updated
  // with `momentum` (BatchNormRunning); where its running inputs are buffers, those outputs are the
  // buffers' next values. Evaluation, and a node in inference mode, normalize by the running
  // statistics (BatchNormInference): PyTorch's train()/eval(). The running variance takes the batch's
  // unbiased variance in a file PyTorch wrote (torch.nn.BatchNorm2d does; ONNX's own definition takes
  // the biased one): docs/onnx.md "Parameters and buffers".
  void map_batch_norm(const OnnxNode& node) {
    only_attributes(node, {"epsilon", "momentum", "training_mode"});
    const auto d = dims_of(input(node, 0), &node);
    if (d.size() < 2 || d.size() > 4)
      unsupported(node, fmt::format("an input of rank {} (rank 2 to 4, channels on axis 1)", d.size()));
    const float eps = attr_float(node, "epsilon", 1e-5f), momentum = attr_float(node, "momentum", 0.9f);
    const bool training_mode = attr_int(node, "training_mode", 0) != 0;
    const LoweredRef x = runtime(input(node, 0), &node), gamma = runtime(input(node, 1), &node),
                     beta = runtime(input(node, 2), &node);
    const LoweredRef mean = runtime(input(node, 3), &node), var = runtime(input(node, 4), &node);
    // An inference-mode node in a training step (frozen statistics, torch's TrainingMode.PRESERVE of a
    // BatchNorm in eval()): its scale and shift would be trained, but batch_norm_inference has no VJP.
    if (opt_.training && !training_mode)
      unsupported(node,
                  "training_mode = 0 in a training step (a BatchNorm frozen in eval(): its gradients are not "
                  "implemented; export with training=torch.onnx.TrainingMode.TRAINING)");
    if (!opt_.training || !training_mode) {
      for (size_t s = 1; s < node.outputs.size(); ++s)
        if (!node.outputs[s].empty() && training_mode)  // evaluation: the running statistics stay
          vals_[node.outputs[s]] = value(input(node, 2 + s), &node);
      define(node, 0,
             emit_one(OpKind::BatchNormInference, Attrs{{}, {eps}}, {x, gamma, beta, mean, var}, node.name,
                      &node));
      return;
    }
    define(node, 0, emit_one(OpKind::BatchNorm, Attrs{{}, {eps}}, {x, gamma, beta}, node.name, &node));
    const int64_t var_stat = m_.producer() == "pytorch" ? 2 : 1;  // unbiased as torch, biased as ONNX
    const LoweredRef running[2] = {mean, var};
    for (int64_t s = 1; s <= 2; ++s) {
      const Val next =
          emit_one(OpKind::BatchNormRunning, Attrs{{s == 1 ? 0 : var_stat}, {momentum}}, {running[s - 1], x},
                   node.name + (s == 1 ? ".running_mean" : ".running_var"), &node);
      if (running[s - 1].kind == LoweredRef::Kind::Buffer) buffer_updates_[running[s - 1].index] = next.ref;
      define(node, static_cast<size_t>(s), next);
    }
  }

  /// `axis` of a rank-`rank` value, negative counting from the end; refused outside [−rank, rank).
  int64_t normalized_axis(const OnnxNode& node, int64_t axis, size_t rank) const {
    const auto r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= r) unsupported(node, fmt::format("axis {} for rank {}", axis, rank));
    return axis < 0 ? axis + r : axis;
  }

  // Gather along axis 0 → gather_rows: embeddings (a table read with the token ids fed at run time) and
  // tables read at constant positions (wpe at Range(0, T)). Negative constant indices count from the end.
  void map_gather(const OnnxNode& node) {
    only_attributes(node, {"axis"});
    const auto d = dims_of(input(node, 0), &node);
    if (d.empty()) unsupported(node, "a Gather from a scalar");
    if (normalized_axis(node, attr_int(node, "axis", 0), d.size()) != 0)
      unsupported(node, fmt::format("Gather along axis {} of a run-time tensor (axis 0 only)",
                                    attr_int(node, "axis", 0)));
    const LoweredRef table = runtime(input(node, 0), &node);
    const Val& ids = value(input(node, 1), &node);
    LoweredRef ids_ref;
    if (ids.is_const) {
      if (ids.c.type != OnnxConstant::Type::Int64) unsupported(node, "float indices");
      OnnxConstant c = ids.c;
      for (int64_t& i : c.ints) {
        if (i < -d[0] || i >= d[0]) unsupported(node, fmt::format("index {} into {} rows", i, d[0]));
        if (i < 0) i += d[0];
      }
      ids_ref = float_constant(c, node, "Gather index tensor");
    } else if (ids.index) {
      ids_ref = ids.ref;
    } else {
      unsupported(node, fmt::format("indices '{}' computed at run time from float values", input(node, 1)));
    }
    define(node, 0, emit_one(OpKind::GatherRows, {}, {table, ids_ref}, node.name, &node));
  }

  // Transpose → RepOps transpose. A 2-D one stays pending so that a MatMul reads it as trans_a/trans_b.
  void map_transpose(const OnnxNode& node) {
    only_attributes(node, {"perm"});
    const auto d = dims_of(input(node, 0), &node);
    std::vector<int64_t> perm(d.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
    perm = attr_ints(node, "perm", perm);
    if (perm.size() != d.size())
      unsupported(node, fmt::format("perm {} for rank {}", dims_str(perm), d.size()));
    const LoweredRef x = runtime(input(node, 0), &node);
    if (perm == std::vector<int64_t>{1, 0}) {
      Val v;
      v.ref = x;
      v.shape = Shape{d[1], d[0]};
      v.lazy_transpose = true;
      define(node, 0, v);
      return;
    }
    define(node, 0, emit_one(OpKind::Transpose, Attrs{perm, {}}, {x}, node.name, &node));
  }

  /// The RepOps operand of a MatMul input: a pending 2-D transpose's source with its trans flag set.
  std::pair<LoweredRef, int64_t> matmul_operand(const std::string& name, const OnnxNode& node) {
    value(name, &node);
    const Val& v = vals_.at(name);
    if (v.lazy_transpose) return {v.ref, 1};
    return {runtime(name, &node), 0};
  }

  // Slice with constant starts/ends/axes/steps → one RepOps slice per sliced axis (positive steps).
  void map_slice(const OnnxNode& node) {
    only_attributes(node, {});
    auto d = dims_of(input(node, 0), &node);
    const auto ints = [&](size_t i, const char* role) -> std::vector<int64_t> {
      const OnnxConstant& c = constant(input(node, i), node, role);
      if (c.type != OnnxConstant::Type::Int64 || c.dims.size() != 1)
        unsupported(node, fmt::format("{} that are not a 1-D int64 tensor", role));
      return c.ints;
    };
    const auto starts = ints(1, "starts"), ends = ints(2, "ends");
    std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
    if (!input(node, 3).empty()) axes = ints(3, "axes");
    if (!input(node, 4).empty()) steps = ints(4, "steps");
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      unsupported(node, "starts, ends, axes and steps of different lengths");
    LoweredRef x = runtime(input(node, 0), &node);
    Val out = value(input(node, 0), &node);
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t axis = normalized_axis(node, axes[k], d.size()), dim = d[static_cast<size_t>(axis)];
      if (steps[k] < 1) unsupported(node, fmt::format("step {} (positive steps only)", steps[k]));
      const auto clamp = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
      const int64_t start = clamp(starts[k]), end = std::max(start, clamp(ends[k]));
      if (start == 0 && end == dim && steps[k] == 1) continue;  // the whole axis
      if (end == start) unsupported(node, "an empty slice");
      out = emit_one(OpKind::Slice, Attrs{{axis, start, end, steps[k]}, {}}, {x},
                     k + 1 == starts.size() ? node.name : fmt::format("{}.axis{}", node.name, axis), &node);
      x = out.ref;
      d[static_cast<size_t>(axis)] = (end - start + steps[k] - 1) / steps[k];
    }
    define(node, 0, out);
  }

  // Split along an axis (sizes from the input, or equal parts) → one RepOps slice per output.
  void map_split(const OnnxNode& node) {
    only_attributes(node, {"axis"});
    const auto d = dims_of(input(node, 0), &node);
    const int64_t axis = normalized_axis(node, attr_int(node, "axis", 0), d.size());
    const int64_t dim = d[static_cast<size_t>(axis)], parts = static_cast<int64_t>(node.outputs.size());
    std::vector<int64_t> sizes;
    if (!input(node, 1).empty()) {
      const OnnxConstant& c = constant(input(node, 1), node, "split");
      if (c.type != OnnxConstant::Type::Int64) unsupported(node, "a split that is not int64");
      sizes = c.ints;
    } else {
      if (dim % parts != 0) unsupported(node, fmt::format("{} equal parts of {}", parts, dim));
      sizes.assign(static_cast<size_t>(parts), dim / parts);
    }
    int64_t total = 0;
    bool positive = true;
    for (int64_t v : sizes) {
      positive = positive && v >= 1 && v <= dim;
      if (positive) total += v;  // at most parts · dim: no overflow
    }
    if (static_cast<int64_t>(sizes.size()) != parts || !positive || total != dim)
      unsupported(node,
                  fmt::format("split {} of a dimension {} into {} outputs", dims_str(sizes), dim, parts));
    const LoweredRef x = runtime(input(node, 0), &node);
    int64_t start = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      define(node, k,
             emit_one(OpKind::Slice, Attrs{{axis, start, start + sizes[k], 1}, {}}, {x},
                      fmt::format("{}.{}", node.name, k), &node));
      start += sizes[k];
    }
  }

  void map_concat(const OnnxNode& node) {
    only_attributes(node, {"axis"});
    const auto d = dims_of(input(node, 0), &node);
    const int64_t axis = normalized_axis(node, attr_int(node, "axis", 0), d.size());
    std::vector<LoweredRef> in;
    for (const std::string& name : node.inputs) in.push_back(runtime(name, &node));
    define(node, 0, emit_one(OpKind::Concat, Attrs{{axis}, {}}, std::move(in), node.name, &node));
  }

  // Where(condition, a, b) with a constant condition (a causal mask, folded at import) → RepOps where.
  void map_where(const OnnxNode& node) {
    only_attributes(node, {});
    const Val& cond = value(input(node, 0), &node);
    if (!cond.is_const)
      unsupported(node, fmt::format("a condition '{}' computed at run time (constant conditions only)",
                                    input(node, 0)));
    const LoweredRef c = float_constant(cond.c, node, "condition");
    define(node, 0,
           emit_one(OpKind::Where, {}, {c, runtime(input(node, 1), &node), runtime(input(node, 2), &node)},
                    node.name, &node));
  }

  // Softmax over the last axis → RepOps softmax (causal 0, scale 1); a vector goes through [1, N].
  void map_softmax(const OnnxNode& node) {
    only_attributes(node, {"axis"});
    const auto d = dims_of(input(node, 0), &node);
    if (d.empty()) unsupported(node, "a Softmax of a scalar");
    if (normalized_axis(node, attr_int(node, "axis", -1), d.size()) != static_cast<int64_t>(d.size()) - 1)
      unsupported(node, fmt::format("axis {} (the last axis only)", attr_int(node, "axis", -1)));
    LoweredRef x = runtime(input(node, 0), &node);
    if (d.size() == 1)
      x = emit_one(OpKind::Reshape, Attrs{{1, d[0]}, {}}, {x}, node.name + ".row", &node).ref;
    Val y = emit_one(OpKind::Softmax, Attrs{{0}, {1.0f}}, {x}, node.name, &node);
    if (d.size() == 1) y = emit_one(OpKind::Reshape, Attrs{d, {}}, {y.ref}, node.name + ".out", &node);
    define(node, 0, y);
  }

  // LayerNormalization over the last axis → rows [M, D] through RepOps layer_norm and back. ONNX's
  // Mean and InvStdDev outputs are left undefined (torch's export does not read them).
  void map_layer_norm(const OnnxNode& node) {
    only_attributes(node, {"axis", "epsilon", "stash_type"});
    const auto d = dims_of(input(node, 0), &node);
    if (d.empty()) unsupported(node, "a LayerNormalization of a scalar");
    if (normalized_axis(node, attr_int(node, "axis", -1), d.size()) != static_cast<int64_t>(d.size()) - 1)
      unsupported(node, fmt::format("axis {} (the last axis only)", attr_int(node, "axis", -1)));
    if (attr_int(node, "stash_type", 1) != 1) unsupported(node, "stash_type other than float");
    const int64_t D = d.back();
    int64_t M = 1;
    for (size_t i = 0; i + 1 < d.size(); ++i) M *= d[i];
    LoweredRef x = runtime(input(node, 0), &node);
    if (d.size() != 2) x = emit_one(OpKind::Reshape, Attrs{{M, D}, {}}, {x}, node.name + ".rows", &node).ref;
    const LoweredRef gamma = runtime(input(node, 1), &node);
    const LoweredRef beta = input(node, 2).empty() ? zero_constant(D) : runtime(input(node, 2), &node);
    Val y = emit_one(OpKind::LayerNorm, Attrs{{}, {attr_float(node, "epsilon", 1e-5f)}}, {x, gamma, beta},
                     node.name, &node);
    if (d.size() != 2) y = emit_one(OpKind::Reshape, Attrs{d, {}}, {y.ref}, node.name + ".out", &node);
    define(node, 0, y);
  }

  // Elementwise functions → RepOps unary (ops/registry.h lists the codes).
  void map_unary(const OnnxNode& node) {
    static const std::map<std::string, int64_t> codes = {
        {"Neg", 0},  {"Reciprocal", 1}, {"Sqrt", 2},    {"Exp", 3}, {"Log", 4},
        {"Tanh", 5}, {"Erf", 6},        {"Sigmoid", 7}, {"Sin", 8}, {"Cos", 9}};
    only_attributes(node, {});
    define(node, 0,
           emit_one(OpKind::Unary, Attrs{{codes.at(node.op_type)}, {0.0f}}, {runtime(input(node, 0), &node)},
                    node.name, &node));
  }

  // Pow(x, p) with a constant scalar exponent → RepOps unary pow.
  void map_pow(const OnnxNode& node) {
    only_attributes(node, {});
    const OnnxConstant& p = constant(input(node, 1), node, "exponent");
    if (p.elements() != 1)
      unsupported(node, fmt::format("an exponent of shape {} (a scalar only)", dims_str(p.dims)));
    const float e = p.type == OnnxConstant::Type::Float32 ? p.floats[0] : static_cast<float>(p.ints[0]);
    define(node, 0,
           emit_one(OpKind::Unary, Attrs{{10}, {e}}, {runtime(input(node, 0), &node)}, node.name, &node));
  }

  // Cast of a run-time float tensor to float: the value itself.
  void map_cast(const OnnxNode& node) {
    only_attributes(node, {"to", "saturate"});
    if (attr_int(node, "to", 0) != kOnnxFloat)
      unsupported(node, fmt::format("a Cast of the run-time value '{}' to {}", input(node, 0),
                                    onnx_type_name(static_cast<int32_t>(attr_int(node, "to", 0)))));
    runtime(input(node, 0), &node);  // refuses token ids
    vals_[node.outputs.at(0)] = value(input(node, 0), &node);
  }

  // Unsqueeze and Squeeze of run-time tensors: reshapes (axes from the input, opset 13).
  void map_unsqueeze(const OnnxNode& node) {
    only_attributes(node, {});
    const auto d = dims_of(input(node, 0), &node);
    const OnnxConstant& a = constant(input(node, 1), node, "axes");
    if (a.type != OnnxConstant::Type::Int64) unsupported(node, "axes that are not int64");
    const size_t rank = d.size() + a.ints.size();
    std::vector<bool> inserted(rank, false);
    for (int64_t axis : a.ints) {
      const auto i = static_cast<size_t>(normalized_axis(node, axis, rank));
      if (inserted[i]) unsupported(node, fmt::format("axes {} naming axis {} twice", dims_str(a.ints), axis));
      inserted[i] = true;
    }
    std::vector<int64_t> out;
    size_t k = 0;
    for (size_t i = 0; i < rank; ++i) out.push_back(inserted[i] ? 1 : d.at(k++));
    reshape_to(node, out);
  }
  void map_squeeze(const OnnxNode& node) {
    only_attributes(node, {});
    const auto d = dims_of(input(node, 0), &node);
    std::vector<bool> removed(d.size(), false);
    if (input(node, 1).empty()) {
      for (size_t i = 0; i < d.size(); ++i) removed[i] = d[i] == 1;
    } else {
      const OnnxConstant& a = constant(input(node, 1), node, "axes");
      if (a.type != OnnxConstant::Type::Int64) unsupported(node, "axes that are not int64");
      for (int64_t axis : a.ints) {
        const auto i = static_cast<size_t>(normalized_axis(node, axis, d.size()));
        if (d[i] != 1) unsupported(node, fmt::format("squeezing axis {} of size {}", axis, d[i]));
        removed[i] = true;
      }
    }
    std::vector<int64_t> out;
    for (size_t i = 0; i < d.size(); ++i)
      if (!removed[i]) out.push_back(d[i]);
    reshape_to(node, out);
  }

  // ---- Llama-style decoders: RMSNorm's mean, grouped-query attention's expand ----

  // ReduceMean over one axis → reduce_mean (keepdims), then a reshape dropping the axis for keepdims = 0.
  // Axes from the attribute (opset ≤ 17) or a constant input (opset 18); RMSNorm's mean(-1, keepdim=True).
  void map_reduce_mean(const OnnxNode& node) {
    only_attributes(node, {"axes", "keepdims", "noop_with_empty_axes"});
    if (attr_int(node, "noop_with_empty_axes", 0) != 0) unsupported(node, "noop_with_empty_axes = 1");
    const auto d = dims_of(input(node, 0), &node);
    std::vector<int64_t> axes = attr_ints(node, "axes", {});
    if (!input(node, 1).empty()) axes = constant(input(node, 1), node, "axes").ints;
    if (axes.size() != 1)
      unsupported(node, fmt::format("axes {} (one axis only; {} of rank {})", dims_str(axes),
                                    axes.empty() ? "none means every axis" : "several", d.size()));
    if (d.empty()) unsupported(node, "a ReduceMean of a scalar");
    const int64_t axis = normalized_axis(node, axes[0], d.size());
    const bool keep = attr_int(node, "keepdims", 1) != 0;
    Val y = emit_one(OpKind::ReduceMean, Attrs{{axis}, {}}, {runtime(input(node, 0), &node)},
                     keep ? node.name : node.name + ".keepdims", &node);
    if (!keep) {
      std::vector<int64_t> out = d;
      out.erase(out.begin() + axis);
      y = emit_one(OpKind::Reshape, Attrs{out, {}}, {y.ref}, node.name, &node);
    }
    define(node, 0, y);
  }

  // Expand of a run-time tensor to a constant shape → expand (the bidirectional broadcast of the
  // input's shape and the shape input, as ONNX defines it); a no-op expand is the value itself.
  void map_expand(const OnnxNode& node) {
    only_attributes(node, {});
    const auto d = dims_of(input(node, 0), &node);
    const OnnxConstant& shape = constant(input(node, 1), node, "shape");
    if (shape.type != OnnxConstant::Type::Int64 || shape.dims.size() != 1)
      unsupported(node, "a shape input that is not a 1-D int64 tensor");
    const std::vector<int64_t> out = broadcast_dims(d, shape.ints, m_.where(node));
    const Val& in = value(input(node, 0), &node);
    if (out == d) {
      if (in.wide.empty()) runtime(input(node, 0), &node);  // refuses token ids
      vals_[node.outputs.at(0)] = in;
      return;
    }
    if (out.size() <= static_cast<size_t>(kMaxRank) && in.wide.empty()) {
      define(node, 0,
             emit_one(OpKind::Expand, Attrs{out, {}}, {runtime(input(node, 0), &node)}, node.name, &node));
      return;
    }
    // Wider than rank 4 (GQA's [B, Hkv, 1, T, E] → [B, Hkv, r, T, E]): runs of adjacent axes the expand
    // treats alike — kept (equal sizes) or repeated (size 1 in) — are merged, which keeps the row-major
    // order, and the expand runs on the merged shapes.
    std::vector<int64_t> in_dims(out.size() - d.size(), 1);
    in_dims.insert(in_dims.end(), d.begin(), d.end());
    std::vector<int64_t> merged_in, merged_out;
    int kind = -1;  // of the current run: 0 kept, 1 repeated
    for (size_t i = 0; i < out.size(); ++i) {
      const int k = out[i] == 1 ? kind : (in_dims[i] == out[i] ? 0 : 1);
      if (merged_in.empty() || (k != kind && k >= 0 && kind >= 0)) {
        merged_in.push_back(in_dims[i]);
        merged_out.push_back(out[i]);
      } else {
        merged_in.back() *= in_dims[i];
        merged_out.back() *= out[i];
      }
      if (k >= 0) kind = k;
    }
    if (merged_out.size() > static_cast<size_t>(kMaxRank))
      unsupported(node,
                  fmt::format("an expand of {} to {} (more than {} alternating runs of kept and repeated "
                              "axes)",
                              dims_str(d), dims_str(out), kMaxRank));
    const LoweredRef x = in.wide.empty() ? runtime(input(node, 0), &node) : in.ref;
    const Val m = emit_one(OpKind::Reshape, Attrs{merged_in, {}}, {x}, node.name + ".merged", &node);
    const Val y = emit_one(OpKind::Expand, Attrs{merged_out, {}}, {m.ref}, node.name, &node);
    define(node, 0, reshaped(y.ref, out, node.name + ".out", node));
  }

  const OnnxModel& m_;
  const LowerOptions& opt_;
  const bool discover_;
  LoweredGraph g_;
  std::map<std::string, Val> vals_;
  std::map<std::string, uint32_t> param_index_;
  std::map<std::string, LoweredRef> constant_refs_;
  std::set<uint32_t> used_;
  std::set<std::string> differentiable_;  ///< find_differentiable
  int64_t dropout_site_ = 0;
  std::map<uint32_t, LoweredRef> buffer_updates_;  ///< map_batch_norm: buffer index → its next value
};

/// The buffers of docs/onnx.md "Parameters and buffers": the float initializers that are a
/// training-mode BatchNormalization's running mean or variance (inputs 3 and 4), in file order. Such an
/// initializer must be read by that node alone, since the step replaces it by the node's outputs 1
/// and 2: one read anywhere else (another node, a graph output) is refused, naming it.
std::vector<std::string> find_onnx_buffers(const OnnxModel& m) {
  std::set<std::string> running;
  for (const OnnxNode& node : m.nodes()) {
    if (node.op_type != "BatchNormalization") continue;
    auto t = node.attributes.find("training_mode");
    if (t == node.attributes.end() || t->second.i == 0) continue;
    for (size_t i = 3; i < node.inputs.size() && i <= 4; ++i) {
      auto c = m.initializers().find(node.inputs[i]);
      if (c != m.initializers().end() && c->second.type == OnnxConstant::Type::Float32)
        running.insert(node.inputs[i]);
    }
  }
  if (running.empty()) return {};
  std::map<std::string, int> reads;
  for (const OnnxNode& node : m.nodes())
    for (const std::string& in : node.inputs)
      if (running.count(in)) ++reads[in];
  for (const auto& o : m.outputs())
    if (running.count(o.name)) ++reads[o.name];
  std::vector<std::string> out;
  for (const std::string& name : m.initializer_order()) {
    if (!running.count(name)) continue;
    if (reads[name] != 1)
      throw OnnxError(
          fmt::format("{}: initializer '{}' is a training-mode BatchNormalization's running "
                      "statistic and is read {} times; a running statistic must be read by "
                      "its BatchNormalization alone (the step replaces it)",
                      m.source(), name, reads[name]));
    out.push_back(name);
  }
  return out;
}

}  // namespace

LoweredGraph lower_onnx(const OnnxModel& model, const LowerOptions& options) {
  return Lowerer(model, options, false).run();
}

std::shared_ptr<const OnnxModel> import_onnx(std::span<const std::byte> bytes, const std::string& source,
                                             const OnnxLimits& limits) {
  auto model = std::make_shared<OnnxModel>(OnnxModel::parse(bytes, source, limits));
  model->set_buffers(find_onnx_buffers(*model));
  // Lower once at batch size 1 to see which float initializers are read at run time.
  LowerOptions probe;
  for (const auto& in : model->inputs()) {
    if (in.elem_type != kOnnxFloat && in.elem_type != kOnnxInt64) continue;
    std::vector<int64_t> dims = in.dims;
    if (dims.empty()) continue;
    for (int64_t& d : dims)
      if (d < 0) d = 1;
    if (dims.size() > static_cast<size_t>(kMaxRank))
      throw OnnxError(fmt::format("{}: graph input '{}' has rank {}; RepOps tensors have rank ≤ {}", source,
                                  in.name, dims.size(), kMaxRank));
    probe.inputs.push_back({in.name, Shape(std::span<const int64_t>(dims))});
  }
  const LoweredGraph g = Lowerer(*model, probe, true).run();
  std::vector<std::string> params;
  for (uint32_t i : g.params_used) params.push_back(model->initializer_order().at(i));
  model->set_params(std::move(params));
  return model;
}

std::vector<Tensor> onnx_param_tensors(const OnnxModel& model) {
  std::vector<Tensor> out;
  for (const std::string& name : model.params()) {
    const OnnxConstant& c = model.initializers().at(name);
    out.emplace_back(Shape(std::span<const int64_t>(c.dims)), std::span<const float>(c.floats));
  }
  return out;
}

std::vector<Tensor> onnx_buffer_tensors(const OnnxModel& model) {
  std::vector<Tensor> out;
  for (const std::string& name : model.buffers()) {
    const OnnxConstant& c = model.initializers().at(name);
    out.emplace_back(Shape(std::span<const int64_t>(c.dims)), std::span<const float>(c.floats));
  }
  return out;
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> ops = {"Add",        "BatchNormalization",
                                  "Cast",       "Concat",
                                  "Conv",       "Expand",
                                  "ReduceMean", "Cos",
                                  "Div",        "Dropout",
                                  "Erf",        "Exp",
                                  "Flatten",    "Gather",
                                  "Gemm",       "GlobalAveragePool",
                                  "Identity",   "LayerNormalization",
                                  "Log",        "MatMul",
                                  "MaxPool",    "Mul",
                                  "Neg",        "Pow",
                                  "Reciprocal", "Relu",
                                  "Reshape",    "Shape",
                                  "Sigmoid",    "Sin",
                                  "Slice",      "Softmax",
                                  "Split",      "Sqrt",
                                  "Squeeze",    "Sub",
                                  "Tanh",       "Transpose",
                                  "Unsqueeze",  "Where"};
  for (const char* op : {"Cast",      "Concat",    "Constant", "ConstantOfShape",
                         "Div",       "Equal",     "Expand",   "Gather",
                         "Greater",   "Less",      "Max",      "Min",
                         "Mul",       "Neg",       "Not",      "Range",
                         "Slice",     "Sqrt",      "Squeeze",  "Sub",
                         "Transpose", "Unsqueeze", "Where"})
    if (is_foldable(op) && std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace tribunal
