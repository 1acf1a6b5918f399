// Canonical message encoding, signed envelopes, dispute ids and node record hashes
// (protocol/codec.h, protocol/envelope.h, protocol/messages.h; docs/protocol.md, "Messages").
#include <doctest/doctest.h>
#include <sodium.h>

#include <bit>
#include <concepts>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/codec.h"
#include "protocol/codec_stream.h"
#include "protocol/envelope.h"
#include "protocol/hash.h"
#include "protocol/merkle.h"
#include "protocol/messages.h"

using namespace tribunal;

namespace {

using Bytes = std::vector<uint8_t>;

// ---- field-by-field equality (named `same`, not operator==, so it cannot clash with one added to
// messages.h later). Floats compare by bits: the encoding must carry NaN payloads unchanged.

bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}
bool same(const InclusionProof& a, const InclusionProof& b);
bool same(const NodeRecord& a, const NodeRecord& b);

template <class T>
bool same(const T& a, const T& b) requires std::equality_comparable<T> {
  return a == b;
}
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i])) return false;
  }
  return true;
}

bool same(const InclusionProof& a, const InclusionProof& b) {
  return a.index == b.index && a.size == b.size && a.path == b.path;
}
bool same(const NodeRecord& a, const NodeRecord& b) {
  return a.op == b.op && a.attrs == b.attrs && a.inputs == b.inputs && a.outputs == b.outputs;
}
bool same(const JobSubmit& a, const JobSubmit& b) {
  return a.job_toml == b.job_toml && a.trainer_claim == b.trainer_claim;
}
bool same(const Claim& a, const Claim& b) {
  return a.job_id == b.job_id && a.steps == b.steps && a.trajectory_root == b.trajectory_root &&
         a.final_state_hash == b.final_state_hash && a.endpoint == b.endpoint;
}
bool same(const DisputeOpen& a, const DisputeOpen& b) {
  return a == b;
}
bool same(const Query& a, const Query& b) {
  return a.round == b.round && a.kind == b.kind && a.level == b.level && a.interval == b.interval &&
         a.step == b.step && a.lo == b.lo && a.hi == b.hi && a.indices == b.indices && a.values == b.values &&
         a.clock == b.clock;
}
bool same(const Children& a, const Children& b) {
  return a.round == b.round && a.left == b.left && a.right == b.right;
}
bool same(const IntervalCommit& a, const IntervalCommit& b) {
  return a.round == b.round && a.root == b.root && a.start_value == b.start_value &&
         same(a.start_in_level1, b.start_in_level1) && same(a.first, b.first) && same(a.last, b.last);
}
bool same(const StepCommit& a, const StepCommit& b) {
  return a.round == b.round && a.root == b.root && a.pre_root == b.pre_root &&
         same(a.pre_in_level2, b.pre_in_level2) && same(a.last, b.last);
}
bool same(const Records& a, const Records& b) {
  return a.round == b.round && a.indices == b.indices && same(a.records, b.records) &&
         same(a.proofs, b.proofs) && a.state_leaves == b.state_leaves &&
         same(a.state_proofs, b.state_proofs) && a.post_state == b.post_state;
}
bool same(const TensorChunk& a, const TensorChunk& b) {
  return a.round == b.round && a.value == b.value && a.shape == b.shape && a.chunk == b.chunk &&
         a.count == b.count && a.chunks == b.chunks && a.chunk_root == b.chunk_root && a.bytes == b.bytes &&
         a.proof == b.proof;
}
bool same(const Samples& a, const Samples& b) {
  return a.round == b.round && a.indices == b.indices && same(a.inputs, b.inputs) &&
         same(a.labels, b.labels) && same(a.proofs, b.proofs);
}
bool same(const Verdict& a, const Verdict& b) {
  return a.job_id == b.job_id && a.dispute_id == b.dispute_id && a.opening == b.opening &&
         a.winners == b.winners && a.losers == b.losers && a.reason == b.reason && a.level == b.level &&
         a.step == b.step && a.node == b.node && a.op == b.op && a.rounds == b.rounds &&
         a.detail == b.detail && a.clocks == b.clocks;
}
bool same(const ErrorMessage& a, const ErrorMessage& b) {
  return a.code == b.code && a.reason == b.reason;
}
bool same(const RefereeCheck& a, const RefereeCheck& b) {
  return a.nonce == b.nonce && a.endpoints == b.endpoints;
}
bool same(const RefereeAnswer& a, const RefereeAnswer& b) {
  return a.nonce == b.nonce && a.refusals == b.refusals;
}

bool same(const StateRequest& a, const StateRequest& b) {
  return a.job_id == b.job_id && a.trajectory_root == b.trajectory_root;
}
bool same(const StateHeader& a, const StateHeader& b) {
  return a.job_id == b.job_id && a.trajectory_root == b.trajectory_root && a.step == b.step &&
         a.state_hash == b.state_hash && same(a.in_trajectory, b.in_trajectory) && a.tensors == b.tensors;
}
bool same(const LogRequest& a, const LogRequest& b) {
  return a.job_id == b.job_id && a.step == b.step;
}
bool same(const LogHeader& a, const LogHeader& b) {
  return a.job_id == b.job_id && a.step == b.step && a.leaves == b.leaves;
}
bool same(const LogEvidence& a, const LogEvidence& b) {
  return a.round == b.round && a.header == b.header;
}

bool same_body(const Body& a, const Body& b) {
  if (a.index() != b.index()) return false;
  return std::visit([&](const auto& x) { return same(x, std::get<std::decay_t<decltype(x)>>(b)); }, a);
}

// ---- sample values: every field differs from its default, digests differ from each other.

Digest dg(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  return d;
}

InclusionProof proof(uint64_t index, uint64_t size, size_t length, uint8_t seed) {
  InclusionProof p{index, size, {}};
  for (size_t i = 0; i < length; ++i) p.path.push_back(dg(static_cast<uint8_t>(seed + i)));
  return p;
}

const KeyPair& key_a() {
  static const KeyPair k = generate_keypair();
  return k;
}
const KeyPair& key_b() {
  static const KeyPair k = generate_keypair();
  return k;
}

std::vector<Bytes> two_claims() {
  return {seal(key_a(), dg(1), 0, Claim{dg(1), 100, dg(2), dg(3), "ws://a:1/"}),
          seal(key_b(), dg(1), 0, Claim{dg(1), 100, dg(4), dg(5), "ws://provider-b.example/x"})};
}

DisputeOpen sample_open() {
  return DisputeOpen{"[job]\n", dg(5), 60000, 784, 10, 0, two_claims()};
}

Query sample_query() {
  Query q;
  q.round = 0x01020304;
  q.kind = QueryKind::OpenInputs;
  q.level = Level::Nodes;
  q.interval = 0x1122334455667788;
  q.step = 41;
  q.lo = 8;
  q.hi = 13;
  q.indices = {3, 1ull << 40, 0};
  q.values = {ValueAddress{ValueOrigin::StateInput, 77, 0}, ValueAddress{ValueOrigin::NodeOutput, 1234, 2}};
  q.clock = std::chrono::milliseconds(120000);
  return q;
}

/// One non-trivial value of every message type, in MessageKind order.
std::vector<Body> sample_bodies() {
  std::vector<Body> v;
  v.push_back(JobSubmit{"[job]\nseed = 7\nsteps = 100\n", {0x54, 0x52, 0x00, 0xff}});
  v.push_back(Claim{dg(1), 123456789012ull, dg(2), dg(3), "ws://provider.example:9000/"});
  v.push_back(sample_open());
  v.push_back(sample_query());
  v.push_back(Children{9, dg(5), dg(6)});
  v.push_back(
      IntervalCommit{10, dg(7), dg(21), proof(3, 9, 4, 100), proof(0, 11, 4, 20), proof(10, 11, 2, 30)});
  v.push_back(StepCommit{11, dg(8), dg(9), proof(6, 11, 4, 110), proof(40, 41, 6, 40)});
  v.push_back(
      Records{12,
              {5, 17},
              {NodeRecord{3, {1, 2, 3}, {dg(14)}, {dg(15), dg(16)}}, NodeRecord{200, {}, {}, {dg(17)}}},
              {proof(5, 41, 6, 50), proof(17, 41, 5, 60)},
              {dg(10), dg(11)},
              {proof(2, 600, 10, 120), proof(597, 600, 10, 130)},
              {dg(12), dg(13), dg(19)}});
  v.push_back(TensorChunk{
      13, 1, {4, -1, 16384}, 2, 3, 5, dg(18), {0xde, 0xad, 0xbe, 0xef, 0}, proof(2, 5, 3, 70).path});
  v.push_back(Samples{14,
                      {0, 99},
                      {{1.5f, -2.0f, 0.0f}, {std::bit_cast<float>(0x7fc01234u)}},
                      {{3.0f}, {-0.0f, 1.0f, 255.0f}},
                      {proof(0, 100, 7, 80), proof(99, 100, 7, 90)}});
  v.push_back(Verdict{dg(19),
                      dg(20),
                      sample_open(),
                      {1},
                      {0},
                      VerdictReason::Equivocation,
                      Level::Steps,
                      57,
                      301,
                      12,
                      33,
                      "party 0 signed two answers to round 12"});
  v.push_back(ErrorMessage{1008, "bad signature"});
  v.push_back(RefereeCheck{dg(22), {"ws://10.0.0.5:9000/", "wss://provider.example/"}});
  v.push_back(RefereeAnswer{dg(22), {"a provider's endpoint ws://10.0.0.5:9000/ is a private address", ""}});
  v.push_back(StateRequest{dg(22), dg(23)});
  v.push_back(StateHeader{dg(24), dg(25), 937, dg(26), proof(4, 5, 3, 120), {dg(27), dg(28), dg(29)}});
  v.push_back(LogRequest{dg(30), 17});
  v.push_back(LogHeader{dg(31), 17, {dg(32), dg(33)}});
  v.push_back(LogEvidence{12, {1, 2, 3}});
  return v;
}

/// Little-endian byte builder for hand-made (possibly malformed) encodings.
struct Builder {
  Bytes out;
  Builder& u8(uint8_t v) { return le(v, 1); }
  Builder& u16(uint16_t v) { return le(v, 2); }
  Builder& u32(uint32_t v) { return le(v, 4); }
  Builder& u64(uint64_t v) { return le(v, 8); }
  Builder& digest(const Digest& d) {
    out.insert(out.end(), d.begin(), d.end());
    return *this;
  }
  Builder& bytes(std::span<const uint8_t> b) {
    u32(static_cast<uint32_t>(b.size()));
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  Builder& str(std::string_view s) {
    return bytes(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  Builder& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
};

/// The close code decode_body throws for `bytes`, or 0 if it does not throw.
int decode_error_code(MessageKind kind, std::span<const uint8_t> bytes, std::string* what = nullptr) {
  try {
    decode_body(kind, bytes);
  } catch (const WireError& e) {
    if (what) *what = e.what();
    return static_cast<int>(e.code());
  }
  return 0;
}

int open_error_code(std::span<const uint8_t> bytes, std::string* what = nullptr) {
  try {
    open_envelope(bytes);
  } catch (const WireError& e) {
    if (what) *what = e.what();
    return static_cast<int>(e.code());
  }
  return 0;
}

constexpr int kInvalid = static_cast<int>(CloseCode::InvalidPayload);
constexpr int kTooBig = static_cast<int>(CloseCode::TooBig);
constexpr int kPolicy = static_cast<int>(CloseCode::PolicyViolation);

// Envelope offsets (wire.h): version 0, kind 1, context 2..33, sequence 34..41, body length 42..45, body 46.
constexpr size_t kBodyAt = 46;

/// Replaces the signature with a valid one by `keys` over the (possibly edited) bytes before it, so a
/// test reaches the checks behind the signature. Also rewrites the sender key to `keys`.
Bytes resign(Bytes env, const KeyPair& keys) {
  const size_t sig_at = env.size() - crypto_sign_BYTES;
  std::copy(keys.public_key.begin(), keys.public_key.end(), env.begin() + (sig_at - 32));
  const Digest d = Hasher(HashTag::Envelope).update(std::span<const uint8_t>(env.data(), sig_at)).final();
  REQUIRE(crypto_sign_detached(env.data() + sig_at, nullptr, d.data(), d.size(), keys.secret_key.data()) ==
          0);
  return env;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Bodies

TEST_CASE("wire: every message type round-trips field by field, and kind_of matches MessageKind") {
  const std::vector<Body> bodies = sample_bodies();
  REQUIRE(bodies.size() == std::variant_size_v<Body>);
  for (size_t i = 0; i < bodies.size(); ++i) {
    const MessageKind kind = kind_of(bodies[i]);
    CAPTURE(i);
    CHECK(static_cast<size_t>(kind) == i + 1);
    const Bytes enc = encode_body(bodies[i]);
    const Body back = decode_body(kind, enc);
    CHECK(same_body(bodies[i], back));
    CHECK(encode_body(back) == enc);
  }
  // `same` itself can fail (so the round-trip check means something).
  Query q = sample_query();
  Query r = q;
  r.values[1].slot ^= 1;
  CHECK_FALSE(same(q, r));
  Samples s = std::get<Samples>(sample_bodies()[9]);
  Samples t = s;
  t.inputs[1][0] = std::bit_cast<float>(0x7fc01235u);  // another NaN payload
  CHECK_FALSE(same(s, t));
}

TEST_CASE("wire: known-answer encoding of a Query body") {
  Query q;
  q.round = 7;
  q.kind = QueryKind::OpenInputs;  // 5
  q.level = Level::Nodes;          // 3
  q.interval = 0x0102;
  q.step = 5;
  q.lo = 0;
  q.hi = 0x10;
  q.indices = {1, 0x0203};
  q.values = {ValueAddress{ValueOrigin::NodeOutput, 9, 2}};  // origin 2
  q.clock = std::chrono::milliseconds(30000);                // 0x7530
  q.chunks = {ChunkRange{1, 2, 5}};                          // a re-ask: chunks [2, 5) of value 1
  // Fields in declaration order, little-endian (99 bytes):
  const std::string expected = std::string("07000000")  // round u32 = 7
                               + "05"                   // kind u8 = OpenInputs
                               + "03"                   // level u8 = Nodes
                               + "0201000000000000"     // interval u64 = 0x0102
                               + "0500000000000000"     // step u64 = 5
                               + "0000000000000000"     // lo u64 = 0
                               + "1000000000000000"     // hi u64 = 0x10
                               + "02000000"             // indices: u32 count = 2
                               + "0100000000000000"     //   indices[0] u64 = 1
                               + "0302000000000000"     //   indices[1] u64 = 0x0203
                               + "01000000"             // values: u32 count = 1
                               + "02"                   //   values[0].origin u8 = NodeOutput
                               + "0900000000000000"     //   values[0].index u64 = 9
                               + "02000000"             //   values[0].slot u32 = 2
                               + "3075000000000000"     // clock u64 ms = 30000 = 0x7530
                               + "01000000"             // chunks: u32 count = 1
                               + "01000000"             //   chunks[0].value u32 = 1
                               + "02000000"             //   chunks[0].first u32 = 2
                               + "05000000";            //   chunks[0].end u32 = 5
  const Bytes enc = encode_body(q);
  CHECK(enc.size() == 99);
  CHECK(to_hex(enc) == expected);
}

TEST_CASE("wire: known-answer encoding of a Claim body") {
  Claim c;
  c.job_id.fill(0xaa);
  c.steps = 1000;  // 0x03e8
  c.trajectory_root.fill(0xbb);
  c.final_state_hash.fill(0xcc);
  c.endpoint = "ws://p/";
  // job_id (32 raw bytes) ‖ steps u64 LE ‖ trajectory_root (32) ‖ final_state_hash (32) ‖ endpoint
  // (u32 length ‖ bytes) = 115 bytes.
  const std::string expected = std::string(64, 'a')              // job_id: 32 × aa
                               + "e803000000000000"              // steps u64 = 1000
                               + std::string(64, 'b')            // trajectory_root: 32 × bb
                               + std::string(64, 'c')            // final_state_hash: 32 × cc
                               + "07000000" + "77733a2f2f702f";  // endpoint "ws://p/"
  const Bytes enc = encode_body(c);
  CHECK(enc.size() == 115);
  CHECK(to_hex(enc) == expected);
}

TEST_CASE("wire: known-answer encoding of StateRequest and StateHeader bodies (kinds 15 and 16)") {
  StateRequest r;
  r.job_id.fill(0xaa);
  r.trajectory_root.fill(0xbb);
  CHECK(to_hex(encode_body(r)) == std::string(64, 'a') + std::string(64, 'b'));
  CHECK(kind_of(Body{r}) == static_cast<MessageKind>(15));
  StateHeader h;
  h.job_id.fill(0x11);
  h.trajectory_root.fill(0x22);
  h.step = 30;
  h.state_hash.fill(0x33);
  h.in_trajectory = InclusionProof{3, 4, {}};
  h.in_trajectory.path.push_back({});
  h.in_trajectory.path[0].fill(0x44);
  h.tensors.resize(1);
  h.tensors[0].fill(0x55);
  // job_id ‖ trajectory_root ‖ step u64 ‖ state_hash ‖ proof (u64 index, u64 size, u32 count, digests)
  // ‖ tensors (u32 count, digests) = 32 + 32 + 8 + 32 + 20 + 32 + 4 + 32 = 192 bytes.
  const std::string expected = std::string(64, '1') + std::string(64, '2') + "1e00000000000000" +
                               std::string(64, '3') + "0300000000000000" + "0400000000000000" + "01000000" +
                               std::string(64, '4') + "01000000" + std::string(64, '5');
  const Bytes enc = encode_body(h);
  CHECK(enc.size() == 192);
  CHECK(to_hex(enc) == expected);
  CHECK(kind_of(Body{h}) == static_cast<MessageKind>(16));
}

TEST_CASE("wire: known-answer encoding of LogRequest and LogHeader bodies (kinds 17 and 18)") {
  LogRequest r;
  r.job_id.fill(0xaa);
  r.step = 30;
  CHECK(to_hex(encode_body(r)) == std::string(64, 'a') + "1e00000000000000");
  CHECK(kind_of(Body{r}) == static_cast<MessageKind>(17));
  LogHeader h;
  h.job_id.fill(0x11);
  h.step = 2;
  h.leaves.resize(2);
  h.leaves[0].fill(0x22);
  h.leaves[1].fill(0x33);
  // job_id ‖ step u64 ‖ leaves (u32 count, digests) = 32 + 8 + 4 + 64 = 108 bytes.
  const Bytes enc = encode_body(h);
  CHECK(enc.size() == 108);
  CHECK(to_hex(enc) ==
        std::string(64, '1') + "0200000000000000" + "02000000" + std::string(64, '2') + std::string(64, '3'));
  CHECK(kind_of(Body{h}) == static_cast<MessageKind>(18));
  CHECK(same(std::get<LogHeader>(decode_body(MessageKind::LogHeader, enc)), h));
}

TEST_CASE("wire: every proper prefix of every encoding is rejected, and so is one trailing byte") {
  for (const Body& body : sample_bodies()) {
    const MessageKind kind = kind_of(body);
    const Bytes enc = encode_body(body);
    CAPTURE(static_cast<int>(kind));
    for (size_t n = 0; n < enc.size(); ++n) {
      CAPTURE(n);
      CHECK(decode_error_code(kind, std::span(enc.data(), n)) == kInvalid);
    }
    Bytes longer = enc;
    longer.push_back(0);
    std::string what;
    CHECK(decode_error_code(kind, longer, &what) == kInvalid);
    CHECK(what.find("trailing") != std::string::npos);
  }
}

TEST_CASE("wire: counts and lengths over the limits are refused before allocating") {
  SUBCASE("a list count of 0xFFFFFFFF") {
    Bytes enc = encode_body(sample_query());
    const size_t count_at = 4 + 1 + 1 + 4 * 8;  // Query.indices follows round, kind, level, 4 × u64
    std::fill_n(enc.begin() + count_at, 4, 0xff);
    std::string what;
    CHECK(decode_error_code(MessageKind::Query, enc, &what) == kTooBig);
    CHECK(what == "Query.indices: count 4294967295 exceeds 4096 at offset 38");
  }
  SUBCASE("a count within the limit but larger than the input") {
    Bytes enc = encode_body(sample_query());
    Builder b;
    b.u32(4000);
    std::copy(b.out.begin(), b.out.end(), enc.begin() + 38);
    std::string what;
    CHECK(decode_error_code(MessageKind::Query, enc, &what) == kInvalid);
    CHECK(what.find("Query.indices: count 4000 needs at least 32000 bytes") == 0);
  }
  SUBCASE("a string length of 0xFFFFFFFF") {
    const Bytes enc = Builder{}.u32(0xffffffff).out;
    std::string what;
    CHECK(decode_error_code(MessageKind::JobSubmit, enc, &what) == kTooBig);
    CHECK(what.find("JobSubmit.job_toml: length 4294967295 exceeds 65536") == 0);
  }
  SUBCASE("a Merkle path longer than 64") {
    Builder b;
    // IntervalCommit round, root, start_value, start_in_level1.{index, size}, then the path count.
    b.u32(1).digest(dg(1)).digest(dg(2)).u64(0).u64(1).u32(65);
    std::string what;
    CHECK(decode_error_code(MessageKind::IntervalCommit, b.out, &what) == kTooBig);
    CHECK(what == "IntervalCommit.start_in_level1.path: count 65 exceeds 64 at offset 84");
    IntervalCommit ic = std::get<IntervalCommit>(sample_bodies()[5]);
    ic.last.path.resize(kMaxProofLength + 1);
    CHECK_THROWS_AS(encode_body(ic), WireError);
    ic.last.path.resize(kMaxProofLength);
    CHECK(same(std::get<IntervalCommit>(decode_body(MessageKind::IntervalCommit, encode_body(ic))), ic));
  }
  SUBCASE("TensorChunk.bytes over kMaxChunkBytes") {
    TensorChunk c = std::get<TensorChunk>(sample_bodies()[8]);
    c.bytes.assign(kMaxChunkBytes, 7);
    const Bytes ok = encode_body(c);
    CHECK(std::get<TensorChunk>(decode_body(MessageKind::TensorChunk, ok)).bytes.size() == kMaxChunkBytes);
    c.bytes.push_back(7);
    CHECK_THROWS_AS(encode_body(c), WireError);
    // Hand-made (round, value, no shape, chunk, count, chunks, root, bytes, no proof): the length field
    // says kMaxChunkBytes + 1 and the bytes are there.
    Builder b;
    b.u32(1).u32(0).u32(0).u32(0).u32(1).u32(1).digest(dg(1)).bytes(c.bytes).u32(0);
    CHECK(decode_error_code(MessageKind::TensorChunk, b.out) == kTooBig);
  }
  SUBCASE("each Samples input at most kMaxListItems floats") {
    Samples s = std::get<Samples>(sample_bodies()[9]);
    s.inputs[0].assign(kMaxListItems, 1.0f);
    CHECK(std::get<Samples>(decode_body(MessageKind::Samples, encode_body(s))).inputs[0].size() ==
          kMaxListItems);
    s.inputs[0].push_back(1.0f);
    CHECK_THROWS_AS(encode_body(s), WireError);
    Builder b;
    b.u32(1).u32(0).u32(1).u32(kMaxListItems + 1);
    for (size_t i = 0; i <= kMaxListItems; ++i) b.u32(0);
    b.u32(0).u32(0);
    std::string what;
    CHECK(decode_error_code(MessageKind::Samples, b.out, &what) == kTooBig);
    CHECK(what == "Samples.inputs: count 4097 exceeds 4096 at offset 12");
  }
  SUBCASE("list counts over kMaxListItems on the encoding side") {
    Query q = sample_query();
    q.indices.assign(kMaxListItems, 1);
    CHECK_NOTHROW(encode_body(q));
    q.indices.push_back(1);
    CHECK_THROWS_AS(encode_body(q), WireError);
  }
  SUBCASE("a body larger than an envelope can carry") {
    CHECK(decode_error_code(MessageKind::JobSubmit, Bytes(kMaxMessageBytes, 0)) == kTooBig);
  }
}

TEST_CASE("wire: enums must hold a declared value") {
  const Bytes good = encode_body(sample_query());
  REQUIRE(decode_error_code(MessageKind::Query, good) == 0);
  struct Case {
    size_t offset;
    uint8_t value;
    const char* field;
  };
  const size_t origin_at = 38 + 4 + 3 * 8 + 4;  // after indices (count + 3 × u64) and the values count
  for (const Case& c :
       {Case{4, 0, "Query.kind"}, Case{4, 8, "Query.kind"}, Case{5, 0, "Query.level"},
        Case{5, 5, "Query.level"}, Case{origin_at, 0, "Query.values.origin"},
        Case{origin_at, 4, "Query.values.origin"}, Case{origin_at, 255, "Query.values.origin"}}) {
    Bytes bad = good;
    bad[c.offset] = c.value;
    std::string what;
    CAPTURE(c.field);
    CHECK(decode_error_code(MessageKind::Query, bad, &what) == kInvalid);
    CHECK(what.find(c.field) == 0);
  }
  // Verdict.reason and .level sit behind two digests, the opening and the winner/loser sets.
  Verdict v = std::get<Verdict>(sample_bodies()[10]);
  const Bytes venc = encode_body(v);
  const size_t reason_at = 64 + encode_body(v.opening).size() + 5 + 5;
  REQUIRE(venc[reason_at] == static_cast<uint8_t>(VerdictReason::Equivocation));
  Bytes bad = venc;
  bad[reason_at] = 12;
  CHECK(decode_error_code(MessageKind::Verdict, bad) == kInvalid);
  bad[reason_at] = 11;
  CHECK(decode_error_code(MessageKind::Verdict, bad) == 0);  // BothValid is the last declared value
  bad = venc;
  bad[reason_at + 1] = 0;
  CHECK(decode_error_code(MessageKind::Verdict, bad) == kInvalid);
  // Unknown message kinds, and invalid enums on the encoding side.
  CHECK(decode_error_code(static_cast<MessageKind>(0), good) == kInvalid);
  CHECK(decode_error_code(static_cast<MessageKind>(20), good) == kInvalid);
  Query q = sample_query();
  q.kind = static_cast<QueryKind>(9);
  CHECK_THROWS_AS(encode_body(q), WireError);
}

TEST_CASE("wire: a RefereeCheck names at most 64 endpoints of at most 1024 bytes; refusals are bounded") {
  RefereeCheck check{dg(1), std::vector<std::string>(kMaxCheckedEndpoints, "ws://p/")};
  CHECK(decode_error_code(MessageKind::RefereeCheck, encode_body(check)) == 0);
  check.endpoints.push_back("ws://p/");
  CHECK_THROWS_AS(encode_body(check), WireError);
  check.endpoints = {std::string(kMaxEndpointBytes + 1, 'x')};
  CHECK_THROWS_AS(encode_body(check), WireError);
  RefereeAnswer answer{dg(1), {std::string(kMaxRefusalBytes, 'r')}};
  CHECK(decode_error_code(MessageKind::RefereeAnswer, encode_body(answer)) == 0);
  answer.refusals[0].push_back('r');
  CHECK_THROWS_AS(encode_body(answer), WireError);
  // Hand-made: 65 endpoints is too big to decode.
  Builder b;
  b.digest(dg(1)).u32(kMaxCheckedEndpoints + 1);
  for (size_t i = 0; i <= kMaxCheckedEndpoints; ++i) b.u32(0);
  CHECK(decode_error_code(MessageKind::RefereeCheck, b.out) == kTooBig);
}

TEST_CASE("wire: DisputeOpen and Verdict carry exactly two claims; verdict sets are canonical") {
  DisputeOpen d = std::get<DisputeOpen>(sample_bodies()[2]);
  for (size_t n : {0, 1, 3}) {
    CAPTURE(n);
    DisputeOpen e = d;
    e.claims.resize(n, d.claims[0]);
    CHECK_THROWS_AS(encode_body(e), WireError);
    // Hand-made decoding input with n claims.
    Builder b;
    b.str("").digest(dg(2)).u64(60000).u64(784).u64(10).u64(0).u32(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) b.bytes(d.claims[0]);
    std::string what;
    CHECK(decode_error_code(MessageKind::DisputeOpen, b.out, &what) == kInvalid);
    CHECK(what.find("DisputeOpen.claims: count " + std::to_string(n) + " is not 2") == 0);
  }
  // A claim envelope inside an opening is bounded (so a verdict, which carries the opening, fits).
  DisputeOpen big = d;
  big.claims[1].resize(kMaxClaimEnvelopeBytes + 1, 0x5a);
  CHECK_THROWS_AS(encode_body(big), WireError);
  Verdict v = std::get<Verdict>(sample_bodies()[10]);
  v.opening.claims.pop_back();
  CHECK_THROWS_AS(encode_body(v), WireError);
  v = std::get<Verdict>(sample_bodies()[10]);
  for (const std::vector<uint8_t>& set : std::vector<std::vector<uint8_t>>{{2}, {1, 0}, {0, 0}, {0, 1, 1}}) {
    v.losers = set;
    CHECK_THROWS_AS(encode_body(v), WireError);
  }
  v.losers = {0, 1};  // both lose: no valid claim
  const Bytes enc = encode_body(v);
  CHECK(same(std::get<Verdict>(decode_body(MessageKind::Verdict, enc)), v));
  // Swap the two loser bytes in the encoding: {1, 0} is refused.
  const size_t losers_at = 64 + encode_body(v.opening).size() + 5 + 4;
  REQUIRE(enc[losers_at] == 0);
  Bytes bad = enc;
  std::swap(bad[losers_at], bad[losers_at + 1]);
  CHECK(decode_error_code(MessageKind::Verdict, bad) == kInvalid);
}

// ---------------------------------------------------------------------------------------------------
// Envelopes

TEST_CASE("envelope: seal/open round-trips every message type") {
  const Digest ctx = dg(42);
  uint64_t seq = 1;
  for (const Body& body : sample_bodies()) {
    const Bytes env = seal(key_a(), ctx, seq, body);
    const Envelope e = open_envelope(env);
    CHECK(e.kind == kind_of(body));
    CHECK(e.context == ctx);
    CHECK(e.sequence == seq);
    CHECK(e.sender == key_a().public_key);
    CHECK(same_body(e.body, body));
    CHECK(e.bytes == env);
    CHECK(env.size() == kBodyAt + encode_body(body).size() + 32 + 64);
    CHECK(env[0] == kWireVersion);
    seq = seq * 1000 + 7;
  }
}

TEST_CASE("envelope: flipping any single bit is detected; every truncation is rejected") {
  const Bytes env = seal(key_a(), dg(3), 0x0102030405060708, Children{5, dg(7), dg(8)});
  REQUIRE(open_error_code(env) == 0);
  for (size_t bit = 0; bit < 8 * env.size(); ++bit) {
    Bytes bad = env;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    CAPTURE(bit);
    CHECK(open_error_code(bad) != 0);
  }
  for (size_t n = 0; n < env.size(); ++n) {
    CAPTURE(n);
    CHECK(open_error_code(std::span(env.data(), n)) != 0);
  }
  Bytes longer = env;
  longer.push_back(0);
  CHECK(open_error_code(longer) != 0);
}

TEST_CASE("envelope: signed by A but naming B is a policy violation") {
  const Bytes env = seal(key_a(), dg(3), 1, ErrorMessage{1000, "bye"});
  Bytes bad = env;
  const size_t sender_at = env.size() - 64 - 32;
  std::copy(key_b().public_key.begin(), key_b().public_key.end(), bad.begin() + sender_at);
  std::string what;
  CHECK(open_error_code(bad, &what) == kPolicy);
  CHECK(what.find("Envelope.signature") == 0);
  // A KeyPair whose halves disagree cannot seal at all.
  KeyPair mixed = key_a();
  mixed.public_key = key_b().public_key;
  CHECK_THROWS_AS(seal(mixed, dg(3), 1, ErrorMessage{}), ProtocolError);
  // B re-signing A's envelope is fine: it is then B's message.
  const Envelope e = open_envelope(resign(env, key_b()));
  CHECK(e.sender == key_b().public_key);
}

TEST_CASE("envelope: version, kind, body length and body are checked even under a valid signature") {
  const Bytes env = seal(key_a(), dg(3), 1, Children{5, dg(7), dg(8)});
  std::string what;
  // 2: before TensorChunk runs; 3: before level 4; 4: state leaves in every StepCommit
  for (uint8_t version : {0, 1, 2, 3, 4, 6, 255}) {
    Bytes bad = env;
    bad[0] = version;
    CHECK(open_error_code(resign(bad, key_a()), &what) == kInvalid);
    CHECK(what == "Envelope.version: version " + std::to_string(version) + " is not 5 at offset 0");
  }
  Bytes bad = env;
  bad[1] = 20;  // the first undeclared kind
  CHECK(open_error_code(resign(bad, key_a()), &what) == kInvalid);
  CHECK(what.find("Envelope.kind") == 0);
  // A valid Children body under kind Claim: a body of the wrong shape for its kind.
  bad = env;
  bad[1] = static_cast<uint8_t>(MessageKind::Claim);
  CHECK(open_error_code(resign(bad, key_a()), &what) == kInvalid);
  CHECK(what.find("Claim.") == 0);
  // Body length one short / one long.
  for (int delta : {-1, 1}) {
    bad = env;
    bad[42] = static_cast<uint8_t>(bad[42] + delta);
    CHECK(open_error_code(resign(bad, key_a()), &what) == kInvalid);
    CHECK(what.find("Envelope.body_length") == 0);
  }
  // A malformed body behind a valid signature: the offset is the envelope's.
  Bytes e2 = seal(key_a(), dg(3), 1, sample_query());
  e2[kBodyAt + 5] = 9;  // Query.level
  CHECK(open_error_code(resign(e2, key_a()), &what) == kInvalid);
  CHECK(what == "Query.level: value 9 is not a declared value at offset " + std::to_string(kBodyAt + 5));
}

TEST_CASE("envelope: oversized envelopes are TooBig") {
  CHECK(open_error_code(Bytes(kMaxMessageBytes + 1, 1)) == kTooBig);
  // The largest body that fits seals and opens; one byte more does not seal.
  const size_t overhead = kBodyAt + 32 + 64;
  // Records filled with node records whose attribute bytes make the envelope exactly 1 MiB.
  const size_t target = kMaxMessageBytes - overhead;
  constexpr size_t kRecordOverhead = 1 + 4 + 4 + 4;  // op, attrs length, #inputs, #outputs
  Records d;
  d.round = 1;
  while (encode_body(d).size() + kRecordOverhead + kMaxStringBytes <= target)
    d.records.push_back(NodeRecord{1, Bytes(kMaxStringBytes, 0x5a), {}, {}});
  d.records.push_back(NodeRecord{1, Bytes(target - encode_body(d).size() - kRecordOverhead, 0x5a), {}, {}});
  const Bytes env = seal(key_a(), dg(1), 1, d);
  CHECK(env.size() == kMaxMessageBytes);
  CHECK(same(std::get<Records>(open_envelope(env).body), d));
  d.records.back().attrs.push_back(0x5a);
  try {
    seal(key_a(), dg(1), 1, d);
    FAIL("sealed an envelope over kMaxMessageBytes");
  } catch (const WireError& e) {
    CHECK(e.code() == CloseCode::TooBig);
  }
}

// ---------------------------------------------------------------------------------------------------
// dispute_id and node_record_hash

TEST_CASE("dispute_id: H(Dispute ‖ the whole DisputeOpen body)") {
  const DisputeOpen d = sample_open();
  const Digest id = dispute_id(d);
  CHECK(id == Hasher(HashTag::Dispute).update(encode_body(d)).final());
  // Every byte of the opening counts: job, data set root and shape, each claim (and so each endpoint).
  const Bytes enc = encode_body(d);
  for (size_t i = 0; i < enc.size(); i += 7) {
    Bytes changed = enc;
    changed[i] ^= 1;
    DisputeOpen other;
    try {
      other = std::get<DisputeOpen>(decode_body(MessageKind::DisputeOpen, changed));
    } catch (const WireError&) {
      continue;  // no longer an opening at all
    }
    CAPTURE(i);
    CHECK(dispute_id(other) != id);
  }
  DisputeOpen swapped = d;
  std::swap(swapped.claims[0], swapped.claims[1]);
  CHECK(dispute_id(swapped) != id);
}

// H(NodeRecord ‖ op ‖ u32 attrs length ‖ attrs ‖ u32 n ‖ inputs ‖ u32 m ‖ outputs)
TEST_CASE("node_record_hash: tag, op, length-prefixed attrs, counted inputs and outputs") {
  const NodeRecord rec{17, {9, 8, 7}, {dg(1), dg(2)}, {dg(3)}};
  Hasher h(HashTag::NodeRecord);
  h.update_u8(17);
  h.update(Bytes{3, 0, 0, 0, 9, 8, 7});
  h.update(Bytes{2, 0, 0, 0}).update(dg(1)).update(dg(2));
  h.update(Bytes{1, 0, 0, 0}).update(dg(3));
  CHECK(node_record_hash(rec) == h.final());

  // The counts separate inputs from outputs, and every field matters.
  const NodeRecord moved{17, {9, 8, 7}, {dg(1)}, {dg(2), dg(3)}};
  CHECK(node_record_hash(moved) != node_record_hash(rec));
  NodeRecord other_op = rec;
  other_op.op = 18;
  CHECK(node_record_hash(other_op) != node_record_hash(rec));
  NodeRecord other_attrs = rec;
  other_attrs.attrs.push_back(0);
  CHECK(node_record_hash(other_attrs) != node_record_hash(rec));
  // Empty record: tag, op, three zero counts.
  Hasher e(HashTag::NodeRecord);
  e.update_u8(0).update(Bytes(12, 0));
  CHECK(node_record_hash(NodeRecord{}) == e.final());
}

TEST_CASE("wire: verdict reason 5 is retired and refused; the others around it are declared") {
  CHECK(codec::enum_valid<VerdictReason>(4));
  CHECK_FALSE(codec::enum_valid<VerdictReason>(5));
  CHECK(codec::enum_valid<VerdictReason>(6));
  CHECK(codec::enum_valid<VerdictReason>(9));
  CHECK(codec::enum_valid<VerdictReason>(10));  // bad_rounding_log
  CHECK(codec::enum_valid<VerdictReason>(11));  // both_valid
  CHECK_FALSE(codec::enum_valid<VerdictReason>(12));
  // Through a whole verdict: the reason byte follows the winners and losers.
  Verdict v = std::get<Verdict>(sample_bodies()[10]);
  v.reason = VerdictReason::Equivocation;  // 6, a byte value to look for after the opening
  const Bytes enc = encode_body(v);
  Verdict w = v;
  w.reason = VerdictReason::Timeout;
  const Bytes other = encode_body(w);
  size_t at = 0;
  while (at < enc.size() && enc[at] == other[at]) ++at;  // the first differing byte is the reason's
  REQUIRE(at < enc.size());
  Bytes bad = enc;
  bad[at] = 5;
  CHECK_THROWS_WITH_AS(decode_body(MessageKind::Verdict, bad), doctest::Contains("Verdict.reason"),
                       WireError);
}

TEST_CASE("wire: an OpenLog query (kind 6) and the rounding-log reasons round-trip") {
  Query q = sample_query();
  q.kind = QueryKind::OpenLog;
  q.values.clear();
  q.indices = {5};
  const Bytes enc = encode_body(q);
  CHECK(enc[4] == 6);
  const Query back = std::get<Query>(decode_body(MessageKind::Query, enc));
  CHECK(back.kind == QueryKind::OpenLog);
  CHECK(back.indices == std::vector<uint64_t>{5});
  CHECK(codec::enum_valid<QueryKind>(6));
  CHECK(codec::enum_valid<QueryKind>(7));  // LogEvidence, a job with roles
  CHECK_FALSE(codec::enum_valid<QueryKind>(8));
  for (VerdictReason r : {VerdictReason::BadRoundingLog, VerdictReason::BothValid}) {
    Verdict v = std::get<Verdict>(sample_bodies()[10]);
    v.reason = r;
    CHECK(std::get<Verdict>(decode_body(MessageKind::Verdict, encode_body(v))).reason == r);
  }
  CHECK(std::string(reason_name(VerdictReason::BadRoundingLog)) == "bad_rounding_log");
  CHECK(std::string(reason_name(VerdictReason::BothValid)) == "both_valid");
}
