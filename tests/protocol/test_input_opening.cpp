// The referee's reassembly of opened inputs (protocol/input_opening.h; docs/protocol.md, "The game",
// "Lost frames"): chunks by index in any order (a chunk already received, from either party, is
// redundant; a gap is missing, never evidence), the graph's shape checked
// at chunk 0 before any byte is kept, the element limit, per-chunk proofs against the committed tensor
// hash, samples against the data set, completion.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "protocol/input_opening.h"
#include "protocol/merkle.h"
#include "protocol/tensor_frames.h"
#include "protocol/tensor_hash.h"

using namespace tribunal;

namespace {

/// A tensor and its TensorChunk stream, one chunk a frame (a re-ask of single chunks; an honest
/// party's first answer packs runs: protocol/tensor_frames.h).
struct Streamed {
  std::vector<int64_t> shape;
  std::vector<float> values;
  Digest leaf{};
  std::vector<TensorChunk> chunks;
};

Streamed stream(std::vector<int64_t> shape, uint32_t value = 0) {
  Streamed s;
  s.shape = std::move(shape);
  size_t numel = 1;
  for (int64_t d : s.shape) numel *= static_cast<size_t>(d);
  for (size_t i = 0; i < numel; ++i) s.values.push_back(0.25f * static_cast<float>(i % 1000) - 7.0f);
  const auto bytes = std::as_bytes(std::span(s.values));
  s.leaf = tensor_leaf(DType::F32, s.shape, bytes);
  const MerkleTree tree(tensor_chunk_hashes(DType::F32, bytes));
  for (uint64_t c = 0; c < tree.size(); ++c) {
    const size_t off = c * kTensorChunkBytes, len = std::min(kTensorChunkBytes, bytes.size() - off);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + off;
    s.chunks.push_back(TensorChunk{7, value, s.shape, static_cast<uint32_t>(c), 1,
                                   static_cast<uint32_t>(tree.size()), tree.root(),
                                   std::vector<uint8_t>(p, p + len), tree.prove_range(c, 1)});
  }
  return s;
}

InputOpening expecting(const std::vector<const Streamed*>& tensors, ExpectedSamples samples = {}) {
  std::vector<ExpectedTensor> want;
  for (const Streamed* t : tensors) want.push_back({t->shape, t->leaf});
  return InputOpening(std::move(want), std::move(samples));
}

/// o.accept(m): the refusal, "" when taken, "redundant" when already received.
template <class M>
std::string refusal(InputOpening& o, const M& m) {
  std::string why;
  switch (o.accept(m, why)) {
    case Acceptance::Taken:
      return "";
    case Acceptance::Redundant:
      return "redundant";
    case Acceptance::Ignored:
      return "ignored: " + why;
    case Acceptance::Refused:
      break;
  }
  return why.empty() ? "refused without a reason" : why;
}

}  // namespace

TEST_CASE("input opening: a multi-chunk tensor in order reassembles bit for bit; one chunk more is refused") {
  const Streamed t = stream({3, 10000});  // 120000 bytes: chunks of 65536 and 54464
  REQUIRE(t.chunks.size() == 2);
  InputOpening o = expecting({&t});
  CHECK_FALSE(o.complete());
  CHECK(refusal(o, t.chunks[0]) == "");
  CHECK_FALSE(o.complete());
  CHECK(o.bytes_held() == kTensorChunkBytes);
  CHECK(refusal(o, t.chunks[1]) == "");
  CHECK(o.complete());
  CHECK(o.bytes_held() == 120000);
  TensorChunk extra = t.chunks[1];
  extra.chunk = 2;
  CHECK(refusal(o, extra) == "tensor chunks [2, +1) of a tensor of 2 chunks (1 to 15 in a frame)");

  OpenedInputs in = o.take();
  REQUIRE(in.tensors.size() == 1);
  CHECK(in.tensors[0].shape == t.shape);
  REQUIRE(in.tensors[0].values.size() == t.values.size());
  CHECK(std::memcmp(in.tensors[0].values.data(), t.values.data(), t.values.size() * sizeof(float)) == 0);
  CHECK_FALSE(in.samples);
  CHECK(o.bytes_held() == 0);  // the data moved out
}

TEST_CASE("input opening: chunks reassemble by index in any order; a gap is missing, not evidence") {
  const Streamed t = stream({2, 20000});  // 160000 bytes: 3 chunks
  REQUIRE(t.chunks.size() == 3);
  InputOpening o = expecting({&t});
  CHECK(o.missing(16) == std::vector<ChunkRange>{{0, 0, 3}});
  // Chunk 0 lost on the way: chunk 1 is taken all the same, and chunk 0 is what is missing before it.
  CHECK(refusal(o, t.chunks[1]) == "");
  CHECK(o.bytes_held() == kTensorChunkBytes);
  CHECK(o.missing_before(0, 1));
  CHECK_FALSE(o.missing_before(0, 0));
  CHECK(o.missing(16) == std::vector<ChunkRange>{{0, 0, 1}, {0, 2, 3}});
  CHECK(o.missing(16, 0, 2) == std::vector<ChunkRange>{{0, 0, 1}});  // before the stream's position only
  CHECK(o.missing(1) == std::vector<ChunkRange>{{0, 0, 1}});
  TensorChunk other_value = t.chunks[0];
  other_value.value = 1;
  CHECK(refusal(o, other_value) == "ignored: tensor chunk of value 1, the question asks for 1");
  CHECK(refusal(o, t.chunks[1]) == "redundant");  // chunk 1 again (from either party, or duplicated): ignored
  CHECK(refusal(o, t.chunks[2]) == "");
  CHECK_FALSE(o.complete());
  CHECK(refusal(o, t.chunks[0]) == "");  // asked again: the gap closes, the held chunks move in place
  CHECK(o.complete());
  CHECK(o.missing(16).empty());
  // A chunk with other bytes than the ones held fails its own proof: refused (evidence).
  TensorChunk garbled = t.chunks[1];
  garbled.bytes[0] ^= 1;
  CHECK(refusal(o, garbled) == "tensor chunks [1, 2) do not match their tensor's chunk root");
  TensorChunk rerooted = t.chunks[0];
  rerooted.chunk_root[3] ^= 1;
  CHECK(refusal(o, rerooted) == "tensor header does not match the committed tensor hash");
  TensorChunk extra = t.chunks[2];
  extra.chunk = 3;
  CHECK(refusal(o, extra) == "tensor chunks [3, +1) of a tensor of 3 chunks (1 to 15 in a frame)");
  const OpenedInputs in = o.take();
  REQUIRE(in.tensors.size() == 1);
  CHECK(std::memcmp(in.tensors[0].values.data(), t.values.data(), t.values.size() * sizeof(float)) == 0);
}

TEST_CASE("input opening: every arrival order of a tensor's chunks reassembles the same bits") {
  const Streamed t = stream({4, 20000});  // 320000 bytes: 5 chunks
  REQUIRE(t.chunks.size() == 5);
  std::vector<size_t> order{0, 1, 2, 3, 4};
  int orders = 0;
  do {
    InputOpening o = expecting({&t});
    for (size_t k = 0; k < order.size(); ++k) {
      REQUIRE(refusal(o, t.chunks[order[k]]) == "");
      CHECK(o.complete() == (k + 1 == order.size()));
    }
    const OpenedInputs in = o.take();
    REQUIRE(in.tensors[0].values.size() == t.values.size());
    CHECK(std::memcmp(in.tensors[0].values.data(), t.values.data(), t.values.size() * sizeof(float)) == 0);
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 120);
}

TEST_CASE("input opening: a shape other than the graph's is refused at chunk 0, before any byte is kept") {
  const Streamed want = stream({4, 5});
  // A sender signing a tensor of another shape, with a self-consistent header and proofs.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{5, 4}, {20}, {4, 5, 1}, {}, {400, 5}}) {
    const Streamed sent = stream(shape);
    InputOpening o = expecting({&want});
    CAPTURE(shape.size());
    CHECK(refusal(o, sent.chunks[0]) == "tensor shape is not the shape of the value in the job's graph");
    CHECK(o.bytes_held() == 0);
    CHECK_FALSE(o.complete());
  }
  // Later chunks may not change the header either.
  const Streamed big = stream({40000});  // 3 chunks
  InputOpening o = expecting({&big});
  REQUIRE(refusal(o, big.chunks[0]) == "");
  TensorChunk reshaped = big.chunks[1];
  reshaped.shape = {20000, 2};
  CHECK(refusal(o, reshaped) == "tensor shape is not the shape of the value in the job's graph");
  TensorChunk rerooted = big.chunks[1];
  rerooted.chunk_root[0] ^= 1;
  CHECK(refusal(o, rerooted) == "tensor header does not match the committed tensor hash");
  CHECK(o.bytes_held() == kTensorChunkBytes);
}

TEST_CASE("input opening: oversized tensors and chunks are refused") {
  // A shape over kMaxOpenedElements (2^21 × 2^20 = 2^41) or with a negative dimension is refused at
  // chunk 0 even when it is the shape the graph names.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{int64_t{1} << 21, int64_t{1} << 20}, {-1, 4}, {int64_t{1} << 41}}) {
    InputOpening o({ExpectedTensor{shape, Digest{}}}, {});
    TensorChunk c{7, 0, shape, 0, 1, 1, Digest{}, {}, {}};
    CHECK(refusal(o, c) == "tensor shape out of range");
    CHECK(o.bytes_held() == 0);
  }
  // Exactly kMaxOpenedElements passes the range check (and then fails only on the hash).
  const std::vector<int64_t> limit{int64_t{1} << 20, int64_t{1} << 20};
  InputOpening at_limit({ExpectedTensor{limit, Digest{}}}, {});
  CHECK(refusal(at_limit, TensorChunk{7, 0, limit, 0, 1, 1, Digest{}, {}, {}}) ==
        "tensor header does not match the committed tensor hash");

  // A chunk with more (or fewer) bytes than its share of the tensor.
  const Streamed t = stream({3, 10000});
  InputOpening o = expecting({&t});
  TensorChunk longer = t.chunks[0];
  longer.bytes.push_back(0);
  CHECK(refusal(o, longer) == "tensor chunks [0, 1) do not match their tensor's chunk root");
  TensorChunk shorter = t.chunks[0];
  shorter.bytes.pop_back();
  CHECK(refusal(o, shorter) == "tensor chunks [0, 1) do not match their tensor's chunk root");
  CHECK(o.bytes_held() == 0);
  CHECK(refusal(o, t.chunks[0]) == "");
}

TEST_CASE("input opening: a header or chunk that does not hash to the commitment is refused") {
  const Streamed t = stream({3, 10000});
  SUBCASE("another tensor of the same shape") {
    Streamed other = stream({3, 10000});
    other.values[5] += 1.0f;
    const auto bytes = std::as_bytes(std::span(other.values));
    const MerkleTree tree(tensor_chunk_hashes(DType::F32, bytes));
    TensorChunk c = t.chunks[0];
    c.chunk_root = tree.root();
    InputOpening o = expecting({&t});
    CHECK(refusal(o, c) == "tensor header does not match the committed tensor hash");
  }
  SUBCASE("a wrong chunk count") {
    TensorChunk c = t.chunks[0];
    c.chunks = 3;
    InputOpening o = expecting({&t});
    CHECK(refusal(o, c) == "tensor header does not match the committed tensor hash");
  }
  SUBCASE("a flipped byte, a proof for another index") {
    InputOpening o = expecting({&t});
    TensorChunk flipped = t.chunks[0];
    flipped.bytes[100] ^= 0x40;
    CHECK(refusal(o, flipped) == "tensor chunks [0, 1) do not match their tensor's chunk root");
    TensorChunk misplaced = t.chunks[0];
    misplaced.proof = t.chunks[1].proof;
    CHECK(refusal(o, misplaced) == "tensor chunks [0, 1) do not match their tensor's chunk root");
    CHECK(refusal(o, t.chunks[0]) == "");
    TensorChunk flipped1 = t.chunks[1];
    flipped1.bytes.back() ^= 1;
    CHECK(refusal(o, flipped1) == "tensor chunks [1, 2) do not match their tensor's chunk root");
    CHECK_FALSE(o.complete());
    CHECK(refusal(o, t.chunks[1]) == "");
    CHECK(o.complete());
  }
}

TEST_CASE("input opening: completion needs every tensor and the samples; restart forgets what arrived") {
  const Streamed a = stream({2, 3}, 0), b = stream({}, 1), empty = stream({0, 4}, 2);
  REQUIRE(empty.chunks.size() == 1);
  REQUIRE(empty.chunks[0].bytes.empty());
  // Two data-set rows proven against a tree of 3 samples, label width 0 (one class id each).
  const std::vector<std::vector<float>> x{{1, 2}, {3, 4}, {5, 6}};
  const std::vector<float> y{0, 1, 2};
  std::vector<Digest> leaves;
  for (size_t i = 0; i < x.size(); ++i) leaves.push_back(sample_leaf(x[i], y[i]));
  const MerkleTree data(leaves);
  const ExpectedSamples rows{true, {2, 0}, data.root(), 3, 0};
  const Samples good{7, {2, 0}, {x[2], x[0]}, {{y[2]}, {y[0]}}, {data.prove(2), data.prove(0)}};

  InputOpening o = expecting({&a, &b, &empty}, rows);
  CHECK(refusal(o, b.chunks[0]) == "");
  CHECK(refusal(o, empty.chunks[0]) == "");
  CHECK(refusal(o, a.chunks[0]) == "");
  CHECK_FALSE(o.complete());  // the samples are missing

  Samples reordered = good;
  std::swap(reordered.indices[0], reordered.indices[1]);
  CHECK(refusal(o, reordered) == "the opened samples are not the ones asked for");
  Samples wide = good;
  wide.labels[1].push_back(0);
  CHECK(refusal(o, wide) == "sample 0 has 2 label values, the job's data set has 1");
  Samples relabelled = good;
  relabelled.labels[0][0] = 1;
  CHECK(refusal(o, relabelled) == "sample 2 is not in the job's data set");
  CHECK(refusal(o, good) == "");
  CHECK(o.complete());
  CHECK(refusal(o, good) == "redundant");  // taken once; again (from either party) it is ignored
  CHECK(refusal(o, relabelled) == "the opened samples are not the ones asked for");

  o.restart();
  CHECK_FALSE(o.complete());
  CHECK(o.bytes_held() == 0);
  CHECK(refusal(o, a.chunks[0]) == "");
  CHECK(refusal(o, b.chunks[0]) == "");
  CHECK(refusal(o, empty.chunks[0]) == "");
  CHECK(refusal(o, good) == "");
  REQUIRE(o.complete());
  const OpenedInputs in = o.take();
  REQUIRE(in.tensors.size() == 3);
  CHECK(in.tensors[0].values == a.values);
  CHECK(in.tensors[1].shape.empty());
  CHECK(in.tensors[1].values == b.values);
  CHECK(in.tensors[2].shape == std::vector<int64_t>{0, 4});
  CHECK(in.tensors[2].values.empty());
  REQUIRE(in.samples);
  CHECK(in.samples->indices == good.indices);
  CHECK(in.samples->inputs == good.inputs);

  // Nothing expected: complete at once.
  CHECK(InputOpening().complete());
  CHECK(InputOpening({}, ExpectedSamples{false, {}, {}, 0, 0}).complete());
}

TEST_CASE(
    "a rounding log streams as a DType::Trits tensor: ceil(count / 5) bytes in 64 KiB chunks, each proven") {
  // 400,003 decisions: 80,001 packed bytes, two chunks (the second 14,465 bytes).
  const uint64_t count = 400'003;
  std::vector<uint8_t> packed(tensor_byte_length(DType::Trits, count));
  REQUIRE(packed.size() == 80'001);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<uint8_t>(i * 7 % 243);
  const std::vector<int64_t> shape{static_cast<int64_t>(count)};
  const auto bytes = std::as_bytes(std::span<const uint8_t>(packed));
  const Digest leaf = tensor_leaf(DType::Trits, shape, bytes);
  CHECK(leaf != tensor_leaf(DType::F32, std::vector<int64_t>{20'000}, bytes.first(80'000)));
  const MerkleTree tree(tensor_chunk_hashes(DType::Trits, bytes));
  REQUIRE(tree.size() == 2);
  std::vector<TensorChunk> chunks;
  for (uint64_t c = 0; c < tree.size(); ++c) {
    const size_t off = c * kTensorChunkBytes, len = std::min(kTensorChunkBytes, bytes.size() - off);
    chunks.push_back(TensorChunk{3, 0, shape, static_cast<uint32_t>(c), 1, 2, tree.root(),
                                 std::vector<uint8_t>(packed.begin() + off, packed.begin() + off + len),
                                 tree.prove_range(c, 1)});
  }
  // The same leaf expected as float32 is another tensor: its header does not hash to it.
  InputOpening as_f32({ExpectedTensor{shape, leaf, DType::F32}}, {});
  CHECK(refusal(as_f32, chunks[0]) == "tensor header does not match the committed tensor hash");

  InputOpening o({ExpectedTensor{shape, leaf, DType::Trits}}, {});
  TensorChunk flipped = chunks[1];
  flipped.bytes[5] ^= 1;
  CHECK(refusal(o, chunks[0]) == "");
  CHECK_FALSE(o.complete());
  CHECK(refusal(o, chunks[0]) == "redundant");
  CHECK(refusal(o, flipped) == "tensor chunks [1, 2) do not match their tensor's chunk root");
  CHECK(refusal(o, chunks[1]) == "");
  CHECK(o.complete());
  CHECK(o.bytes_held() == packed.size());
  const OpenedInputs got = o.take();
  REQUIRE(got.tensors.size() == 1);
  CHECK(got.tensors[0].values.empty());
  CHECK(got.tensors[0].bytes == packed);
  CHECK(got.tensors[0].shape == shape);
}

TEST_CASE("input opening: runs of chunks in one frame, each proven by one range proof, in any order") {
  // 40 chunks: an honest party's frames are runs of 15, 15 and 10 (protocol/tensor_frames.h).
  const Streamed t = stream({40, 16384});
  REQUIRE(t.chunks.size() == 40);
  std::vector<TensorChunk> frames;
  for_each_tensor_frame(7, 0, DType::F32, t.shape, std::as_bytes(std::span(t.values)), {},
                        [&](TensorChunk&& f) {
                          frames.push_back(std::move(f));
                          return true;
                        });
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].chunk == 0);
  CHECK(frames[0].count == 15);
  CHECK(frames[1].chunk == 15);
  CHECK(frames[2].count == 10);
  CHECK(frames[1].bytes.size() == 15 * kTensorChunkBytes);
  CHECK(frames[1].proof.size() <= 2 * 6);  // one proof for the run, ≤ 2 digests per level of 40 leaves

  SUBCASE("last frame first: reassembled bit for bit") {
    InputOpening o = expecting({&t});
    CHECK(refusal(o, frames[2]) == "");
    CHECK(refusal(o, frames[0]) == "");
    CHECK_FALSE(o.complete());
    CHECK(o.missing(8) == std::vector<ChunkRange>{{0, 15, 30}});
    CHECK(refusal(o, frames[1]) == "");
    REQUIRE(o.complete());
    CHECK(o.bytes_held() == 40 * kTensorChunkBytes);
    const OpenedInputs in = o.take();
    REQUIRE(in.tensors[0].values.size() == t.values.size());
    CHECK(std::memcmp(in.tensors[0].values.data(), t.values.data(), t.values.size() * 4) == 0);
  }
  SUBCASE("a run over chunks already held keeps the others; the same run again is redundant") {
    InputOpening o = expecting({&t});
    CHECK(refusal(o, t.chunks[16]) == "");
    CHECK(refusal(o, t.chunks[29]) == "");
    CHECK(refusal(o, frames[1]) == "");
    CHECK(o.bytes_held() == 15 * kTensorChunkBytes);
    CHECK(refusal(o, frames[1]) == "redundant");
    CHECK(refusal(o, t.chunks[20]) == "redundant");
    CHECK(o.missing(8) == std::vector<ChunkRange>{{0, 0, 15}, {0, 30, 40}});
  }
  SUBCASE("one byte changed anywhere in a run refuses the whole frame, keeping nothing of it") {
    InputOpening o = expecting({&t});
    CHECK(refusal(o, t.chunks[15]) == "");
    TensorChunk forged = frames[1];
    forged.bytes[3 * kTensorChunkBytes + 5] ^= 1;
    CHECK(refusal(o, forged) == "tensor chunks [15, 30) do not match their tensor's chunk root");
    CHECK(o.bytes_held() == kTensorChunkBytes);
    CHECK(o.missing(8) == std::vector<ChunkRange>{{0, 0, 15}, {0, 16, 40}});
    // Proven bytes in another frame's place, or a count that is not the bytes', fail the same way.
    TensorChunk moved = frames[1];
    moved.chunk = 0;
    CHECK(refusal(o, moved) == "tensor chunks [0, 15) do not match their tensor's chunk root");
    TensorChunk fewer = frames[1];
    fewer.count = 14;
    CHECK(refusal(o, fewer) == "tensor chunks [15, 29) do not match their tensor's chunk root");
  }
  SUBCASE("a run of no chunks, of more than kMaxFrameChunks, or past the tensor's end is refused") {
    InputOpening o = expecting({&t});
    TensorChunk empty = frames[0];
    empty.count = 0;
    CHECK(refusal(o, empty) == "tensor chunks [0, +0) of a tensor of 40 chunks (1 to 15 in a frame)");
    TensorChunk wide = frames[0];
    wide.count = 16;
    CHECK(refusal(o, wide) == "tensor chunks [0, +16) of a tensor of 40 chunks (1 to 15 in a frame)");
    TensorChunk past = frames[2];
    past.chunk = 31;
    CHECK(refusal(o, past) == "tensor chunks [31, +10) of a tensor of 40 chunks (1 to 15 in a frame)");
    CHECK(o.bytes_held() == 0);
  }
}

TEST_CASE("input opening of some chunks (level 4): only the wanted chunks are kept, in any order") {
  const Streamed t = stream({6, 16384});  // 6 chunks of 16384 floats
  REQUIRE(t.chunks.size() == 6);
  ExpectedTensor want{t.shape, t.leaf};
  want.first_chunk = 2;
  want.end_chunk = 4;
  InputOpening o({want}, {});
  CHECK(o.missing(16) == std::vector<ChunkRange>{{0, 2, 4}});
  // A chunk outside the wanted range asks nothing of the opening: ignored, its bytes not checked, not
  // evidence.
  TensorChunk outside = t.chunks[0];
  outside.bytes[3] ^= 1;
  CHECK(refusal(o, outside).starts_with("ignored: "));
  CHECK(refusal(o, t.chunks[5]).starts_with("ignored: "));
  CHECK(refusal(o, t.chunks[3]) == "");
  CHECK_FALSE(o.complete());
  CHECK(o.missing(16) == std::vector<ChunkRange>{{0, 2, 3}});
  CHECK(o.missing_before(0, 3));  // chunk 2 is missing before chunk 3
  // A bad wanted chunk is still evidence.
  TensorChunk forged = t.chunks[2];
  forged.bytes[0] ^= 1;
  CHECK(refusal(o, forged).find("do not match") != std::string::npos);
  // A run over chunks 1 to 3 (an honest party's frame): chunk 2 is kept, 1 not, 3 is held already.
  const auto bytes = std::as_bytes(std::span(t.values));
  const MerkleTree tree(tensor_chunk_hashes(DType::F32, bytes));
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + kTensorChunkBytes;
  const TensorChunk run{7,
                        0,
                        t.shape,
                        1,
                        3,
                        6,
                        tree.root(),
                        std::vector<uint8_t>(p, p + 3 * kTensorChunkBytes),
                        tree.prove_range(1, 3)};
  CHECK(refusal(o, run) == "");
  REQUIRE(o.complete());
  CHECK(o.bytes_held() == 2 * kTensorChunkBytes);
  CHECK(refusal(o, t.chunks[2]) == "redundant");
  const OpenedInputs in = o.take();
  REQUIRE(in.tensors.size() == 1);
  CHECK(in.tensors[0].shape == t.shape);  // the whole tensor's shape; its values from chunk 2 on
  CHECK(in.tensors[0].first_element == 2 * 16384);
  REQUIRE(in.tensors[0].values.size() == 2 * 16384);
  CHECK(std::memcmp(in.tensors[0].values.data(), t.values.data() + 2 * 16384, 2 * kTensorChunkBytes) == 0);
}
