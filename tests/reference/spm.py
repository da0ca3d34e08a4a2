"""A small SentencePiece-style tokenizer over llama2.c's tokenizer.bin, for the perplexity text.

tokenizer.bin: int32 max_token_length, then per token: float32 score, int32 byte length, bytes.
Encoding (the SentencePiece BPE model as llama2.c uses it): prepend one space (the dummy prefix),
replace nothing else; start from one piece per UTF-8 character (a character missing from the
vocabulary becomes its UTF-8 bytes as the byte tokens <0xXX>, which sit at ids 3..258); then
repeatedly merge the adjacent pair whose concatenation is a vocabulary piece with the highest score
(leftmost on ties) until no pair merges.
"""

import struct


class SpmVocab:
    def __init__(self, pieces, scores, mergeable=None):
        """pieces: list of bytes (spaces as real spaces), scores: list of float; mergeable: ids that
        text may turn into (default: all but 0..2, llama's <unk>, <s>, </s>)."""
        self.pieces = list(pieces)
        self.scores = list(scores)
        # Byte tokens are "<0xXX>" pieces, or (in llama2.c's export) the raw byte itself at id 3+b.
        # They only serve the fallback: a raw "," piece at id 47 must not shadow the real "," piece.
        self.byte_ids = {}
        for i, p in enumerate(self.pieces):
            if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
                self.byte_ids[int(p[3:5], 16)] = i
        if not self.byte_ids and len(self.pieces) >= 259:
            self.byte_ids = {b: 3 + b for b in range(256) if self.pieces[3 + b] == bytes([b])}
        byte_tok = set(self.byte_ids.values())
        self.byte_set = byte_tok
        self.byte_of = {i: b for b, i in self.byte_ids.items()}
        self.ids = {}
        for i, p in enumerate(self.pieces):
            ok = (i > 2) if mergeable is None else (i in mergeable)
            if i not in byte_tok and ok:
                self.ids.setdefault(p, i)

    @classmethod
    def from_llama2c(cls, path, vocab_size=None):
        with open(path, "rb") as f:
            data = f.read()
        pos = 4
        pieces, scores = [], []
        while pos < len(data) and (vocab_size is None or len(pieces) < vocab_size):
            score, n = struct.unpack("<fi", data[pos:pos + 8])
            pos += 8
            pieces.append(data[pos:pos + n])
            pos += n
            scores.append(score)
        return cls(pieces, scores)

    @classmethod
    def from_gguf_metadata(cls, md):
        """GGUF tokenizer.ggml.tokens use U+2581 for the space."""
        pieces = [t.replace("\u2581", " ").encode("utf-8") for t in md["tokenizer.ggml.tokens"]]
        types = md.get("tokenizer.ggml.token_type")
        # token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
        mergeable = None if types is None else {i for i, t in enumerate(types) if t in (1, 4)}
        return cls(pieces, md["tokenizer.ggml.scores"], mergeable)

    def encode(self, text, bos=True):
        ids = [1] if bos else []
        if not text:
            return ids
        syms = []
        for ch in " " + text:
            piece = ch.encode("utf-8")
            if piece in self.ids:
                syms.append(self.ids[piece])
            else:
                syms.extend(self.byte_ids[b] for b in piece)
        while True:
            best = None
            for i in range(len(syms) - 1):
                merged = self.pieces[syms[i]] + self.pieces[syms[i + 1]]
                tid = self.ids.get(merged)
                if tid is not None and (best is None or self.scores[tid] > best[0]):
                    best = (self.scores[tid], i, tid)
            if best is None:
                break
            _, i, tid = best
            syms[i:i + 2] = [tid]
        return ids + syms

    def decode(self, ids):
        out = bytearray()
        prev = None
        for t in ids:
            p = self.pieces[t]
            if t in self.byte_set:
                out += bytes([self.byte_of[t]])
            elif t in (0, 1, 2):
                pass
            else:
                if prev == 1 and p.startswith(b" "):
                    p = p[1:]
                out += p
            prev = t
        return out.decode("utf-8", errors="replace")
