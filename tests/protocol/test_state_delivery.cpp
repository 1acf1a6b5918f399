// The client's checks of a delivered final state (protocol/state_delivery.h; docs/protocol.md,
// "Delivery"): the header against the trajectory root, each chunk against its tensor leaf, in order.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "protocol/merkle.h"
#include "protocol/state_delivery.h"
#include "protocol/tensor_hash.h"

using namespace tribunal;

namespace {

// A state of three tensors (one of three chunks), the last of four checkpoints of a trajectory.
struct Fixture {
  std::vector<std::vector<int64_t>> shapes{{2, 3}, {40000}, {}};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Digest> leaves;
  std::vector<Digest> checkpoints;
  DeliveryTerms terms;
  StateHeader header;

  Fixture() {
    for (size_t v = 0; v < shapes.size(); ++v) {
      uint64_t n = 1;
      for (int64_t d : shapes[v]) n *= static_cast<uint64_t>(d);
      std::vector<float> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(v * 1000 + i) * 0.5f;
      bytes.emplace_back(n * 4);
      if (n) std::memcpy(bytes.back().data(), values.data(), n * 4);
      leaves.push_back(tensor_leaf(DType::F32, shapes[v], std::as_bytes(std::span(bytes.back()))));
    }
    Digest other{};
    other.fill(7);
    checkpoints = {other, other, other, merkle_root(leaves)};
    terms.job_id.fill(1);
    terms.trajectory_root = merkle_root(checkpoints);
    terms.steps = 30;
    terms.checkpoints = checkpoints.size();
    terms.shapes = shapes;
    header = {terms.job_id, terms.trajectory_root, 30, merkle_root(leaves), MerkleTree(checkpoints).prove(3),
              leaves};
  }

  std::vector<TensorChunk> chunks() const {
    std::vector<TensorChunk> out;
    for (size_t v = 0; v < shapes.size(); ++v) {
      const auto b = std::as_bytes(std::span(bytes[v]));
      const MerkleTree tree(tensor_chunk_hashes(DType::F32, b));
      for (uint64_t k = 0; k < tree.size(); ++k) {
        TensorChunk c;
        c.value = static_cast<uint32_t>(v);
        c.shape = shapes[v];
        c.chunk = static_cast<uint32_t>(k);
        c.chunks = static_cast<uint32_t>(tree.size());
        c.chunk_root = tree.root();
        const size_t begin = k * kTensorChunkBytes,
                     end = std::min(bytes[v].size(), begin + kTensorChunkBytes);
        c.bytes.assign(bytes[v].begin() + static_cast<std::ptrdiff_t>(begin),
                       bytes[v].begin() + static_cast<std::ptrdiff_t>(end));
        c.proof = tree.prove_range(k, 1);
        out.push_back(c);
      }
    }
    return out;
  }
};

}  // namespace

TEST_CASE("state delivery: an honest stream is accepted chunk by chunk, its bytes the state's") {
  Fixture f;
  StateDelivery d(f.terms);
  std::string why;
  REQUIRE(d.accept(f.header, why));
  CHECK(d.state_hash() == merkle_root(f.leaves));
  CHECK(d.total_bytes() == 24 + 160000 + 4);
  const auto chunks = f.chunks();
  REQUIRE(chunks.size() == 5);  // 1 + 3 + 1
  std::vector<uint8_t> got;
  for (const TensorChunk& c : chunks) {
    CHECK_FALSE(d.complete());
    REQUIRE(d.accept(c, why));
    got.insert(got.end(), c.bytes.begin(), c.bytes.end());
  }
  CHECK(d.complete());
  CHECK(d.bytes_taken() == d.total_bytes());
  std::vector<uint8_t> want;
  for (const auto& b : f.bytes) want.insert(want.end(), b.begin(), b.end());
  CHECK(got == want);
  CHECK_FALSE(d.accept(chunks[0], why));  // nothing after the whole state
}

TEST_CASE("state delivery: one flipped byte is refused at its chunk, and the stream ends there") {
  Fixture f;
  StateDelivery d(f.terms);
  std::string why;
  REQUIRE(d.accept(f.header, why));
  auto chunks = f.chunks();
  chunks[2].bytes[100] ^= 0x01;  // tensor 1, chunk 1
  REQUIRE(d.accept(chunks[0], why));
  REQUIRE(d.accept(chunks[1], why));
  CHECK_FALSE(d.accept(chunks[2], why));
  CHECK(why == "tensor 1 chunk 1: its bytes (chunks 1 to 1) do not match the tensor's committed chunk root");
  CHECK(d.bytes_taken() == 24 + 65536);
  chunks[2].bytes[100] ^= 0x01;
  CHECK_FALSE(d.accept(chunks[2], why));  // a failed delivery takes nothing more
  CHECK(why == "the delivery already failed");
}

TEST_CASE("state delivery: a header not proven under the claim's trajectory root is refused") {
  std::string why;
  {
    Fixture f;  // the state hash proven as another leaf than the last
    f.header.in_trajectory = MerkleTree(f.checkpoints).prove(0);
    f.header.state_hash = f.checkpoints[0];
    StateDelivery d(f.terms);
    CHECK_FALSE(d.accept(f.header, why));
    CHECK(why == "the final state hash is not the last leaf of the claim's trajectory root");
  }
  {
    Fixture f;  // leaves of another state under the right state hash
    f.header.tensors[1][0] ^= 1;
    StateDelivery d(f.terms);
    CHECK_FALSE(d.accept(f.header, why));
    CHECK(why == "the tensor leaves do not hash to the final state hash");
  }
  {
    Fixture f;  // a header for another claim
    f.header.trajectory_root[0] ^= 1;
    StateDelivery d(f.terms);
    CHECK_FALSE(d.accept(f.header, why));
    CHECK(why == "the StateHeader is for another trajectory root than the claim that stood");
  }
  {
    Fixture f;  // chunks before any header
    StateDelivery d(f.terms);
    CHECK_FALSE(d.accept(f.chunks()[0], why));
    CHECK(why == "a TensorChunk before the StateHeader");
  }
}

TEST_CASE("state delivery: a chunk out of order, of another shape or with a forged header is refused") {
  std::string why;
  {
    Fixture f;
    StateDelivery d(f.terms);
    REQUIRE(d.accept(f.header, why));
    CHECK_FALSE(d.accept(f.chunks()[1], why));  // tensor 1 before tensor 0
    CHECK(why.find("out of order") != std::string::npos);
  }
  {
    Fixture f;
    StateDelivery d(f.terms);
    REQUIRE(d.accept(f.header, why));
    auto c = f.chunks()[0];
    c.shape = {3, 2};
    CHECK_FALSE(d.accept(c, why));
    CHECK(why == "tensor 0 chunk 0: its shape is not the shape of the tensor in the job's state layout");
  }
  {
    Fixture f;  // bytes and proof consistent with a forged chunk root: the leaf check catches it
    StateDelivery d(f.terms);
    REQUIRE(d.accept(f.header, why));
    auto c = f.chunks()[0];
    c.bytes[0] ^= 1;
    const MerkleTree tree(tensor_chunk_hashes(DType::F32, std::as_bytes(std::span(c.bytes))));
    c.chunk_root = tree.root();
    c.proof = tree.prove_range(0, 1);
    CHECK_FALSE(d.accept(c, why));
    CHECK(why == "tensor 0 chunk 0: tensor header does not match the committed tensor hash");
  }
}
