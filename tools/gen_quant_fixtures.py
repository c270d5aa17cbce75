#!/usr/bin/env python3
"""Writes tests/fixtures/quant/quant-ref.gguf: references for the quantized block types Q8_0, Q4_0,
Q4_K, Q6_K and Q5_K, made by the `gguf` package (llama.cpp's gguf-py, numpy code written independently
of mmsched), for tests/test_quant.c.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy==2.1.3 gguf==0.17.1
    /tmp/venv/bin/pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcp
    tar xzf /tmp/lcp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcp
    /tmp/venv/bin/python tools/gen_quant_fixtures.py \
        --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp [output path]

The K types' reference quantizer is llama.cpp's own (gguf cannot quantize them): --llama-cpp names
a llama.cpp source tree (here the one llama-cpp-python 0.3.36's source package vendors), whose
ggml/src/ggml-quants.c is compiled with the system's cc into a temporary shared library (a few
stubs for the ggml functions its reference quantizers never call), and quantize_row_q4_K_ref,
quantize_row_q6_K_ref and quantize_row_q5_K_ref (what llama-quantize writes without an importance
matrix) quantize the Gaussian matrix; their error, measured through gguf's dequantization, is
recorded for our quantizer to be held to.

Only for developers: CI reads the committed file and never runs this. Written with gguf 0.17.1 and
numpy 2.1.3 (the versions are recorded in the file). gguf.quants quantizes Q8_0 and Q4_0 (its Q8_0
claims to be bit-exact with ggml's reference quantize_row_q8_0_ref; its Q4_0 emulates the FMA of
ggml's in float64) and only dequantizes Q4_K, Q6_K and Q5_K. Deterministic: fixed seeds, the same bytes
on every run with the same packages.

Blocks for dequantization are made independently of our code: for Q8_0 and Q4_0, gguf's quantize of
the float rows `T.input` (below) followed by random-byte blocks; for Q4_K, Q6_K and Q5_K, random bytes
for the quants and the packed scales, and random finite f16 super-block scales (d, and dmin for Q4_K
and Q5_K),
so every bit pattern of the scale packing is exercised. Dequantization of these blocks is exact in
float32 for all five types (every product is exact, the K types' one subtraction rounds once), so a
correct dequantizer matches `T.deq` bit for bit.

GGUF shapes are ne (innermost first). Raw blocks are I8 tensors (GGUF type 24), ne {type_size,
n_blocks}: the bytes exactly as the block layout stores them, whatever type mapping the reader has.

Contents (T is each of q8_0, q4_0, q4_k, q6_k, q5_k):
  quant.generator           (str) "tools/gen_quant_fixtures.py"
  quant.gguf_version        (str) version of the gguf package used
  quant.numpy_version       (str) version of numpy used
  quant.seed                (u32) the numpy seed
  quant.types               (str array) "q8_0", "q4_0", "q4_k", "q6_k", "q5_k"
  T.ggml_type               (u32) GGUF's type id: 8, 2, 12, 14, 13
  T.blck_size, T.type_size  (u32) elements and bytes per block: 32/34, 32/18, 256/144, 256/210,
                            256/176
  T.blocks                  I8 [type_size, n_blocks]: blocks to dequantize
  T.n_blocks_tame           (u32) the first n_blocks_tame of T.blocks are "tame": for q8_0/q4_0
                            they are T.input_q (gguf's quantization of T.input); for the K types
                            their d (and dmin) are positive normal f16 in [2^-8, 2^3), so their
                            values are a plausible signal to requantize. The rest have random
                            finite f16 scales of any sign, subnormals and zeros included (q8_0 and
                            q4_0: random quant bytes too, so q8_0 has -128). Special K-type
                            blocks among the rest: scale bytes all 0x00 and all 0xFF, d = +0 with
                            dmin = -0, quants all 0x00 and all 0xFF.
  T.deq                     F32 [blck_size, n_blocks]: gguf.quants.dequantize(T.blocks)
  gauss                     F32 [512, 48]: N(0, 1) samples, the matrix for quantization error
  gauss.mean_sq             (f32) mean of gauss^2 (float64 sum), for normalised errors

  Only for T in q4_k, q6_k, q5_k (llama.cpp's reference quantizers, see --llama-cpp):
  T.ref_gauss_mse           (f32) mean((dequantize(ref_quantize(gauss)) - gauss)^2), float64 sum
  quant.ref_quantizer       (str) which: "llama.cpp ggml-quants.c quantize_row_T_ref (from ...)"

  Only for T in q8_0, q4_0 (the types gguf can quantize):
  T.input                   F32 [256, 13]: float rows: 0 all zeros; 1 one huge value (1e4) among
                            N(0, 1); 2 negative only; 3 tiny values (1e-6 scale, f16 d underflows
                            to 0 or a subnormal); 4 values of 1e-30 scale (d is 0 in f16);
                            5 integer and half-integer grid values (rounding ties for both types);
                            6 a block whose signed maximum is positive, the next negative;
                            7 N(0, 1) times 1e3; 8..11 N(0, 1) with a different scale per block;
                            12 near ties: block 0 holds 127 (q8_0 scale exactly 1) and block 1
                            holds -8 (q4_0 scale exactly 1), each with k + 0.5 (k = 0..4 and 0..2)
                            and the floats just below and above it, both signs
  T.input_q                 I8 [type_size, 104]: gguf.quants.quantize(T.input)
  T.input_mse               (f32) mean((dequantize(T.input_q) - T.input)^2), float64 sum
  T.gauss_q                 I8 [type_size, 768]: gguf.quants.quantize(gauss)
  T.gauss_mse               (f32) mean((dequantize(T.gauss_q) - gauss)^2), float64 sum
"""

import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = sys.argv[1:]
if len(ARGS) < 2 or ARGS[0] != "--llama-cpp":
    sys.exit("usage: gen_quant_fixtures.py --llama-cpp LLAMA_CPP_SOURCE_DIR [output path] (see the header)")
LLAMA_CPP = ARGS[1]
OUT = ARGS[2] if len(ARGS) > 2 else os.path.join(ROOT, "tests", "fixtures", "quant", "quant-ref.gguf")
SEED = 20250704

TYPES = [  # name, ggml type, block size, type size, gguf can quantize
    ("q8_0", Q.Q8_0, 32, 34, True),
    ("q4_0", Q.Q4_0, 32, 18, True),
    ("q4_k", Q.Q4_K, 256, 144, False),
    ("q6_k", Q.Q6_K, 256, 210, False),
    ("q5_k", Q.Q5_K, 256, 176, False),   # last: the rng stream of the types before it is unchanged
]
ROW = 256          # elements of a T.input row
N_RANDOM = 32      # random blocks of q8_0/q4_0 after the input's
N_K_TAME = 32      # q4_k/q6_k: tame blocks, then N_K_WILD others
N_K_WILD = 40

rng = np.random.default_rng(SEED)


def f16_bits_finite(n, any_sign=True):
    """Random finite f16 bit patterns (exponent field != 31): subnormals and zeros included."""
    b = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp = (b >> 10) & 0x1F
    b = np.where(exp == 31, b & np.uint16(0xBFFF), b).astype(np.uint16)   # exponent 31 -> 15
    if not any_sign:
        b &= np.uint16(0x7FFF)
    return b


def f16_bits_tame(n):
    """Positive normal f16 in [2^-8, 2^3): exponent field 7..17, random mantissa."""
    exp = rng.integers(7, 18, size=n).astype(np.uint16)
    man = rng.integers(0, 1 << 10, size=n).astype(np.uint16)
    return ((exp << 10) | man).astype(np.uint16)


def put_f16(blocks, offset, bits):
    blocks[:, offset:offset + 2] = bits.view(np.uint8).reshape(-1, 2)


def input_rows():
    r = np.zeros((13, ROW), np.float64)
    r[1] = rng.standard_normal(ROW); r[1, 37] = 1e4                      # one huge value
    r[2] = -np.abs(rng.standard_normal(ROW)) - 0.01                       # negative only
    r[3] = rng.standard_normal(ROW) * 1e-6                                # tiny
    r[4] = rng.standard_normal(ROW) * 1e-30                               # far below f16
    g = np.arange(ROW)
    r[5] = np.where(g % 32 == 0, 127.0, np.where(g % 32 == 1, -8.0, ((g * 7) % 31 - 15) * 0.5))  # ties
    r[6] = rng.standard_normal(ROW)
    r[6, 3] = 5.0; r[6, 32 + 9] = -5.0                                    # signed max + then -
    r[7] = rng.standard_normal(ROW) * 1e3
    for k in range(8, 12):
        r[k] = rng.standard_normal(ROW) * np.repeat(np.exp(rng.uniform(-6, 6, ROW // 32)), 32)
    r = r.astype(np.float32)
    # Row 12, near ties: block 0 has 127 (q8_0: d = 1, id = 1) and block 1 has -8 (q4_0: d = 1,
    # id = 1), so the scaled values are the stored ones: k + 0.5 and the floats just below and above
    # it, both signs (0.5 - 2^-25 is where x + 0.5f rounds up to 1 in float).
    near = []
    for k in range(0, 5):
        t = np.float32(k + 0.5)
        near += [t, np.nextafter(t, np.float32(0)), np.nextafter(t, np.float32(100))]
    near = np.array(near, np.float32)
    r[12] = (rng.standard_normal(ROW) * 0.3).astype(np.float32)
    r[12, 0] = 127.0
    r[12, 1:1 + 15] = near
    r[12, 16:16 + 15] = -near
    r[12, 32] = -8.0
    r[12, 33:33 + 9] = near[:9]
    r[12, 42:42 + 9] = -near[:9]
    return r


def mse(a, b):
    d = a.astype(np.float64) - b.astype(np.float64)
    return float(np.mean(d * d))


def kquant_blocks(name, type_size):
    n = N_K_TAME + N_K_WILD
    b = rng.integers(0, 256, size=(n, type_size), dtype=np.uint16).astype(np.uint8)
    if name in ("q4_k", "q5_k"):   # d, dmin, scales[12], (q5_k: qh[32]), qs[128]
        put_f16(b[:N_K_TAME], 0, f16_bits_tame(N_K_TAME))
        put_f16(b[:N_K_TAME], 2, f16_bits_tame(N_K_TAME))
        put_f16(b[N_K_TAME:], 0, f16_bits_finite(N_K_WILD))
        put_f16(b[N_K_TAME:], 2, f16_bits_finite(N_K_WILD))
        w = N_K_TAME
        b[w + 0, 4:16] = 0x00
        b[w + 1, 4:16] = 0xFF
        put_f16(b[w + 2:w + 3], 0, np.array([0x0000], np.uint16))
        put_f16(b[w + 2:w + 3], 2, np.array([0x8000], np.uint16))
        b[w + 3, 16:] = 0x00
        b[w + 4, 16:] = 0xFF
        b[w + 5, 4:16] = 0xFF; b[w + 5, 16:] = 0xFF
    else:                # q6_k: ql[128], qh[64], scales[16] (int8), d
        put_f16(b[:N_K_TAME], 208, f16_bits_tame(N_K_TAME))
        put_f16(b[N_K_TAME:], 208, f16_bits_finite(N_K_WILD))
        w = N_K_TAME
        b[w + 0, 192:208] = 0x00
        b[w + 1, 192:208] = 0xFF
        b[w + 2, 192:208] = 0x80                                          # scale -128
        put_f16(b[w + 3:w + 4], 208, np.array([0x8000], np.uint16))
        b[w + 4, :192] = 0x00                                             # q = -32
        b[w + 5, :192] = 0xFF                                             # q = 31
    return b, N_K_TAME


# The ggml functions ggml-quants.c links against that its reference quantizers never call.
GGML_STUBS = r"""
#include <stdio.h>
#include <stdlib.h>
void ggml_abort(const char *file, int line, const char *fmt, ...) { fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt); abort(); }
size_t ggml_row_size(int t, long long ne) { (void)t; (void)ne; abort(); }
const char *ggml_type_name(int t) { (void)t; return "?"; }
size_t ggml_type_size(int t) { (void)t; abort(); }
"""


def llama_cpp_reference(gauss):
    """{name: mse} of llama.cpp's reference quantizers of the K types on gauss (see the header)."""
    ggml = os.path.join(LLAMA_CPP, "ggml")
    src = os.path.join(ggml, "src", "ggml-quants.c")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        stubs, lib = os.path.join(tmp, "stubs.c"), os.path.join(tmp, "libggml_quants.so")
        with open(stubs, "w") as f:
            f.write(GGML_STUBS)
        subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-w", "-I", os.path.join(ggml, "include"), "-I", os.path.join(ggml, "src"),
                        src, stubs, "-o", lib, "-lm"], check=True)
        so = ctypes.CDLL(lib)
        x = np.ascontiguousarray(gauss, np.float32)
        for name, qt, blck, tsize, _ in TYPES:
            if blck != 256:
                continue
            fn = getattr(so, "quantize_row_%s_ref" % name.replace("_k", "_K"))
            y = np.zeros((x.size // blck, tsize), np.uint8)
            fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
            out[name] = mse(quants.dequantize(y, qt).reshape(x.shape), x)
    return out


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    gauss = rng.standard_normal((48, 512)).astype(np.float32)
    w = gguf.GGUFWriter(OUT, "mmsquant")
    w.add_string("quant.generator", "tools/gen_quant_fixtures.py")
    w.add_string("quant.gguf_version", _version("gguf"))
    w.add_string("quant.numpy_version", np.__version__)
    w.add_uint32("quant.seed", SEED)
    w.add_array("quant.types", [t[0] for t in TYPES])
    w.add_float32("gauss.mean_sq", float(np.mean(gauss.astype(np.float64) ** 2)))
    w.add_tensor("gauss", gauss)
    checks = {}
    ref = llama_cpp_reference(gauss)
    w.add_string("quant.ref_quantizer", "llama.cpp ggml-quants.c quantize_row_T_ref (from %s)" % os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(LLAMA_CPP)))))
    for name, m in ref.items():
        w.add_float32(f"{name}.ref_gauss_mse", m)
        print(f"{name}: llama.cpp reference quantizer mse on gauss {m:.6g} (normalised {m / np.mean(gauss.astype(np.float64) ** 2):.6g})")

    for name, qt, blck, tsize, can_q in TYPES:
        w.add_uint32(f"{name}.ggml_type", int(qt))
        w.add_uint32(f"{name}.blck_size", blck)
        w.add_uint32(f"{name}.type_size", tsize)
        if can_q:
            inp = input_rows()
            inp_q = quants.quantize(inp, qt).reshape(-1, tsize)
            rnd = rng.integers(0, 256, size=(N_RANDOM, tsize), dtype=np.uint16).astype(np.uint8)
            put_f16(rnd, 0, f16_bits_finite(N_RANDOM))
            blocks = np.concatenate([inp_q, rnd], axis=0)
            tame = inp_q.shape[0]
            gq = quants.quantize(gauss, qt).reshape(-1, tsize)
            in_mse = mse(quants.dequantize(inp_q, qt).reshape(inp.shape), inp)
            g_mse = mse(quants.dequantize(gq, qt).reshape(gauss.shape), gauss)
            w.add_tensor(f"{name}.input", inp)
            w.add_tensor(f"{name}.input_q", inp_q.view(np.int8))
            w.add_float32(f"{name}.input_mse", in_mse)
            w.add_tensor(f"{name}.gauss_q", gq.view(np.int8))
            w.add_float32(f"{name}.gauss_mse", g_mse)
            print(f"{name}: gguf quantize mse on input {in_mse:.6g}, on gauss {g_mse:.6g} "
                  f"(normalised {g_mse / np.mean(gauss.astype(np.float64) ** 2):.6g})")
            checks[name] = (inp_q, gq)
        else:
            blocks, tame = kquant_blocks(name, tsize)
        deq = quants.dequantize(blocks, qt).reshape(-1, blck).astype(np.float32)
        assert np.all(np.isfinite(deq)), name
        w.add_tensor(f"{name}.blocks", blocks.view(np.int8))
        w.add_uint32(f"{name}.n_blocks_tame", tame)
        w.add_tensor(f"{name}.deq", deq)
        checks.setdefault(name, None)
        checks[name] = (checks[name], blocks, deq)
        print(f"{name}: {blocks.shape[0]} blocks ({tame} tame)")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # Self-check: read the file back with gguf's reader.
    r = gguf.GGUFReader(OUT)
    t = {x.name: x for x in r.tensors}
    assert np.array_equal(np.asarray(t["gauss"].data).reshape(gauss.shape), gauss)
    for name, qt, blck, tsize, can_q in TYPES:
        extra, blocks, deq = checks[name]
        got = np.asarray(t[f"{name}.blocks"].data).view(np.uint8).reshape(-1, tsize)
        assert np.array_equal(got, blocks), name
        assert list(t[f"{name}.blocks"].shape) == [tsize, blocks.shape[0]], (name, t[f"{name}.blocks"].shape)
        assert np.array_equal(np.asarray(t[f"{name}.deq"].data).reshape(deq.shape).view(np.uint32), deq.view(np.uint32))
        if can_q:
            inp_q, gq = extra
            assert np.array_equal(np.asarray(t[f"{name}.input_q"].data).view(np.uint8).reshape(inp_q.shape), inp_q)
            assert np.array_equal(np.asarray(t[f"{name}.gauss_q"].data).view(np.uint8).reshape(gq.shape), gq)
    size = os.path.getsize(OUT)
    assert size < 1 << 20, size
    print(f"wrote {os.path.relpath(OUT, os.getcwd())} ({size} bytes)")


def _version(pkg):
    from importlib.metadata import version
    return version(pkg)


if __name__ == "__main__":
    main()
