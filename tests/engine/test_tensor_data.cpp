// The user's own data (data.dataset = "tensors", engine/tensor_data.h): .npy and safetensors files
// written here, read back, trained on by an MLP and a CNN of the data set's image shape and class count
// (a safetensors set exactly as its .npy twin), and each kind of bad data refused with the file and the
// first bad sample named.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "engine/data_registry.h"
#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/npy.h"
#include "engine/safetensors.h"
#include "engine/tensor_data.h"
#include "engine/trainer.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using tribunal::testing::TempDir;

namespace {

constexpr int64_t kSamples = 48, kChannels = 3, kSide = 8, kClasses = 4;
constexpr int64_t kFeatures = kChannels * kSide * kSide;

// A learnable set: the label is which quarter of channel 0 is brightest.
struct Arrays {
  std::vector<float> x;
  std::vector<int64_t> y;
};

Arrays make_arrays() {
  Arrays a;
  a.x.resize(static_cast<size_t>(kSamples * kFeatures));
  a.y.resize(static_cast<size_t>(kSamples));
  for (int64_t i = 0; i < kSamples; ++i) {
    const int64_t label = (i * 7 + 3) % kClasses;
    a.y[static_cast<size_t>(i)] = label;
    for (int64_t k = 0; k < kFeatures; ++k) {
      const int64_t row = (k / kSide) % kSide, col = k % kSide;
      const int64_t quarter = (row / (kSide / 2)) * 2 + col / (kSide / 2);
      const float noise = static_cast<float>((i * 31 + k * 17) % 13) / 26.0f;
      a.x[static_cast<size_t>(i * kFeatures + k)] =
          (k < kSide * kSide && quarter == label ? 1.0f : 0.0f) + noise;
    }
  }
  return a;
}

void write_features(const std::filesystem::path& file, const std::vector<float>& x,
                    const std::vector<int64_t>& shape) {
  write_npy(file, "<f4", shape, x.data(), x.size() * sizeof(float));
}

void write_labels(const std::filesystem::path& file, const std::vector<int64_t>& y) {
  write_npy(file, "<i8", {static_cast<int64_t>(y.size())}, y.data(), y.size() * sizeof(int64_t));
}

// DIR/features.npy [N, 3, 8, 8] and DIR/labels.npy [N] int64.
void write_set(const std::filesystem::path& dir, const Arrays& a) {
  write_features(dir / "features.npy", a.x, {kSamples, kChannels, kSide, kSide});
  write_labels(dir / "labels.npy", a.y);
}

// FILE: a safetensors data file of "features" (F32, `shape`) and "labels" (I64 [N]), then `extra`.
void write_safetensors_set(const std::filesystem::path& file, const Arrays& a,
                           const std::vector<int64_t>& shape, std::vector<RawTensor> extra = {}) {
  std::vector<RawTensor> t = {
      {"features", "F32", shape, std::as_bytes(std::span<const float>(a.x))},
      {"labels", "I64", {static_cast<int64_t>(a.y.size())}, std::as_bytes(std::span<const int64_t>(a.y))}};
  t.insert(t.end(), extra.begin(), extra.end());
  write_safetensors_raw(file, t, {});
}

std::string error_loading(const std::filesystem::path& dir, int64_t classes = kClasses) {
  ThreadPool pool(1);
  try {
    load_tensor_data(dir, classes, Split::Train, pool);
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

JobSpec job_on(const std::filesystem::path& dir, const std::string& text) {
  JobSpec job = parse_job(text, "user.toml");
  DataRegistry registry;
  registry.add("mine", dir);
  locate_data(job, registry);
  return job;
}

const char* kCnnJob = R"(
[model]
kind = "cnn"
channels = [4]
kernel = 3
[data]
dataset = "tensors"
name = "mine"
classes = 4
image = [3, 8, 8]
[train]
seed = 5
steps = 40
batch_size = 16
stride = 10
[optimizer]
kind = "adamw"
lr = 0.01
)";

const char* kMlpJob = R"(
[model]
kind = "mlp"
widths = [192, 16, 4]
[data]
dataset = "tensors"
name = "mine"
classes = 4
[train]
seed = 5
steps = 40
batch_size = 16
stride = 10
[optimizer]
kind = "adamw"
lr = 0.01
)";

TrainResult train_on(const JobSpec& job) {
  TrainOptions o;
  o.threads = 1;
  o.evaluate = true;
  return run_training(job, o);
}

}  // namespace

TEST_CASE(".npy files round-trip and their header is checked") {
  TempDir dir("npy");
  const std::vector<int32_t> v = {1, -2, 3, 4, 5, 6};
  write_npy(dir.path / "a.npy", "<i4", {2, 3}, v.data(), v.size() * 4);
  const NpyArray a = read_npy(dir.path / "a.npy");
  CHECK(a.header.descr == "<i4");
  CHECK(a.header.shape == std::vector<int64_t>{2, 3});
  CHECK(a.bytes.size() == 24);
  CHECK(std::memcmp(a.bytes.data(), v.data(), 24) == 0);
  // A file numpy 1.x writes for np.arange(3, dtype=np.uint8): version 1.0, a 118-byte header.
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }";
  header.resize(117, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + std::string(1, static_cast<char>(header.size())) +
                     std::string(1, '\0') + header + std::string("\x00\x01\x02", 3);
  testing::write_text(dir.path / "u8.npy", file);
  CHECK(read_npy(dir.path / "u8.npy").bytes == std::vector<uint8_t>{0, 1, 2});
  // Fortran order, an unaccepted type, a bad magic, a truncated payload, trailing bytes.
  const auto error_of = [&](const std::string& text) {
    testing::write_text(dir.path / "bad.npy", text);
    try {
      read_npy(dir.path / "bad.npy");
    } catch (const EngineError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto with_header = [&](const std::string& dict, const std::string& payload) {
    std::string h = dict;
    h.resize(117, ' ');
    h += '\n';
    return std::string("\x93NUMPY\x01\x00", 8) + std::string(1, static_cast<char>(h.size())) +
           std::string(1, '\0') + h + payload;
  };
  CHECK(error_of(with_header("{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }", "abc"))
            .find("only C-order") != std::string::npos);
  CHECK(error_of(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", "12345678"))
            .find("'<f8' is not accepted") != std::string::npos);
  CHECK(error_of("PK\x03\x04 not numpy at all").find("not an .npy file") != std::string::npos);
  CHECK(error_of(with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", "abc"))
            .find("truncated: shape 4 of '|u1' needs 4 data bytes, the file has 3") != std::string::npos);
  CHECK(error_of(with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "abc"))
            .find("1 trailing bytes") != std::string::npos);
  CHECK(error_of(with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), 'x': 1}", "ab"))
            .find("unexpected or repeated key 'x'") != std::string::npos);
}

TEST_CASE("a tensors data set loads with its shape, and its root depends only on the samples") {
  TempDir dir("tensors");
  const Arrays a = make_arrays();
  write_set(dir.path, a);
  ThreadPool pool(2);
  const Dataset d = load_tensor_data(dir.path, kClasses, Split::Train, pool);
  CHECK(d.samples() == kSamples);
  CHECK(d.inputs.shape() == Shape{kSamples, kFeatures});
  CHECK(d.labels.shape() == Shape{kSamples});
  CHECK(d.rows == kSide);
  CHECK(d.cols == kSide);
  CHECK(d.classes == kClasses);
  CHECK(d.labels[5] == static_cast<float>(a.y[5]));
  CHECK(d.inputs[7 * kFeatures + 3] == a.x[static_cast<size_t>(7 * kFeatures + 3)]);
  CHECK(d.root == dataset_root(d));
  // The same samples as uint8 labels and [N, F] features, on another thread count: the same root.
  TempDir other("tensors2");
  write_features(other.path / "features.npy", a.x, {kSamples, kFeatures});
  std::vector<uint8_t> y8(a.y.begin(), a.y.end());
  write_npy(other.path / "labels.npy", "|u1", {kSamples}, y8.data(), y8.size());
  ThreadPool serial(1);
  const Dataset flat = load_tensor_data(other.path, kClasses, Split::Train, serial);
  CHECK(flat.root == d.root);
  CHECK(flat.rows == 1);
  CHECK(flat.cols == kFeatures);
  // One label changed: another root.
  Arrays b = a;
  b.y[9] = (b.y[9] + 1) % kClasses;
  write_labels(other.path / "labels.npy", b.y);
  CHECK(load_tensor_data(other.path, kClasses, Split::Train, serial).root != d.root);
  // The shape from the headers alone.
  const DataShape shape = tensor_data_shape(dir.path, kClasses);
  CHECK(shape == DataShape{kSamples, kFeatures, kClasses, 0});
  // No test files: an empty test split.
  CHECK(load_tensor_data(dir.path, kClasses, Split::Test, pool).samples() == 0);
}

TEST_CASE("bad user data is refused naming the file and the first bad sample") {
  TempDir dir("baddata");
  const Arrays good = make_arrays();
  const auto features = (dir.path / "features.npy").string();
  const auto labels = (dir.path / "labels.npy").string();

  SUBCASE("labels out of range") {
    Arrays a = good;
    a.y[13] = kClasses;
    a.y[20] = kClasses + 5;
    write_set(dir.path, a);
    CHECK(error_loading(dir.path) ==
          labels + ": sample 13: label 4 is not a class id 0..3 (data.classes = 4)");
  }
  SUBCASE("a negative label") {
    Arrays a = good;
    a.y[2] = -1;
    write_set(dir.path, a);
    CHECK(error_loading(dir.path) ==
          labels + ": sample 2: label -1 is not a class id 0..3 (data.classes = 4)");
  }
  SUBCASE("NaN and infinite features") {
    Arrays a = good;
    a.x[static_cast<size_t>(11 * kFeatures + 70)] = std::numeric_limits<float>::quiet_NaN();
    a.x[static_cast<size_t>(30 * kFeatures)] = std::numeric_limits<float>::infinity();
    write_set(dir.path, a);
    CHECK(error_loading(dir.path) == features + ": sample 11: feature 70 is nan (features must be finite)");
  }
  SUBCASE("mismatched sample counts") {
    write_set(dir.path, good);
    std::vector<int64_t> y(good.y.begin(), good.y.end() - 1);
    write_labels(dir.path / "labels.npy", y);
    CHECK(error_loading(dir.path) == labels + ": 47 labels but " + features + " has 48 samples");
  }
  SUBCASE("a truncated features file") {
    write_set(dir.path, good);
    std::filesystem::resize_file(dir.path / "features.npy",
                                 std::filesystem::file_size(dir.path / "features.npy") - 5);
    CHECK(error_loading(dir.path).starts_with(features +
                                              ": truncated: shape 48x3x8x8 of '<f4' needs 36864 data bytes"));
  }
  SUBCASE("float labels and integer features") {
    write_features(dir.path / "features.npy", good.x, {kSamples, kChannels, kSide, kSide});
    std::vector<float> fy(good.y.begin(), good.y.end());
    write_npy(dir.path / "labels.npy", "<f4", {kSamples}, fy.data(), fy.size() * 4);
    CHECK(error_loading(dir.path) ==
          labels + ": labels must be integers ('<i8', '<i4' or '|u1'), not float32 ('<f4')");
    write_npy(dir.path / "features.npy", "<i8", {kSamples}, good.y.data(), good.y.size() * 8);
    CHECK(error_loading(dir.path).starts_with(features + ": features must be float32 ('<f4'), not '<i8'"));
  }
  SUBCASE("labels of another rank") {
    write_features(dir.path / "features.npy", good.x, {kSamples, kChannels, kSide, kSide});
    write_npy(dir.path / "labels.npy", "<i8", {kSamples / 2, 2}, good.y.data(), good.y.size() * 8);
    CHECK(error_loading(dir.path) == labels + ": labels must be [N] class ids, not shape (24, 2)");
  }
  SUBCASE("a missing file") {
    write_labels(dir.path / "labels.npy", good.y);
    CHECK(error_loading(dir.path).starts_with(features + ": cannot open"));
  }
}

TEST_CASE("a data.safetensors set has the root, job id and trajectory of its .npy twin") {
  const Arrays a = make_arrays();
  TempDir npy("twin-npy"), st("twin-st");
  write_set(npy.path, a);
  write_features(npy.path / "test-features.npy", a.x, {kSamples, kChannels, kSide, kSide});
  write_labels(npy.path / "test-labels.npy", a.y);
  write_safetensors_set(st.path / "data.safetensors", a, {kSamples, kChannels, kSide, kSide});
  write_safetensors_set(st.path / "test.safetensors", a, {kSamples, kChannels, kSide, kSide});

  ThreadPool pool(2);
  const Dataset dn = load_tensor_data(npy.path, kClasses, Split::Train, pool);
  const Dataset ds = load_tensor_data(st.path, kClasses, Split::Train, pool);
  CHECK(ds.root == dn.root);
  CHECK(ds.rows == kSide);
  CHECK(ds.cols == kSide);
  CHECK(ds.inputs.shape() == Shape{kSamples, kFeatures});
  CHECK(ds.labels[5] == static_cast<float>(a.y[5]));
  CHECK(load_tensor_data(st.path, kClasses, Split::Test, pool).root ==
        load_tensor_data(npy.path, kClasses, Split::Test, pool).root);
  CHECK(tensor_data_shape(st.path, kClasses) == DataShape{kSamples, kFeatures, kClasses, 0});

  // A few steps of the cnn: the same job id and trajectory root from either form.
  std::string text = kCnnJob;
  text.replace(text.find("steps = 40"), 10, "steps = 6");
  text.replace(text.find("stride = 10"), 11, "stride = 3");
  const TrainResult rn = train_on(job_on(npy.path, text));
  const TrainResult rs = train_on(job_on(st.path, text));
  CHECK(rs.steps == 6);
  CHECK(rs.job_id == rn.job_id);
  CHECK(rs.trajectory_root == rn.trajectory_root);
  CHECK(rs.test_accuracy == rn.test_accuracy);

  // [N, F] features and I32 labels (an F32 tensor of int32 bytes whose dtype is then patched): the
  // same root again.
  TempDir flat("twin-flat");
  const std::vector<int32_t> y32(a.y.begin(), a.y.end());
  const RawTensor t[] = {
      {"features", "F32", {kSamples, kFeatures}, std::as_bytes(std::span<const float>(a.x))},
      {"labels", "F32", {kSamples}, std::as_bytes(std::span<const int32_t>(y32))}};
  write_safetensors_raw(flat.path / "data.safetensors", t, {});
  std::string bytes = testing::read_text(flat.path / "data.safetensors");
  bytes.replace(bytes.rfind("\"F32\""), 5, "\"I32\"");
  testing::write_text(flat.path / "data.safetensors", bytes);
  const Dataset d32 = load_tensor_data(flat.path, kClasses, Split::Train, pool);
  CHECK(d32.root == dn.root);
  CHECK(d32.rows == 1);
  CHECK(d32.cols == kFeatures);
  // The checkpoint reader stays F32-only on the same file.
  CHECK_THROWS_WITH_AS(read_safetensors(flat.path / "data.safetensors"),
                       ((flat.path / "data.safetensors").string() +
                        ": tensor \"labels\": dtype \"I32\" is not supported (only F32)")
                           .c_str(),
                       EngineError);
}

TEST_CASE("bad safetensors data is refused naming the file, the tensor and the first bad sample") {
  TempDir dir("badst");
  const Arrays good = make_arrays();
  const std::filesystem::path file = dir.path / "data.safetensors";
  const std::string at = file.string() + ": ";
  const std::vector<int64_t> image = {kSamples, kChannels, kSide, kSide};

  SUBCASE("labels out of range") {
    Arrays a = good;
    a.y[13] = kClasses;
    a.y[20] = -1;
    write_safetensors_set(file, a, image);
    CHECK(error_loading(dir.path) ==
          at + "tensor \"labels\": sample 13: label 4 is not a class id 0..3 (data.classes = 4)");
  }
  SUBCASE("NaN and infinite features") {
    Arrays a = good;
    a.x[static_cast<size_t>(11 * kFeatures + 70)] = std::numeric_limits<float>::quiet_NaN();
    a.x[static_cast<size_t>(30 * kFeatures)] = std::numeric_limits<float>::infinity();
    write_safetensors_set(file, a, image);
    CHECK(error_loading(dir.path) ==
          at + "tensor \"features\": sample 11: feature 70 is nan (features must be finite)");
  }
  SUBCASE("mismatched sample counts") {
    Arrays a = good;
    a.y.pop_back();
    write_safetensors_set(file, a, image);
    CHECK(error_loading(dir.path) ==
          at + "tensor \"labels\": 47 labels but tensor \"features\" has 48 samples");
    CHECK_THROWS_WITH_AS(tensor_data_shape(dir.path, kClasses), error_loading(dir.path).c_str(), EngineError);
  }
  SUBCASE("a truncated file") {
    write_safetensors_set(file, good, image);
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 5);
    CHECK(error_loading(dir.path) ==
          at + "tensor \"labels\": data_offsets [36864, 37248] out of range of the 37243-byte data buffer");
    std::filesystem::resize_file(file, 20);
    CHECK(error_loading(dir.path).starts_with(at + "header length "));
    CHECK(error_loading(dir.path).ends_with(" exceeds the 12 bytes after the length field (truncated?)"));
  }
  SUBCASE("wrong dtypes") {
    const std::vector<float> fy(good.y.begin(), good.y.end());
    const RawTensor float_labels[] = {
        {"features", "F32", image, std::as_bytes(std::span<const float>(good.x))},
        {"labels", "F32", {kSamples}, std::as_bytes(std::span<const float>(fy))}};
    write_safetensors_raw(file, float_labels, {});
    CHECK(error_loading(dir.path) ==
          at + "tensor \"labels\": labels must be integers (I64, I32 or U8), not float32 (F32)");
    const RawTensor int_features[] = {
        {"features", "I64", {kSamples}, std::as_bytes(std::span<const int64_t>(good.y))},
        {"labels", "I64", {kSamples}, std::as_bytes(std::span<const int64_t>(good.y))}};
    write_safetensors_raw(file, int_features, {});
    CHECK(error_loading(dir.path) ==
          at + "tensor \"features\": features must be float32 (F32), not I64 (numpy: x.astype(np.float32))");
    // A dtype no reader accepts (F64: the I64 labels' bytes, relabelled).
    write_safetensors_set(file, good, image);
    std::string bytes = testing::read_text(file);
    bytes.replace(bytes.find("\"I64\""), 5, "\"F64\"");
    testing::write_text(file, bytes);
    CHECK(error_loading(dir.path) ==
          at + "tensor \"labels\": dtype \"F64\" is not supported (F32, I64, I32 or U8)");
  }
  SUBCASE("a missing or an extra tensor") {
    const RawTensor only_features[] = {
        {"features", "F32", image, std::as_bytes(std::span<const float>(good.x))}};
    write_safetensors_raw(file, only_features, {});
    CHECK(error_loading(dir.path) ==
          at + "no tensor \"labels\" (a data file holds exactly \"features\" and \"labels\")");
    const float w[2] = {1, 2};
    write_safetensors_set(file, good, image,
                          {{"weights", "F32", {2}, std::as_bytes(std::span<const float>(w))}});
    CHECK(error_loading(dir.path) ==
          at + "unexpected tensor \"weights\" (a data file holds exactly \"features\" and \"labels\")");
  }
  SUBCASE("both forms in one directory") {
    write_safetensors_set(file, good, image);
    write_labels(dir.path / "test-labels.npy", good.y);
    const std::string both =
        dir.path.string() +
        ": holds both test-labels.npy and data.safetensors: keep one form of the data set "
        "(.npy or .safetensors)";
    CHECK(error_loading(dir.path) == both);
    CHECK_THROWS_WITH_AS(tensor_data_shape(dir.path, kClasses), both.c_str(), EngineError);
  }
  SUBCASE("a test.safetensors without data.safetensors") {
    write_safetensors_set(dir.path / "test.safetensors", good, image);
    CHECK(error_loading(dir.path).starts_with(at + "cannot open"));
  }
}

TEST_CASE("an MLP and a CNN train on a user's .npy data set of 3x8x8 images and 4 classes") {
  TempDir dir("usertrain");
  write_set(dir.path, make_arrays());
  const Arrays a = make_arrays();
  // The test split: the training arrays again (the accuracy is then the training accuracy).
  write_features(dir.path / "test-features.npy", a.x, {kSamples, kChannels, kSide, kSide});
  write_labels(dir.path / "test-labels.npy", a.y);

  const JobSpec cnn = job_on(dir.path, kCnnJob);
  CHECK(cnn.model.image_channels == 3);
  CHECK(cnn.model.image_height == 8);
  CHECK(cnn.model.image_width == 8);
  CHECK(cnn.model.classes == 4);
  CHECK(expected_data_shape(cnn) == DataShape{kSamples, kFeatures, kClasses, 0});
  const TrainResult rc = train_on(cnn);
  CHECK(rc.steps == 40);
  CHECK(rc.test_accuracy > 0.9);
  // Trained again: the same trajectory (the set is bound by its root in the job id).
  CHECK(train_on(cnn).trajectory_root == rc.trajectory_root);

  const JobSpec mlp = job_on(dir.path, kMlpJob);
  const TrainResult rm = train_on(mlp);
  CHECK(rm.test_accuracy > 0.9);
  CHECK(rm.job_id != rc.job_id);

  // Fewer classes than the labels use: refused at load, naming the labels file and sample.
  std::string text = kMlpJob;
  text.replace(text.find("classes = 4"), 11, "classes = 3");
  text.replace(text.find("16, 4]"), 6, "16, 3]");
  const std::string three = [&] {
    try {
      train_on(job_on(dir.path, text));
    } catch (const EngineError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(three.starts_with((dir.path / "labels.npy").string() + ": sample 0: label 3 is not a class id 0..2"));
  // A cnn stating another image shape than the files have is refused before training.
  std::string other = kCnnJob;
  other.replace(other.find("[3, 8, 8]"), 9, "[3, 4, 16]");
  CHECK_THROWS_WITH_AS(train_on(job_on(dir.path, other)), doctest::Contains("the cnn reads 4x16 images"),
                       EngineError);
}

TEST_CASE("a tensors job states its classes and a cnn's image shape, and nothing else") {
  const auto error_of = [](std::string text, const std::string& from, const std::string& to) {
    if (!from.empty()) text.replace(text.find(from), from.size(), to);
    try {
      parse_job(text, "user.toml");
    } catch (const EngineError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(kCnnJob, "", "").empty());
  CHECK(error_of(kMlpJob, "", "").empty());
  CHECK(error_of(kCnnJob, "name = \"mine\"\n", "") ==
        "user.toml:7:11: data.dataset = \"tensors\" needs data.name (a registered data set)");
  CHECK(error_of(kCnnJob, "classes = 4\n", "").find("classes") != std::string::npos);
  CHECK(error_of(kCnnJob, "image = [3, 8, 8]\n", "") ==
        "user.toml:7:11: a cnn on data.dataset = \"tensors\" needs data.image = [C, H, W]");
  CHECK(error_of(kCnnJob, "[3, 8, 8]", "[8, 8]").find("data.image must be [C, H, W] (3 entries), got 2") !=
        std::string::npos);
  CHECK(error_of(kCnnJob, "[3, 8, 8]", "[3, 6, 6]").empty());
  CHECK(error_of(kCnnJob, "channels = [4]", "channels = [4, 4, 4, 4]")
            .find("block 3 would max-pool a 1x1 image") != std::string::npos);
  CHECK(error_of(kMlpJob, "classes = 4", "classes = 4\nimage = [3, 8, 8]").find("unknown key") !=
        std::string::npos);
  CHECK(error_of(kMlpJob, "classes = 4", "classes = 1").find("out of range") != std::string::npos);
  // The image shape and classes reach the model (and so the job id's cnn fields).
  const JobSpec job = parse_job(kCnnJob, "user.toml");
  CHECK(job.model.image_channels == 3);
  CHECK(job.model.classes == 4);
  CHECK(job.data_classes == 4);
  CHECK(job.dataset == "tensors");
}
