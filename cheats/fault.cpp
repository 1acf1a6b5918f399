#include "cheats/fault.h"

#include <bit>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/job.h"
#include "engine/step.h"
#include "ops/rounding_log.h"

namespace tribunal::cheats {

std::string describe(const Fault& f) {
  std::vector<std::string> parts;
  if (f.init_delta != 0.0f) parts.push_back(fmt::format("initial weights {:+g}", f.init_delta));
  if (f.step >= 0)
    parts.push_back(fmt::format("corrupt step {} node {} output {} element {} by {:+g}", f.step, f.node,
                                f.slot, f.element < 0 ? std::string("all") : std::to_string(f.element),
                                f.delta));
  if (f.swap_step >= 0)
    parts.push_back(
        fmt::format("swap step {} position {} -> row {}", f.swap_step, f.swap_position, f.swap_row));
  if (f.relabel_step >= 0)
    parts.push_back(fmt::format("relabel step {} position {} -> label {}", f.relabel_step, f.relabel_position,
                                f.relabel_label));
  if (f.reorder_step >= 0)
    parts.push_back(fmt::format("reorder batches of steps {} and {}", f.reorder_step, f.reorder_with));
  if (f.skip_from >= 0)
    parts.push_back(fmt::format("skip steps {}..{} ({})", f.skip_from, f.skip_from + f.skip_count - 1,
                                f.skip_mode == SkipMode::Unchanged ? "unchanged" : "extrapolated"));
  if (f.hparam_from >= 0 && (f.lr_scale != 1.0f || f.wd_scale != 1.0f))
    parts.push_back(fmt::format("lr x{:g} weight_decay x{:g} from step {}{}", f.lr_scale, f.wd_scale,
                                f.hparam_from, f.hparam_hidden ? " (records claim the job's)" : ""));
  if (f.bf16_from >= 0) parts.push_back(fmt::format("bf16 {} from step {}", op_name(f.bf16_op), f.bf16_from));
  if (f.claim_steps >= 0) parts.push_back(fmt::format("claim {} steps", f.claim_steps));
  if (f.rounding != RoundingFault::None && f.rounding_step >= 0) {
    if (f.rounding == RoundingFault::Bloat)
      parts.push_back(fmt::format("rounding log bloated at step {}", f.rounding_step));
    else
      parts.push_back(fmt::format(
          "rounding log {} at step {} node {}{}", f.rounding == RoundingFault::Forge ? "forged" : "omitted",
          f.rounding_step, f.rounding_node,
          f.rounding == RoundingFault::Forge ? fmt::format(" from element {}", f.rounding_element) : ""));
  }
  if (parts.empty()) return "honest";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
  return out;
}

void check_fault(const Fault& f, const JobSpec& job, const DataShape& data) {
  const auto fail = [](const std::string& what) { throw EngineError("fault: " + what); };
  const auto position = [&](int64_t p, const char* name) {
    if (p < 0 || p >= job.batch_size)
      fail(fmt::format("{} {} is not a batch position (batch {})", name, p, job.batch_size));
  };
  if (f.step >= 0) {
    const StepGraph g =
        build_step_graph(job, data, f.step, std::vector<int64_t>(static_cast<size_t>(job.batch_size), 0));
    if (f.node < 0 || f.node >= static_cast<int64_t>(g.nodes.size()))
      fail(fmt::format("node {} does not exist (a step has {} nodes)", f.node, g.nodes.size()));
    const Node& node = g.nodes[static_cast<size_t>(f.node)];
    if (f.slot >= node.outputs.size()) fail(fmt::format("node {} has no output {}", f.node, f.slot));
    const int64_t numel = g.values[node.outputs[f.slot]].shape.numel();
    if (f.element < -1 || f.element >= numel)
      fail(fmt::format("element {} out of range (output {} of node {} has {})", f.element, f.slot, f.node,
                       numel));
  }
  if (f.swap_step >= 0) {
    position(f.swap_position, "swap_position");
    if (f.swap_row < 0 || f.swap_row >= data.samples)
      fail(fmt::format("swap_row {} is not a sample", f.swap_row));
  }
  if (f.relabel_step >= 0) {
    position(f.relabel_position, "relabel_position");
    if (f.relabel_label < 0 || f.relabel_label >= data.classes)
      fail(fmt::format("relabel_label {} is not a class (0..{})", f.relabel_label, data.classes - 1));
  }
  if (f.reorder_step >= 0 && (f.reorder_with < 0 || f.reorder_with == f.reorder_step))
    fail("reorder_with must be another step");
  if (f.skip_from >= 0 && f.skip_count < 1) fail("skip_count must be at least 1");
  if (!std::isfinite(f.lr_scale) || !std::isfinite(f.wd_scale)) fail("lr_scale and wd_scale must be finite");
  if (static_cast<size_t>(f.bf16_op) >= kOpKindCount) fail("bf16_op is not an op kind");
  if (f.claim_steps >= 0 && (f.claim_steps < 1 || f.claim_steps > kMaxSteps))
    fail(fmt::format("claim_steps {} out of range (1..{})", f.claim_steps, kMaxSteps));
  if (f.rounding != RoundingFault::None && f.rounding_step >= 0) {
    if (job.numerics.mode != NumericsMode::RoundingLog) fail("rounding-log faults need a rounding-log job");
    const StepGraph g = build_step_graph(job, data, f.rounding_step,
                                         std::vector<int64_t>(static_cast<size_t>(job.batch_size), 0));
    if (f.rounding != RoundingFault::Bloat &&
        (f.rounding_node < 0 || f.rounding_node >= static_cast<int64_t>(g.nodes.size())))
      fail(fmt::format("rounding_node {} does not exist (a step has {} nodes)", f.rounding_node,
                       g.nodes.size()));
    if (f.rounding_element < 0) fail("rounding_element must be ≥ 0");
  }
}

namespace {

// The grid value x rounds to, and the decision that names it (round_replayed(x, d, q) == nearest).
Rounding nearest_direction(double x, double quantum) {
  const float nearest = round_replayed(x, Rounding::Nearest, quantum);
  return round_replayed(x, Rounding::Down, quantum) == nearest ? Rounding::Down : Rounding::Up;
}

}  // namespace

void tamper_rounding(const Fault& f, int64_t step, size_t node, std::span<const std::vector<double>> wide,
                     RoundingLog& log, std::span<Tensor* const> out, double tau,
                     std::span<const std::vector<double>> quanta) {
  if (f.rounding == RoundingFault::None || step != f.rounding_step) return;
  if (f.rounding != RoundingFault::Bloat && static_cast<int64_t>(node) != f.rounding_node) return;
  std::vector<Rounding> d = unpack_trits(log.packed, log.count);
  size_t k = 0;  // index in log order
  bool done = false;
  for (size_t i = 0; i < wide.size() && !done; ++i) {
    const std::span<float> y = out[i]->values();
    for (size_t e = 0; e < wide[i].size() && !done; ++e, ++k) {
      const double x = wide[i][e], quantum = quantum_at(quanta, i, e);
      switch (f.rounding) {
        case RoundingFault::Forge:
          if (k >= static_cast<size_t>(f.rounding_element) && boundary_distance(x, quantum) >= 1.5 * tau) {
            d[k] = nearest_direction(x, quantum) == Rounding::Down ? Rounding::Up : Rounding::Down;
            y[e] = round_replayed(x, d[k], quantum);
            done = true;
          }
          break;
        case RoundingFault::Omit:
          if (d[k] != Rounding::Nearest) {
            d[k] = Rounding::Nearest;
            y[e] = round_replayed(x, Rounding::Nearest, quantum);
            done = true;
          }
          break;
        case RoundingFault::Bloat:
          d[k] = nearest_direction(x, quantum);
          break;
        case RoundingFault::None:
          break;
      }
    }
  }
  log.packed = pack_trits(d);
}

float round_to_bf16(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return std::bit_cast<float>((bits | 0x00400000u) & 0xFFFF0000u);  // NaN: keep it quiet
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

}  // namespace tribunal::cheats
