#include "dispute/responder.h"

#include <algorithm>
#include <bit>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/numerics.h"
#include "engine/state.h"
#include "protocol/merkle.h"
#include "protocol/tensor_frames.h"
#include "protocol/tensor_hash.h"
#include "protocol/trajectory.h"

namespace tribunal {
namespace {

// The level-3 tree of a step: its node records, then state_hash(t+1).
std::vector<Digest> step_leaves(const StepTrace& tr) {
  std::vector<Digest> leaves;
  for (const NodeRecord& r : tr.records) leaves.push_back(node_record_hash(r));
  leaves.push_back(merkle_root(tr.post_state));
  return leaves;
}

// Whether a query asks for chunk `c` of its value `v`: every chunk, or those in its re-ask ranges
// (Query.chunks; docs/protocol.md, "Lost frames").
bool wanted(const Query& q, uint32_t v, uint64_t c) {
  if (q.chunks.empty()) return true;
  return std::any_of(q.chunks.begin(), q.chunks.end(),
                     [&](const ChunkRange& r) { return r.value == v && c >= r.first && c < r.end; });
}

// Appends the TensorChunk frames of one opened tensor (value `v` of query `q`) to `out`: every chunk,
// or the ones a re-ask lists.
void append_chunks(std::vector<Body>& out, const Query& q, uint32_t v, DType dtype,
                   std::span<const int64_t> shape, std::span<const std::byte> bytes) {
  for_each_tensor_frame(
      q.round, v, dtype, shape, bytes, [&](uint64_t c) { return wanted(q, v, c); },
      [&](TensorChunk&& frame) {
        out.push_back(std::move(frame));
        return true;
      });
}

}  // namespace

DisputeResponder::DisputeResponder(const JobSpec& job, const Dataset& train, std::filesystem::path store,
                                   ThreadPool& pool, StepPolicyPtr policy)
    : job_(job),
      train_(train),
      store_(std::move(store)),
      pool_(pool),
      // A rounding-log provider replays its own logs (written beside the checkpoints), so its answers
      // are the steps it trained even if its float64 kernels changed since.
      trainer_(job, train, pool, std::move(policy), nullptr, Device::Cpu,
               // An auditor's store holds the trainer's logs, replayed as it audited them.
               RoundingOptions{default_float64_gemm(), store_, !job.numerics.trainer.empty()}),
      checkpoints_(checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride))) {
  require_disputable(job.numerics, "dispute responder");
}

const std::vector<Digest>& DisputeResponder::trajectory_leaves() {
  if (trajectory_.empty()) {
    for (uint64_t c : checkpoints_) {
      const CheckpointHeader h = read_checkpoint_header(checkpoint_path(store_, static_cast<int64_t>(c)));
      if (h.job_id != trainer_.job_id() || h.step != static_cast<int64_t>(c))
        throw EngineError(fmt::format("{}: checkpoint of another job or step", store_.string()));
      trajectory_.push_back(h.state_hash);
    }
  }
  return trajectory_;
}

void DisputeResponder::seek(uint64_t step) {
  if (trainer_.state().step() == static_cast<int64_t>(step)) return;
  if (trainer_.state().step() > static_cast<int64_t>(step) ||
      step - static_cast<uint64_t>(trainer_.state().step()) > static_cast<uint64_t>(job_.stride)) {
    const uint64_t from = step / static_cast<uint64_t>(job_.stride) * static_cast<uint64_t>(job_.stride);
    trainer_.set_state(
        load_checkpoint(checkpoint_path(store_, static_cast<int64_t>(from)), job_, trainer_.job_id(), pool_));
  }
  while (trainer_.state().step() < static_cast<int64_t>(step)) trainer_.step();
}

const std::vector<Digest>& DisputeResponder::interval_leaves(uint64_t k) {
  auto it = intervals_.find(k);
  if (it != intervals_.end()) return it->second;
  std::vector<Digest> leaves;
  seek(checkpoints_[k - 1]);
  leaves.push_back(trainer_.hash_state());
  while (trainer_.state().step() < static_cast<int64_t>(checkpoints_[k])) {
    trainer_.step();
    leaves.push_back(trainer_.hash_state());
  }
  return intervals_[k] = std::move(leaves);
}

const StepTrace& DisputeResponder::trace(uint64_t step) {
  if (!trace_ || trace_->first != step) {
    trace_.reset();  // one step's values at a time: a GPT-2-small step's are gigabytes
    seek(step);
    trace_.emplace(step, trainer_.traced_step());
  }
  return trace_->second;
}

const MerkleTree& DisputeResponder::dataset_tree() {
  if (!dataset_tree_) {
    std::vector<Digest> leaves(static_cast<size_t>(train_.labels.shape()[0]));
    pool_.parallel_for(
        static_cast<int64_t>(leaves.size()),
        [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) leaves[static_cast<size_t>(i)] = sample_hash(train_, i);
        },
        256);
    dataset_tree_ = std::make_unique<MerkleTree>(std::move(leaves));
  }
  return *dataset_tree_;
}

std::vector<Body> DisputeResponder::answer(const Query& q) {
  const uint64_t n1 = checkpoints_.size();
  const auto check = [&](bool ok, const char* what) {
    if (!ok) throw EngineError(fmt::format("query of round {}: {}", q.round, what));
  };
  const bool interval_ok = q.interval >= 1 && q.interval < n1;
  const bool step_ok =
      interval_ok && q.step >= checkpoints_[q.interval - 1] && q.step < checkpoints_[q.interval];
  switch (q.kind) {
    case QueryKind::Children: {
      std::vector<Digest> level3;
      const std::vector<Digest>* leaves = nullptr;
      if (q.level == Level::Checkpoints) {
        leaves = &trajectory_leaves();
      } else if (q.level == Level::Steps) {
        check(interval_ok, "no such interval");
        leaves = &interval_leaves(q.interval);
      } else if (q.level == Level::Chunks) {
        // Level 4: the chunk tree of output indices[1] of node indices[0], the one under the chunk
        // root of that output's tensor leaf in this provider's record.
        check(step_ok, "no such step");
        const StepTrace& tr = trace(q.step);
        check(q.indices.size() == 2 && q.indices[0] < tr.graph.nodes.size() &&
                  q.indices[1] < tr.graph.nodes[q.indices[0]].outputs.size(),
              "no such node output");
        const Tensor& t = tr.values[tr.graph.nodes[q.indices[0]].outputs[q.indices[1]]];
        level3 = tensor_chunk_hashes(DType::F32, t.bytes());
        leaves = &level3;
      } else {
        check(step_ok, "no such step");
        level3 = step_leaves(trace(q.step));
        leaves = &level3;
      }
      check(q.lo < q.hi && q.hi - q.lo >= 2 && q.hi <= leaves->size(), "no such tree node");
      const uint64_t mid = q.lo + std::bit_floor(q.hi - q.lo - 1);
      const auto part = [&](uint64_t a, uint64_t b) {
        return b - a == 1 ? (*leaves)[a] : merkle_root(std::span(*leaves).subspan(a, b - a));
      };
      return {Children{q.round, part(q.lo, mid), part(mid, q.hi)}};
    }
    case QueryKind::CommitInterval: {
      check(interval_ok, "no such interval");
      const std::vector<Digest> l2 = interval_leaves(q.interval);
      const MerkleTree t1(trajectory_leaves()), t2(l2);
      return {IntervalCommit{q.round, t2.root(), trajectory_leaves()[q.interval - 1],
                             t1.prove(q.interval - 1), t2.prove(0), t2.prove(l2.size() - 1)}};
    }
    case QueryKind::CommitStep: {
      check(step_ok, "no such step");
      const std::vector<Digest> l2 = interval_leaves(q.interval);
      const StepTrace& tr = trace(q.step);
      const std::vector<Digest> l3 = step_leaves(tr);
      const MerkleTree t3(l3);
      StepCommit c;
      c.round = q.round;
      c.root = t3.root();
      c.pre_root = merkle_root(tr.pre_state);
      c.pre_in_level2 = MerkleTree(l2).prove(q.step - checkpoints_[q.interval - 1]);
      c.last = t3.prove(l3.size() - 1);
      return {c};
    }
    case QueryKind::OpenRecords: {
      check(step_ok, "no such step");
      const StepTrace& tr = trace(q.step);
      const MerkleTree t3(step_leaves(tr));
      Records out;
      out.round = q.round;
      out.indices = q.indices;
      for (uint64_t i : q.indices) {
        check(i < tr.records.size(), "no such node");
        out.records.push_back(tr.records[i]);
        out.proofs.push_back(t3.prove(i));
      }
      // The state leaves asked for: state t's with their proofs under state_hash(t), all of state t+1's.
      std::optional<MerkleTree> pre;
      for (const ValueAddress& a : q.values) {
        if (a.origin == ValueOrigin::NextState) {
          out.post_state = tr.post_state;
          continue;
        }
        check(a.origin == ValueOrigin::StateInput && a.index < tr.pre_state.size(), "no such state tensor");
        if (!pre) pre.emplace(tr.pre_state);
        out.state_leaves.push_back(tr.pre_state[a.index]);
        out.state_proofs.push_back(pre->prove(a.index));
      }
      return {out};
    }
    case QueryKind::OpenInputs: {
      check(step_ok, "no such step");
      const StepTrace& tr = trace(q.step);
      std::vector<Body> out;
      for (uint32_t v = 0; v < q.values.size(); ++v) {
        const ValueAddress& a = q.values[v];
        ValueId id;
        if (a.origin == ValueOrigin::StateInput) {
          check(a.index < tr.graph.state_inputs.size(), "no such state tensor");
          id = tr.graph.state_inputs[a.index];
        } else {
          check(a.origin == ValueOrigin::NodeOutput, "an opening names state tensors or node outputs");
          check(a.index < tr.graph.nodes.size() && a.slot < tr.graph.nodes[a.index].outputs.size(),
                "no such node output");
          id = tr.graph.nodes[a.index].outputs[a.slot];
        }
        const Tensor& t = tr.values[id];
        append_chunks(out, q, v, DType::F32, t.shape().dims(), t.bytes());
      }
      if (!q.indices.empty()) {
        const int64_t d = train_.inputs.shape()[1];
        Samples s;
        s.round = q.round;
        s.indices = q.indices;
        for (uint64_t row : q.indices) {
          check(row < static_cast<uint64_t>(train_.labels.shape()[0]), "no such sample");
          const float* x = train_.inputs.data() + static_cast<int64_t>(row) * d;
          s.inputs.emplace_back(x, x + d);
          const int64_t width = train_.labels.shape().rank() == 1 ? 1 : train_.labels.shape()[1];
          const float* y = train_.labels.data() + static_cast<int64_t>(row) * width;
          s.labels.emplace_back(y, y + width);
          s.proofs.push_back(dataset_tree().prove(row));
        }
        out.push_back(std::move(s));
      }
      return out;
    }
    case QueryKind::LogEvidence:
      check(step_ok, "no such step");
      return {log_evidence(q)};
    case QueryKind::OpenLog: {
      // This provider's own log of the node, the one its record's last output hash commits to.
      check(step_ok, "no such step");
      const StepTrace& tr = trace(q.step);
      check(tr.rounding_log.step >= 0, "not a rounding-log job");
      check(q.indices.size() == 1 && q.indices[0] < tr.rounding_log.nodes.size(), "no such node");
      const RoundingLog& log = tr.rounding_log.nodes[q.indices[0]];
      std::vector<Body> out;
      const int64_t shape[] = {static_cast<int64_t>(log.count)};
      append_chunks(out, q, 0, DType::Trits, shape, std::as_bytes(std::span<const uint8_t>(log.packed)));
      return out;
    }
  }
  throw EngineError(fmt::format("query of round {}: unknown kind", q.round));
}

// An auditor's evidence (QueryKind::LogEvidence): the trainer's signed LogHeader of the step, kept when
// it fetched the trainer's logs; none (an empty header) when this store has no such file.
Body DisputeResponder::log_evidence(const Query& q) const {
  LogEvidence e;
  e.round = q.round;
  const std::filesystem::path file = log_header_path(audited_logs_dir(store_), static_cast<int64_t>(q.step));
  std::ifstream in(file, std::ios::binary);
  if (in) e.header.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return e;
}

}  // namespace tribunal
