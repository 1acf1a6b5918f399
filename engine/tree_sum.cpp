#include "engine/tree_sum.h"

#include <vector>

namespace tribunal {

ValueId append_tree_sum(GraphBuilder& builder, std::span<const ValueId> partials, const std::string& name) {
  if (partials.empty()) throw OpError("tree sum of '" + name + "': no partials");
  std::vector<ValueId> level(partials.begin(), partials.end());
  for (int depth = 1; level.size() > 1; ++depth) {
    const bool last_level = level.size() == 2;
    std::vector<ValueId> up;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      const std::string node = last_level ? name : name + "/tree" + std::to_string(depth) + "." + std::to_string(i / 2);
      up.push_back(builder.add_node(OpKind::Add, {}, {level[i], level[i + 1]}, node).front());
    }
    if (level.size() % 2 == 1) up.push_back(level.back());  // the odd one out waits for the next level
    level = std::move(up);
  }
  return level.front();
}

}  // namespace tribunal
