#!/usr/bin/env python3
"""Known-answer values for the tribunal commitment layer (docs/commitments.md, DESIGN.md §5).

Run by hand (`python3 tools/commitment_kat.py`); it is not part of the build. It re-implements the
encodings independently of the C++ code, with only hashlib.blake2b(digest_size=32) and the RFC 6962
recursive MTH definition (split at the largest power of two < n), and prints the hex digests that
tests/protocol/test_hash.cpp and tests/protocol/test_merkle.cpp assert. Regenerate them with it.
"""
import hashlib
import struct

TAG_LEAF, TAG_NODE, TAG_TENSOR, TAG_CHUNK = 0x00, 0x01, 0x10, 0x11
CHUNK_BYTES = 65536
DTYPE_F32 = 1


def h(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def tagged(tag: int, data: bytes) -> bytes:
    return h(bytes([tag]) + data)


def mth(values: list) -> bytes:
    """RFC 6962 §2.1 Merkle Tree Hash over values, each hashed as a leaf H(0x00 || value)."""
    n = len(values)
    if n == 0:
        return h(b"")
    if n == 1:
        return tagged(TAG_LEAF, values[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return tagged(TAG_NODE, mth(values[:k]) + mth(values[k:]))


def f32_bytes(floats) -> bytes:
    return b"".join(struct.pack("<f", x) for x in floats)


def canonical_f32(data: bytes) -> bytes:
    out = bytearray()
    for (bits,) in struct.iter_unpack("<I", data):
        if bits & 0x7FFFFFFF > 0x7F800000:
            bits = 0x7FC00000
        out += struct.pack("<I", bits)
    return bytes(out)


def tensor_leaf(shape, data: bytes) -> bytes:
    chunks = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    chunk_root = mth([tagged(TAG_CHUNK, canonical_f32(c)) for c in chunks])
    enc = bytes([DTYPE_F32, len(shape)]) + b"".join(struct.pack("<Q", d) for d in shape)
    return tagged(TAG_TENSOR, enc + struct.pack("<Q", len(data)) + chunk_root)


def main() -> None:
    print("blake2b_256('')     ", h(b"").hex())
    print("blake2b_256('abc')  ", h(b"abc").hex())
    print("tagged(Tensor,'abc')", tagged(TAG_TENSOR, b"abc").hex())
    print("tagged(Job,'')      ", tagged(0x13, b"").hex())

    # Tensors; the C++ tests build the same ones.
    print("leaf rank0 [3.5]            ", tensor_leaf([], f32_bytes([3.5])).hex())
    # rank 2 [2,3]: 1, -0.0, NaN with payload 1, 0.5, inf, -2 (the NaN hashes as 0x7FC00000)
    r2 = f32_bytes([1.0, -0.0]) + struct.pack("<I", 0x7FC00001) + f32_bytes([0.5, float("inf"), -2.0])
    print("leaf rank2 [2,3]            ", tensor_leaf([2, 3], r2).hex())
    print("leaf empty [0]              ", tensor_leaf([0], b"").hex())
    print("leaf empty [2,0]            ", tensor_leaf([2, 0], b"").hex())
    # 40000 floats = 160000 bytes = chunks of 65536, 65536, 28928; x_i = 0.5*i - 1000 (exact in f32)
    ramp = f32_bytes(0.5 * i - 1000.0 for i in range(40000))
    print("leaf 3-chunk [40000]        ", tensor_leaf([40000], ramp).hex())

    # Merkle roots over values v_i = H(Tensor || byte i).
    for n in (0, 1, 2, 3, 5, 7, 8):
        print(f"merkle_root n={n}", mth([tagged(TAG_TENSOR, bytes([i])) for i in range(n)]).hex())


if __name__ == "__main__":
    main()
