#!/usr/bin/env python3
"""Checks tools/blake3_ref.py (the pure-Python BLAKE3 behind tools/commitment_kat.py) against Debian's
`b3sum` (package b3sum, the BLAKE3 team's Rust implementation) on the inputs of BLAKE3's official test
vectors: the bytes i mod 251 at every length those vectors list, at 32 and 131 output bytes.

    python3 tools/blake3_check.py [B3SUM]     exit 0 if all agree, 1 on any difference, 77 without b3sum
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blake3_ref import blake3  # noqa: E402

# The input lengths of BLAKE3's test_vectors.json: around each block and chunk boundary and the
# powers of two of chunks up to 31 KiB, then 100 KiB.
LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025, 2048, 2049, 3072,
           3073, 4096, 4097, 5120, 5121, 6144, 6145, 7168, 7169, 8192, 8193, 16384, 31744, 102400)
OUTPUT_LENGTHS = (32, 131)


def main(argv: list) -> int:
    b3sum = argv[1] if len(argv) > 1 else shutil.which("b3sum")
    if not b3sum:
        print("blake3_check: b3sum not found (Debian package b3sum, scripts/bootstrap.sh): skipped")
        return 77
    failures = 0
    for n in LENGTHS:
        data = bytes(i % 251 for i in range(n))
        for out_len in OUTPUT_LENGTHS:
            want = subprocess.run([b3sum, "--no-names", "--length", str(out_len)], input=data,
                                  capture_output=True, check=True).stdout.decode().strip()
            got = blake3(data, out_len).hex()
            if got != want:
                print(f"blake3_check: MISMATCH at {n} input bytes, {out_len} output bytes: "
                      f"b3sum {want}, tools/blake3_ref.py {got}")
                failures += 1
    checked = len(LENGTHS) * len(OUTPUT_LENGTHS)
    if failures:
        print(f"blake3_check: {failures} of {checked} digests differ from b3sum")
        return 1
    print(f"blake3_check: all {checked} digests agree with {b3sum}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
