#!/usr/bin/env python3
"""Print (or write) the tokenizer.chat_template string stored in a GGUF file's metadata.

A one-off helper for the template tests: walks the GGUF v2/v3 key/value header only, so it needs
no gguf package. Usage: extract_gguf_template.py model.gguf [out.jinja]
"""
import struct
import sys

# GGUF metadata value type ids and the byte size of the fixed-width ones.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated GGUF at offset {self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8")

    def skip_value(self, vtype):
        if vtype in FIXED:
            self.take(FIXED[vtype])
        elif vtype == STRING:
            self.take(self.u64())
        elif vtype == ARRAY:
            elem, count = self.u32(), self.u64()
            if elem in FIXED:
                self.take(FIXED[elem] * count)
            else:
                for _ in range(count):
                    self.skip_value(elem)
        else:
            raise ValueError(f"unknown GGUF value type {vtype} at offset {self.pos}")


def chat_template(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version = r.u32()
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} not supported")
    r.u64()  # tensor count
    n_kv = r.u64()
    for _ in range(n_kv):
        key = r.string()
        vtype = r.u32()
        if key == "tokenizer.chat_template" and vtype == STRING:
            return r.string()
        r.skip_value(vtype)
    raise ValueError(f"{path}: no tokenizer.chat_template key")


if __name__ == "__main__":
    text = chat_template(sys.argv[1])
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8", newline="") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
