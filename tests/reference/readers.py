"""File readers of the reference: GGUF, safetensors (single file and sharded), MLX affine-quantized
safetensors, llama2.c checkpoints. Independent of the C++ readers; written from the formats'
published descriptions. Every reader returns float64 numpy arrays shaped like the PyTorch weight
([out_features, in_features] for matrices).
"""

import json
import os
import struct

import numpy as np

import ggml_dequant

# ---------------------------------------------------------------------------------------------
# GGUF


class GGUFFile:
    """metadata: dict key -> python value; tensors: name -> (ggml type id, dims (ne0 first), offset)."""

    _SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, path):
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        if bytes(self.buf[0:4]) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {bytes(self.buf[0:4])!r})")
        self.pos = 4
        self.version = self._u32()
        if self.version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {self.version} not supported")
        n_tensors = self._u64()
        n_kv = self._u64()
        self.metadata = {}
        for _ in range(n_kv):
            key = self._str()
            vtype = self._u32()
            self.metadata[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u32()
            dims = [self._u64() for _ in range(n_dims)]
            ttype = self._u32()
            offset = self._u64()
            self.tensors[name] = (ttype, dims, offset)
        align = int(self.metadata.get("general.alignment", 32))
        self.data_start = (self.pos + align - 1) // align * align

    def _take(self, n):
        if self.pos + n > self.buf.size:
            raise ValueError(f"{self.path}: truncated at byte {self.pos}")
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def _u32(self):
        return struct.unpack("<I", self._take(4))[0]

    def _u64(self):
        return struct.unpack("<Q", self._take(8))[0]

    def _str(self):
        n = self._u64()
        return self._take(n).decode("utf-8")

    def _value(self, vtype):
        if vtype in self._SCALARS:
            fmt = self._SCALARS[vtype]
            return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]
        if vtype == 8:
            return self._str()
        if vtype == 9:
            etype = self._u32()
            n = self._u64()
            if etype in self._SCALARS and etype != 7:
                fmt = self._SCALARS[etype]
                size = struct.calcsize(fmt)
                arr = np.frombuffer(self._take(n * size), dtype=np.dtype(fmt))
                return arr.tolist()
            return [self._value(etype) for _ in range(n)]
        raise ValueError(f"{self.path}: unknown GGUF value type {vtype}")

    def tensor(self, name):
        """float64 array shaped with the outermost dimension first (dims reversed)."""
        if name not in self.tensors:
            raise KeyError(f"{self.path}: no tensor {name}")
        ttype, dims, offset = self.tensors[name]
        n = int(np.prod(dims)) if dims else 1
        nbytes = ggml_dequant.tensor_nbytes(ttype, n)
        start = self.data_start + offset
        if start + nbytes > self.buf.size:
            raise ValueError(f"{self.path}: tensor {name} runs past the end of the file")
        raw = np.asarray(self.buf[start:start + nbytes])
        vals = ggml_dequant.dequantize(ggml_dequant.GGML_TYPES[ttype][0], raw, n)
        return vals.reshape(list(reversed(dims)))

    def type_name(self, name):
        return ggml_dequant.GGML_TYPES[self.tensors[name][0]][0]


# ---------------------------------------------------------------------------------------------
# safetensors

_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "U8": "u1", "I16": "<i2",
              "U16": "<u2", "I32": "<i4", "U32": "<u4", "I64": "<i8", "U64": "<u8", "BOOL": "?",
              "F8_E4M3": "u1"}


def fp8_e4m3_values():
    """float64 [256]: the value of every E4M3 (fn variant: no infinities) code; 0x7F / 0xFF are NaN."""
    c = np.arange(256)
    e, m = (c >> 3) & 0xF, (c & 0x7) / 8.0
    v = np.where(e == 0, m * 2.0 ** -6, (1 + m) * 2.0 ** (e - 7.0)) * np.where(c & 0x80, -1.0, 1.0)
    v[(c & 0x7F) == 0x7F] = np.nan
    return v


class SafetensorsFile:
    """One .safetensors file: u64 header length, JSON header, then the raw data region."""

    def __init__(self, path):
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        (hlen,) = struct.unpack("<Q", bytes(self.buf[0:8]))
        if 8 + hlen > self.buf.size:
            raise ValueError(f"{path}: header length {hlen} runs past the end of the file")
        self.header = json.loads(bytes(self.buf[8:8 + hlen]).decode("utf-8"))
        self.metadata = self.header.pop("__metadata__", {})
        self.data_start = 8 + hlen

    def names(self):
        return list(self.header.keys())

    def raw(self, name):
        """(numpy array in the stored dtype, dtype string); BF16 is returned as uint16."""
        info = self.header[name]
        b, e = info["data_offsets"]
        dt = info["dtype"]
        data = np.asarray(self.buf[self.data_start + b:self.data_start + e])
        shape = info["shape"]
        if dt == "BF16":
            arr = data.view("<u2")
        elif dt in _ST_DTYPES:
            arr = data.view(np.dtype(_ST_DTYPES[dt]))
        else:
            raise ValueError(f"{self.path}: tensor {name} has unsupported dtype {dt}")
        return arr.reshape(shape), dt

    def tensor(self, name):
        arr, dt = self.raw(name)
        if dt == "BF16":
            return ggml_dequant.bf16_to_f64(arr).reshape(arr.shape)
        if dt == "F8_E4M3":
            return fp8_e4m3_values()[arr]
        return arr.astype(np.float64)


class SafetensorsDir:
    """A model directory: model.safetensors or sharded files listed in model.safetensors.index.json."""

    def __init__(self, path):
        self.path = path
        self.files = {}
        self.where = {}
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                wmap = json.load(f)["weight_map"]
            for name, fname in wmap.items():
                if fname not in self.files:
                    self.files[fname] = SafetensorsFile(os.path.join(path, fname))
                self.where[name] = self.files[fname]
        else:
            single = [f for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
            if not single:
                raise ValueError(f"{path}: no .safetensors files")
            for fname in single:
                st = SafetensorsFile(os.path.join(path, fname))
                self.files[fname] = st
                for n in st.names():
                    self.where[n] = st
        with open(os.path.join(path, "config.json")) as f:
            self.config = json.load(f)
        # Multimodal checkpoints (Qwen3.5) keep the text model under a prefix: transformers'
        # model.language_model.* and mlx-lm's language_model.model.* / language_model.lm_head.*.
        # Text-model names are accepted for them; quantization settings stay keyed by stored name.
        self.stored = {}
        for n in list(self.where):
            for pre, to in (("model.language_model.", "model."), ("language_model.model.", "model."),
                            ("language_model.lm_head.", "lm_head.")):
                if n.startswith(pre):
                    self.stored[to + n[len(pre):]] = n
                    self.where[to + n[len(pre):]] = self.where[n]
                    break

    def stored_name(self, name):
        return self.stored.get(name, name)

    def has(self, name):
        return name in self.where

    def raw(self, name):
        return self.where[name].raw(self.stored_name(name))

    def tensor(self, name):
        """Dense float64 weight; MLX-quantized weights (name.scales present) are dequantized."""
        base = name[:-len(".weight")] if name.endswith(".weight") else None
        if base is not None and self.has(base + ".scales"):
            return self._mlx_dequant(base)
        return self.where[name].tensor(self.stored_name(name))

    def _quant_params(self, module):
        q = self.config.get("quantization") or self.config.get("quantization_config") or {}
        per = q.get(self.stored_name(module + ".weight")[:-len(".weight")])
        if isinstance(per, dict):
            return int(per.get("group_size", q.get("group_size", 64))), per.get("bits")
        return int(q.get("group_size", 64)), q.get("bits")

    def _mlx_dequant(self, module):
        codes, cdt = self.raw(module + ".weight")
        if cdt != "U32":
            raise ValueError(f"{self.path}: {module}.weight has dtype {cdt}, MLX codes are U32")
        scales = self.tensor(module + ".scales")
        biases = self.tensor(module + ".biases")
        group, cfg_bits = self._quant_params(module)
        n_in = scales.shape[-1] * group
        bits = codes.shape[-1] * 32 // n_in
        if cfg_bits is not None and int(cfg_bits) != bits:
            raise ValueError(f"{self.path}: {module}: codes imply {bits} bits, config says {cfg_bits}")
        return mlx_dequantize(codes, scales, biases, bits, group)


def mlx_unpack(codes, bits, n_in):
    """codes: uint32 [rows, n_in*bits/32] -> int64 [rows, n_in].
    MLX stores each row as one little-endian bit stream: value i occupies bits [i*bits, (i+1)*bits)
    counting from the least significant bit of the first byte. For 2/4/8 bits that is simply
    32/bits values per uint32, lowest bits first; for 3, 5 and 6 bits values straddle bytes and
    words (8 values per 3 bytes, 8 per 5 bytes, 4 per 3 bytes)."""
    rows = codes.shape[0]
    by = np.ascontiguousarray(codes.astype("<u4")).view(np.uint8).reshape(rows, -1)
    bitstream = np.unpackbits(by, axis=1, bitorder="little")  # [rows, n_in*bits]
    if bitstream.shape[1] != n_in * bits:
        raise ValueError(f"MLX codes hold {bitstream.shape[1]} bits per row, want {n_in * bits}")
    b = bitstream.reshape(rows, n_in, bits).astype(np.int64)
    weights = (1 << np.arange(bits, dtype=np.int64))
    return (b * weights).sum(axis=2)


def mlx_dequantize(codes, scales, biases, bits, group):
    """w[r, i] = scales[r, i // group] * q[r, i] + biases[r, i // group]."""
    lead = codes.shape[:-1]
    codes2 = codes.reshape(-1, codes.shape[-1])
    n_in = scales.shape[-1] * group
    q = mlx_unpack(codes2, bits, n_in).astype(np.float64)
    s = np.repeat(scales.reshape(-1, scales.shape[-1]), group, axis=1)
    bb = np.repeat(biases.reshape(-1, biases.shape[-1]), group, axis=1)
    return (s * q + bb).reshape(*lead, n_in)


def mlx_pack(q, bits):
    """Inverse of mlx_unpack (used by the self-tests to build files): int [rows, n] -> uint32."""
    rows, n = q.shape
    bitsarr = ((q[:, :, None].astype(np.int64) >> np.arange(bits)) & 1).astype(np.uint8)
    by = np.packbits(bitsarr.reshape(rows, n * bits), axis=1, bitorder="little")
    return by.view("<u4").reshape(rows, -1)


# ---------------------------------------------------------------------------------------------
# llama2.c checkpoint (legacy version-0 .bin)


def read_llama2c(path):
    """Header of seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    negative vocab_size = separate classifier), then fp32 arrays in a fixed order."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", bytes(raw[0:28]))
    shared = vocab > 0
    vocab = abs(vocab)
    head = dim // n_heads
    kv_dim = n_kv * head
    f = np.asarray(raw[28:]).view("<f4")
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        if pos + n > f.size:
            raise ValueError(f"{path}: file too short for a dim {dim}, {n_layers}-layer checkpoint")
        a = f[pos:pos + n].astype(np.float64).reshape(shape)
        pos += n
        return a

    w = {}
    w["tok_embd"] = take(vocab, dim)
    w["attn_norm"] = take(n_layers, dim)
    w["wq"] = take(n_layers, dim, dim)
    w["wk"] = take(n_layers, kv_dim, dim)
    w["wv"] = take(n_layers, kv_dim, dim)
    w["wo"] = take(n_layers, dim, dim)
    w["ffn_norm"] = take(n_layers, dim)
    w["w1"] = take(n_layers, hidden, dim)
    w["w2"] = take(n_layers, dim, hidden)
    w["w3"] = take(n_layers, hidden, dim)
    w["out_norm"] = take(dim)
    take(seq_len, head // 2)  # legacy precomputed RoPE tables, unused
    take(seq_len, head // 2)
    w["output"] = w["tok_embd"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, vocab=vocab,
               seq_len=seq_len)
    return cfg, w
