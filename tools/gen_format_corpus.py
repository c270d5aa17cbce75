#!/usr/bin/env python3
"""Writes the seed and hostile inputs of the JSON and safetensors readers (tests/fuzz/corpus-json/,
tests/fuzz/corpus-safetensors/): valid files the fuzzers start from, and one file per way a file can
be broken, named for what is wrong. tests/test_formats.c replays them all and expects, for each
hostile-* file, an error naming the file and the field (its table lists the words). Standard
library only: python3 tools/gen_format_corpus.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
J = os.path.join(HERE, "..", "tests", "fuzz", "corpus-json")
S = os.path.join(HERE, "..", "tests", "fuzz", "corpus-safetensors")


def st(header, data=b"", raw_header=None, length=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def good_header():
    return {"__metadata__": {"format": "pt"},
            "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
            "c": {"dtype": "I64", "shape": [], "data_offsets": [22, 30]}}


def main():
    os.makedirs(J, exist_ok=True)
    os.makedirs(S, exist_ok=True)
    data = bytes(range(30))
    files_s = {
        "seed-three-tensors": st(good_header(), data),
        "seed-empty": st({}, b""),
        "hostile-truncated-header": struct.pack("<Q", 64)[:5],
        "hostile-header-length-past-eof": st(good_header(), data, length=4096),
        "hostile-header-not-json": st(None, data, raw_header=b'{"a": {"dtype": "F32",'),
        "hostile-header-not-object": st([1, 2], b""),
        "hostile-overlapping-offsets": st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
        "hostile-offsets-past-data": st({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
        "hostile-dtype-shape-mismatch": st({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}}, bytes(8)),
        "hostile-unknown-dtype": st({"a": {"dtype": "F31", "shape": [2], "data_offsets": [0, 8]}}, bytes(8)),
        "hostile-duplicate-keys": st(None, bytes(8), raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                             b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'),
        "hostile-deep-nesting": st(None, b"", raw_header=b'{"__metadata__":' + b"[" * 200 + b"]" * 200 + b"}"),
        "hostile-huge-number": st(None, bytes(8), raw_header=b'{"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}}'),
        "hostile-shape-overflow": st({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}}, bytes(8)),
        "hostile-invalid-utf8": st(None, bytes(8), raw_header=b'{"\xff\xfe":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'),
        "hostile-hole-in-data": st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(12)),
        "hostile-missing-offsets": st({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)),
        "hostile-negative-shape": st({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, bytes(8)),
        "hostile-unknown-field": st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": 1}}, bytes(8)),
        "hostile-metadata-not-strings": st({"__metadata__": {"format": 3}}, b""),
    }
    files_j = {
        "seed-config": json.dumps({"architectures": ["MllamaForConditionalGeneration"], "text_config": {"hidden_size": 24,
                                   "rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "cross_attention_layers": [1, 3]},
                                   "x": [True, False, None, -0.5e-3, "\u00e9\U0001F600\n"]}).encode(),
        "hostile-trailing-comma": b'{"a": [1, 2,]}',
        "hostile-comment": b'{"a": 1 /* no */}',
        "hostile-nan": b'{"a": NaN}',
        "hostile-leading-zero": b'[012]',
        "hostile-huge-number": b'[1e999]',
        "hostile-control-character": b'["a\x01b"]',
        "hostile-invalid-utf8": b'["\xc0\xaf"]',
        "hostile-lone-surrogate": b'["\\udc00"]',
        "hostile-duplicate-keys": b'{"k": 1, "k": 2}',
        "hostile-deep-nesting": b"[" * 129 + b"]" * 129,
        "hostile-text-after-value": b'{"a": 1} {"b": 2}',
        "hostile-unterminated-string": b'{"a": "b',
        "hostile-empty": b"",
    }
    for d, files in ((S, files_s), (J, files_j)):
        for name, b in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(b)
        print(f"{d}: {len(files)} files")


if __name__ == "__main__":
    main()
