// RFC 6962 (Certificate Transparency) Merkle trees over 32-byte values, with inclusion proofs.
//   leaf hash = H(0x00 ‖ value), node hash = H(0x01 ‖ left ‖ right)
//   MTH(n leaves) splits at k = the largest power of two < n, so an unpaired last node is promoted,
//   never duplicated (no CVE-2012-2459). The empty tree's root is H() (BLAKE3 of nothing).
// Source: RFC 6962 §2.1, RFC 9162 §2.1.3 (proof verification); docs/commitments.md (and its range
// proofs of consecutive leaves).
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
  /// The range proof of leaves [first, first + count) (verify_range): the roots of the subtrees
  /// outside the range that RFC 6962's recursion meets, left to right; at most 2·⌈log2 size⌉ digests.
  /// Throws ProtocolError unless 1 ≤ count and first + count ≤ size().
  std::vector<Digest> prove_range(uint64_t first, uint64_t count) const;

 private:
  std::vector<std::vector<Digest>> levels_;  // levels_[0] = leaf hashes
  Digest root_{};
};

/// Pure verifier shared by every party: true iff `value` is leaf proof.index of a tree of
/// proof.size leaves whose root is `root`. Never throws; any malformed proof is just false.
bool verify_inclusion(const Digest& value, const InclusionProof& proof, const Digest& root);

/// Pure verifier of a range proof: true iff `values` are the leaves [first, first + values.size()) of
/// a tree of `size` leaves whose root is `root`, given `path` = MerkleTree::prove_range(first,
/// values.size()). The verifier walks RFC 6962's recursion MTH(D[lo..hi)) top-down: a subtree inside
/// the range is hashed from `values`, one outside it takes the next digest of `path`, one that
/// straddles a range end splits at the largest power of two below its size (docs/commitments.md,
/// "Range proofs"). Every digest of `path` must be used. Never throws; anything malformed is false.
/// As with inclusion proofs, `size` is bound only through the path's shape: take it from a trusted
/// place (a tensor's chunk count follows from its shape in the job's graph).
/// One range proof replaces the values.size() inclusion proofs of its leaves (a tensor's chunks sent
/// in one frame, docs/protocol.md).
bool verify_range(std::span<const Digest> values, uint64_t first, uint64_t size, std::span<const Digest> path,
                  const Digest& root);

}  // namespace tribunal
