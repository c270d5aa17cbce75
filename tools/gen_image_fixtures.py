#!/usr/bin/env python3
"""Writes tests/fixtures/images/preprocess-ref.gguf: references for mms_image_resize_bilinear and
mms_mllama_preprocess_image, made by Pillow and transformers' PIL (slow) mllama image processor.

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install pillow numpy gguf transformers
    /tmp/venv/bin/python tools/gen_image_fixtures.py

Only for developers: CI reads the committed file and never runs this. The results depend on the
Pillow version (Pillow 13 started to run the vertical pass first when the height shrinks much
more than the width), so the versions used are recorded in the file.

Contents (k counts from 0):
  fixture.*                 versions, processor class, the pattern formula
  img.count, rs.count
  img.{k}.name              a short description
  img.{k}.width/height/tile/max_tiles (u32)
  img.{k}.rgb               I8 tensor, ne {3*width, height}: the source bytes; or, for large sources,
  img.{k}.pattern_seed      (u32) the source is pattern(width, height, seed), see below
  img.{k}.aspect_ratio_id, img.{k}.num_tiles (i32), img.{k}.aspect_ratio_mask (i32 array, max_tiles)
  img.{k}.resized_width/resized_height (u32), img.{k}.resized_fnv1a64 (u64): the processor's
                            resized uint8 image (rows of RGB bytes), FNV-1a 64 of its bytes
  img.{k}.pixel_values_fnv1a64 (u64): FNV-1a 64 of the float32 pixel_values (max_tiles, 3, tile,
                            tile) bytes, little-endian: they must match exactly
  tile 560:    img.{k}.resized (I8, ne {3*w, h}) when small
  rs.{k}.name, rs.{k}.src_width/src_height/dst_width/dst_height (u32),
  rs.{k}.src, rs.{k}.dst    I8 tensors, ne {3*w, h}: the source and PIL's resize(BILINEAR) of it

pattern(w, h, seed): for pixel (x, y) and channel c, in uint32 arithmetic (mod 2^32):
  n = x*0x9E3779B1 + y*0x85EBCA77 + c*0xC2B2AE3D + seed*0x27D4EB2F
  n ^= n >> 15; n *= 0x2C1B3C6D; n ^= n >> 12
  g = c == 0 ? x*255/w : c == 1 ? y*255/h : (x+y)*255/(w+h)        (integer division)
  v = (g + (n & 63) + (((x/17 + y/13) & 1) ? 96 : 0)) & 255
"""

import os
import sys

import numpy as np
from PIL import Image
import PIL
import gguf
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "images", "preprocess-ref.gguf")

# The 11B model's preprocessor_config.json values (the class defaults are 224 and 0.5).
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
SMALL_RESIZED = 100 * 1024   # store a 560 case's resized bytes up to this size


def pattern(w, h, seed):
    y, x = np.mgrid[0:h, 0:w].astype(np.uint64)
    m = np.uint64(0xFFFFFFFF)
    out = np.empty((h, w, 3), np.uint8)
    for c in range(3):
        n = (x * np.uint64(0x9E3779B1) + y * np.uint64(0x85EBCA77) + np.uint64(c * 0xC2B2AE3D)
             + np.uint64((seed * 0x27D4EB2F) & 0xFFFFFFFF)) & m
        n ^= n >> np.uint64(15)
        n = (n * np.uint64(0x2C1B3C6D)) & m
        n ^= n >> np.uint64(12)
        if c == 0:
            g = x * np.uint64(255) // np.uint64(w)
        elif c == 1:
            g = y * np.uint64(255) // np.uint64(h)
        else:
            g = (x + y) * np.uint64(255) // np.uint64(w + h)
        stripe = np.where(((x // np.uint64(17) + y // np.uint64(13)) & np.uint64(1)) == 1, 96, 0).astype(np.uint64)
        out[:, :, c] = ((g + (n & np.uint64(63)) + stripe) & np.uint64(255)).astype(np.uint8)
    return out


def noise(w, h, seed):
    return np.random.RandomState(seed).randint(0, 256, (h, w, 3), dtype=np.uint8)


def smooth(w, h, seed):
    """A blurry image: noise upscaled, so neighbouring pixels are close (like a photo)."""
    small = noise(max(1, w // 8), max(1, h // 8), seed)
    return np.asarray(Image.fromarray(small, "RGB").resize((w, h), Image.BICUBIC))


def fnv1a64(a):
    """FNV-1a 64 of an array's bytes (a Python loop: a few seconds for the largest image)."""
    h = 0xCBF29CE484222325
    for byte in np.ascontiguousarray(a, dtype=np.uint8).tobytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_processor(tile, max_tiles):
    try:
        from transformers import MllamaImageProcessorPil as cls   # v5: the PIL backend has its own class
    except ImportError:
        from transformers import MllamaImageProcessor as cls      # v4: the class itself is the slow one
    p = cls(size={"height": tile, "width": tile}, image_mean=MEAN, image_std=STD, max_image_tiles=max_tiles,
            do_convert_rgb=True, do_resize=True, do_rescale=True, do_normalize=True, do_pad=True,
            resample=PIL.Image.BILINEAR)
    name = type(p).__name__
    assert "Fast" not in name and getattr(p, "backend", "pil") == "pil", f"not the PIL processor: {name}"
    return p


def run_processor(rgb, tile, max_tiles):
    """pixel_values (max_tiles, 3, tile, tile), id, num_tiles, mask, and the resized uint8 (h, w, 3)."""
    p = make_processor(tile, max_tiles)
    captured = []
    orig = p.resize

    def capture(image, *args, **kwargs):
        out = orig(image, *args, **kwargs)
        captured.append(out[0])
        return out
    p.resize = capture
    out = p(images=[[Image.fromarray(rgb, "RGB")]], return_tensors="np")
    assert len(captured) == 1
    resized = np.asarray(captured[0])
    assert resized.dtype == np.uint8 and resized.ndim == 3 and resized.shape[0] == 3, (resized.dtype, resized.shape)
    resized = np.ascontiguousarray(resized.transpose(1, 2, 0))
    pv = np.asarray(out["pixel_values"], dtype=np.float32)
    assert pv.shape == (1, 1, max_tiles, 3, tile, tile), pv.shape
    ids = np.asarray(out["aspect_ratio_ids"])
    mask = np.asarray(out["aspect_ratio_mask"])
    return pv[0, 0], int(ids[0, 0]), int(out["num_tiles"][0][0]), [int(v) for v in mask[0, 0]], resized


def i8(a):
    """(h, w, 3) uint8 to an (h, 3w) int8 array: GGUF's I8, ne {3w, h}."""
    h, w, _ = a.shape
    return np.ascontiguousarray(a).reshape(h, w * 3).view(np.int8)


# (name, width, height, tile, max_tiles, source kind, seed); kind "pattern" is regenerated by the test
IMG_CASES = [
    ("1x1", 1, 1, 56, 4, "noise", 1),
    ("exact tile 56x56 (>= 1 picks 1x1)", 56, 56, 56, 4, "smooth", 2),
    ("64x48, the worked example at tile 56", 64, 48, 56, 4, "smooth", 3),
    ("one over the tile 57x56", 57, 56, 56, 4, "noise", 4),
    ("one under 55x56", 55, 56, 56, 4, "noise", 5),
    ("wide 200x50", 200, 50, 56, 4, "smooth", 6),
    ("tall 50x200", 50, 200, 56, 4, "smooth", 7),
    ("downscale to 2x2 300x290", 300, 290, 56, 4, "pattern", 8),
    ("upscale 13x7", 13, 7, 56, 4, "noise", 9),
    ("very tall 3x190", 3, 190, 56, 4, "noise", 10),
    ("1x500 (fit floors to 0, or 1)", 1, 500, 56, 4, "noise", 11),
    ("8000x300", 8000, 300, 56, 4, "pattern", 12),
    ("300x8000", 300, 8000, 56, 4, "pattern", 13),
    ("1x1 one tile", 1, 1, 56, 1, "noise", 14),
    ("56x56 one tile", 56, 56, 56, 1, "smooth", 15),
    ("100x40 one tile", 100, 40, 56, 1, "smooth", 16),
    ("40x100 one tile", 40, 100, 56, 1, "noise", 17),
    ("7x3 one tile", 7, 3, 56, 1, "noise", 18),
    ("500x400 one tile", 500, 400, 56, 1, "pattern", 19),
    ("100x30, 6 tiles of 28", 100, 30, 28, 6, "smooth", 20),
    ("640x480, 16 tiles of 14", 640, 480, 14, 16, "pattern", 21),
    ("33x90, 9 tiles of 14", 33, 90, 14, 9, "noise", 22),
    ("640x480, the worked example (id 2, 2 tiles)", 640, 480, 560, 4, "pattern", 23),
    ("560x560 exactly (>= 1 picks 1x1)", 560, 560, 560, 4, "pattern", 24),
    ("1x1 at 560", 1, 1, 560, 4, "noise", 25),
    ("37x23 upscaled", 37, 23, 560, 4, "smooth", 26),
    ("600x20", 600, 20, 560, 4, "noise", 27),
    ("20x600", 20, 600, 560, 4, "smooth", 28),
    ("2400x100 downscaled", 2400, 100, 560, 4, "pattern", 29),
    ("4032x3024 photo size", 4032, 3024, 560, 4, "pattern", 30),
]

# (name, src w, src h, dst w, dst h, source kind, seed)
RS_CASES = [
    ("1x1 to 1x1 (copy)", 1, 1, 1, 1, "noise", 101),
    ("1x1 up to 9x4", 1, 1, 9, 4, "noise", 102),
    ("9x4 down to 1x1", 9, 4, 1, 1, "noise", 103),
    ("upscale 7x5 to 23x17", 7, 5, 23, 17, "noise", 104),
    ("upscale x8 12x9 to 96x72", 12, 9, 96, 72, "smooth", 105),
    ("downscale x85 600x40 to 7x3", 600, 40, 7, 3, "smooth", 106),
    ("downscale x40 both 200x160 to 5x4", 200, 160, 5, 4, "noise", 107),
    ("non-integer 97x61 to 45x29", 97, 61, 45, 29, "smooth", 108),
    ("non-integer up 45x29 to 97x61", 45, 29, 97, 61, "noise", 109),
    ("vertical only 50x40 to 50x17", 50, 40, 50, 17, "noise", 110),
    ("horizontal only 50x40 to 131x40", 50, 40, 131, 40, "smooth", 111),
    ("horizontal only down 131x40 to 50x40", 131, 40, 50, 40, "noise", 112),
    ("vertical first (Pillow 13) 40x300 to 30x20", 40, 300, 30, 20, "noise", 113),
    ("order boundary: dh loss == 2 dw loss, 60x50 to 50x30", 60, 50, 50, 30, "noise", 114),
    ("order boundary + 1, 60x51 to 50x30", 60, 51, 50, 30, "noise", 115),
    ("x up, y down 20x300 to 200x30", 20, 300, 200, 30, "smooth", 116),
    ("x down, y up 300x20 to 30x200", 300, 20, 30, 200, "smooth", 117),
    ("column 1x300 to 1x7", 1, 300, 1, 7, "noise", 118),
    ("row 300x1 to 640x1", 300, 1, 640, 1, "noise", 119),
    ("to a column 250x9 to 1x100", 250, 9, 1, 100, "noise", 120),
    ("smooth 131x87 to 60x37", 131, 87, 60, 37, "smooth", 121),
    ("binary edges 64x64 to 27x41", 64, 64, 27, 41, "binary", 122),
]


def source(kind, w, h, seed):
    if kind == "noise":
        return noise(w, h, seed)
    if kind == "smooth":
        return smooth(w, h, seed)
    if kind == "pattern":
        return pattern(w, h, seed)
    if kind == "binary":
        return (np.random.RandomState(seed).randint(0, 2, (h, w, 3)) * 255).astype(np.uint8)
    raise ValueError(kind)


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    w = gguf.GGUFWriter(OUT, "mmsched-image-fixture")
    w.add_string("fixture.pillow_version", PIL.__version__)
    w.add_string("fixture.transformers_version", transformers.__version__)
    w.add_string("fixture.numpy_version", np.__version__)
    w.add_string("fixture.processor", type(make_processor(56, 4)).__name__)
    w.add_string("fixture.pattern", "see tools/gen_image_fixtures.py")
    w.add_uint32("img.count", len(IMG_CASES))
    w.add_uint32("rs.count", len(RS_CASES))

    for k, (name, width, height, tile, mt, kind, seed) in enumerate(IMG_CASES):
        rgb = source(kind, width, height, seed)
        pv, aid, ntiles, mask, resized = run_processor(rgb, tile, mt)
        p = f"img.{k}."
        w.add_string(p + "name", name)
        for key, v in (("width", width), ("height", height), ("tile", tile), ("max_tiles", mt),
                       ("resized_width", resized.shape[1]), ("resized_height", resized.shape[0])):
            w.add_uint32(p + key, v)
        if kind == "pattern":
            w.add_uint32(p + "pattern_seed", seed)
        else:
            w.add_tensor(p + "rgb", i8(rgb), raw_dtype=gguf.GGMLQuantizationType.I8)
        w.add_int32(p + "aspect_ratio_id", aid)
        w.add_int32(p + "num_tiles", ntiles)
        w.add_array(p + "aspect_ratio_mask", mask)
        w.add_uint64(p + "resized_fnv1a64", fnv1a64(resized))
        # the values must match bit for bit, so their hash is enough (and keeps the file small)
        w.add_uint64(p + "pixel_values_fnv1a64", fnv1a64(np.ascontiguousarray(pv, dtype=np.float32).view(np.uint8)))
        if tile > 56 and resized.nbytes <= SMALL_RESIZED:
            w.add_tensor(p + "resized", i8(resized), raw_dtype=gguf.GGMLQuantizationType.I8)
        print(f"img {k:2d} {name}: id {aid}, {ntiles} tiles, resized {resized.shape[1]}x{resized.shape[0]}")

    for k, (name, sw, sh, dw, dh, kind, seed) in enumerate(RS_CASES):
        src = source(kind, sw, sh, seed)
        dst = np.asarray(Image.fromarray(src, "RGB").resize((dw, dh), Image.BILINEAR))
        p = f"rs.{k}."
        w.add_string(p + "name", name)
        for key, v in (("src_width", sw), ("src_height", sh), ("dst_width", dw), ("dst_height", dh)):
            w.add_uint32(p + key, v)
        w.add_tensor(p + "src", i8(src), raw_dtype=gguf.GGMLQuantizationType.I8)
        w.add_tensor(p + "dst", i8(dst), raw_dtype=gguf.GGMLQuantizationType.I8)

    # transparency: every (colour, alpha) pair composited over white as the processor's
    # convert_to_rgb does (PIL alpha_composite); the grid is rebuilt by the test from its rule
    a, c = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")          # row a, column c
    grid = np.stack([c, 255 - c, (c * 7 + a) & 255, a], -1).astype(np.uint8)
    over = Image.alpha_composite(Image.new("RGBA", (256, 256), (255, 255, 255)), Image.fromarray(grid, "RGBA"))
    w.add_uint64("alpha.grid_rgb_fnv1a64", fnv1a64(np.asarray(over.convert("RGB"))))
    print("alpha grid composited over white")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes (Pillow {PIL.__version__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    sys.exit(main())
