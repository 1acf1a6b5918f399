// engine/model_cache.h: a registered model file is read, hashed and imported once per stamp; a copy
// of the same bytes shares the import; a rewritten file is read again and hashes to its new bytes.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include "engine/model_cache.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
namespace fs = std::filesystem;

namespace {

Digest file_hash(const fs::path& p) {
  const std::string bytes = testing::read_text(p);
  return hash_tagged(HashTag::File, std::as_bytes(std::span(bytes.data(), bytes.size())));
}

}  // namespace

TEST_CASE("a model file is imported once per stamp, and again once rewritten") {
  const fs::path fixtures = testing::source_dir() / "tests/fixtures/onnx";
  testing::TempDir dir("model-cache");
  const fs::path a = dir.path / "a.onnx", b = dir.path / "b.onnx";
  fs::copy_file(fixtures / "mlp.onnx", a);
  fs::copy_file(fixtures / "mlp.onnx", b);

  const ModelFile first = load_model_file(a, "a", OnnxLimits{});
  CHECK(first.hash == file_hash(a));
  const ModelFile again = load_model_file(a, "a", OnnxLimits{});
  CHECK(again.model.get() == first.model.get());  // not imported again
  const ModelFile copy = load_model_file(b, "b", OnnxLimits{});
  CHECK(copy.hash == first.hash);
  CHECK(copy.model.get() == first.model.get());  // the same bytes: the same import

  // Rewritten in place with other bytes: a new stamp, so it is read, hashed and imported afresh.
  fs::remove(a);
  fs::copy_file(fixtures / "cnn.onnx", a);
  fs::last_write_time(a, fs::last_write_time(a) + std::chrono::seconds(1));
  const ModelFile rewritten = load_model_file(a, "a", OnnxLimits{});
  CHECK(rewritten.hash == file_hash(fixtures / "cnn.onnx"));
  CHECK(rewritten.hash != first.hash);
  CHECK(rewritten.model.get() != first.model.get());

  OnnxLimits small;
  small.max_file_bytes = 16;
  fs::last_write_time(b, fs::last_write_time(b) + std::chrono::seconds(1));  // not cached any more
  CHECK_THROWS_WITH(load_model_file(b, "b", small), doctest::Contains("more than the 16 a model file may"));
  CHECK_THROWS_WITH(load_model_file(dir.path / "missing.onnx", "m", OnnxLimits{}),
                    doctest::Contains("cannot read model file 'm'"));
}
