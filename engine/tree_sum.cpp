#include "engine/tree_sum.h"

#include <vector>

namespace tribunal {

ValueId append_tree_sum(GraphBuilder& builder, std::span<const ValueId> partials, const std::string& name) {
  if (partials.empty()) throw OpError("tree sum of '" + name + "': no partials");
  StepGraph& g = builder.graph();
  std::vector<ValueId> level(partials.begin(), partials.end());
  std::vector<ShardSpan> spans;  // the shards each value of the level sums
  for (size_t i = 0; i < partials.size(); ++i) spans.push_back({static_cast<int32_t>(i), 1});
  for (int depth = 1; level.size() > 1; ++depth) {
    const bool last_level = level.size() == 2;
    std::vector<ValueId> up;
    std::vector<ShardSpan> up_spans;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      const std::string node =
          last_level ? name : name + "/tree" + std::to_string(depth) + "." + std::to_string(i / 2);
      up.push_back(builder.add_node(OpKind::Add, {}, {level[i], level[i + 1]}, node).front());
      up_spans.push_back({spans[i].first, spans[i].count + spans[i + 1].count});
      g.node_shards.resize(g.nodes.size());
      g.node_shards.back() = up_spans.back();
    }
    if (level.size() % 2 == 1) {  // the odd one out waits for the next level
      up.push_back(level.back());
      up_spans.push_back(spans.back());
    }
    level = std::move(up);
    spans = std::move(up_spans);
  }
  return level.front();
}

}  // namespace tribunal
