#include "nodes/train_set.h"

#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace tribunal::nodes {

std::shared_ptr<const Dataset> shared_train_set(const JobSpec& job, ThreadPool& pool) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const Dataset>> cache;
  // The most recently used set stays loaded: a provider is disputed about the job it just trained,
  // and each dispute is a new connection.
  static std::shared_ptr<const Dataset> recent;
  std::string key = job.dataset == "text" ? fmt::format("text\n{}\n{}\n{}", job.data_path.string(),
                                                        job.model.context, job.validation)
                                          : fmt::format("{}\n{}", job.dataset, job.data_path.string());
  // The labels' check: class ids below data.classes, or an mse job's data.targets float targets (files
  // of their own, targets.npy); one of the two is 0.
  if (job.dataset == "tensors") key += fmt::format("\n{}\n{}", job.data_classes, job.data_targets);
  std::lock_guard lock(mu);
  if (auto data = cache[key].lock()) return recent = data;
  auto data = std::make_shared<const Dataset>(load_dataset(job, Split::Train, pool));
  cache[key] = data;
  return recent = data;
}

}  // namespace tribunal::nodes
