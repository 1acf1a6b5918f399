// Every 64 KiB chunk of every node output of real step graphs, computed by the node's part
// (ops/op_part.h) from only the input ranges the part names, hashes to the executor's chunk hash:
// what a referee narrowed to one chunk would re-execute (docs/numerics.md "Parts of an op").
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dispute/job_oracle.h"
#include "engine/dataset.h"
#include "engine/executor.h"
#include "engine/state.h"
#include "ops/op_part.h"
#include "protocol/tensor_hash.h"
#include "tests/dispute/executed_step.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

JobSpec edited(const std::string& file, const std::vector<std::pair<std::string, std::string>>& edits) {
  std::ifstream in(testing::source_dir() / "scenarios/jobs" / file);
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (const auto& edit : edits) {
    const size_t at = s.find(edit.first);
    REQUIRE_MESSAGE(at != std::string::npos, file << " has no '" << edit.first << "'");
    s.replace(at, edit.first.size(), edit.second);
  }
  JobSpec job = parse_job(s, file + " (wider)");
  locate_data(job, DataRegistry::debian());
  return job;
}

constexpr int64_t kChunkElements = static_cast<int64_t>(kTensorChunkBytes / sizeof(float));

}  // namespace

TEST_CASE(
    "every chunk of every node output of a GPT and a CNN step, computed by its part, has the "
    "executor's chunk hash") {
  struct Job {
    const char* file;
    std::vector<std::pair<std::string, std::string>> edits;
  };
  // Wider than the short jobs, so that outputs span several chunks (wide_gpt.toml's MLP hidden
  // layer: 256 × 512 = 8 chunks; its attention probabilities 4 · 4 · 64 · 64 = 4 chunks).
  const std::vector<Job> jobs = {
      {"wide_gpt.toml", {}},
      {"short_cnn.toml", {{"batch_size = 16", "batch_size = 64"}}},
  };
  for (const Job& j : jobs) {
    const std::string file = j.file;
    CAPTURE(file);
    const JobSpec job = edited(j.file, j.edits);
    testing::ExecutedStep run(job, 2);
    const StepGraph& g = run.graph();
    const Executor& executor = run.executor;

    std::map<std::string, int> smaller_parts;  // op → chunks whose part ran on less than all of input 0
    size_t chunks = 0;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const Node& node = g.nodes[n];
      std::vector<Shape> shapes;
      for (ValueId v : node.inputs) shapes.push_back(g.values[v].shape);
      for (size_t slot = 0; slot < node.outputs.size(); ++slot) {
        const Tensor& want = executor.value(node.outputs[slot]);
        const std::vector<Digest> want_hashes = tensor_chunk_hashes(DType::F32, want.bytes());
        for (int64_t c = 0; c * kChunkElements < std::max<int64_t>(want.numel(), 1); ++c) {
          const ElementRange range{c * kChunkElements, std::min(want.numel(), (c + 1) * kChunkElements)};
          if (range.size() == 0) break;
          const std::optional<OpPart> part =
              op_part(node.op, node.attrs, shapes, static_cast<int>(slot), range);
          if (!part) continue;
          std::vector<std::span<const float>> slices;
          for (size_t i = 0; i < node.inputs.size(); ++i)
            slices.push_back(executor.value(node.inputs[i])
                                 .values()
                                 .subspan(static_cast<size_t>(part->inputs[i].first),
                                          static_cast<size_t>(part->inputs[i].size())));
          const std::vector<float> got =
              run_part(node.op, *part, slices, static_cast<int>(slot), range.size(), run.threads);
          REQUIRE_MESSAGE(tensor_chunk_hash(DType::F32, std::as_bytes(std::span<const float>(got))) ==
                              want_hashes[static_cast<size_t>(c)],
                          "node " << n << " (" << op_name(node.op) << ") output " << slot << " chunk " << c);
          ++chunks;
          if (part->shapes[0].numel() < shapes[0].numel()) ++smaller_parts[op_name(node.op)];
        }
      }
    }
    CHECK(chunks > g.nodes.size() / 2);
    // The ops a dispute at scale lands on most (a product, an update) and the GPT's and CNN's
    // row-wise and elementwise ops read less than their whole inputs for some chunk.
    if (file == "wide_gpt.toml")
      for (const char* op : {"linear", "matmul", "adamw", "gelu", "softmax", "layer_norm", "add"}) {
        CAPTURE(op);
        CHECK(smaller_parts[op] > 0);
      }
    else
      CHECK(smaller_parts["relu"] > 0);
  }
}
