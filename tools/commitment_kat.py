#!/usr/bin/env python3
"""Known-answer values for the tribunal commitment layer (docs/commitments.md).

It re-implements the encodings independently of the C++ code, with only a pure-Python BLAKE3
(tools/blake3_ref.py, checked against Debian's b3sum by ctest's blake3_check) and the RFC 6962
recursive MTH definition (split at the largest power of two < n), and computes one hex digest per
named case.

    python3 tools/commitment_kat.py                 prints the known answers, one "NAME HEX" a line
    python3 tools/commitment_kat.py --check FILE    compares them with FILE; exit 1 on any difference

tests/fixtures/commitment_kat.txt holds the values: tests/protocol/test_hash.cpp and test_merkle.cpp
assert them against the C++ code, and ctest's `commitment_kat` test runs this script with --check on
the same file, so CI checks both implementations against one set of values. Regenerate the file with
    python3 tools/commitment_kat.py > tests/fixtures/commitment_kat.txt
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blake3_ref import blake3  # noqa: E402

TAG_LEAF, TAG_NODE, TAG_TENSOR, TAG_CHUNK, TAG_JOB = 0x00, 0x01, 0x10, 0x11, 0x13
CHUNK_BYTES = 65536
DTYPE_F32 = 1
MERKLE_SIZES = (0, 1, 2, 3, 5, 7, 8)

HEADER = """\
# Known answers of the commitment layer (docs/commitments.md): one "NAME HEX" a line.
# Written by tools/commitment_kat.py (an independent Python implementation); asserted against the C++
# code by tests/protocol/test_hash.cpp and test_merkle.cpp, and against the script by ctest's
# commitment_kat test. Do not edit by hand: regenerate with
#   python3 tools/commitment_kat.py > tests/fixtures/commitment_kat.txt"""


def h(data: bytes) -> bytes:
    return blake3(data, 32)


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


def with_bits(data: bytes, bits: dict) -> bytes:
    """data with the float32 at each index replaced by the given bit pattern."""
    out = bytearray(data)
    for index, value in bits.items():
        out[4 * index:4 * index + 4] = struct.pack("<I", value)
    return bytes(out)


def tensor_leaf(shape, data: bytes) -> bytes:
    chunks = [data[i:i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]
    chunk_root = mth([tagged(TAG_CHUNK, canonical_f32(c)) for c in chunks])
    enc = bytes([DTYPE_F32, len(shape)]) + b"".join(struct.pack("<Q", d) for d in shape)
    return tagged(TAG_TENSOR, enc + struct.pack("<Q", len(data)) + chunk_root)


def known_answers() -> list:
    """(name, hex) in file order. The C++ tests build the same inputs under the same names."""
    ramp = f32_bytes(0.5 * i - 1000.0 for i in range(40000))
    kat = [
        ("blake3_256/empty", h(b"")),
        ("blake3_256/abc", h(b"abc")),
        # i mod 251 (the input of BLAKE3's test vectors), six of its 1 KiB chunks
        ("blake3_256/pattern_5121", h(bytes(i % 251 for i in range(5121)))),
        ("hash_tagged/tensor/abc", tagged(TAG_TENSOR, b"abc")),
        ("hash_tagged/job/empty", tagged(TAG_JOB, b"")),
        # rank 0: [3.5]
        ("tensor_leaf/rank0", tensor_leaf([], f32_bytes([3.5]))),
        # rank 2 [2,3]: 1, -0.0, NaN with payload 1, 0.5, inf, -2 (the NaN hashes as 0x7FC00000)
        ("tensor_leaf/rank2_specials",
         tensor_leaf([2, 3], f32_bytes([1.0, -0.0]) + struct.pack("<I", 0x7FC00001) + f32_bytes([0.5, float("inf"), -2.0]))),
        ("tensor_leaf/empty_0", tensor_leaf([0], b"")),
        ("tensor_leaf/empty_2x0", tensor_leaf([2, 0], b"")),
        # 40000 floats = 160000 bytes = chunks of 65536, 65536, 28928; x_i = 0.5*i - 1000 (exact in f32)
        ("tensor_leaf/ramp_40000", tensor_leaf([40000], ramp)),
        # the ramp with NaNs at elements 5000, 5001 and 20000 (payloads differ; all hash as 0x7FC00000)
        ("tensor_leaf/ramp_40000_nans", tensor_leaf([40000], with_bits(ramp, {5000: 0x7FC00001, 5001: 0xFFC00000,
                                                                               20000: 0x7F800001}))),
    ]
    # Merkle roots over values v_i = H(Tensor || byte i).
    for n in MERKLE_SIZES:
        kat.append((f"merkle_root/{n}", mth([tagged(TAG_TENSOR, bytes([i])) for i in range(n)])))
    return [(name, digest.hex()) for name, digest in kat]


def read_kat_file(path: str) -> dict:
    entries = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or parts[0] in entries:
                raise SystemExit(f"{path}:{number}: expected one 'NAME HEX' per name, got {line!r}")
            entries[parts[0]] = parts[1]
    return entries


def check(path: str) -> int:
    want = read_kat_file(path)
    got = dict(known_answers())
    problems = []
    for name, value in got.items():
        if name not in want:
            problems.append(f"{name}: computed {value}, missing from {path}")
        elif want[name] != value:
            problems.append(f"{name}: {path} says {want[name]}, this implementation computes {value}")
    problems += [f"{name}: in {path}, not computed here" for name in want if name not in got]
    for p in problems:
        print(f"commitment_kat: MISMATCH {p}")
    if problems:
        print(f"commitment_kat: {len(problems)} of {len(got)} known answers differ from {path}")
        return 1
    print(f"commitment_kat: all {len(got)} known answers agree with {path}")
    return 0


def main(argv: list) -> int:
    if len(argv) == 3 and argv[1] == "--check":
        return check(argv[2])
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(HEADER)
    for name, value in known_answers():
        print(name, value)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
