#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/reference.gguf with the `gguf` package (llama.cpp's gguf-py), so the
reader is checked against a writer that is not ours. tests/test_gguf.c hard-codes the values below;
change both together. CI never runs this: the output is committed.

    pip install gguf numpy          # written with gguf 0.19.0, numpy 2.4
    python3 tools/gen_gguf_fixture.py [output path]
"""
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGUFValueType as T, GGMLQuantizationType as Q

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/gguf/reference.gguf"
out.parent.mkdir(parents=True, exist_ok=True)

w = gguf.GGUFWriter(str(out), "mmstest")       # adds general.architecture = "mmstest"
w.add_custom_alignment(64)                     # general.alignment = 64 (u32)
w.add_uint8("test.u8", 200)
w.add_int8("test.i8", -100)
w.add_uint16("test.u16", 60000)
w.add_int16("test.i16", -30000)
w.add_uint32("test.u32", 4000000000)
w.add_int32("test.i32", -2000000000)
w.add_uint64("test.u64", 2**40 + 3)
w.add_int64("test.i64", -(2**40) - 5)
w.add_float32("test.f32", 0.15625)
w.add_float64("test.f64", 3.141592653589793)
w.add_bool("test.true", True)
w.add_bool("test.false", False)
w.add_string("test.str", "h\u00e9llo w\u00f6rld")           # UTF-8: 13 bytes
w.add_key_value("test.str_empty", "", T.STRING)           # add_string skips empty strings
w.add_array("test.arr_i32", [1, -2, 2147483647])          # ints infer INT32
w.add_array("test.arr_f32", [0.5, -1.25, 1e30])           # floats infer FLOAT32
w.add_array("test.arr_str", ["a", "", "\u00fcn\u00ef", "tab\there"])
w.add_key_value("test.arr_u8", [0, 255, 7], T.ARRAY, sub_type=T.UINT8)
w.add_key_value("test.arr_i64", [-(2**40), 5], T.ARRAY, sub_type=T.INT64)
w.add_key_value("test.arr_f64", [0.25, -8.0], T.ARRAY, sub_type=T.FLOAT64)
w.add_key_value("test.arr_bool", [True, False, True], T.ARRAY, sub_type=T.BOOL)

# numpy shapes are outermost first; GGUF's ne are innermost first ((3, 5) -> ne = [5, 3])
w.add_tensor("t.f32", (np.arange(15, dtype=np.float32) * 0.5 - 3.0).reshape(3, 5))
w.add_tensor("t.f16", (np.arange(8, dtype=np.float16) - 4).reshape(2, 2, 2))
w.add_tensor("t.i32", np.arange(7, dtype=np.int32) * -3)
w.add_tensor("t.q8_0", (np.arange(2 * 34, dtype=np.uint8) * 3).reshape(2, 34), raw_dtype=Q.Q8_0)   # ne = [32, 2]
w.add_tensor("t.bf16", np.array([0x3f80, 0xc000, 0x0000, 0x7f80], dtype=np.uint16), raw_dtype=Q.BF16)  # 1, -2, 0, inf
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {out} ({out.stat().st_size} bytes)")
