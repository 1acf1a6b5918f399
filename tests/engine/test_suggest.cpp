// "Did you mean …?" (engine/suggest.h): the edit distance, the closeness rule, and the TOML readers
// that use it for a mistyped key or table of a job file.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/job.h"
#include "engine/suggest.h"

using namespace tribunal;

TEST_CASE("edit_distance counts inserts, deletes, substitutions and adjacent swaps") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("", "ab") == 2);
  CHECK(edit_distance("batch_size", "batch_size") == 0);
  CHECK(edit_distance("batch_sise", "batch_size") == 1);  // substitution
  CHECK(edit_distance("stpes", "steps") == 1);            // adjacent swap
  CHECK(edit_distance("strid", "stride") == 1);           // insertion
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("ca", "abc") == 3);  // optimal string alignment, not unrestricted Damerau (2)
}

TEST_CASE("closest_name answers a typo, never an unrelated name") {
  const std::vector<std::string_view> keys = {"seed", "steps", "batch_size", "stride", "shards"};
  CHECK(closest_name("batch_sise", keys) == "batch_size");
  CHECK(closest_name("stpes", keys) == "steps");
  CHECK(closest_name("sed", keys) == "seed");
  CHECK(closest_name("learning_rate", keys).empty());
  CHECK(closest_name("x", keys).empty());
  CHECK(closest_name("steps", keys).empty());  // the name itself is no suggestion
  CHECK(did_you_mean("strid", keys) == " (did you mean 'stride'?)");
  CHECK(did_you_mean("momentum", keys).empty());
}

namespace {

constexpr const char* kJob = R"(
[model]
widths = [784, 16, 10]
[data]
dataset = "fashion-mnist"
[train]
steps = 4
batch_size = 8
stride = 2
[optimizer]
lr = 0.01
)";

std::string error_of(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  try {
    parse_job(text, "job.toml");
  } catch (const EngineError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a mistyped job key or table names the one meant") {
  CHECK(error_of(kJob, "batch_size", "batch_sise") ==
        "job.toml:8:14: unknown key 'batch_sise' in [train] (did you mean 'batch_size'?)");
  CHECK(error_of(kJob, "lr = 0.01", "lr = 0.01\nweight_decy = 0.1") ==
        "job.toml:12:15: unknown key 'weight_decy' in [optimizer] (did you mean 'weight_decay'?)");
  CHECK(error_of(kJob, "[optimizer]", "[optimiser]") ==
        "job.toml:10:1: unknown table or key 'optimiser' (did you mean [optimizer]? expected [model], "
        "[data], [train], [optimizer], [dispute], [numerics])");
  // Nothing close: the refusal alone.
  CHECK(error_of(kJob, "lr = 0.01", "lr = 0.01\nlearning_rate = 3") ==
        "job.toml:12:17: unknown key 'learning_rate' in [optimizer]");
}
