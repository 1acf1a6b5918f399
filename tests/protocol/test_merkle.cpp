// RFC 6962 Merkle trees and RFC 9162 inclusion proofs (protocol/merkle.h).
// Expected roots are those of tests/fixtures/commitment_kat.txt, written by tools/commitment_kat.py
// (an independent Python implementation; ctest's commitment_kat test checks it).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/merkle.h"
#include "tests/protocol/commitment_kat.h"

using namespace tribunal;

namespace {

// v_i = H(Tensor ‖ byte i), as in tools/commitment_kat.py.
std::vector<Digest> values(size_t n) {
  std::vector<Digest> v;
  for (size_t i = 0; i < n; ++i) {
    const std::byte b{static_cast<uint8_t>(i)};
    v.push_back(hash_tagged(HashTag::Tensor, std::span(&b, 1)));
  }
  return v;
}

// Shape of RFC 9162 PATH(m, D[n]) from the leaf up: true where the sibling is on the left. Written
// from the recursive definition, independently of the implementation.
std::vector<bool> path_shape(uint64_t m, uint64_t n) {
  if (n <= 1) return {};
  uint64_t k = 1;
  while (k * 2 < n) k *= 2;
  std::vector<bool> s = m < k ? path_shape(m, k) : path_shape(m - k, n - k);
  s.push_back(m >= k);
  return s;
}

// The range proof of leaves [a, b) written from its definition (docs/commitments.md, "Range proofs"),
// independently of MerkleTree's levels: MTH of each subtree outside the range that the recursion
// meets, left to right.
void range_path(std::span<const Digest> v, uint64_t lo, uint64_t hi, uint64_t a, uint64_t b,
                std::vector<Digest>& out) {
  if (lo >= a && hi <= b) return;
  if (hi <= a || lo >= b) {
    out.push_back(merkle_root(v.subspan(lo, hi - lo)));
    return;
  }
  uint64_t k = 1;
  while (k * 2 < hi - lo) k *= 2;
  range_path(v, lo, lo + k, a, b, out);
  range_path(v, lo + k, hi, a, b, out);
}

Digest flip(Digest d, size_t bit) {
  d[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  return d;
}

}  // namespace

TEST_CASE("merkle leaf and node hashes are RFC 6962's with BLAKE3") {
  const auto v = values(2);
  CHECK(merkle_leaf_hash(v[0]) == hash_tagged(HashTag::MerkleLeaf, std::as_bytes(std::span(v[0]))));
  std::vector<uint8_t> cat(v[0].begin(), v[0].end());
  cat.insert(cat.end(), v[1].begin(), v[1].end());
  CHECK(merkle_node_hash(v[0], v[1]) == hash_tagged(HashTag::MerkleNode, std::as_bytes(std::span(cat))));
}

TEST_CASE("merkle_root and MerkleTree::root known answers (tests/fixtures/commitment_kat.txt)") {
  size_t checked = 0;
  for (const auto& entry : testing::commitment_kats()) {  // every merkle_root/N the script writes
    const std::string& name = entry.first;
    if (!name.starts_with("merkle_root/")) continue;
    CAPTURE(name);
    const size_t n = std::stoul(name.substr(std::string_view("merkle_root/").size()));
    CHECK(to_hex(merkle_root(values(n))) == entry.second);
    MerkleTree tree(values(n));
    CHECK(tree.size() == n);
    CHECK(to_hex(tree.root()) == entry.second);
    ++checked;
  }
  CHECK(checked >= 7);  // n = 0, 1, 2, 3, 5, 7, 8: empty, single, powers of two and unpaired nodes
}

TEST_CASE("merkle_root follows the recursive MTH definition (split at the largest power of two)") {
  for (size_t n :
       {size_t{2}, size_t{3}, size_t{6}, size_t{13}, size_t{64}, size_t{65}, size_t{1000}, size_t{1023}}) {
    CAPTURE(n);
    const auto v = values(n);
    size_t k = 1;
    while (k * 2 < n) k *= 2;
    const Digest left = merkle_root(std::span(v).subspan(0, k));
    const Digest right = merkle_root(std::span(v).subspan(k));
    CHECK(merkle_root(v) == merkle_node_hash(left, right));
    CHECK(MerkleTree(v).root() == merkle_root(v));
  }
}

TEST_CASE("empty tree") {
  MerkleTree tree({});
  CHECK(tree.size() == 0);
  CHECK(tree.root() == blake3_256({}));
  CHECK_THROWS_AS(tree.prove(0), ProtocolError);
  CHECK_FALSE(verify_inclusion(values(1)[0], InclusionProof{0, 0, {}}, tree.root()));
}

TEST_CASE("prove rejects out-of-range indices") {
  MerkleTree tree(values(5));
  CHECK_NOTHROW(tree.prove(4));
  CHECK_THROWS_WITH_AS(tree.prove(5), doctest::Contains("index 5"), ProtocolError);
  CHECK_THROWS_AS(tree.prove(UINT64_MAX), ProtocolError);
}

TEST_CASE("inclusion proofs for every leaf of trees of 1..33 leaves; every tampering fails") {
  for (uint64_t n = 1; n <= 33; ++n) {
    const auto v = values(n);
    const MerkleTree tree(v);
    const Digest root = merkle_root(v);
    REQUIRE(tree.root() == root);
    int bad = 0;  // count of wrong verdicts, reported per tree size
    std::string first_bad;
    auto expect = [&](bool got, bool want, const std::string& what) {
      if (got != want) {
        if (bad++ == 0) first_bad = what;
      }
    };
    for (uint64_t i = 0; i < n; ++i) {
      const InclusionProof p = tree.prove(i);
      const std::string at = "n=" + std::to_string(n) + " i=" + std::to_string(i) + ": ";
      CHECK(p.index == i);
      CHECK(p.size == n);
      CHECK(p.path.size() == path_shape(i, n).size());
      expect(verify_inclusion(v[i], p, root), true, at + "honest proof");
      expect(verify_inclusion(v[i], p, tree.root()), true, at + "honest proof vs tree root");

      for (size_t bit = 0; bit < 256; ++bit) {
        expect(verify_inclusion(flip(v[i], bit), p, root), false, at + "value bit " + std::to_string(bit));
        expect(verify_inclusion(v[i], p, flip(root, bit)), false, at + "root bit " + std::to_string(bit));
      }
      for (size_t j = 0; j < p.path.size(); ++j) {
        for (size_t bit = 0; bit < 256; ++bit) {
          InclusionProof q = p;
          q.path[j] = flip(q.path[j], bit);
          expect(verify_inclusion(v[i], q, root), false, at + "path[" + std::to_string(j) + "] bit");
        }
      }
      // Any other (index, size) claim fails unless PATH(index', size') has exactly the left/right
      // shape of PATH(i, n). Within one size every index has its own shape, but RFC 9162's algorithm
      // binds the size only through the shape (e.g. leaf 0 of 3 leaves vs of 4 leaves). Claims like
      // (0, 1) for leaf 1 of 2 leaves are what step 4a (path longer than the tree) rejects.
      for (uint64_t k = 0; k < n + 3; ++k) {
        for (uint64_t s = 0; s <= 40; ++s) {
          if (k == i && s == n) continue;
          InclusionProof q = p;
          q.index = k;
          q.size = s;
          const bool same_shape = k < s && path_shape(k, s) == path_shape(i, n);
          if (s == n) expect(same_shape, false, at + "two indices of one size share a shape");
          expect(verify_inclusion(v[i], q, root), same_shape,
                 at + "claim (" + std::to_string(k) + ", " + std::to_string(s) + ")");
        }
      }
      for (uint64_t k : {uint64_t{1} << 32, UINT64_MAX}) {
        InclusionProof q = p;
        q.index = k;
        expect(verify_inclusion(v[i], q, root), false, at + "huge index");
      }
      for (uint64_t s : {uint64_t{1} << 32, UINT64_MAX}) {
        InclusionProof q = p;
        q.size = s;
        expect(verify_inclusion(v[i], q, root), false, at + "huge size");
      }
      // Truncated or extended paths.
      if (!p.path.empty()) {
        InclusionProof q = p;
        q.path.pop_back();
        expect(verify_inclusion(v[i], q, root), false, at + "path without its last element");
        q = p;
        q.path.erase(q.path.begin());
        expect(verify_inclusion(v[i], q, root), false, at + "path without its first element");
      }
      for (const Digest& extra : {root, Digest{}, v[i]}) {
        InclusionProof q = p;
        q.path.push_back(extra);
        expect(verify_inclusion(v[i], q, root), false, at + "path with an element appended");
        q = p;
        q.path.insert(q.path.begin(), extra);
        expect(verify_inclusion(v[i], q, root), false, at + "path with an element prepended");
      }
      // A different leaf's value with this proof fails.
      for (uint64_t k = 0; k < n; ++k) {
        if (k != i) expect(verify_inclusion(v[k], p, root), false, at + "value of leaf " + std::to_string(k));
      }
    }
    CAPTURE(n);
    INFO(first_bad);
    CHECK(bad == 0);
  }
}

TEST_CASE("a proof's size is bound only through its shape (documented RFC 9162 behaviour)") {
  // Leaf 0 of 3 leaves: path [leaf1, leaf2], both siblings on the right, as for leaf 0 of 4 leaves.
  const auto v = values(3);
  const MerkleTree tree(v);
  InclusionProof p = tree.prove(0);
  p.size = 4;
  CHECK(verify_inclusion(v[0], p, tree.root()));
  p.size = 5;
  CHECK_FALSE(verify_inclusion(v[0], p, tree.root()));

  // RFC 9162 step 4a: leaf 1 of a 2-leaf tree must not pass as leaf 0 of a 1-leaf tree, although
  // H(0x01 ‖ path[0] ‖ leaf) is the root.
  const auto w = values(2);
  InclusionProof q = MerkleTree(w).prove(1);
  q.index = 0;
  q.size = 1;
  CHECK_FALSE(verify_inclusion(w[1], q, merkle_root(w)));
}

TEST_CASE("verify_inclusion never throws on malformed proofs") {
  const auto v = values(4);
  const Digest root = merkle_root(v);
  CHECK_FALSE(verify_inclusion(v[0], InclusionProof{0, 0, {}}, root));
  CHECK_FALSE(verify_inclusion(v[0], InclusionProof{5, 4, {}}, root));
  CHECK_FALSE(verify_inclusion(v[0], InclusionProof{0, 4, {}}, root));
  CHECK_FALSE(verify_inclusion(v[0], InclusionProof{0, UINT64_MAX, std::vector<Digest>(70)}, root));
  CHECK_FALSE(
      verify_inclusion(v[0], InclusionProof{UINT64_MAX - 1, UINT64_MAX, std::vector<Digest>(64)}, root));
  CHECK(verify_inclusion(v[0], InclusionProof{0, 1, {}}, merkle_leaf_hash(v[0])));
}

TEST_CASE(
    "range proofs of every range of trees of 1..40 leaves are the definition's; every tampering fails") {
  for (uint64_t n = 1; n <= 40; ++n) {
    const auto v = values(n);
    const MerkleTree tree(v);
    uint64_t depth = 0;
    while ((uint64_t{1} << depth) < n) ++depth;
    for (uint64_t a = 0; a < n; ++a)
      for (uint64_t b = a + 1; b <= n; ++b) {
        CAPTURE(n);
        CAPTURE(a);
        CAPTURE(b);
        const std::span<const Digest> range = std::span(v).subspan(a, b - a);
        const std::vector<Digest> path = tree.prove_range(a, b - a);
        std::vector<Digest> want;
        range_path(v, 0, n, a, b, want);
        REQUIRE(path == want);
        CHECK(path.size() <= 2 * depth);
        if (b - a == 1) CHECK(path.size() == tree.prove(a).path.size());  // one leaf: as many as its path
        if (a == 0 && b == n) CHECK(path.empty());
        REQUIRE(verify_range(range, a, n, path, tree.root()));
        // Another root, another value, another place, a digest more or less or changed: all fail.
        // (The tree size is bound only through the path's shape, as for inclusion proofs: receivers
        // take it from the job, here the chunk count of the tensor's shape.)
        CHECK_FALSE(verify_range(range, a, n, path, flip(tree.root(), 3)));
        std::vector<Digest> other(range.begin(), range.end());
        other[other.size() / 2] = flip(other[other.size() / 2], 7);
        CHECK_FALSE(verify_range(other, a, n, path, tree.root()));
        if (a + 1 < b) CHECK_FALSE(verify_range(range.subspan(1), a, n, path, tree.root()));
        if (b < n) CHECK_FALSE(verify_range(range, a + 1, n, path, tree.root()));
        if (a > 0) CHECK_FALSE(verify_range(range, a - 1, n, path, tree.root()));
        std::vector<Digest> longer = path;
        longer.push_back(tree.root());
        CHECK_FALSE(verify_range(range, a, n, longer, tree.root()));
        if (!path.empty()) {
          std::vector<Digest> shorter(path.begin(), path.end() - 1);
          CHECK_FALSE(verify_range(range, a, n, shorter, tree.root()));
          std::vector<Digest> changed = path;
          changed[0] = flip(changed[0], 0);
          CHECK_FALSE(verify_range(range, a, n, changed, tree.root()));
        }
      }
  }
}

TEST_CASE("range proofs refuse empty and out-of-tree ranges") {
  const auto v = values(5);
  const MerkleTree tree(v);
  CHECK_THROWS_AS(tree.prove_range(0, 0), ProtocolError);
  CHECK_THROWS_AS(tree.prove_range(5, 1), ProtocolError);
  CHECK_THROWS_AS(tree.prove_range(3, 3), ProtocolError);
  CHECK_THROWS_AS(tree.prove_range(1, UINT64_MAX), ProtocolError);  // first + count overflows
  CHECK_FALSE(verify_range({}, 0, 5, {}, tree.root()));
  CHECK_FALSE(verify_range(v, 0, 0, {}, tree.root()));
  CHECK_FALSE(verify_range(v, 1, 5, {}, tree.root()));
  CHECK_FALSE(verify_range(std::span(v).first(1), UINT64_MAX, 5, {}, tree.root()));
  CHECK(verify_range(v, 0, 5, {}, tree.root()));
}
