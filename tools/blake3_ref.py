"""BLAKE3 in pure Python: the hash mode (unkeyed, no derive-key) with any output length.

A direct reading of the BLAKE3 specification (Aumasson, Neves, O'Connor, Wilcox-O'Hearn, 2020:
sections 2.1-2.6), written for tools/commitment_kat.py so that the commitment layer's known answers are
derived without the C implementation the project links. Slow (about 1 MB/s) and only for tests.
tools/blake3_check.py checks it against Debian's `b3sum`.
"""

IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
MSG_PERMUTATION = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
CHUNK_START, CHUNK_END, PARENT, ROOT = 1 << 0, 1 << 1, 1 << 2, 1 << 3
BLOCK_LEN = 64
CHUNK_LEN = 1024
MASK = 0xFFFFFFFF


def _rotr(x: int, n: int) -> int:
    return ((x >> n) | (x << (32 - n))) & MASK


def _g(s: list, a: int, b: int, c: int, d: int, mx: int, my: int) -> None:
    s[a] = (s[a] + s[b] + mx) & MASK
    s[d] = _rotr(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & MASK
    s[b] = _rotr(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b] + my) & MASK
    s[d] = _rotr(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & MASK
    s[b] = _rotr(s[b] ^ s[c], 7)


def compress(cv: tuple, block: bytes, counter: int, block_len: int, flags: int) -> list:
    """The compression function (spec 2.2): 16 output words; the first 8 are the next chaining value."""
    m = [int.from_bytes(block[4 * i:4 * i + 4], "little") for i in range(16)]
    s = list(cv) + list(IV[:4]) + [counter & MASK, (counter >> 32) & MASK, block_len, flags]
    for r in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[p] for p in MSG_PERMUTATION]
    return [s[i] ^ s[i + 8] for i in range(8)] + [s[i + 8] ^ cv[i] for i in range(8)]


class _Output:
    """The last compression's inputs, kept so the root can be finalized with ROOT (spec 2.6)."""

    def __init__(self, cv, block, counter, block_len, flags):
        self.cv, self.block, self.counter, self.block_len, self.flags = cv, block, counter, block_len, flags

    def chaining_value(self) -> tuple:
        return tuple(compress(self.cv, self.block, self.counter, self.block_len, self.flags)[:8])

    def root_bytes(self, length: int) -> bytes:
        out = bytearray()
        counter = 0
        while len(out) < length:
            words = compress(self.cv, self.block, counter, self.block_len, self.flags | ROOT)
            out += b"".join(w.to_bytes(4, "little") for w in words)
            counter += 1
        return bytes(out[:length])


def _chunk_output(chunk: bytes, chunk_counter: int) -> _Output:
    """A chunk of at most CHUNK_LEN bytes (spec 2.4), all but its last block compressed."""
    cv = IV
    blocks = [chunk[i:i + BLOCK_LEN] for i in range(0, len(chunk), BLOCK_LEN)] or [b""]
    for i, block in enumerate(blocks):
        flags = (CHUNK_START if i == 0 else 0) | (CHUNK_END if i == len(blocks) - 1 else 0)
        padded = block + bytes(BLOCK_LEN - len(block))
        if i == len(blocks) - 1:
            return _Output(cv, padded, chunk_counter, len(block), flags)
        cv = tuple(compress(cv, padded, chunk_counter, BLOCK_LEN, flags)[:8])
    raise AssertionError("unreachable")


def _parent_output(left_cv: tuple, right_cv: tuple) -> _Output:
    block = b"".join(w.to_bytes(4, "little") for w in left_cv + right_cv)
    return _Output(IV, block, 0, BLOCK_LEN, PARENT)


def _subtree_output(data: bytes, first_chunk: int) -> _Output:
    """Spec 2.5: the left subtree holds the largest power of two of chunks that leaves at least one
    byte to the right."""
    if len(data) <= CHUNK_LEN:
        return _chunk_output(data, first_chunk)
    chunks = (len(data) + CHUNK_LEN - 1) // CHUNK_LEN
    left_chunks = 1
    while left_chunks * 2 < chunks:
        left_chunks *= 2
    split = left_chunks * CHUNK_LEN
    left = _subtree_output(data[:split], first_chunk).chaining_value()
    right = _subtree_output(data[split:], first_chunk + left_chunks).chaining_value()
    return _parent_output(left, right)


def blake3(data: bytes, length: int = 32) -> bytes:
    """BLAKE3(data) in hash mode, `length` output bytes (32 by default)."""
    return _subtree_output(bytes(data), 0).root_bytes(length)
