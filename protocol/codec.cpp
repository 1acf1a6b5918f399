// Canonical encoding of message bodies. See codec.h; docs/protocol.md, "Messages".
//
// Each message's fields are listed once, in declaration order, by one fields(stream, m) function —
// Bitcoin Core's SERIALIZE_METHODS is the model. The same list runs with a Writer over a const message
// (encode), with a strict Reader over a default one (decode), and with a MinSize counter (the smallest
// encoding of one item, so that a Reader refuses a count that cannot fit before it allocates). The three
// streams take the same call, s("field", m.field[, rule]), and differ only in what they do with a value
// of each type, so the two directions cannot drift apart.
#include "protocol/codec.h"

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "protocol/codec_stream.h"

namespace tribunal {
namespace codec {
namespace {

/// The refusal of a count or length `n` outside `b` ("count 5 exceeds 4"), or nullopt within it.
struct Refusal {
  CloseCode code;
  std::string what;
};
std::optional<Refusal> bounds_refusal(const char* noun, uint64_t n, Bounds b) {
  const std::string head = std::string(noun) + " " + std::to_string(n);
  if (b.min == b.max && n != b.min)
    return Refusal{CloseCode::InvalidPayload, head + " is not " + std::to_string(b.min)};
  if (n > b.max) return Refusal{CloseCode::TooBig, head + " exceeds " + std::to_string(b.max)};
  if (n < b.min) return Refusal{CloseCode::InvalidPayload, head + " is below " + std::to_string(b.min)};
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// ByteReader (codec_stream.h)

void ByteReader::fail(CloseCode code, const FieldName& field, size_t at, const std::string& what) const {
  throw WireError(code, field.str() + ": " + what + at_offset(at));
}

std::span<const uint8_t> ByteReader::take(const FieldName& field, size_t n) {
  if (n > remaining()) {
    fail(CloseCode::InvalidPayload, field, pos_,
         "needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
  }
  const auto s = in_.subspan(pos_, n);
  pos_ += n;
  return s;
}

uint64_t ByteReader::uint_le(const FieldName& field, size_t n) {
  const auto b = take(field, n);
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
  return v;
}

Digest ByteReader::digest(const FieldName& field) {
  Digest d;
  const auto b = take(field, d.size());
  std::copy(b.begin(), b.end(), d.begin());
  return d;
}

size_t ByteReader::length(const FieldName& field, const char* noun, Bounds bounds, size_t min_item_bytes) {
  const size_t at = pos_;
  const uint32_t n = u32(field);
  if (const auto refusal = bounds_refusal(noun, n, bounds)) fail(refusal->code, field, at, refusal->what);
  if (uint64_t{n} * min_item_bytes > remaining()) {
    fail(CloseCode::InvalidPayload, field, at,
         std::string(noun) + " " + std::to_string(n) + " needs at least " +
             std::to_string(uint64_t{n} * min_item_bytes) + " bytes, " + std::to_string(remaining()) +
             " left");
  }
  return n;
}

void ByteReader::finish(const FieldName& message) const {
  if (remaining() != 0) {
    fail(CloseCode::InvalidPayload, message, pos_, std::to_string(remaining()) + " trailing bytes");
  }
}

namespace {

// ---------------------------------------------------------------------------------------------------
// Field rules: fixed-size fields take none; a byte string or list is bounded by its Rule (by default
// a byte string holds at most kMaxStringBytes, a list kMaxListItems items of the same defaults).

constexpr Bounds kList{0, kMaxListItems};
constexpr Bounds kExactlyTwo{2, 2};
constexpr Bounds kProofPath{0, kMaxProofLength};
constexpr Bounds kRangeProof{0, kMaxRangeProofLength};
constexpr Bounds kClaimIndices{0, 2};

template <class T>
inline constexpr bool kIsByteString =
    std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<uint8_t>>;
template <class T>
inline constexpr bool kIsDuration = std::is_same_v<T, std::chrono::milliseconds>;
template <class T>
inline constexpr bool kIsVector = false;
template <class T>
inline constexpr bool kIsVector<std::vector<T>> = true;

template <class T>
constexpr Bounds default_bounds() {
  return kIsByteString<T> ? up_to(kMaxStringBytes) : kList;
}

/// The bounds of a byte string or list, and of its items when those are byte strings or lists.
struct Rule {
  Rule(Bounds size_bounds, Bounds item_bounds = kList) : size(size_bounds), item(item_bounds) {}
  Bounds size;
  Bounds item;
};

template <class T>
Rule default_rule() {
  if constexpr (kIsVector<T>)
    return {default_bounds<T>(), default_bounds<typename T::value_type>()};
  else
    return {default_bounds<T>()};
}

/// Verdict.winners / losers: claim indices 0 or 1, strictly increasing, so a set has one encoding.
struct ClaimIndexSet {};

/// A message's fields are named "Message.field" (kMessageNames, in Body order: MessageKind k is
/// alternative k − 1), also where one message is nested in another (Verdict.opening's fields are
/// "DisputeOpen.…"); a struct that is not a message continues the name of the field holding it
/// ("Query.values.origin").
constexpr std::array<std::string_view, 19> kMessageNames = {
    "JobSubmit",      "Claim",        "DisputeOpen",  "Query",         "Children",
    "IntervalCommit", "StepCommit",   "Records",      "TensorChunk",   "Samples",
    "Verdict",        "ErrorMessage", "RefereeCheck", "RefereeAnswer", "StateRequest",
    "StateHeader",    "LogRequest",   "LogHeader",    "LogEvidence"};
static_assert(kMessageNames.size() == std::variant_size_v<Body>);

/// The index of T among the Body alternatives; kMessageNames.size() when T is no message.
template <class T, size_t... I>
constexpr size_t body_index(std::index_sequence<I...>) {
  constexpr std::array<bool, sizeof...(I)> is_alternative{
      std::is_same_v<T, std::variant_alternative_t<I, Body>>...};
  for (size_t i = 0; i < is_alternative.size(); ++i)
    if (is_alternative[i]) return i;
  return is_alternative.size();
}
template <class T>
inline constexpr size_t kBodyIndex = body_index<T>(std::make_index_sequence<std::variant_size_v<Body>>{});
template <class T>
inline constexpr bool kIsMessage = kBodyIndex<T> < kMessageNames.size();

// ---------------------------------------------------------------------------------------------------
// The field lists (messages.h): the only place that says what each encoding holds. One function per
// type serves the type and its const (Is), so the Writer and the Reader walk the same list.

template <class M, class T>
concept Is = std::is_same_v<std::remove_const_t<M>, T>;

template <class S>
void fields(S& s, Is<JobSubmit> auto& m) {
  s("job_toml", m.job_toml)("trainer_claim", m.trainer_claim, up_to(kMaxClaimEnvelopeBytes));
}
template <class S>
void fields(S& s, Is<Claim> auto& m) {
  s("job_id", m.job_id)("steps", m.steps)("trajectory_root", m.trajectory_root)(
      "final_state_hash", m.final_state_hash)("endpoint", m.endpoint, up_to(kMaxEndpointBytes));
}
// Claim envelopes travel inside DisputeOpen and Verdict. A Claim envelope is the 142 bytes of the
// envelope around a body of 108 bytes and its endpoint, so kMaxClaimEnvelopeBytes bounds it; a
// verdict, which carries the opening, then stays far below one envelope.
template <class S>
void fields(S& s, Is<DisputeOpen> auto& m) {
  s("job_toml", m.job_toml)("dataset_root", m.dataset_root)("dataset_samples", m.dataset_samples)(
      "features", m.features)("classes", m.classes)("label_width", m.label_width)(
      "claims", m.claims, Rule{kExactlyTwo, up_to(kMaxClaimEnvelopeBytes)});
}
template <class S>
void fields(S& s, Is<ValueAddress> auto& m) {
  s("origin", m.origin)("index", m.index)("slot", m.slot);
}
template <class S>
void fields(S& s, Is<ChunkRange> auto& m) {
  s("value", m.value)("first", m.first)("end", m.end);
}
template <class S>
void fields(S& s, Is<Query> auto& m) {
  s("round", m.round)("kind", m.kind)("level", m.level)("interval", m.interval)("step", m.step)("lo", m.lo)(
      "hi", m.hi)("indices", m.indices)("values", m.values)("clock", m.clock)("chunks", m.chunks);
}
template <class S>
void fields(S& s, Is<Children> auto& m) {
  s("round", m.round)("left", m.left)("right", m.right);
}
template <class S>
void fields(S& s, Is<InclusionProof> auto& m) {
  s("index", m.index)("size", m.size)("path", m.path, kProofPath);
}
template <class S>
void fields(S& s, Is<IntervalCommit> auto& m) {
  s("round", m.round)("root", m.root)("start_value", m.start_value)("start_in_level1", m.start_in_level1)(
      "first", m.first)("last", m.last);
}
template <class S>
void fields(S& s, Is<StepCommit> auto& m) {
  s("round", m.round)("root", m.root)("pre_root", m.pre_root)("pre_in_level2", m.pre_in_level2)("last",
                                                                                                m.last);
}
template <class S>
void fields(S& s, Is<NodeRecord> auto& m) {
  s("op", m.op)("attrs", m.attrs)("inputs", m.inputs)("outputs", m.outputs);
}
template <class S>
void fields(S& s, Is<Records> auto& m) {
  s("round", m.round)("indices", m.indices)("records", m.records)("proofs", m.proofs)(
      "state_leaves", m.state_leaves)("state_proofs", m.state_proofs)("post_state", m.post_state);
}
template <class S>
void fields(S& s, Is<TensorChunk> auto& m) {
  s("round", m.round)("value", m.value)("shape", m.shape)("chunk", m.chunk)("count", m.count)(
      "chunks", m.chunks)("chunk_root", m.chunk_root)("bytes", m.bytes, up_to(kMaxChunkBytes))(
      "proof", m.proof, kRangeProof);
}
template <class S>
void fields(S& s, Is<Samples> auto& m) {
  s("round", m.round)("indices", m.indices)("inputs", m.inputs)("labels", m.labels)("proofs", m.proofs);
}
template <class S>
void fields(S& s, Is<Verdict> auto& m) {
  s("job_id", m.job_id)("dispute_id", m.dispute_id)("opening", m.opening)(
      "winners", m.winners, ClaimIndexSet{})("losers", m.losers, ClaimIndexSet{})("reason", m.reason)(
      "level", m.level)("step", m.step)("node", m.node)("op", m.op)("rounds", m.rounds)("detail", m.detail)(
      "clocks", m.clocks, Rule{kExactlyTwo});
}
template <class S>
void fields(S& s, Is<ErrorMessage> auto& m) {
  s("code", m.code)("reason", m.reason);
}
// Endpoints and refusals: at most kMaxCheckedEndpoints strings, an endpoint as long as a Claim's, a
// refusal room for the endpoint it quotes and why.
template <class S>
void fields(S& s, Is<RefereeCheck> auto& m) {
  s("nonce", m.nonce)("endpoints", m.endpoints, Rule{up_to(kMaxCheckedEndpoints), up_to(kMaxEndpointBytes)});
}
template <class S>
void fields(S& s, Is<RefereeAnswer> auto& m) {
  s("nonce", m.nonce)("refusals", m.refusals, Rule{up_to(kMaxCheckedEndpoints), up_to(kMaxRefusalBytes)});
}
template <class S>
void fields(S& s, Is<StateRequest> auto& m) {
  s("job_id", m.job_id)("trajectory_root", m.trajectory_root);
}
template <class S>
void fields(S& s, Is<StateHeader> auto& m) {
  s("job_id", m.job_id)("trajectory_root", m.trajectory_root)("step", m.step)("state_hash", m.state_hash)(
      "in_trajectory", m.in_trajectory)("tensors", m.tensors);
}

template <class S>
void fields(S& s, Is<LogRequest> auto& m) {
  s("job_id", m.job_id)("step", m.step);
}
template <class S>
void fields(S& s, Is<LogHeader> auto& m) {
  s("job_id", m.job_id)("step", m.step)("leaves", m.leaves);
}
template <class S>
void fields(S& s, Is<LogEvidence> auto& m) {
  s("round", m.round)("header", m.header, Rule{up_to(kMaxMessageBytes)});
}

// ---------------------------------------------------------------------------------------------------
// The streams.

/// The call every stream shares. s("field", value[, rule]) names the value under the current field,
/// hands it to the stream's `value(name, v, rule)`, and returns the stream so that fields chain.
template <class Stream>
class FieldStream {
 public:
  template <class T>
  Stream& operator()(std::string_view field, T& v) {
    return (*this)(field, v, default_rule<std::remove_const_t<T>>());
  }
  template <class T, class R>
  Stream& operator()(std::string_view field, T& v, const R& rule) {
    const FieldName name{field, at_};
    self().value(name, v, rule);
    return self();
  }

 protected:
  /// The fields of struct `v` (T may be const), named under `name` — or under the message's own name.
  template <class T>
  void nested(const FieldName& name, T& v) {
    using U = std::remove_const_t<T>;
    FieldName root;
    if constexpr (kIsMessage<U>) root.segment = kMessageNames[kBodyIndex<U>];
    const FieldName* saved = std::exchange(at_, kIsMessage<U> ? &root : &name);
    fields(self(), v);
    at_ = saved;
  }

 private:
  Stream& self() { return static_cast<Stream&>(*this); }
  const FieldName* at_ = nullptr;
};

/// Encodes; refuses whatever the Reader would refuse ("encode: FIELD: …"), so what encodes decodes.
class Writer : public ByteWriter, public FieldStream<Writer> {
 public:
  template <class M>
  void message(const M& m) {
    nested(FieldName{}, m);
  }

  template <class T>
  void value(const FieldName& f, const T& v, const Rule& rule) {
    if constexpr (std::is_enum_v<T>) {
      const auto raw_value = static_cast<uint8_t>(v);
      if (!enum_valid<T>(raw_value))
        refuse(CloseCode::InvalidPayload, f,
               "value " + std::to_string(raw_value) + " is not a declared value");
      u8(raw_value);
    } else if constexpr (kIsDuration<T>) {
      if (v.count() < 0) refuse(CloseCode::InvalidPayload, f, "a negative duration");
      uint_le(static_cast<uint64_t>(v.count()), 8);  // milliseconds
    } else if constexpr (std::is_same_v<T, float>) {
      u32(std::bit_cast<uint32_t>(v));  // the bits as they are: NaN payloads survive
    } else if constexpr (std::is_integral_v<T>) {
      uint_le(static_cast<uint64_t>(v), sizeof(T));  // a signed value as two's complement
    } else if constexpr (std::is_same_v<T, Digest>) {
      raw(v);
    } else if constexpr (kIsByteString<T>) {
      length(f, "length", v.size(), rule.size);
      raw(std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size()));
    } else if constexpr (kIsVector<T>) {
      length(f, "count", v.size(), rule.size);
      for (const auto& item : v) value(f, item, Rule{rule.item});
    } else {
      nested(f, v);
    }
  }

  void value(const FieldName& f, const std::vector<uint8_t>& v, ClaimIndexSet) {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] > 1 || (i > 0 && v[i] <= v[i - 1]))
        refuse(CloseCode::InvalidPayload, f, "claim indices must be 0 or 1, strictly increasing");
    length(f, "count", v.size(), kClaimIndices);
    raw(v);
  }

 private:
  [[noreturn]] static void refuse(CloseCode code, const FieldName& f, const std::string& what) {
    throw WireError(code, "encode: " + f.str() + ": " + what);
  }
  void length(const FieldName& f, const char* noun, size_t n, Bounds b) {
    if (const auto refusal = bounds_refusal(noun, n, b)) refuse(refusal->code, f, refusal->what);
    u32(static_cast<uint32_t>(n));  // b.max < 2^32, so this never truncates
  }
};

template <class T>
size_t min_bytes();

/// Decodes strictly: each length against the limits and the input left, each enum against its
/// declared values; finish() refuses trailing bytes.
class Reader : public ByteReader, public FieldStream<Reader> {
 public:
  using ByteReader::ByteReader;

  template <class M>
  void message(M& m) {
    nested(FieldName{}, m);
    finish(FieldName{kMessageNames[kBodyIndex<M>]});
  }

  template <class T>
  void value(const FieldName& f, T& v, const Rule& rule) {
    if constexpr (std::is_enum_v<T>) {
      v = enumeration<T>(f);
    } else if constexpr (kIsDuration<T>) {
      const size_t at = offset();
      const uint64_t ms = uint_le(f, 8);
      if (ms > static_cast<uint64_t>(INT64_MAX))
        fail(CloseCode::InvalidPayload, f, at, "a duration beyond 2^63 − 1 ms");
      v = std::chrono::milliseconds(static_cast<int64_t>(ms));
    } else if constexpr (std::is_same_v<T, float>) {
      v = std::bit_cast<float>(u32(f));
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(uint_le(f, sizeof(T)));
    } else if constexpr (std::is_same_v<T, Digest>) {
      v = digest(f);
    } else if constexpr (kIsByteString<T>) {
      const auto b = take(f, length(f, "length", rule.size, 1));
      v.assign(b.begin(), b.end());
    } else if constexpr (kIsVector<T>) {
      using Item = typename T::value_type;
      const size_t n = length(f, "count", rule.size, min_bytes<Item>());
      v.clear();
      v.reserve(n);
      for (size_t i = 0; i < n; ++i) value(f, v.emplace_back(), Rule{rule.item});
    } else {
      nested(f, v);
    }
  }

  void value(const FieldName& f, std::vector<uint8_t>& v, ClaimIndexSet) {
    const size_t n = length(f, "count", kClaimIndices, 1);
    v.clear();
    for (size_t i = 0; i < n; ++i) {
      const size_t at = offset();
      const uint8_t index = u8(f);
      if (index > 1 || (i > 0 && index <= v.back())) {
        fail(CloseCode::InvalidPayload, f, at,
             "claim index " + std::to_string(index) + " is not 0 or 1 in strictly increasing order");
      }
      v.push_back(index);
    }
  }
};

/// Adds up the smallest encoding of a value: fixed-size fields at their size, a byte string or list
/// at its empty size (the u32 count).
class MinSize : public FieldStream<MinSize> {
 public:
  size_t total = 0;

  template <class T>
  void value(const FieldName& f, const T& v, const Rule&) {
    if constexpr (std::is_enum_v<T>)
      total += 1;
    else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Digest> || kIsDuration<T>)
      total += sizeof(T);
    else if constexpr (kIsByteString<T> || kIsVector<T>)
      total += 4;
    else
      nested(f, v);
  }
  void value(const FieldName&, const std::vector<uint8_t>&, ClaimIndexSet) { total += 4; }
};

/// The smallest encoding of one T (bytes).
template <class T>
size_t min_bytes() {
  static const size_t n = [] {
    MinSize s;
    const T v{};
    s("", v);
    return s.total;
  }();
  return n;
}

// ---------------------------------------------------------------------------------------------------
// Body alternatives and kinds.

// kind_of and decode_body map MessageKind k to Body alternative k − 1; keep the two lists in step.
template <MessageKind K, class T>
inline constexpr bool kKindIs =
    std::is_same_v<std::variant_alternative_t<static_cast<size_t>(K) - 1, Body>, T>;
static_assert(
    kKindIs<MessageKind::JobSubmit, JobSubmit> && kKindIs<MessageKind::Claim, Claim> &&
    kKindIs<MessageKind::DisputeOpen, DisputeOpen> && kKindIs<MessageKind::Query, Query> &&
    kKindIs<MessageKind::Children, Children> && kKindIs<MessageKind::IntervalCommit, IntervalCommit> &&
    kKindIs<MessageKind::StepCommit, StepCommit> && kKindIs<MessageKind::Records, Records> &&
    kKindIs<MessageKind::TensorChunk, TensorChunk> && kKindIs<MessageKind::Samples, Samples> &&
    kKindIs<MessageKind::Verdict, Verdict> && kKindIs<MessageKind::Error, ErrorMessage> &&
    kKindIs<MessageKind::RefereeCheck, RefereeCheck> && kKindIs<MessageKind::RefereeAnswer, RefereeAnswer> &&
    kKindIs<MessageKind::StateRequest, StateRequest> && kKindIs<MessageKind::StateHeader, StateHeader> &&
    kKindIs<MessageKind::LogRequest, LogRequest> && kKindIs<MessageKind::LogHeader, LogHeader> &&
    kKindIs<MessageKind::LogEvidence, LogEvidence> && std::variant_size_v<Body> == kEnumLast<MessageKind>);

/// The message name of a declared kind.
std::string kind_name(MessageKind kind) {
  return std::string(kMessageNames[static_cast<size_t>(kind) - 1]);
}

/// A default-constructed Body holding alternative `index`.
template <size_t... I>
Body empty_body(size_t index, std::index_sequence<I...>) {
  Body body;
  ((index == I ? (void)body.emplace<I>() : void()), ...);
  return body;
}

}  // namespace
}  // namespace codec

MessageKind kind_of(const Body& body) {
  return static_cast<MessageKind>(body.index() + 1);
}

std::vector<uint8_t> encode_body(const Body& body) {
  codec::Writer w;
  std::visit([&](const auto& m) { w.message(m); }, body);
  if (w.bytes_so_far().size() > kMaxBodyBytes) {
    throw WireError(CloseCode::TooBig, "encode: " + codec::kind_name(kind_of(body)) + ": body of " +
                                           std::to_string(w.bytes_so_far().size()) + " bytes exceeds " +
                                           std::to_string(kMaxBodyBytes));
  }
  return w.take();
}

Body decode_body(MessageKind kind, std::span<const uint8_t> bytes, size_t offset_base) {
  const auto k = static_cast<uint8_t>(kind);
  if (!codec::enum_valid<MessageKind>(k)) {
    throw WireError(CloseCode::InvalidPayload,
                    "decode_body: message kind " + std::to_string(k) + " is not declared");
  }
  if (bytes.size() > kMaxBodyBytes) {
    throw WireError(CloseCode::TooBig, codec::kind_name(kind) + ": body of " + std::to_string(bytes.size()) +
                                           " bytes exceeds " + std::to_string(kMaxBodyBytes));
  }
  Body body = codec::empty_body(k - 1, std::make_index_sequence<std::variant_size_v<Body>>{});
  codec::Reader r(bytes, offset_base);
  std::visit([&](auto& m) { r.message(m); }, body);
  return body;
}

}  // namespace tribunal
