// Internal to referee/report.cpp: the report's inline SVG pictures, each a pure function of what it shows.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "referee/report.h"

namespace tribunal::report_svg {

/// Text escaped for HTML/SVG element content and attribute values.
std::string escape(const std::string& text);

/// What the narrowing picture shows: the trajectory's checkpoints, the located interval and step (when
/// the game got that far), the step's node count and the located node, and the rounds of each level.
struct Narrowing {
  std::vector<uint64_t> checkpoints;  ///< steps 0, s, 2s, …, T
  int level = 1;                      ///< where the verdict ended (1, 2 or 3)
  uint64_t interval = 0;              ///< k: the interval [checkpoints[k-1], checkpoints[k]] (level ≥ 2)
  uint64_t step = 0;                  ///< the located step (level ≥ 2)
  uint64_t nodes = 0;                 ///< nodes of the located step's graph (level 3)
  uint64_t node = 0;                  ///< the located node (level 3)
  std::array<uint32_t, 3> rounds{};   ///< rounds played at each level
};
std::string narrowing(const Narrowing& n);

/// The nodes the graph picture shows: all of a graph of at most 60 nodes; of a larger one, the located
/// node, the 12 before and after it, and the nodes producing its inputs and using its outputs.
std::vector<size_t> graph_nodes_shown(const StepGraph& g, uint64_t located);

/// The located step's graph: the `shown` nodes (ascending) in topological order laid out column by
/// column, `located` in red, its producers and consumers outlined, the edges that touch it drawn bold.
std::string graph(const StepGraph& g, uint64_t located, const std::vector<size_t>& shown);

/// Both parties' losses at their checkpoints (step 0's, produced by no step, left out), a dashed mark at
/// `first_differing` (a step; none when negative), each line named by `names` (claim order). The loss
/// axis is logarithmic when every loss is positive and the largest is over 10 times the smallest (a
/// cheater's jump leaves the honest curve readable); a loss that is not finite is drawn clipped at the
/// top, marked "not finite". Axis titles: "step" and "training loss".
std::string losses(const std::array<std::vector<LossPoint>, 2>& losses, int64_t first_differing,
                   const std::array<std::string, 2>& names = {"claim 0", "claim 1"});

}  // namespace tribunal::report_svg
