"""Edits minidc checkpoints the way a writer would seal them (datasets/checkpoint_seal.c): the
metadata checksums "checksum.__metadata__.<key>" are a 64-bit multiply-xorshift digest of
key, a 0 byte, value; tensor checksums "checksum.<name>" the same digest of the tensor's bytes.
As a module: read(path) -> (header, data), write(path, header, data), seal(header, data).
As a script: checkpoint_seal.py IN OUT [--unsealed] [KEY=VALUE | -KEY | @FLIP]... sets or removes
metadata entries (@NAME flips the first byte of tensor NAME) and reseals, or with --unsealed
leaves the checksums as they were (an edit made after saving)."""
import json
import struct
import sys

M = (1 << 64) - 1


def digest(b):
    h = 0x243F6A8885A308D3 ^ len(b)
    i = 0
    while i + 8 <= len(b):
        h = ((h ^ int.from_bytes(b[i:i + 8], "little")) * 0x9E3779B97F4A7C15) & M
        h ^= h >> 29
        i += 8
    for c in b[i:]:
        h = ((h ^ c) * 0x100000001B3) & M
    return "%016x" % (h ^ (h >> 32))


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), bytearray(b[8 + n:])


def write(path, header, data):
    j = json.dumps(header, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + bytes(data))


def seal(header, data):
    meta = {k: v for k, v in header["__metadata__"].items() if not k.startswith("checksum.")}
    for name, t in header.items():
        if name != "__metadata__":
            s, e = t["data_offsets"]
            meta["checksum." + name] = digest(bytes(data[s:e]))
    for k in [k for k in meta if not k.startswith("checksum.")]:
        meta["checksum.__metadata__." + k] = digest(k.encode() + b"\0" + meta[k].encode())
    header["__metadata__"] = meta


if __name__ == "__main__":
    h, d = read(sys.argv[1])
    args = sys.argv[3:]
    for a in args:
        if a.startswith("@"):
            d[h[a[1:]]["data_offsets"][0]] ^= 0x01
        elif a.startswith("-") and a != "--unsealed":
            del h["__metadata__"][a[1:]]
        elif "=" in a:
            k, v = a.split("=", 1)
            h["__metadata__"][k] = v
    if "--unsealed" not in args:
        seal(h, d)
    write(sys.argv[2], h, d)
