#include "dispute/opening.h"

#include <utility>

namespace tribunal {

DisputeOpen dispute_open(const std::string& job_toml, const Dataset& data, std::vector<uint8_t> claim_a,
                         std::vector<uint8_t> claim_b) {
  const DataShape shape = data_shape_of(data);
  DisputeOpen d;
  d.job_toml = job_toml;
  d.dataset_root = data.root;
  d.dataset_samples = static_cast<uint64_t>(shape.samples);
  d.features = static_cast<uint64_t>(shape.features);
  d.classes = static_cast<uint64_t>(shape.classes);
  d.label_width = static_cast<uint64_t>(shape.label_width);
  d.claims = {std::move(claim_a), std::move(claim_b)};
  return d;
}

}  // namespace tribunal
