// Canonical encoding of protocol messages and the signed envelope. See wire.h; DESIGN §7.
//
// Every message has one encode/decode pair below, written against the Writer/Reader primitives, which
// own all the checking: a Reader checks each length against the remaining input and the wire.h limits
// before it allocates, and a Writer applies the same limits, so whatever encodes also decodes.
#include "protocol/wire.h"

#include <sodium.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tribunal {
namespace {

// ---------------------------------------------------------------------------------------------------
// Enums: each protocol enum is numbered 1..last without gaps, so validity is a range check.

template <class E>
inline constexpr uint8_t kEnumLast = 0;
template <>
inline constexpr uint8_t kEnumLast<MessageKind> = static_cast<uint8_t>(MessageKind::Error);
template <>
inline constexpr uint8_t kEnumLast<Level> = static_cast<uint8_t>(Level::Nodes);
template <>
inline constexpr uint8_t kEnumLast<QueryKind> = static_cast<uint8_t>(QueryKind::OpenInputs);
template <>
inline constexpr uint8_t kEnumLast<ValueOrigin> = static_cast<uint8_t>(ValueOrigin::NodeOutput);
template <>
inline constexpr uint8_t kEnumLast<VerdictReason> = static_cast<uint8_t>(VerdictReason::RefereeFault);

template <class E>
bool enum_valid(uint8_t v) {
  static_assert(kEnumLast<E> > 0, "enum without a declared range");
  return v >= 1 && v <= kEnumLast<E>;
}

// kind_of and decode_body map MessageKind k to Body alternative k − 1; keep the two lists in step.
template <MessageKind K, class T>
inline constexpr bool kKindIs =
    std::is_same_v<std::variant_alternative_t<static_cast<size_t>(K) - 1, Body>, T>;
static_assert(kKindIs<MessageKind::JobSubmit, JobSubmit> && kKindIs<MessageKind::Claim, Claim> &&
              kKindIs<MessageKind::DisputeOpen, DisputeOpen> && kKindIs<MessageKind::Query, Query> &&
              kKindIs<MessageKind::Answer, Answer> && kKindIs<MessageKind::IntervalCommit, IntervalCommit> &&
              kKindIs<MessageKind::StepCommit, StepCommit> && kKindIs<MessageKind::Records, Records> &&
              kKindIs<MessageKind::TensorChunk, TensorChunk> && kKindIs<MessageKind::Samples, Samples> &&
              kKindIs<MessageKind::Verdict, Verdict> && kKindIs<MessageKind::Error, ErrorMessage> &&
              std::variant_size_v<Body> == kEnumLast<MessageKind>);

const char* kind_name(MessageKind kind) {
  static constexpr const char* kNames[] = {"JobSubmit",   "Claim",          "DisputeOpen", "Query",
                                           "Answer",      "IntervalCommit", "StepCommit",  "Records",
                                           "TensorChunk", "Samples",        "Verdict",     "ErrorMessage"};
  const auto k = static_cast<uint8_t>(kind);
  return enum_valid<MessageKind>(k) ? kNames[k - 1] : "?";
}

// ---------------------------------------------------------------------------------------------------
// Envelope layout (wire.h): header ‖ body ‖ trailer.

constexpr size_t kEnvelopeHeaderBytes = 1 + 1 + 32 + 8 + 4;  // version, kind, context, sequence, length
constexpr size_t kEnvelopeTrailerBytes = crypto_sign_PUBLICKEYBYTES + crypto_sign_BYTES;
/// The largest body an envelope can carry; encode_body and decode_body refuse larger ones.
constexpr size_t kMaxBodyBytes = kMaxMessageBytes - kEnvelopeHeaderBytes - kEnvelopeTrailerBytes;

static_assert(sizeof(PublicKey) == crypto_sign_PUBLICKEYBYTES);
static_assert(sizeof(KeyPair::secret_key) == crypto_sign_SECRETKEYBYTES);

// ---------------------------------------------------------------------------------------------------
// Counts and lengths. One rule for both directions: above `max` is TooBig (a size limit), below
// `min` or off an exact count is InvalidPayload (a structural rule, e.g. "exactly two claims").

struct Bounds {
  size_t min = 0;
  size_t max = 0;
};
constexpr Bounds kList{0, kMaxListItems};
constexpr Bounds kExactlyTwo{2, 2};
constexpr Bounds kProofPath{0, kMaxProofLength};
constexpr Bounds kClaimIndexSet{0, 2};  // Verdict.winners / losers: a subset of {0, 1}

constexpr Bounds up_to(size_t max) {
  return {0, max};
}

/// Throws WireError if `n` (a "count" or "length") is outside `b`; `where` ends the message.
void check_bounds(std::string_view field, const char* noun, uint64_t n, Bounds b, const std::string& where) {
  const std::string head = std::string(field) + ": " + noun + " " + std::to_string(n);
  if (b.min == b.max && n != b.min) {
    throw WireError(CloseCode::InvalidPayload, head + " is not " + std::to_string(b.min) + where);
  }
  if (n > b.max) throw WireError(CloseCode::TooBig, head + " exceeds " + std::to_string(b.max) + where);
  if (n < b.min) {
    throw WireError(CloseCode::InvalidPayload, head + " is below " + std::to_string(b.min) + where);
  }
}

// ---------------------------------------------------------------------------------------------------
// Writer: appends the canonical encoding; refuses values the Reader would refuse.

class Writer {
 public:
  void reserve(size_t n) { out_.reserve(n); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }  // two's complement
  void f32(float v) { u32(std::bit_cast<uint32_t>(v)); }  // the bits as they are: NaN payloads survive
  void raw(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void digest(const Digest& d) { raw(d); }

  template <class E>
  void enumeration(std::string_view field, E v) {
    const auto raw_value = static_cast<uint8_t>(v);
    if (!enum_valid<E>(raw_value)) {
      throw WireError(CloseCode::InvalidPayload,
                      prefix(field) + "value " + std::to_string(raw_value) + " is not a declared value");
    }
    u8(raw_value);
  }

  void bytes(std::string_view field, std::span<const uint8_t> b, size_t limit) {
    length(field, "length", b.size(), up_to(limit));
    raw(b);
  }
  void string(std::string_view field, std::string_view s, size_t limit) {
    bytes(field, std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()), limit);
  }

  /// u32 count, then each item through `write_item`.
  template <class T, class F>
  void list(std::string_view field, const std::vector<T>& items, Bounds bounds, F&& write_item) {
    length(field, "count", items.size(), bounds);
    for (const T& item : items) write_item(item);
  }
  void digests(std::string_view field, const std::vector<Digest>& items) {
    list(field, items, kList, [&](const Digest& d) { digest(d); });
  }
  void u64s(std::string_view field, const std::vector<uint64_t>& items) {
    list(field, items, kList, [&](uint64_t v) { u64(v); });
  }
  void f32s(std::string_view field, const std::vector<float>& items) {
    list(field, items, kList, [&](float v) { f32(v); });
  }

  void proof(std::string_view field, const InclusionProof& p) {
    u64(p.index);
    u64(p.size);
    list(std::string(field) + ".path", p.path, kProofPath, [&](const Digest& d) { digest(d); });
  }

  const std::vector<uint8_t>& bytes_so_far() const { return out_; }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  static std::string prefix(std::string_view field) { return "encode: " + std::string(field) + ": "; }

  void length(std::string_view field, const char* noun, size_t n, Bounds b) {
    check_bounds("encode: " + std::string(field), noun, n, b, "");
    u32(static_cast<uint32_t>(n));  // b.max < 2^32, so this never truncates
  }

  void put_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }

  std::vector<uint8_t> out_;
};

// ---------------------------------------------------------------------------------------------------
// Reader: consumes a canonical encoding. Offsets in errors are relative to the buffer the caller
// passed to the public function (`base` shifts them when a body is read inside an envelope).

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in, size_t base = 0) : in_(in), base_(base) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }

  [[noreturn]] void fail(CloseCode code, std::string_view field, size_t at, const std::string& what) const {
    throw WireError(code, std::string(field) + ": " + what + at_offset(at));
  }

  /// The next `n` bytes, or an error if fewer remain.
  std::span<const uint8_t> take(std::string_view field, size_t n) {
    if (n > remaining()) {
      fail(CloseCode::InvalidPayload, field, pos_,
           "needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
    }
    const auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  uint8_t u8(std::string_view field) { return static_cast<uint8_t>(uint_le(field, 1)); }
  uint16_t u16(std::string_view field) { return static_cast<uint16_t>(uint_le(field, 2)); }
  uint32_t u32(std::string_view field) { return static_cast<uint32_t>(uint_le(field, 4)); }
  uint64_t u64(std::string_view field) { return uint_le(field, 8); }
  int64_t i64(std::string_view field) { return static_cast<int64_t>(u64(field)); }
  float f32(std::string_view field) { return std::bit_cast<float>(u32(field)); }

  Digest digest(std::string_view field) {
    Digest d;
    const auto b = take(field, d.size());
    std::copy(b.begin(), b.end(), d.begin());
    return d;
  }

  template <class E>
  E enumeration(std::string_view field) {
    const size_t at = pos_;
    const uint8_t v = u8(field);
    if (!enum_valid<E>(v))
      fail(CloseCode::InvalidPayload, field, at, "value " + std::to_string(v) + " is not a declared value");
    return static_cast<E>(v);
  }

  std::vector<uint8_t> bytes(std::string_view field, size_t limit) {
    const auto b = take(field, length(field, "length", up_to(limit), 1));
    return {b.begin(), b.end()};
  }
  std::string string(std::string_view field, size_t limit) {
    const auto b = take(field, length(field, "length", up_to(limit), 1));
    return {b.begin(), b.end()};
  }

  /// u32 count, then that many items from `read_item`. `min_item_bytes` is the smallest encoding of
  /// one item: a count that cannot fit in what is left is refused before the vector is reserved.
  template <class F>
  auto list(std::string_view field, Bounds bounds, size_t min_item_bytes, F&& read_item) {
    const size_t n = length(field, "count", bounds, min_item_bytes);
    std::vector<decltype(read_item())> items;
    items.reserve(n);
    for (size_t i = 0; i < n; ++i) items.push_back(read_item());
    return items;
  }
  std::vector<Digest> digests(std::string_view field) {
    return list(field, kList, sizeof(Digest), [&] { return digest(field); });
  }
  std::vector<uint64_t> u64s(std::string_view field) {
    return list(field, kList, 8, [&] { return u64(field); });
  }
  std::vector<float> f32s(std::string_view field) {
    return list(field, kList, 4, [&] { return f32(field); });
  }

  static constexpr size_t kMinProofBytes = 8 + 8 + 4;
  InclusionProof proof(std::string_view field) {
    const std::string f(field);
    InclusionProof p;
    p.index = u64(f + ".index");
    p.size = u64(f + ".size");
    const std::string path = f + ".path";
    p.path = list(path, kProofPath, sizeof(Digest), [&] { return digest(path); });
    return p;
  }

  /// Canonical encodings have nothing after the last field.
  void finish(std::string_view message) const {
    if (remaining() != 0) {
      fail(CloseCode::InvalidPayload, message, pos_, std::to_string(remaining()) + " trailing bytes");
    }
  }

 private:
  std::string at_offset(size_t at) const { return " at offset " + std::to_string(base_ + at); }

  uint64_t uint_le(std::string_view field, size_t n) {
    const auto b = take(field, n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
    return v;
  }

  size_t length(std::string_view field, const char* noun, Bounds bounds, size_t min_item_bytes) {
    const size_t at = pos_;
    const uint32_t n = u32(field);
    check_bounds(field, noun, n, bounds, at_offset(at));
    if (uint64_t{n} * min_item_bytes > remaining()) {
      fail(CloseCode::InvalidPayload, field, at,
           std::string(noun) + " " + std::to_string(n) + " needs at least " +
               std::to_string(uint64_t{n} * min_item_bytes) + " bytes, " + std::to_string(remaining()) +
               " left");
    }
    return n;
  }

  std::span<const uint8_t> in_;
  size_t base_ = 0;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------------
// Shared pieces of several messages.

// Claim envelopes travel inside DisputeOpen and Verdict. A Claim envelope is the 146 bytes of the
// envelope around a body of 108 bytes and its endpoint, so kMaxClaimEnvelopeBytes bounds it; a
// verdict, which carries the opening, then stays far below one envelope.
constexpr size_t kMinBytesItemBytes = 4;  // a byte string / string: its u32 length

void write_claims(Writer& w, std::string_view field, const std::vector<std::vector<uint8_t>>& claims) {
  w.list(field, claims, kExactlyTwo,
         [&](const std::vector<uint8_t>& c) { w.bytes(field, c, kMaxClaimEnvelopeBytes); });
}
std::vector<std::vector<uint8_t>> read_claims(Reader& r, std::string_view field) {
  return r.list(field, kExactlyTwo, kMinBytesItemBytes, [&] { return r.bytes(field, kMaxClaimEnvelopeBytes); });
}

// Verdict.winners / losers: claim indices, strictly increasing, so a set has one encoding.
void write_claim_indices(Writer& w, std::string_view field, const std::vector<uint8_t>& indices) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] > 1 || (i > 0 && indices[i] <= indices[i - 1])) {
      throw WireError(CloseCode::InvalidPayload, "encode: " + std::string(field) +
                                                     ": claim indices must be 0 or 1, strictly increasing");
    }
  }
  w.list(field, indices, kClaimIndexSet, [&](uint8_t v) { w.u8(v); });
}
std::vector<uint8_t> read_claim_indices(Reader& r, std::string_view field) {
  int previous = -1;
  return r.list(field, kClaimIndexSet, 1, [&] {
    const size_t at = r.offset();
    const uint8_t v = r.u8(field);
    if (v > 1 || v <= previous) {
      r.fail(CloseCode::InvalidPayload, field, at,
             "claim index " + std::to_string(v) + " is not 0 or 1 in strictly increasing order");
    }
    previous = v;
    return v;
  });
}

std::vector<InclusionProof> read_proofs(Reader& r, std::string_view field) {
  return r.list(field, kList, Reader::kMinProofBytes, [&] { return r.proof(field); });
}
void write_proofs(Writer& w, std::string_view field, const std::vector<InclusionProof>& proofs) {
  w.list(field, proofs, kList, [&](const InclusionProof& p) { w.proof(field, p); });
}

// ---------------------------------------------------------------------------------------------------
// One encode/decode pair per message, fields in declaration order (messages.h).

void encode(Writer& w, const JobSubmit& m) {
  w.string("JobSubmit.job_toml", m.job_toml, kMaxStringBytes);
}
void decode(Reader& r, JobSubmit& m) {
  m.job_toml = r.string("JobSubmit.job_toml", kMaxStringBytes);
}

void encode(Writer& w, const Claim& m) {
  w.digest(m.job_id);
  w.u64(m.steps);
  w.digest(m.trajectory_root);
  w.digest(m.final_state_hash);
  w.string("Claim.endpoint", m.endpoint, kMaxEndpointBytes);
}
void decode(Reader& r, Claim& m) {
  m.job_id = r.digest("Claim.job_id");
  m.steps = r.u64("Claim.steps");
  m.trajectory_root = r.digest("Claim.trajectory_root");
  m.final_state_hash = r.digest("Claim.final_state_hash");
  m.endpoint = r.string("Claim.endpoint", kMaxEndpointBytes);
}

void encode(Writer& w, const DisputeOpen& m) {
  w.string("DisputeOpen.job_toml", m.job_toml, kMaxStringBytes);
  w.digest(m.dataset_root);
  w.u64(m.dataset_samples);
  w.u64(m.features);
  w.u64(m.classes);
  w.u64(m.label_width);
  write_claims(w, "DisputeOpen.claims", m.claims);
}
void decode(Reader& r, DisputeOpen& m) {
  m.job_toml = r.string("DisputeOpen.job_toml", kMaxStringBytes);
  m.dataset_root = r.digest("DisputeOpen.dataset_root");
  m.dataset_samples = r.u64("DisputeOpen.dataset_samples");
  m.features = r.u64("DisputeOpen.features");
  m.classes = r.u64("DisputeOpen.classes");
  m.label_width = r.u64("DisputeOpen.label_width");
  m.claims = read_claims(r, "DisputeOpen.claims");
}

constexpr size_t kValueAddressBytes = 1 + 8 + 4;  // origin, index, slot
void encode(Writer& w, const Query& m) {
  w.u32(m.round);
  w.enumeration("Query.kind", m.kind);
  w.enumeration("Query.level", m.level);
  w.u64(m.interval);
  w.u64(m.step);
  w.u64(m.lo);
  w.u64(m.hi);
  w.u64s("Query.indices", m.indices);
  w.list("Query.values", m.values, kList, [&](const ValueAddress& v) {
    w.enumeration("Query.values.origin", v.origin);
    w.u64(v.index);
    w.u32(v.slot);
  });
  w.u64(m.deadline_ms);
}
void decode(Reader& r, Query& m) {
  m.round = r.u32("Query.round");
  m.kind = r.enumeration<QueryKind>("Query.kind");
  m.level = r.enumeration<Level>("Query.level");
  m.interval = r.u64("Query.interval");
  m.step = r.u64("Query.step");
  m.lo = r.u64("Query.lo");
  m.hi = r.u64("Query.hi");
  m.indices = r.u64s("Query.indices");
  m.values = r.list("Query.values", kList, kValueAddressBytes, [&] {
    ValueAddress v;
    v.origin = r.enumeration<ValueOrigin>("Query.values.origin");
    v.index = r.u64("Query.values.index");
    v.slot = r.u32("Query.values.slot");
    return v;
  });
  m.deadline_ms = r.u64("Query.deadline_ms");
}

void encode(Writer& w, const Answer& m) {
  w.u32(m.round);
  w.digest(m.left);
  w.digest(m.right);
}
void decode(Reader& r, Answer& m) {
  m.round = r.u32("Answer.round");
  m.left = r.digest("Answer.left");
  m.right = r.digest("Answer.right");
}

void encode(Writer& w, const IntervalCommit& m) {
  w.u32(m.round);
  w.digest(m.root);
  w.digest(m.start_value);
  w.proof("IntervalCommit.start_in_level1", m.start_in_level1);
  w.proof("IntervalCommit.first", m.first);
  w.proof("IntervalCommit.last", m.last);
}
void decode(Reader& r, IntervalCommit& m) {
  m.round = r.u32("IntervalCommit.round");
  m.root = r.digest("IntervalCommit.root");
  m.start_value = r.digest("IntervalCommit.start_value");
  m.start_in_level1 = r.proof("IntervalCommit.start_in_level1");
  m.first = r.proof("IntervalCommit.first");
  m.last = r.proof("IntervalCommit.last");
}

void encode(Writer& w, const StepCommit& m) {
  w.u32(m.round);
  w.digest(m.root);
  w.digests("StepCommit.pre_state", m.pre_state);
  w.digests("StepCommit.post_state", m.post_state);
  w.proof("StepCommit.pre_in_level2", m.pre_in_level2);
  w.proof("StepCommit.last", m.last);
}
void decode(Reader& r, StepCommit& m) {
  m.round = r.u32("StepCommit.round");
  m.root = r.digest("StepCommit.root");
  m.pre_state = r.digests("StepCommit.pre_state");
  m.post_state = r.digests("StepCommit.post_state");
  m.pre_in_level2 = r.proof("StepCommit.pre_in_level2");
  m.last = r.proof("StepCommit.last");
}

// A NodeRecord is only ever an item of Records.records.
constexpr size_t kMinNodeRecordBytes = 1 + 4 + 4 + 4;
void encode(Writer& w, const NodeRecord& m) {
  w.u8(m.op);
  w.bytes("Records.records.attrs", m.attrs, kMaxStringBytes);
  w.digests("Records.records.inputs", m.inputs);
  w.digests("Records.records.outputs", m.outputs);
}
void decode(Reader& r, NodeRecord& m) {
  m.op = r.u8("Records.records.op");
  m.attrs = r.bytes("Records.records.attrs", kMaxStringBytes);
  m.inputs = r.digests("Records.records.inputs");
  m.outputs = r.digests("Records.records.outputs");
}

void encode(Writer& w, const Records& m) {
  w.u32(m.round);
  w.u64s("Records.indices", m.indices);
  w.list("Records.records", m.records, kList, [&](const NodeRecord& rec) { encode(w, rec); });
  write_proofs(w, "Records.proofs", m.proofs);
}
void decode(Reader& r, Records& m) {
  m.round = r.u32("Records.round");
  m.indices = r.u64s("Records.indices");
  m.records = r.list("Records.records", kList, kMinNodeRecordBytes, [&] {
    NodeRecord rec;
    decode(r, rec);
    return rec;
  });
  m.proofs = read_proofs(r, "Records.proofs");
}

void encode(Writer& w, const TensorChunk& m) {
  w.u32(m.round);
  w.u32(m.value);
  w.list("TensorChunk.shape", m.shape, kList, [&](int64_t d) { w.i64(d); });
  w.u32(m.chunk);
  w.u32(m.chunks);
  w.digest(m.chunk_root);
  w.bytes("TensorChunk.bytes", m.bytes, kMaxChunkBytes);
  w.proof("TensorChunk.proof", m.proof);
}
void decode(Reader& r, TensorChunk& m) {
  m.round = r.u32("TensorChunk.round");
  m.value = r.u32("TensorChunk.value");
  m.shape = r.list("TensorChunk.shape", kList, 8, [&] { return r.i64("TensorChunk.shape"); });
  m.chunk = r.u32("TensorChunk.chunk");
  m.chunks = r.u32("TensorChunk.chunks");
  m.chunk_root = r.digest("TensorChunk.chunk_root");
  m.bytes = r.bytes("TensorChunk.bytes", kMaxChunkBytes);
  m.proof = r.proof("TensorChunk.proof");
}

void encode(Writer& w, const Samples& m) {
  w.u32(m.round);
  w.u64s("Samples.indices", m.indices);
  w.list("Samples.inputs", m.inputs, kList,
         [&](const std::vector<float>& x) { w.f32s("Samples.inputs", x); });
  w.list("Samples.labels", m.labels, kList,
         [&](const std::vector<float>& y) { w.f32s("Samples.labels", y); });
  write_proofs(w, "Samples.proofs", m.proofs);
}
void decode(Reader& r, Samples& m) {
  m.round = r.u32("Samples.round");
  m.indices = r.u64s("Samples.indices");
  m.inputs = r.list("Samples.inputs", kList, 4, [&] { return r.f32s("Samples.inputs"); });
  m.labels = r.list("Samples.labels", kList, 4, [&] { return r.f32s("Samples.labels"); });
  m.proofs = read_proofs(r, "Samples.proofs");
}

void encode(Writer& w, const Verdict& m) {
  w.digest(m.job_id);
  w.digest(m.dispute_id);
  encode(w, m.opening);
  write_claim_indices(w, "Verdict.winners", m.winners);
  write_claim_indices(w, "Verdict.losers", m.losers);
  w.enumeration("Verdict.reason", m.reason);
  w.enumeration("Verdict.level", m.level);
  w.u64(m.step);
  w.u64(m.node);
  w.u8(m.op);
  w.u32(m.rounds);
  w.string("Verdict.detail", m.detail, kMaxStringBytes);
}
void decode(Reader& r, Verdict& m) {
  m.job_id = r.digest("Verdict.job_id");
  m.dispute_id = r.digest("Verdict.dispute_id");
  decode(r, m.opening);
  m.winners = read_claim_indices(r, "Verdict.winners");
  m.losers = read_claim_indices(r, "Verdict.losers");
  m.reason = r.enumeration<VerdictReason>("Verdict.reason");
  m.level = r.enumeration<Level>("Verdict.level");
  m.step = r.u64("Verdict.step");
  m.node = r.u64("Verdict.node");
  m.op = r.u8("Verdict.op");
  m.rounds = r.u32("Verdict.rounds");
  m.detail = r.string("Verdict.detail", kMaxStringBytes);
}

void encode(Writer& w, const ErrorMessage& m) {
  w.u16(m.code);
  w.string("ErrorMessage.reason", m.reason, kMaxStringBytes);
}
void decode(Reader& r, ErrorMessage& m) {
  m.code = r.u16("ErrorMessage.code");
  m.reason = r.string("ErrorMessage.reason", kMaxStringBytes);
}

// ---------------------------------------------------------------------------------------------------

/// A default-constructed Body holding alternative `index`.
template <size_t... I>
Body empty_body(size_t index, std::index_sequence<I...>) {
  Body body;
  ((index == I ? (void)body.emplace<I>() : void()), ...);
  return body;
}

Body decode_body_at(MessageKind kind, std::span<const uint8_t> bytes, size_t base) {
  const auto k = static_cast<uint8_t>(kind);
  if (!enum_valid<MessageKind>(k)) {
    throw WireError(CloseCode::InvalidPayload,
                    "decode_body: message kind " + std::to_string(k) + " is not declared");
  }
  if (bytes.size() > kMaxBodyBytes) {
    throw WireError(CloseCode::TooBig, std::string(kind_name(kind)) + ": body of " +
                                           std::to_string(bytes.size()) + " bytes exceeds " +
                                           std::to_string(kMaxBodyBytes));
  }
  Body body = empty_body(k - 1, std::make_index_sequence<std::variant_size_v<Body>>{});
  Reader r(bytes, base);
  std::visit([&](auto& m) { decode(r, m); }, body);
  r.finish(kind_name(kind));
  return body;
}

/// What an envelope signature signs: H(Envelope ‖ every byte before the signature).
Digest envelope_digest(std::span<const uint8_t> signed_bytes) {
  return Hasher(HashTag::Envelope).update(signed_bytes).final();
}

}  // namespace

MessageKind kind_of(const Body& body) {
  return static_cast<MessageKind>(body.index() + 1);
}

std::vector<uint8_t> encode_body(const Body& body) {
  Writer w;
  std::visit([&](const auto& m) { encode(w, m); }, body);
  if (w.bytes_so_far().size() > kMaxBodyBytes) {
    throw WireError(CloseCode::TooBig, std::string("encode: ") + kind_name(kind_of(body)) + ": body of " +
                                           std::to_string(w.bytes_so_far().size()) + " bytes exceeds " +
                                           std::to_string(kMaxBodyBytes));
  }
  return w.take();
}

Body decode_body(MessageKind kind, std::span<const uint8_t> bytes) {
  return decode_body_at(kind, bytes, 0);
}

bool KeyPair::halves_agree() const {
  return std::equal(public_key.begin(), public_key.end(), secret_key.begin() + (secret_key.size() - public_key.size()));
}

KeyPair generate_keypair() {
  ensure_sodium();
  KeyPair keys;
  if (crypto_sign_keypair(keys.public_key.data(), keys.secret_key.data()) != 0) {
    throw ProtocolError("generate_keypair: crypto_sign_keypair failed");
  }
  return keys;
}

std::vector<uint8_t> seal(const KeyPair& keys, const Digest& context, uint64_t sequence, const Body& body) {
  ensure_sodium();
  if (!keys.halves_agree()) throw ProtocolError("seal: public key is not the secret key's public half");
  const std::vector<uint8_t> encoded = encode_body(body);  // ≤ kMaxBodyBytes, so the envelope fits
  Writer w;
  w.reserve(kEnvelopeHeaderBytes + encoded.size() + kEnvelopeTrailerBytes);
  w.u8(kWireVersion);
  w.u8(static_cast<uint8_t>(kind_of(body)));
  w.digest(context);
  w.u64(sequence);
  w.u32(static_cast<uint32_t>(encoded.size()));
  w.raw(encoded);
  w.raw(keys.public_key);
  const Digest signed_digest = envelope_digest(w.bytes_so_far());
  std::array<uint8_t, crypto_sign_BYTES> signature{};
  if (crypto_sign_detached(signature.data(), nullptr, signed_digest.data(), signed_digest.size(),
                           keys.secret_key.data()) != 0) {
    throw ProtocolError("seal: crypto_sign_detached failed");
  }
  w.raw(signature);
  return w.take();
}

Envelope open_envelope(std::span<const uint8_t> bytes) {
  ensure_sodium();
  if (bytes.size() > kMaxMessageBytes) {
    throw WireError(CloseCode::TooBig, "Envelope: " + std::to_string(bytes.size()) + " bytes exceed " +
                                           std::to_string(kMaxMessageBytes));
  }
  Reader r(bytes);
  Envelope env;
  const uint8_t version = r.u8("Envelope.version");
  if (version != kWireVersion) {
    r.fail(CloseCode::InvalidPayload, "Envelope.version", 0,
           "version " + std::to_string(version) + " is not " + std::to_string(kWireVersion));
  }
  env.kind = r.enumeration<MessageKind>("Envelope.kind");
  env.context = r.digest("Envelope.context");
  env.sequence = r.u64("Envelope.sequence");
  const size_t length_at = r.offset();
  const uint32_t body_length = r.u32("Envelope.body_length");
  if (r.remaining() < kEnvelopeTrailerBytes || body_length != r.remaining() - kEnvelopeTrailerBytes) {
    r.fail(CloseCode::InvalidPayload, "Envelope.body_length", length_at,
           "body length " + std::to_string(body_length) + " does not match the envelope size " +
               std::to_string(bytes.size()));
  }
  const size_t body_at = r.offset();
  const std::span<const uint8_t> body = r.take("Envelope.body", body_length);
  const auto sender = r.take("Envelope.sender", env.sender.size());
  std::copy(sender.begin(), sender.end(), env.sender.begin());
  const size_t signature_at = r.offset();
  const std::span<const uint8_t> signature = r.take("Envelope.signature", crypto_sign_BYTES);
  r.finish("Envelope");

  // The signature first: a body is only parsed once it is known to come from the named sender.
  const Digest signed_digest = envelope_digest(bytes.first(signature_at));
  if (crypto_sign_verify_detached(signature.data(), signed_digest.data(), signed_digest.size(),
                                  env.sender.data()) != 0) {
    r.fail(CloseCode::PolicyViolation, "Envelope.signature", signature_at,
           "does not verify under the sender key");
  }
  env.body = decode_body_at(env.kind, body, body_at);
  env.bytes.assign(bytes.begin(), bytes.end());
  return env;
}

Digest dispute_id(const DisputeOpen& opening) {
  Hasher h(HashTag::Dispute);
  h.update(encode_body(opening));
  return h.final();
}

}  // namespace tribunal
