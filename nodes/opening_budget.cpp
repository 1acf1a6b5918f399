#include "nodes/opening_budget.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tribunal::nodes {

bool OpeningBudget::reserve(const void* holder, uint64_t bytes, Granted granted) {
  std::lock_guard lock(mu_);
  if (held_.contains(holder)) return true;
  if (std::any_of(queue_.begin(), queue_.end(), [&](const Waiter& w) { return w.holder == holder; }))
    return false;
  // First come, first served: a large opening at the head is not starved by smaller ones behind it.
  if (queue_.empty() && fits(bytes)) {
    held_[holder] = bytes;
    reserved_ += bytes;
    return true;
  }
  queue_.push_back({holder, bytes, std::move(granted)});
  ++deferred_;
  return false;
}

void OpeningBudget::release(const void* holder) {
  std::vector<Granted> grants;
  {
    std::lock_guard lock(mu_);
    if (const auto it = held_.find(holder); it != held_.end()) {
      reserved_ -= it->second;
      held_.erase(it);
    } else {
      std::erase_if(queue_, [&](const Waiter& w) { return w.holder == holder; });
    }
    while (!queue_.empty() && fits(queue_.front().bytes)) {
      Waiter& w = queue_.front();
      held_[w.holder] = w.bytes;
      reserved_ += w.bytes;
      grants.push_back(std::move(w.granted));
      queue_.pop_front();
    }
  }
  for (Granted& g : grants) g();
}

uint64_t OpeningBudget::reserved() const {
  std::lock_guard lock(mu_);
  return reserved_;
}

size_t OpeningBudget::waiting() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

uint64_t OpeningBudget::deferred() const {
  std::lock_guard lock(mu_);
  return deferred_;
}

}  // namespace tribunal::nodes
