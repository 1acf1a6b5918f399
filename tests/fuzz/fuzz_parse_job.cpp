// libFuzzer target: the job text a client sends to a referee or a provider (DisputeOpen.job_toml,
// a submitted job) on arbitrary bytes. parse_job either refuses with EngineError (the TOML parser's
// errors included) or returns a job whose identity and dispute cost the referee then derives from
// the text alone (engine/cost.h), on the data shapes of the built-in data sets; neither may crash,
// hang or read out of bounds, whatever the numbers.
#include <cstdint>
#include <string_view>

#include "engine/cost.h"
#include "engine/error.h"
#include "engine/job.h"
#include "ops/tensor.h"

using namespace tribunal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  JobSpec job;
  try {
    job = parse_job(text, "fuzz");
  } catch (const EngineError&) {
    return 0;
  }
  // Fashion-MNIST's shape and the text set's (a GPT's windows): what a referee derives the cost on.
  const DataShape shape = job.dataset == "text"
                              ? DataShape{4096, job.model.context, job.model.vocab, job.model.context}
                              : DataShape{60000, 784, 10, 0};
  try {
    (void)job_id(job, Digest{}, shape);
    (void)dispute_cost(job, shape);
  } catch (const EngineError&) {
  } catch (const OpError&) {
  }
  return 0;
}
