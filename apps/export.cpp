// `tribunal export CHECKPOINT --job JOB --out DIR`: a stored checkpoint in the PyTorch form
// (engine/pytorch_export.h): DIR/model.safetensors and DIR/optimizer.safetensors.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/pytorch_export.h"

namespace tribunal::cli {
namespace {

struct ExportSettings {
  std::filesystem::path checkpoint, job_path, out_dir;
  DataRegistry datasets = DataRegistry::debian();
  int threads = 1;
  bool json = false;
};

int run_export(const ExportSettings& s) {
  if (s.checkpoint.empty()) throw UsageError("give a checkpoint (a run's step_*.safetensors)");
  if (s.job_path.empty()) throw UsageError("give the checkpoint's job with --job JOB.toml");
  if (s.out_dir.empty()) throw UsageError("give the directory to write with --out DIR");
  const JobSpec job = load_job(s.job_path, s.datasets);
  const CheckpointHeader header = read_checkpoint_header(s.checkpoint);  // missing or corrupt: named
  ThreadPool pool(s.threads);
  const Digest id = job_id(job, load_dataset(job, Split::Train, pool));
  if (header.job_id != id)
    throw EngineError(fmt::format("{}: a checkpoint of job {}, but {} is job {}", s.checkpoint.string(),
                                  to_hex(header.job_id), s.job_path.string(), to_hex(id)));
  // Verified as any checkpoint is read: names, shapes and the recorded state_hash.
  const State state = load_checkpoint(s.checkpoint, job, id, pool);
  std::error_code ec;
  std::filesystem::create_directories(s.out_dir, ec);
  if (ec)
    throw EngineError(fmt::format("{}: cannot create the directory: {}", s.out_dir.string(), ec.message()));
  const auto model = s.out_dir / "model.safetensors", optimizer = s.out_dir / "optimizer.safetensors";
  const PytorchState form = to_pytorch(job, state);
  write_pytorch(model, optimizer, job, form, id, header.state_hash);
  if (s.json) {
    // Each tensor's first element and float64 sum: what a reader of the files can check them by.
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto* group : {&form.model, &form.optimizer})
      for (const TorchTensor& t : *group) {
        double sum = 0.0;
        for (float v : t.value.values()) sum += static_cast<double>(v);
        const auto dims = t.value.shape().dims();
        tensors.push_back({{"file", group == &form.model ? "model" : "optimizer"},
                           {"name", t.name},
                           {"shape", std::vector<int64_t>(dims.begin(), dims.end())},
                           {"first", t.value.numel() ? static_cast<double>(t.value[0]) : 0.0},
                           {"sum", sum}});
      }
    for (const std::string& name : form.batch_counters)  // I64 scalars, each the step count
      tensors.push_back({{"file", "model"},
                         {"name", name},
                         {"shape", std::vector<int64_t>{}},
                         {"first", static_cast<double>(form.step)},
                         {"sum", static_cast<double>(form.step)}});
    const nlohmann::json out = {{"job_id", to_hex(id)},
                                {"step", form.step},
                                {"loss", static_cast<double>(form.loss)},
                                {"state_hash", to_hex(header.state_hash)},
                                {"model", model.string()},
                                {"optimizer", optimizer.string()},
                                {"tensors", tensors}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    const JobFootprint footprint = job_footprint(job);
    const size_t buffers = state_layout(job).num_buffers;
    fmt::print("job_id      {}\n", to_hex(id));
    fmt::print("step        {} (loss {:.4f}, state_hash {})\n", form.step, form.loss,
               to_hex(header.state_hash));
    fmt::print("model       {} ({} tensors, {} parameters{})\n", model.string(),
               form.model.size() + form.batch_counters.size(), footprint.parameters,
               buffers ? fmt::format(", {} buffers", buffers + form.batch_counters.size()) : std::string());
    fmt::print("optimizer   {} ({} tensors and step)\n", optimizer.string(), form.optimizer.size());
  }
  return 0;
}

}  // namespace

Command add_export(CLI::App& root) {
  auto s = std::make_shared<ExportSettings>();
  CLI::App* app = root.add_subcommand(
      "export",
      "write a stored checkpoint in PyTorch's names and layouts (docs/parity.md): DIR/model.safetensors "
      "(the weights, for load_state_dict) and DIR/optimizer.safetensors (the optimizer state and step); "
      "the checkpoint is verified first and must be the job's");
  app->add_option("checkpoint", s->checkpoint, "the checkpoint (a run's or a store's step_*.safetensors)")
      ->type_name("CHECKPOINT");
  app->add_option("--job", s->job_path, "the checkpoint's job file (TOML)")->type_name("JOB.toml");
  app->add_option("--out", s->out_dir, "the directory to write the two files to (created)")->type_name("DIR");
  add_integer(*app, "--threads", s->threads, 1, 256, "threads for hashing the data set and the state", "K");
  app->add_flag(
      "--json", s->json,
      "print one JSON object (ids, step, loss and each tensor's name, shape, first element and sum)");
  add_datasets(*app, s->datasets);
  return {app, [s] { return run_export(*s); }};
}

}  // namespace tribunal::cli
