"""Numpy dequantization of GGML block types, written from the published block layouts.

Every function takes the raw bytes of a tensor (a 1-D uint8 array, whole blocks only) and returns
float64 values in file order (GGUF's innermost dimension first). Layouts (all little endian,
fp16 scales):

  Q4_0  32 values/18 B: d, 16 bytes of nibbles; low nibbles are values 0..15, high 16..31; (q-8)*d
  Q4_1  32/20 B: d, m, 16 nibble bytes as Q4_0; q*d + m
  Q5_0  32/22 B: d, 32-bit high-bit mask qh, 16 nibble bytes; bit j of qh is bit 4 of value j;
        (q-16)*d
  Q5_1  32/24 B: d, m, qh, nibbles; q*d + m
  Q8_0  32/34 B: d, 32 int8; q*d
  Q2_K  256/84 B: 16 bytes scales (low nibble scale, high nibble min), 64 bytes of 2-bit codes, d,
        dmin. 16 sub-blocks of 16; value = d*sc*q - dmin*m
  Q3_K  256/110 B: 32 bytes high-bit mask, 64 bytes 2-bit low codes, 12 bytes of sixteen 6-bit signed
        scales (biased by 32), d. value = d*(sc-32)*(q - 4 if the high bit is clear)
  Q4_K  256/144 B: d, dmin, 12 bytes of eight 6-bit scales + eight 6-bit mins, 128 nibble bytes.
        8 sub-blocks of 32: value = d*sc*q - dmin*m
  Q5_K  256/176 B: d, dmin, 12 scale bytes as Q4_K, 32 bytes high bits, 128 nibble bytes
  Q6_K  256/210 B: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, d;
        value = d*sc*(q-32)

Within the K-quants the order in which codes map to output positions is the subtle part; each
function below spells it out.
"""

import numpy as np

QK = 32
QK_K = 256

# ggml type id -> (name, block elements, block bytes)
GGML_TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    30: ("BF16", 1, 2),
}
GGML_TYPE_IDS = {v[0]: k for k, v in GGML_TYPES.items()}


def _f16(b):
    """b: uint8 [n, 2] -> float64 [n]."""
    return np.ascontiguousarray(b).view(np.float16).reshape(-1).astype(np.float64)


def _blocks(raw, nbytes):
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    if raw.size % nbytes:
        raise ValueError(f"{raw.size} bytes is not a whole number of {nbytes}-byte blocks")
    return raw.reshape(-1, nbytes)


def bf16_to_f64(raw):
    u = np.ascontiguousarray(raw).view(np.uint16).astype(np.uint32) << 16
    return u.view(np.float32).astype(np.float64)


def deq_q4_0(raw):
    b = _blocks(raw, 18)
    d = _f16(b[:, 0:2])[:, None]
    qs = b[:, 2:18]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64)
    return ((q - 8.0) * d).reshape(-1)


def deq_q4_1(raw):
    b = _blocks(raw, 20)
    d = _f16(b[:, 0:2])[:, None]
    m = _f16(b[:, 2:4])[:, None]
    qs = b[:, 4:20]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64)
    return (q * d + m).reshape(-1)


def _q5_codes(qh_bytes, qs):
    qh = np.ascontiguousarray(qh_bytes).view("<u4").reshape(-1, 1)
    j = np.arange(32, dtype=np.uint32)[None, :]
    high = ((qh >> j) & 1).astype(np.int64) << 4  # [n, 32], bit j belongs to value j
    low = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int64)
    return low | high


def deq_q5_0(raw):
    b = _blocks(raw, 22)
    d = _f16(b[:, 0:2])[:, None]
    q = _q5_codes(b[:, 2:6], b[:, 6:22]).astype(np.float64)
    return ((q - 16.0) * d).reshape(-1)


def deq_q5_1(raw):
    b = _blocks(raw, 24)
    d = _f16(b[:, 0:2])[:, None]
    m = _f16(b[:, 2:4])[:, None]
    q = _q5_codes(b[:, 4:8], b[:, 8:24]).astype(np.float64)
    return (q * d + m).reshape(-1)


def deq_q8_0(raw):
    b = _blocks(raw, 34)
    d = _f16(b[:, 0:2])[:, None]
    q = b[:, 2:34].view(np.int8).astype(np.float64)
    return (q * d).reshape(-1)


def deq_q2_k(raw):
    b = _blocks(raw, 84)
    scales = b[:, 0:16]
    qs = b[:, 16:80]
    d = _f16(b[:, 80:82])[:, None]
    dmin = _f16(b[:, 82:84])[:, None]
    n = b.shape[0]
    out = np.empty((n, 256), dtype=np.float64)
    # Output order: two halves of 128; in each, four 2-bit planes (shift 0,2,4,6) of the half's 32
    # code bytes; each plane gives 32 values, the first 16 bytes under one scale, the next 16 under
    # the following one.
    pos = 0
    sidx = 0
    for half in range(2):
        q = qs[:, 32 * half:32 * half + 32].astype(np.int64)
        for plane in range(4):
            codes = (q >> (2 * plane)) & 3
            for part in range(2):
                sc = scales[:, sidx].astype(np.int64)
                dl = d[:, 0] * (sc & 0x0F)
                ml = dmin[:, 0] * (sc >> 4)
                out[:, pos:pos + 16] = dl[:, None] * codes[:, 16 * part:16 * part + 16] - ml[:, None]
                pos += 16
                sidx += 1
    return out.reshape(-1)


def q3_k_scales(sc12):
    """sc12: uint8 [n, 12] -> int64 [n, 16] signed 6-bit scales.
    Scale i: low 4 bits from byte i (i<8, low nibble) or byte i-8 (high nibble); top 2 bits from
    byte 8 + i%4 at bit position 2*(i//4)."""
    sc = sc12.astype(np.int64)
    out = np.empty((sc.shape[0], 16), dtype=np.int64)
    for i in range(16):
        low = (sc[:, i] & 0x0F) if i < 8 else (sc[:, i - 8] >> 4)
        high = (sc[:, 8 + i % 4] >> (2 * (i // 4))) & 3
        out[:, i] = (low | (high << 4)) - 32
    return out


def deq_q3_k(raw):
    b = _blocks(raw, 110)
    hmask = b[:, 0:32].astype(np.int64)
    qs = b[:, 32:96].astype(np.int64)
    scales = q3_k_scales(b[:, 96:108])
    d = _f16(b[:, 108:110])
    n = b.shape[0]
    out = np.empty((n, 256), dtype=np.float64)
    # Same traversal as Q2_K; the high bit of value at (plane p of half h, byte l) is bit (4h+p) of
    # hmask[l] (l over all 32 hmask bytes). A clear high bit means subtract 4.
    pos = 0
    sidx = 0
    for half in range(2):
        q = qs[:, 32 * half:32 * half + 32]
        for plane in range(4):
            bit = 4 * half + plane
            codes = ((q >> (2 * plane)) & 3) - np.where((hmask >> bit) & 1, 0, 4)
            for part in range(2):
                dl = d * scales[:, sidx]
                out[:, pos:pos + 16] = dl[:, None] * codes[:, 16 * part:16 * part + 16]
                pos += 16
                sidx += 1
    return out.reshape(-1)


def k4_scale_min(sc12):
    """sc12: uint8 [n, 12] -> (scales [n, 8], mins [n, 8]) 6-bit values shared by Q4_K and Q5_K.
    j<4: scale = byte j & 63, min = byte j+4 & 63; j>=4: scale = low nibble of byte j+4 with the
    top two bits of byte j-4 on top, min = high nibble of byte j+4 with the top two bits of byte j."""
    q = sc12.astype(np.int64)
    s = np.empty((q.shape[0], 8), dtype=np.int64)
    m = np.empty((q.shape[0], 8), dtype=np.int64)
    for j in range(8):
        if j < 4:
            s[:, j] = q[:, j] & 63
            m[:, j] = q[:, j + 4] & 63
        else:
            s[:, j] = (q[:, j + 4] & 0x0F) | ((q[:, j - 4] >> 6) << 4)
            m[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return s, m


def deq_q4_k(raw):
    b = _blocks(raw, 144)
    d = _f16(b[:, 0:2])[:, None]
    dmin = _f16(b[:, 2:4])[:, None]
    s, m = k4_scale_min(b[:, 4:16])
    qs = b[:, 16:144].astype(np.int64)
    out = np.empty((b.shape[0], 256), dtype=np.float64)
    # Four chunks of 64 outputs; chunk c reads code bytes [32c, 32c+32): low nibbles first (sub-block
    # 2c), then high nibbles (sub-block 2c+1).
    for c in range(4):
        q = qs[:, 32 * c:32 * c + 32]
        for k, codes in enumerate((q & 0x0F, q >> 4)):
            sb = 2 * c + k
            out[:, 64 * c + 32 * k:64 * c + 32 * k + 32] = (
                d * s[:, sb:sb + 1] * codes - dmin * m[:, sb:sb + 1])
    return out.reshape(-1)


def deq_q5_k(raw):
    b = _blocks(raw, 176)
    d = _f16(b[:, 0:2])[:, None]
    dmin = _f16(b[:, 2:4])[:, None]
    s, m = k4_scale_min(b[:, 4:16])
    qh = b[:, 16:48].astype(np.int64)
    qs = b[:, 48:176].astype(np.int64)
    out = np.empty((b.shape[0], 256), dtype=np.float64)
    # As Q4_K; the fifth bit of sub-block sb's value l is bit sb of qh[l].
    for c in range(4):
        q = qs[:, 32 * c:32 * c + 32]
        for k, low in enumerate((q & 0x0F, q >> 4)):
            sb = 2 * c + k
            codes = low + (((qh >> sb) & 1) << 4)
            out[:, 64 * c + 32 * k:64 * c + 32 * k + 32] = (
                d * s[:, sb:sb + 1] * codes - dmin * m[:, sb:sb + 1])
    return out.reshape(-1)


def deq_q6_k(raw):
    b = _blocks(raw, 210)
    ql = b[:, 0:128].astype(np.int64)
    qh = b[:, 128:192].astype(np.int64)
    sc = b[:, 192:208].view(np.int8).astype(np.int64)
    d = _f16(b[:, 208:210])[:, None]
    out = np.empty((b.shape[0], 256), dtype=np.float64)
    # Two halves of 128 values; half h uses ql[64h:64h+64], qh[32h:32h+32], scales[8h:8h+8].
    # Within a half, for l in 0..31: value l     = low nibble of ql[l]    + qh[l] bits 0-1
    #                                 value l+32  = low nibble of ql[l+32] + qh[l] bits 2-3
    #                                 value l+64  = high nibble of ql[l]   + qh[l] bits 4-5
    #                                 value l+96  = high nibble of ql[l+32]+ qh[l] bits 6-7
    # and value v of the half uses scale v // 16.
    for h in range(2):
        lo = ql[:, 64 * h:64 * h + 64]
        hi = qh[:, 32 * h:32 * h + 32]
        parts = [
            (lo[:, 0:32] & 0x0F) | (((hi >> 0) & 3) << 4),
            (lo[:, 32:64] & 0x0F) | (((hi >> 2) & 3) << 4),
            (lo[:, 0:32] >> 4) | (((hi >> 4) & 3) << 4),
            (lo[:, 32:64] >> 4) | (((hi >> 6) & 3) << 4),
        ]
        q = np.concatenate(parts, axis=1) - 32  # [n, 128]
        scale = np.repeat(sc[:, 8 * h:8 * h + 8], 16, axis=1)
        out[:, 128 * h:128 * h + 128] = d * scale * q
    return out.reshape(-1)


_DEQ = {
    "Q4_0": deq_q4_0, "Q4_1": deq_q4_1, "Q5_0": deq_q5_0, "Q5_1": deq_q5_1, "Q8_0": deq_q8_0,
    "Q2_K": deq_q2_k, "Q3_K": deq_q3_k, "Q4_K": deq_q4_k, "Q5_K": deq_q5_k, "Q6_K": deq_q6_k,
}


def dequantize(type_name, raw, n_elems):
    """raw bytes of one tensor -> float64 [n_elems]."""
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    if type_name == "F32":
        out = raw.view("<f4").astype(np.float64)
    elif type_name == "F16":
        out = raw.view("<f2").astype(np.float64)
    elif type_name == "BF16":
        out = bf16_to_f64(raw)
    elif type_name in _DEQ:
        out = _DEQ[type_name](raw)
    else:
        raise ValueError(f"unsupported ggml type {type_name}")
    if out.size != n_elems:
        raise ValueError(f"{type_name}: {raw.size} bytes decode to {out.size} values, want {n_elems}")
    return out


def tensor_nbytes(type_id, n_elems):
    name, be, bb = GGML_TYPES[type_id]
    if n_elems % be:
        raise ValueError(f"{name}: {n_elems} values is not a whole number of {be}-value blocks")
    return n_elems // be * bb
