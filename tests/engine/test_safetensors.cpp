// safetensors: bitwise round trip, header layout as the reference implementation reads it, and
// every corruption rejected with the path in the message.
#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/safetensors.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace tribunal;

namespace {

using testing::TempDir;

std::vector<uint8_t> read_raw(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_raw(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

void put_le64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A hand-made file: header length, header text, then `data_bytes` bytes of data.
void write_crafted(const fs::path& path, const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes;
  put_le64(bytes, header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0x42);
  write_raw(path, bytes);
}

Tensor from_bits(Shape shape, const std::vector<uint32_t>& bits) {
  Tensor t(shape);
  REQUIRE(static_cast<size_t>(t.numel()) == bits.size());
  std::memcpy(t.data(), bits.data(), bits.size() * 4);
  return t;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         (a.numel() == 0 || std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * 4) == 0);
}

std::string read_error(const fs::path& path) {
  try {
    read_safetensors(path);
  } catch (const EngineError& e) {
    return e.what();
  }
  FAIL("read_safetensors did not throw");
  return {};
}

void check_rejected(const fs::path& path, const std::string& what) {
  std::string msg = read_error(path);
  INFO("message: ", msg);
  CHECK(msg.find(path.string()) != std::string::npos);
  CHECK(msg.find(what) != std::string::npos);
  // The header-only reader applies the same validation.
  CHECK_THROWS_AS(read_safetensors_metadata(path), EngineError);
}

}  // namespace

TEST_CASE("safetensors round trip is bitwise, keeps order and metadata") {
  TempDir tmp;
  const fs::path path = tmp.path / "state.safetensors";
  // Quiet NaN with a payload, signalling NaN, -0, +0, smallest and largest subnormals, inf, -inf.
  Tensor special = from_bits(Shape{2, 4}, {0x7fc12345u, 0x7f800001u, 0x80000000u, 0x00000000u, 0x00000001u,
                                           0x007fffffu, 0x7f800000u, 0xff800000u});
  Tensor scalar = from_bits(Shape{}, {std::bit_cast<uint32_t>(3.5f)});
  Tensor empty(Shape{0, 5});
  Tensor rank4(Shape{2, 1, 3, 2});
  for (int64_t i = 0; i < rank4.numel(); ++i) rank4[i] = static_cast<float>(i) * -0.1f;
  Tensor vec(Shape{3}, std::vector<float>{1.0f, 2.0f, 3.0f});

  // Not alphabetical, to check that the written order is kept.
  const std::vector<NamedTensor> tensors = {
      {"zeta.weight", &special}, {"step", &scalar}, {"empty", &empty}, {"alpha", &rank4}, {"b", &vec}};
  const std::map<std::string, std::string> metadata = {
      {"format", "tribunal"}, {"step", "42"}, {"unicode", "h\xc3\xa9llo \xe2\x9c\x93"}, {"empty", ""}};
  write_safetensors(path, tensors, metadata);
  CHECK_FALSE(fs::exists(path.string() + ".tmp"));

  SafetensorsFile f = read_safetensors(path);
  CHECK(f.metadata == metadata);
  REQUIRE(f.tensors.size() == tensors.size());
  // The zero-byte tensor sits at the same offset as the next one and sorts first.
  const std::vector<std::string> expected_order = {"zeta.weight", "step", "empty", "alpha", "b"};
  for (size_t i = 0; i < tensors.size(); ++i) CHECK(f.tensors[i].first == expected_order[i]);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* original = nullptr;
    for (const auto& t : tensors) {
      if (t.name == f.tensors[i].first) original = t.tensor;
    }
    REQUIRE(original != nullptr);
    CHECK_MESSAGE(bitwise_equal(f.tensors[i].second, *original), f.tensors[i].first);
  }
  CHECK(read_safetensors_metadata(path) == metadata);

  // Overwriting replaces the file atomically.
  write_safetensors(path, std::vector<NamedTensor>{{"b", &vec}}, {});
  SafetensorsFile g = read_safetensors(path);
  REQUIRE(g.tensors.size() == 1);
  CHECK(bitwise_equal(g.tensors[0].second, vec));
  CHECK(g.metadata.empty());
  CHECK_FALSE(fs::exists(path.string() + ".tmp"));

  // No tensors at all.
  write_safetensors(path, {}, {{"k", "v"}});
  SafetensorsFile h = read_safetensors(path);
  CHECK(h.tensors.empty());
  CHECK(h.metadata.at("k") == "v");
}

TEST_CASE("safetensors header layout matches the reference format") {
  TempDir tmp;
  const fs::path path = tmp.path / "x.safetensors";
  Tensor a(Shape{2, 3});
  Tensor b(Shape{});
  Tensor c(Shape{4});
  for (int64_t i = 0; i < 6; ++i) a[i] = static_cast<float>(i) + 0.5f;
  b[0] = -1.25f;
  write_safetensors(path, std::vector<NamedTensor>{{"w", &a}, {"s", &b}, {"v", &c}}, {{"step", "7"}});

  auto bytes = read_raw(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  CHECK(n % 8 == 0);
  REQUIRE(8 + n + (6 + 1 + 4) * 4 == bytes.size());
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  CHECK(header.front() == '{');
  CHECK(header.find_last_not_of(' ') + 1 > header.size() - 8);  // at most 7 padding spaces
  CHECK(header[header.find_last_not_of(' ')] == '}');

  auto j = nlohmann::json::parse(header);
  CHECK(j.size() == 4);
  CHECK(j["__metadata__"] == nlohmann::json{{"step", "7"}});
  CHECK(j["w"]["dtype"] == "F32");
  CHECK(j["w"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(j["w"]["data_offsets"] == nlohmann::json::array({0, 24}));
  CHECK(j["s"]["shape"] == nlohmann::json::array());
  CHECK(j["s"]["data_offsets"] == nlohmann::json::array({24, 28}));
  CHECK(j["v"]["shape"] == nlohmann::json::array({4}));
  CHECK(j["v"]["data_offsets"] == nlohmann::json::array({28, 44}));
  // Data little-endian right after the header.
  float s_value = 0;
  std::memcpy(&s_value, bytes.data() + 8 + n + 24, 4);
  CHECK(s_value == -1.25f);
  CHECK(bytes[8 + n + 4] == 0x00);
  CHECK(bytes[8 + n + 7] == 0x3f);  // 1.5f = 0x3fc00000, little-endian
}

TEST_CASE("safetensors write errors name the path") {
  TempDir tmp;
  Tensor a(Shape{2});
  auto write_error = [&](const fs::path& path, std::vector<NamedTensor> tensors) {
    try {
      write_safetensors(path, tensors, {});
    } catch (const EngineError& e) {
      std::string msg = e.what();
      CHECK(msg.find(path.string()) != std::string::npos);
      CHECK_FALSE(fs::exists(path.string() + ".tmp"));
      return msg;
    }
    FAIL("write_safetensors did not throw");
    return std::string();
  };
  CHECK(write_error(tmp.path / "no" / "such" / "dir.safetensors", {{"a", &a}}).find("cannot create") !=
        std::string::npos);
  CHECK(write_error(tmp.path / "d.safetensors", {{"a", &a}, {"a", &a}}).find("duplicate") !=
        std::string::npos);
  CHECK(write_error(tmp.path / "r.safetensors", {{"__metadata__", &a}}).find("reserved") !=
        std::string::npos);
  CHECK(write_error(tmp.path / "n.safetensors", {{"a", nullptr}}).find("null") != std::string::npos);
  CHECK(write_error(tmp.path / "u.safetensors", {{"bad\xff", &a}}).find("UTF-8") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path / "d.safetensors"));
  // A directory in the way of the final name: rename fails, the temporary is cleaned up.
  fs::create_directories(tmp.path / "isdir.safetensors" / "x");
  CHECK(write_error(tmp.path / "isdir.safetensors", {{"a", &a}}).find("rename") != std::string::npos);
}

TEST_CASE("safetensors raw writer: I64 tensors with their dtype; a wrong dtype or size is refused") {
  TempDir tmp;
  const int64_t step = 1234567890123;
  const float w[3] = {1.5f, -2.0f, 0.25f};
  const fs::path path = tmp.path / "raw.safetensors";
  const RawTensor ok[] = {{"w", "F32", {3}, std::as_bytes(std::span<const float>(w))},
                          {"step", "I64", {}, std::as_bytes(std::span<const int64_t>(&step, 1))}};
  write_safetensors_raw(path, ok, {{"k", "v"}});
  const std::vector<uint8_t> bytes = read_raw(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header =
      nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  CHECK(header.at("w").at("dtype") == "F32");
  CHECK(header.at("step").at("dtype") == "I64");
  CHECK(header.at("step").at("shape").empty());
  CHECK(header.at("step").at("data_offsets") == nlohmann::json::array({12, 20}));
  int64_t stored = 0;
  std::memcpy(&stored, bytes.data() + 8 + n + 12, 8);
  CHECK(stored == step);
  // The strict reader takes F32 only: an I64 tensor is refused, not misread.
  CHECK_THROWS_WITH_AS(read_safetensors(path), doctest::Contains("I64"), EngineError);

  const RawTensor f16[] = {{"w", "F16", {3}, std::as_bytes(std::span<const float>(w))}};
  CHECK_THROWS_WITH_AS(write_safetensors_raw(tmp.path / "f16.safetensors", f16, {}),
                       doctest::Contains("dtype \"F16\" is not F32 or I64"), EngineError);
  const RawTensor short_data[] = {{"w", "F32", {4}, std::as_bytes(std::span<const float>(w))}};
  CHECK_THROWS_WITH_AS(write_safetensors_raw(tmp.path / "short.safetensors", short_data, {}),
                       doctest::Contains("12 bytes for 4 F32 elements"), EngineError);
  CHECK_FALSE(fs::exists(tmp.path / "short.safetensors"));
}

TEST_CASE("safetensors rejects corrupt and adversarial files") {
  TempDir tmp;
  const fs::path path = tmp.path / "bad.safetensors";
  const std::string a8 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

  SUBCASE("missing file") {
    check_rejected(tmp.path / "missing.safetensors", "cannot open");
  }
  SUBCASE("shorter than the length field") {
    write_raw(path, {1, 0, 0});
    check_rejected(path, "truncated");
  }
  SUBCASE("truncated data") {
    Tensor t(Shape{4});
    write_safetensors(path, std::vector<NamedTensor>{{"t", &t}}, {});
    auto bytes = read_raw(path);
    bytes.resize(bytes.size() - 3);
    write_raw(path, bytes);
    check_rejected(path, "out of range");
  }
  SUBCASE("truncated header") {
    Tensor t(Shape{4});
    write_safetensors(path, std::vector<NamedTensor>{{"t", &t}}, {});
    auto bytes = read_raw(path);
    bytes.resize(20);
    write_raw(path, bytes);
    check_rejected(path, "header length");
  }
  SUBCASE("header length above 100 MB") {
    std::vector<uint8_t> bytes;
    put_le64(bytes, uint64_t{1} << 40);
    bytes.resize(64, ' ');
    write_raw(path, bytes);
    check_rejected(path, "exceeds the 100000000-byte limit");
  }
  SUBCASE("header length beyond the file") {
    std::vector<uint8_t> bytes;
    put_le64(bytes, 1000);
    const std::string h = "{}";
    bytes.insert(bytes.end(), h.begin(), h.end());
    write_raw(path, bytes);
    check_rejected(path, "header length 1000 exceeds");
  }
  SUBCASE("bad JSON") {
    write_crafted(path, R"({"a":{"dtype":"F32",)", 0);
    check_rejected(path, "not valid JSON");
  }
  SUBCASE("header not an object") {
    write_crafted(path, "[1, 2]  ", 0);
    check_rejected(path, "does not start with '{'");
  }
  SUBCASE("invalid UTF-8 in the header") {
    write_crafted(path, "{\"\xc3\x28\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
    check_rejected(path, "not valid JSON");
  }
  SUBCASE("bad dtype") {
    write_crafted(path, R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
    check_rejected(path, "dtype \"F16\" is not supported");
  }
  SUBCASE("dtype not a string") {
    write_crafted(path, R"({"a":{"dtype":1,"shape":[2],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "dtype is not a string");
  }
  SUBCASE("overlapping offsets") {
    write_crafted(path, "{" + a8 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
    check_rejected(path, "overlap");
  }
  SUBCASE("gap between tensors") {
    write_crafted(path, "{" + a8 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", 20);
    check_rejected(path, "gap of 4 bytes before tensor \"b\"");
  }
  SUBCASE("gap at the start") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
    check_rejected(path, "gap of 4 bytes");
  }
  SUBCASE("offsets out of range") {
    write_crafted(path, "{" + a8 + "}", 4);
    check_rejected(path, "out of range");
  }
  SUBCASE("begin after end") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8);
    check_rejected(path, "begin after end");
  }
  SUBCASE("bytes after the last tensor") {
    write_crafted(path, "{" + a8 + "}", 12);
    check_rejected(path, "4 bytes at the end of the data buffer belong to no tensor");
  }
  SUBCASE("shape does not match the offsets") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "needs 12 bytes but data_offsets [0, 8] span 8");
  }
  SUBCASE("shape overflowing 64 bits") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
    check_rejected(path, "shape is too large");
  }
  SUBCASE("negative dim") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "non-negative integers");
  }
  SUBCASE("fractional dim") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "non-negative integers");
  }
  SUBCASE("rank above 4") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[1,1,1,1,2],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "rank 5 exceeds 4");
  }
  SUBCASE("data_offsets not a pair") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8);
    check_rejected(path, "data_offsets must be [begin, end]");
  }
  SUBCASE("missing key") {
    write_crafted(path, R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8);
    check_rejected(path, "missing \"shape\"");
  }
  SUBCASE("unknown key") {
    write_crafted(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8);
    check_rejected(path, "unknown key \"x\"");
  }
  SUBCASE("entry not an object") {
    write_crafted(path, R"({"a":[1]})", 0);
    check_rejected(path, "entry is not an object");
  }
  SUBCASE("duplicate tensor name") {
    write_crafted(path, "{" + a8 + "," + R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16);
    check_rejected(path, "duplicate key \"a\"");
  }
  SUBCASE("duplicate key inside an entry") {
    write_crafted(path, R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
    check_rejected(path, "duplicate key \"dtype\"");
  }
  SUBCASE("metadata value not a string") {
    write_crafted(path, "{\"__metadata__\":{\"step\":7}," + a8 + "}", 8);
    check_rejected(path, "__metadata__ value of \"step\" is not a string");
  }
  SUBCASE("metadata not an object") {
    write_crafted(path, "{\"__metadata__\":\"x\"," + a8 + "}", 8);
    check_rejected(path, "__metadata__ is not an object");
  }
  SUBCASE("a directory") {
    check_rejected(tmp.path, "not a regular file");
  }
}

TEST_CASE("safetensors accepts a hand-written file in the reference layout") {
  TempDir tmp;
  const fs::path path = tmp.path / "ref.safetensors";
  // Unpadded header, keys in another order than the data: both are valid safetensors.
  std::vector<uint8_t> bytes;
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"__metadata__":{"format":"pt"},)"
      R"("a":{"shape":[1,2],"data_offsets":[0,8],"dtype":"F32"}})";
  put_le64(bytes, header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (float v : {1.0f, -2.0f, 0.25f}) {
    uint32_t u = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  write_raw(path, bytes);
  SafetensorsFile f = read_safetensors(path);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].first == "a");
  CHECK(f.tensors[0].second.shape() == Shape{1, 2});
  CHECK(f.tensors[0].second[1] == -2.0f);
  CHECK(f.tensors[1].first == "b");
  CHECK(f.tensors[1].second[0] == 0.25f);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
}
