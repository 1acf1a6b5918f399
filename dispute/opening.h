// The client's DisputeOpen (docs/protocol.md, "Opening a dispute"): the job, its data set's root and
// shape, and the two signed claims that disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/dataset.h"
#include "protocol/messages.h"

namespace tribunal {

/// The client's DisputeOpen (docs/protocol.md, "Opening a dispute") over two providers' signed Claim
/// envelopes for the job `job_toml` trained on `data`: the data set's root and shape come from `data`.
DisputeOpen dispute_open(const std::string& job_toml, const Dataset& data, std::vector<uint8_t> claim_a,
                         std::vector<uint8_t> claim_b);

}  // namespace tribunal
