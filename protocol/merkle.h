// RFC 6962 (Certificate Transparency) Merkle trees over 32-byte values, with inclusion proofs.
//   leaf hash = H(0x00 ‖ value), node hash = H(0x01 ‖ left ‖ right)
//   MTH(n leaves) splits at k = the largest power of two < n, so an unpaired last node is promoted,
//   never duplicated (no CVE-2012-2459). The empty tree's root is H() (BLAKE3 of nothing).
// Source: RFC 6962 §2.1, RFC 9162 §2.1.3 (proof verification); docs/commitments.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "protocol/hash.h"

namespace tribunal {

/// H(0x00 ‖ value).
Digest merkle_leaf_hash(const Digest& value);

/// H(0x01 ‖ left ‖ right).
Digest merkle_node_hash(const Digest& left, const Digest& right);

/// Root over values (each hashed as a leaf). O(n) hashes, O(log n) extra memory.
Digest merkle_root(std::span<const Digest> values);

/// Proof that the value at `index` is in a tree of `size` leaves: the sibling hashes from the leaf
/// up (RFC 9162 §2.1.3.1 order).
struct InclusionProof {
  uint64_t index = 0;
  uint64_t size = 0;
  std::vector<Digest> path;
};

/// A Merkle tree that keeps every level so it can produce inclusion proofs.
class MerkleTree {
 public:
  explicit MerkleTree(std::vector<Digest> values);
  uint64_t size() const { return static_cast<uint64_t>(levels_.empty() ? 0 : levels_[0].size()); }
  const Digest& root() const { return root_; }
  /// Throws ProtocolError if index ≥ size().
  InclusionProof prove(uint64_t index) const;

 private:
  std::vector<std::vector<Digest>> levels_;  // levels_[0] = leaf hashes
  Digest root_{};
};

/// Pure verifier shared by every party: true iff `value` is leaf proof.index of a tree of
/// proof.size leaves whose root is `root`. Never throws; any malformed proof is just false.
bool verify_inclusion(const Digest& value, const InclusionProof& proof, const Digest& root);

}  // namespace tribunal
