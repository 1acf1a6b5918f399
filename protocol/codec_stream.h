// The byte streams of the canonical encoding (protocol/codec.h, docs/protocol.md "Messages"): a
// ByteWriter that appends little-endian fixed-width values and a strict ByteReader that consumes them,
// checking every read against the input left and naming the field and offset of whatever it refuses.
// The body codec (codec.cpp) drives them from each message's one field list; the envelope
// (envelope.cpp) reads and writes its header with them; engine/job.cpp writes the job id's canonical
// encoding with the ByteWriter (docs/commitments.md, "Job id and dispute id").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/codec.h"

namespace tribunal::codec {

/// A field's name in error messages ("Query.values.origin"): a chain of segments from the message
/// down, rendered only when an error is raised, so naming a field costs nothing on valid input.
struct FieldName {
  std::string_view segment;
  const FieldName* parent = nullptr;
  std::string str() const {
    return parent ? parent->str() + "." + std::string(segment) : std::string(segment);
  }
};

/// An allowed count or length. Above `max` is TooBig (a size limit); below `min` or off an exact
/// count is InvalidPayload (a structural rule, e.g. "exactly two claims"). max < 2^32 always.
struct Bounds {
  size_t min = 0;
  size_t max = 0;
};
constexpr Bounds up_to(size_t max) {
  return {0, max};
}

/// The last declared value of each protocol enum; each is numbered 1..last, so validity is a range
/// check, less a retired value (kEnumRetired) that is never given out again.
template <class E>
inline constexpr uint8_t kEnumLast = 0;
template <>
inline constexpr uint8_t kEnumLast<MessageKind> = static_cast<uint8_t>(MessageKind::LogEvidence);
template <>
inline constexpr uint8_t kEnumLast<Level> = static_cast<uint8_t>(Level::Chunks);
template <>
inline constexpr uint8_t kEnumLast<QueryKind> = static_cast<uint8_t>(QueryKind::LogEvidence);
template <>
inline constexpr uint8_t kEnumLast<ValueOrigin> = static_cast<uint8_t>(ValueOrigin::NextState);
template <>
inline constexpr uint8_t kEnumLast<VerdictReason> = static_cast<uint8_t>(VerdictReason::BothValid);

/// A value of protocol enum E that is retired (0: none): VerdictReason 5, once `malformed`.
template <class E>
inline constexpr uint8_t kEnumRetired = 0;
template <>
inline constexpr uint8_t kEnumRetired<VerdictReason> = 5;

/// True if `v` is a declared value of protocol enum E.
template <class E>
bool enum_valid(uint8_t v) {
  static_assert(kEnumLast<E> > 0, "enum without a declared range");
  return v >= 1 && v <= kEnumLast<E> && v != kEnumRetired<E>;
}

/// Appends the canonical encoding: little-endian u8/u16/u32/u64, raw bytes.
class ByteWriter {
 public:
  void reserve(size_t n) { out_.reserve(n); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { uint_le(v, 4); }
  void u64(uint64_t v) { uint_le(v, 8); }
  void uint_le(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void raw(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }

  const std::vector<uint8_t>& bytes_so_far() const { return out_; }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

/// Consumes a canonical encoding. Every refusal is a WireError "FIELD: what at offset N", N counted
/// from the start of the buffer the caller holds (`base` is where `in` starts inside it: a body read
/// inside an envelope reports the envelope's offsets).
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in, size_t base = 0) : in_(in), base_(base) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }

  /// Throws WireError(code, "FIELD: what at offset at").
  [[noreturn]] void fail(CloseCode code, const FieldName& field, size_t at, const std::string& what) const;

  /// The next `n` bytes; InvalidPayload if fewer remain.
  std::span<const uint8_t> take(const FieldName& field, size_t n);
  /// An n-byte little-endian unsigned integer (n ≤ 8).
  uint64_t uint_le(const FieldName& field, size_t n);
  uint8_t u8(const FieldName& field) { return static_cast<uint8_t>(uint_le(field, 1)); }
  uint32_t u32(const FieldName& field) { return static_cast<uint32_t>(uint_le(field, 4)); }
  uint64_t u64(const FieldName& field) { return uint_le(field, 8); }
  Digest digest(const FieldName& field);

  /// One byte holding a declared value of E; InvalidPayload otherwise.
  template <class E>
  E enumeration(const FieldName& field) {
    const size_t at = pos_;
    const uint8_t v = u8(field);
    if (!enum_valid<E>(v))
      fail(CloseCode::InvalidPayload, field, at, "value " + std::to_string(v) + " is not a declared value");
    return static_cast<E>(v);
  }

  /// A u32 count or length (`noun`) within `bounds`, refused before anything is allocated when n items
  /// of at least `min_item_bytes` each cannot fit in what is left.
  size_t length(const FieldName& field, const char* noun, Bounds bounds, size_t min_item_bytes);

  /// Canonical encodings have nothing after the last field: InvalidPayload "MESSAGE: n trailing bytes".
  void finish(const FieldName& message) const;

 private:
  std::string at_offset(size_t at) const { return " at offset " + std::to_string(base_ + at); }

  std::span<const uint8_t> in_;
  size_t base_ = 0;
  size_t pos_ = 0;
};

}  // namespace tribunal::codec
