#include "engine/suggest.h"

#include <algorithm>

namespace tribunal {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the two before the current one (for a transposition).
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates) {
  const size_t limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string_view best;
  size_t best_distance = limit + 1;
  for (std::string_view c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance && c != word) best = c, best_distance = d;
  }
  return std::string(best);
}

std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates) {
  const std::string name = closest_name(word, candidates);
  return name.empty() ? std::string() : " (did you mean '" + name + "'?)";
}

}  // namespace tribunal
