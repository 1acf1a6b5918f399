// The toy "counter" program (after Optimism's and Arbitrum BoLD's fault-proof tests; docs/protocol.md):
// a state of one float32 scalar, a step of G nodes each adding the constant 1. Small enough to play
// the dispute game exhaustively over every divergence point; providers are the honest algorithm fed a
// wrong trace. Test support for the game (tests/protocol, the fuzzer, the campaign of scenarios/); the
// node's op is ops/registry.h's OpKind::Add, so the one byte it records is the real op's.
#pragma once

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "ops/registry.h"
#include "protocol/game.h"
#include "protocol/merkle.h"
#include "protocol/tensor_frames.h"
#include "protocol/tensor_hash.h"
#include "protocol/trajectory.h"

namespace tribunal::toy {

constexpr uint8_t kAddOp = static_cast<uint8_t>(OpKind::Add);

inline Digest scalar_leaf(float x) {
  return tensor_leaf(DType::F32, {}, std::as_bytes(std::span<const float>(&x, 1)));
}
inline Digest state_hash(float x) {
  return merkle_root(std::vector<Digest>{scalar_leaf(x)});
}

/// A node's rounding log in the counter's rounding-log variant: one decision (a trit, 0 to 2) packed in
/// one byte, committed as a DType::Trits tensor leaf of shape [1].
inline Digest trit_leaf(uint8_t trit) {
  const int64_t shape[1] = {1};
  return tensor_leaf(DType::Trits, shape, std::as_bytes(std::span<const uint8_t>(&trit, 1)));
}

/// The referee's view: G adds per step, from the initial state 0.
class CounterOracle : public StepOracle {
 public:
  /// `rounding_log`: the rounding-log variant, every record one more output (its log's leaf).
  explicit CounterOracle(uint32_t nodes, bool rounding_log = false)
      : nodes_(nodes), rounding_log_(rounding_log) {}
  Digest initial_state_hash() const override { return state_hash(0.0f); }
  StepSpec step_spec(uint64_t) const override {
    StepSpec s;
    s.state_inputs = 1;
    for (uint32_t n = 0; n < nodes_; ++n) {
      NodeSpec node;
      node.op = kAddOp;
      node.outputs = 1;
      InputSpec prev{
          n == 0 ? InputSpec::Source::State : InputSpec::Source::Node, n == 0 ? 0u : n - 1u, 0, {}, {}};
      node.inputs = {prev, InputSpec{InputSpec::Source::Constant, 0, 0, scalar_leaf(1.0f), {}}};
      if (rounding_log_) {
        node.rounding_log = true;
        node.outputs = 2;
        node.log_values = 1;
      }
      s.nodes.push_back(node);
    }
    s.state_outputs = {InputSpec{InputSpec::Source::Node, nodes_ - 1, 0, {}, {}}};
    return s;
  }

 private:
  uint32_t nodes_;
  bool rounding_log_;
};

/// How a provider deviates from the honest computation.
struct Fault {
  std::optional<float> initial;  ///< start from this instead of 0
  int64_t step = -1, node = -1;  ///< corrupt this node's output …
  float delta = 0.5f;            ///< … by adding this
  bool lie_post_state = false;   ///< honest records, but claim the corrupted value as the next state
  /// Rounding-log variant: the log of node `log_node` of step `log_step` holds `log_trit` (honest: 0,
  /// Nearest); 2 (Up) also rounds that node's output up by one float32 ulp, as if its float64 sum had
  /// been just below a rounding boundary. `bad_log_proof` opens its log with a chunk that does not
  /// match its leaf.
  int64_t log_step = -1, log_node = -1;
  uint8_t log_trit = 0;
  bool bad_log_proof = false;
};

/// A provider of the counter program: trains (computes its trace) and answers every query honestly
/// with respect to its own trace.
class CounterProvider {
 public:
  /// `rounding_log`: the rounding-log variant (records end in their log's leaf; QueryKind::OpenLog).
  CounterProvider(uint64_t steps, uint64_t stride, uint32_t nodes, Fault fault = {},
                  bool rounding_log = false)
      : steps_(steps), stride_(stride), nodes_(nodes), fault_(fault), rounding_log_(rounding_log) {
    states_.push_back(fault.initial.value_or(0.0f));
    for (uint64_t t = 0; t < steps; ++t) states_.push_back(run_step(t, states_.back()).back_state);
  }

  Claim claim(const Digest& job_id) const {
    std::vector<Digest> leaves;
    for (uint64_t c : checkpoint_steps(steps_, stride_)) leaves.push_back(state_hash(states_[c]));
    return {job_id, steps_, merkle_root(leaves), leaves.back(), "counter:provider"};
  }

  /// The answer(s) to a query: one body, or a stream (tensor chunks).
  std::vector<Body> answer(const Query& q) const {
    switch (q.kind) {
      case QueryKind::Children: {
        const std::vector<Digest> leaves = level_leaves(q);
        const uint64_t mid = q.lo + std::bit_floor(q.hi - q.lo - 1);
        auto part = [&](uint64_t a, uint64_t b) {
          return b - a == 1 ? leaves[a] : merkle_root(std::span(leaves).subspan(a, b - a));
        };
        return {Children{q.round, part(q.lo, mid), part(mid, q.hi)}};
      }
      case QueryKind::CommitInterval: {
        const auto cps = checkpoint_steps(steps_, stride_);
        std::vector<Digest> l1;
        for (uint64_t c : cps) l1.push_back(state_hash(states_[c]));
        const std::vector<Digest> l2 = interval_leaves(cps[q.interval - 1], cps[q.interval]);
        MerkleTree t1(l1), t2(l2);
        return {IntervalCommit{q.round, t2.root(), l1[q.interval - 1], t1.prove(q.interval - 1), t2.prove(0),
                               t2.prove(l2.size() - 1)}};
      }
      case QueryKind::CommitStep: {
        const auto cps = checkpoint_steps(steps_, stride_);
        const std::vector<Digest> l2 = interval_leaves(cps[q.interval - 1], cps[q.interval]);
        const std::vector<Digest> l3 = step_leaves(q.step);
        StepCommit c;
        c.round = q.round;
        c.root = merkle_root(l3);
        c.pre_root = merkle_root(std::vector<Digest>{scalar_leaf(states_[q.step])});
        c.pre_in_level2 = MerkleTree(l2).prove(q.step - cps[q.interval - 1]);
        c.last = MerkleTree(l3).prove(l3.size() - 1);
        return {c};
      }
      case QueryKind::OpenRecords: {
        const Trace tr = run_step(q.step, states_[q.step]);
        const MerkleTree tree(step_leaves(q.step));
        Records r;
        r.round = q.round;
        r.indices = q.indices;
        for (uint64_t i : q.indices) {
          r.records.push_back(tr.records[i]);
          r.proofs.push_back(tree.prove(i));
        }
        for (const ValueAddress& a : q.values) {  // the state is one tensor: leaf 0 of states t and t+1
          const std::vector<Digest> pre{scalar_leaf(states_[q.step])};
          if (a.origin == ValueOrigin::NextState) {
            r.post_state = {scalar_leaf(states_[q.step + 1])};
          } else {
            r.state_leaves.push_back(pre.at(a.index));
            r.state_proofs.push_back(MerkleTree(pre).prove(a.index));
          }
        }
        return {r};
      }
      case QueryKind::OpenInputs: {
        const Trace tr = run_step(q.step, states_[q.step]);
        std::vector<Body> out;
        for (uint32_t v = 0; v < q.values.size(); ++v) {
          const ValueAddress& a = q.values[v];
          const float x = a.origin == ValueOrigin::StateInput ? states_[q.step] : tr.outputs[a.index];
          for_each_tensor_frame(q.round, v, DType::F32, {}, std::as_bytes(std::span(&x, 1)), {},
                                [&](TensorChunk&& frame) {
                                  out.push_back(std::move(frame));
                                  return true;
                                });
        }
        return out;
      }
      case QueryKind::OpenLog: {
        const uint8_t log = log_of(q.step, q.indices.at(0));
        const int64_t shape[] = {1};
        std::vector<Body> out;
        for_each_tensor_frame(q.round, 0, DType::Trits, shape, std::as_bytes(std::span(&log, 1)), {},
                              [&](TensorChunk&& frame) {
                                if (fault_.bad_log_proof) frame.bytes[0] ^= 1;
                                out.push_back(std::move(frame));
                                return true;
                              });
        return out;
      }
      case QueryKind::LogEvidence:
        return {LogEvidence{q.round, {}}};  // the counter job has no trainer's headers
    }
    return {};
  }

  float state(uint64_t t) const { return states_[t]; }

 private:
  struct Trace {
    std::vector<float> outputs;
    std::vector<NodeRecord> records;
    float back_state = 0;
  };

  Trace run_step(uint64_t t, float x) const {
    Trace tr;
    float v = x;
    Digest in = scalar_leaf(x);
    for (uint32_t n = 0; n < nodes_; ++n) {
      v = v + 1.0f;
      if (static_cast<int64_t>(t) == fault_.step && static_cast<int64_t>(n) == fault_.node &&
          !fault_.lie_post_state)
        v += fault_.delta;
      if (rounding_log_ && log_of(t, n) == 2) v = std::nextafter(v, INFINITY);
      tr.outputs.push_back(v);
      NodeRecord r{kAddOp, {}, {in, scalar_leaf(1.0f)}, {scalar_leaf(v)}};
      if (rounding_log_) r.outputs.push_back(trit_leaf(log_of(t, n)));
      tr.records.push_back(r);
      in = scalar_leaf(v);
    }
    tr.back_state = v;
    if (static_cast<int64_t>(t) == fault_.step && fault_.lie_post_state) tr.back_state = v + fault_.delta;
    return tr;
  }

  uint8_t log_of(uint64_t t, uint64_t n) const {
    return static_cast<int64_t>(t) == fault_.log_step && static_cast<int64_t>(n) == fault_.log_node
               ? fault_.log_trit
               : 0;
  }

  std::vector<Digest> interval_leaves(uint64_t a, uint64_t b) const {
    std::vector<Digest> out;
    for (uint64_t t = a; t <= b; ++t) out.push_back(state_hash(states_[t]));
    return out;
  }

  std::vector<Digest> step_leaves(uint64_t t) const {
    const Trace tr = run_step(t, states_[t]);
    std::vector<Digest> out;
    for (const NodeRecord& r : tr.records) out.push_back(node_record_hash(r));
    out.push_back(state_hash(states_[t + 1]));
    return out;
  }

  std::vector<Digest> level_leaves(const Query& q) const {
    const auto cps = checkpoint_steps(steps_, stride_);
    if (q.level == Level::Checkpoints) {
      std::vector<Digest> out;
      for (uint64_t c : cps) out.push_back(state_hash(states_[c]));
      return out;
    }
    if (q.level == Level::Steps) return interval_leaves(cps[q.interval - 1], cps[q.interval]);
    return step_leaves(q.step);
  }

  uint64_t steps_, stride_;
  uint32_t nodes_;
  Fault fault_;
  bool rounding_log_ = false;
  std::vector<float> states_;
};

}  // namespace tribunal::toy
