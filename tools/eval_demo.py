#!/usr/bin/env python3
"""Evaluate the bundled demo model through the C program, on pictures it has never seen, drawn by a
renderer unlike the training one.

    python tools/eval_demo.py --out DIR [--cli build/mllama] [--model models/mllama-demo.gguf] [--seed N]
    python tools/eval_demo.py --out DIR --limits                       # the model's limits alone
    python tools/eval_demo.py --slice tests/fixtures/demo/fresh        # the small set test_cli runs
    python tools/eval_demo.py --out DIR --json [--n-json N] [--n-json-multi M] [--batch build/batch]

The training pictures (tools/train_demo.py) are Pillow polygons drawn at 2-4x and box-filtered, with
Gaussian noise and some JPEG. These are signed-distance shapes covered with a one-pixel linear ramp at
the picture's own size, on a background with a faint gradient, with uniform and salt-and-pepper
noise, saved as PNG or as JPEG of quality 30..95 (with or without chroma subsampling); pictures are
1:4..4:1 and 16..3000 pixels a side. The scenes and the words come from tools/demo_world.py, so each
expected answer follows from the scene description, never from a model. Each case runs
`mllama -m MODEL --image ... PROMPT -q` (chats through -i), the way a user runs it.

Prints and writes (DIR/report.md, DIR/results.json) the accuracy of captions (exact match, and per
attribute: count, shapes, colours, places, background), of question answers per kind, of questions
about two or three pictures, of two-turn chats, per aspect ratio and per size, the captions per size
beside what an ideal observer names right (ideal_caption: what the pixels allow); and counts runaway
answers (more than 40 words, or a word four or more times in a row) over every case, pictures outside
the world (generated ones and any photos given with --photos) included. Needs numpy and Pillow only
(--json: jsonschema too).

--json asks N fresh scenes of one shape (and M of two or three) through `build/batch` for the caption
and for JSON under each of JSON_VARIANTS' schemas, whose enums are the world's words; every JSON
answer must parse and validate with Python's jsonschema (the failures are listed and make the exit
status 1). It writes DIR/json-report.md and DIR/json-results.json: per field (shape, colour,
position) how often the JSON is right beside the same field read from the caption. The model was
trained on captions only and never saw JSON.

The model's limits (--limits runs these alone; --n-long-chat, --n-large, --n-outside-kind add them
to any run), on pictures 64..1000 pixels a side: chats of --long-chat-turns (6) turns, accuracy per
turn and the broken answers (empty, runaway, a word no answer of the world has) and the others that
are no answer of the world; captions of shapes of radius 0.14..0.20 of the shorter side beside the
same scenes at the world's 0.08..0.12; and per kind of picture outside the world (value noise, text,
a screenshot, a landscape, a line drawing, transparent parts, one shape filling the picture) how
often the model says it cannot tell (demo_world.NOT_A_SCENE) or names shapes, with examples. Every
case runs the program with -t (--threads, default 1).
"""

import argparse
import io
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import demo_world as W  # noqa: E402

# ---------------------------------------------------------------------------------------------------
# the renderer: signed distances, evaluated at pixel centres inside each shape's box


def sd_polygon(px, py, pts):
    """Signed distance to a simple polygon (negative inside), vectorised over px, py."""
    d = np.full(px.shape, np.inf, np.float32)
    inside = np.zeros(px.shape, bool)
    n = len(pts)
    for i in range(n):
        ax, ay = pts[i]
        bx, by = pts[(i + 1) % n]
        ex, ey = bx - ax, by - ay
        wx, wy = px - ax, py - ay
        t = np.clip((wx * ex + wy * ey) / (ex * ex + ey * ey), 0, 1)
        dx, dy = wx - ex * t, wy - ey * t
        d = np.minimum(d, dx * dx + dy * dy)
        cond = ((py >= ay) != (py >= by)) & (px < ax + (py - ay) * ex / np.where(ey == 0, 1e-9, ey))
        inside ^= cond
    d = np.sqrt(d)
    return np.where(inside, -d, d)


def shape_outline(shape, rx, ry):
    """Unit outlines (before rotation), in the shape's own proportions: vertices or None (ellipses)."""
    if shape == "square":
        return [(-0.82, -0.82), (0.82, -0.82), (0.82, 0.82), (-0.82, 0.82)]
    if shape == "diamond":
        return [(0, -1.08), (0.82, 0), (0, 1.08), (-0.82, 0)]
    if shape == "triangle":
        return [(0.0, -0.92), (0.92, 0.7), (-0.92, 0.7)]
    if shape == "cross":
        w = 0.3
        return [(-w, -1), (w, -1), (w, -w), (1, -w), (1, w), (w, w), (w, 1), (-w, 1), (-w, w), (-1, w), (-1, -w), (-w, -w)]
    return None


def coverage(shape, px, py, cx, cy, rx, ry, rot):
    """Fraction of each pixel inside the shape: clamp(0.5 - signed distance)."""
    c, s = math.cos(rot), math.sin(rot)
    ux = (px - cx) * c + (py - cy) * s          # into the shape's frame
    uy = -(px - cx) * s + (py - cy) * c
    if shape in ("circle", "ring"):
        k = np.sqrt((ux / rx) ** 2 + (uy / ry) ** 2)
        sd = (k - 1.0) * min(rx, ry)
        if shape == "ring":
            sd = np.maximum(sd, (0.52 - k) * min(rx, ry))
    else:
        pts = [(x * rx, y * ry) for x, y in shape_outline(shape, rx, ry)]
        sd = sd_polygon(ux, uy, pts)
    return np.clip(0.5 - sd, 0.0, 1.0)


def draw(rng, scene, size, radius=W.RADIUS):
    """A scene as RGB8 (H, W, 3), and its layout: what paint() and ideal_caption() need."""
    layout = lay_out(rng, scene, size, radius)
    return finish(rng, layout), layout


def lay_out(rng, scene, size, radius=W.RADIUS):
    """Where, how big, what colour: the scene's shapes at radius (fractions of the shorter side)."""
    Wd, Hd = size
    bg = np.array(W.BACKGROUNDS[scene["bg"]], np.float32) * rng.uniform(0.93, 1.07) + rng.uniform(-6, 6, 3)
    layout = dict(size=size, bg=bg, gradient=rng.uniform(-5, 5), shapes=[])
    short = min(Wd, Hd)
    for sh in scene["shapes"]:
        fg = np.array(W.COLOURS[sh["colour"]], np.float32) * rng.uniform(0.9, 1.1) + rng.uniform(-10, 10, 3)
        r = rng.uniform(*radius) * short
        st = math.exp(rng.uniform(-math.log(W.STRETCH), math.log(W.STRETCH)))
        row, col = sh["pos"]
        layout["shapes"].append(dict(shape=sh["shape"], fg=fg, rx=r * math.sqrt(st), ry=r / math.sqrt(st),
                                     cx=(W.GRID[col] + rng.uniform(-W.JITTER, W.JITTER)) * Wd,
                                     cy=(W.GRID[row] + rng.uniform(-W.JITTER, W.JITTER)) * Hd,
                                     rot=math.radians(rng.uniform(-W.ROTATE, W.ROTATE))))
    return layout


def finish(rng, layout):
    """The painted layout with the renderer's noise: RGB8 (H, W, 3)."""
    Wd, Hd = layout["size"]
    img = paint(layout)
    amp = rng.uniform(0, 10)
    img += rng.uniform(-amp, amp, (Hd, Wd, 1)).astype(np.float32)
    out = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    salt = rng.random((Hd, Wd)) < 0.002
    out[salt] = rng.choice([0, 255], size=(int(salt.sum()), 1)).astype(np.uint8)
    return out


# How far a shape reaches from its centre, in its radius (the farthest vertex of shape_outline)
REACH = {"circle": 1.0, "ring": 1.0, "square": 1.16, "diamond": 1.08, "triangle": 1.16, "cross": 1.05}


def fit_inside(layout):
    """Moves shapes that cross the picture's edge inward (still within their third: a reach is under
    a third of the shorter side up to radius 0.25); False when two shapes then come closer than 2% of
    the shorter side: world scenes never touch, so such a layout is drawn anew."""
    Wd, Hd = layout["size"]
    reach = [REACH[s["shape"]] * max(s["rx"], s["ry"]) for s in layout["shapes"]]
    for s, e in zip(layout["shapes"], reach):
        s["cx"] = min(max(s["cx"], e + 1), Wd - e - 1)
        s["cy"] = min(max(s["cy"], e + 1), Hd - e - 1)
    gap = 0.02 * min(Wd, Hd)
    for i, a in enumerate(layout["shapes"]):
        for j in range(i):
            b = layout["shapes"][j]
            if math.hypot(a["cx"] - b["cx"], a["cy"] - b["cy"]) < reach[i] + reach[j] + gap:
                return False
    return True


def shape_box(s, size):
    """The pixels a shape may cover: (x0, x1, y0, y1)."""
    ext = 1.2 * max(s["rx"], s["ry"]) + 2
    return (max(0, int(s["cx"] - ext)), min(size[0], int(s["cx"] + ext) + 1),
            max(0, int(s["cy"] - ext)), min(size[1], int(s["cy"] + ext) + 1))


def paint(layout, swap=None, window=None):
    """The noiseless picture (float RGB), or its window (x0, x1, y0, y1) alone; swap=(i, shape) paints
    shape i as that shape instead."""
    Wd, Hd = layout["size"]
    wx0, wx1, wy0, wy1 = window or (0, Wd, 0, Hd)
    yy = np.linspace(-1, 1, Hd, dtype=np.float32)[wy0:wy1, None, None]
    img = np.broadcast_to(layout["bg"] + yy * layout["gradient"], (wy1 - wy0, wx1 - wx0, 3)).astype(np.float32).copy()
    for i, s in enumerate(layout["shapes"]):
        x0, x1, y0, y1 = shape_box(s, layout["size"])
        x0, x1, y0, y1 = max(x0, wx0), min(x1, wx1), max(y0, wy0), min(y1, wy1)
        if x0 >= x1 or y0 >= y1:
            continue
        py, px = np.mgrid[y0:y1, x0:x1].astype(np.float32) + 0.5
        kind = swap[1] if swap and swap[0] == i else s["shape"]
        cov = coverage(kind, px, py, s["cx"], s["cy"], s["rx"], s["ry"], s["rot"])[..., None]
        part = img[y0 - wy0:y1 - wy0, x0 - wx0:x1 - wx0]
        part[...] = part * (1 - cov) + s["fg"] * cov
    return img


def ideal_caption(path, layout):
    """How often an ideal observer names every shape of a picture right: it knows each shape's place,
    size, stretch, rotation and colour and the background, and picks, per shape, the one of the six
    shapes whose noiseless painting is nearest (least squares) to the file's decoded pixels around it
    (a tie counts as a draw among the tied). It knows far more than a model, which sees the pixels only,
    so its share estimates what the pixels allow at most."""
    pic = np.asarray(Image.open(path).convert("RGB"), np.float32)
    p_all = 1.0
    for i, s in enumerate(layout["shapes"]):
        box = shape_box(s, layout["size"])
        x0, x1, y0, y1 = box
        err = {k: float(((paint(layout, (i, k), box) - pic[y0:y1, x0:x1]) ** 2).sum()) for k in W.SHAPES}
        least = min(err.values())
        best = [k for k in W.SHAPES if err[k] == least]
        p_all *= (s["shape"] in best) / len(best)
    return p_all


# The kinds of picture outside the world draw_outside makes (extend both together)
OUTSIDE_KINDS = ["photo", "text", "screen", "scenery", "drawing", "transparent", "filled"]


def draw_outside(rng, size, kind):
    """A picture outside the world -> (RGB8 or RGBA8 pixels, a note: the variant, or for "filled" the
    caption the shape would have as a world scene). Kinds: value-noise 'photos', TrueType text lines
    (a page or a text screenshot), a window-like screenshot of bars, a photo-like landscape, a line
    drawing, a picture with transparent parts (RGBA), one shape of the world filling most of it."""
    Wd, Hd = size
    if kind == "photo":
        acc = noise_layers(rng, size, 4)
        acc = acc / acc.max() * 255
        return np.clip(acc + rng.normal(0, 3, acc.shape), 0, 255).astype(np.uint8), ""
    if kind == "scenery":
        return draw_scenery(rng, size), ""
    if kind == "drawing":
        return draw_sketch(rng, size), ""
    if kind == "transparent":
        return draw_transparent(rng, size)
    if kind == "filled":
        return draw_filled(rng, size)
    img = Image.new("RGB", (Wd, Hd), (250, 250, 248) if kind == "text" else (60, 63, 65))
    d = ImageDraw.Draw(img)
    if kind == "screen":
        d.rectangle([0, 0, Wd, Hd // 10], fill=(200, 200, 205))
        for i in range(6):
            y = Hd // 8 + i * Hd // 8
            d.rectangle([Wd // 20, y, Wd // 20 + int(rng.uniform(0.3, 0.9) * Wd), y + Hd // 20], fill=(90, 140, 200))
        return np.asarray(img, np.uint8), ""
    write_lines(rng, d, size, (20, 20, 20))
    return np.asarray(img, np.uint8), ""


LOREM = "Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt".split()


def write_lines(rng, d, size, ink):
    """Lines of seven Latin words down the whole picture, DejaVu Sans a twelfth of its height."""
    Wd, Hd = size
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", max(8, Hd // 12))
    except OSError:
        font = ImageFont.load_default()
    y = 2
    while y < Hd:
        d.text((4, y), " ".join(rng.choice(LOREM, 7)), fill=ink, font=font)
        y += max(10, Hd // 9)


def noise_layers(rng, size, octaves, channels=3):
    """Value noise: random grids of 4, 8, 16... cells a side resized bilinearly to the picture, each
    octave half the weight of the last; float (H, W, channels), 0..255 * (2 - 2^(1-octaves))."""
    Wd, Hd = size
    acc = np.zeros((Hd, Wd, channels), np.float32)
    for octave in range(octaves):
        g = rng.uniform(0, 1, (2 ** (octave + 2), 2 ** (octave + 2), channels)).astype(np.float32)
        grid = Image.fromarray((g * 255).astype(np.uint8).squeeze(), "RGB" if channels == 3 else "L")
        acc += np.asarray(grid.resize((Wd, Hd), Image.BILINEAR), np.float32).reshape(Hd, Wd, channels) / (2 ** octave)
    return acc


def unit_noise(rng, size, octaves):
    """noise_layers of one channel scaled to 0..1: (H, W, 1)."""
    return noise_layers(rng, size, octaves, 1) / (255 * (2 - 2 ** (1 - octaves)))


def draw_scenery(rng, size):
    """A photo-like landscape: a sky graded down to a wavy horizon with soft clouds, ground of some
    earthy colour with fine texture, blurred dark bushes along the horizon, camera noise."""
    Wd, Hd = size
    yy = np.arange(Hd, dtype=np.float32)[:, None, None]
    horizon = Hd * (rng.uniform(0.3, 0.65) + 0.08 * (unit_noise(rng, (Wd, 1), 3)[0] - 0.5))   # (W, 1)
    top = np.array([70, 120, 200], np.float32) + rng.uniform(-20, 20, 3)
    low = np.array([205, 215, 230], np.float32) + rng.uniform(-15, 15, 3)
    t = np.clip(yy / np.maximum(horizon[None], 1), 0, 1)
    sky = top * (1 - t) + low * t
    sky += np.clip(unit_noise(rng, size, 5) - 0.5, 0, 1) * 1.6 * (250 - sky)                 # clouds
    earth = [(70, 110, 45), (120, 100, 60), (95, 125, 60), (160, 140, 95)][int(rng.integers(4))]
    ground = (np.array(earth, np.float32) + rng.uniform(-15, 15, 3)) * (0.45 + unit_noise(rng, size, 6))
    img = Image.fromarray(np.clip(np.where(yy < horizon[None], sky, ground), 0, 255).astype(np.uint8), "RGB")
    bushes = Image.new("L", size, 0)
    d = ImageDraw.Draw(bushes)
    for _ in range(int(rng.integers(2, 8))):
        x = rng.uniform(0, Wd)
        y = horizon[min(Wd - 1, int(x)), 0]
        rx, ry = rng.uniform(0.03, 0.12) * Wd, rng.uniform(0.03, 0.1) * Hd
        d.ellipse([x - rx, y - 1.6 * ry, x + rx, y + 0.4 * ry], fill=int(rng.integers(150, 256)))
    bushes = bushes.filter(ImageFilter.GaussianBlur(max(1.0, min(Wd, Hd) / 60)))
    dark = Image.new("RGB", size, tuple(int(v) for v in rng.integers(15, 60, 3)))
    img = Image.composite(dark, img, bushes).filter(ImageFilter.GaussianBlur(0.6))
    a = np.asarray(img, np.float32) + rng.normal(0, rng.uniform(1, 5), (Hd, Wd, 3))
    return np.clip(np.rint(a), 0, 255).astype(np.uint8)


def draw_sketch(rng, size):
    """A line drawing in dark ink on paper: free curves, a house, outlined ellipses (thin rings),
    waves, hatched patches; strokes about a hundredth of the shorter side."""
    Wd, Hd = size
    paper = tuple(int(v) for v in rng.integers(235, 256, 3))
    img = Image.new("RGB", size, paper)
    d = ImageDraw.Draw(img)
    ink = tuple(int(v) for v in rng.integers(10, 70, 3))
    w = max(1, int(round(min(Wd, Hd) / rng.uniform(60, 160))))
    for _ in range(int(rng.integers(4, 10))):
        x, y = rng.uniform(0.1, 0.9) * Wd, rng.uniform(0.1, 0.9) * Hd
        sx, sy = rng.uniform(0.1, 0.35) * Wd, rng.uniform(0.1, 0.35) * Hd
        k = int(rng.integers(5))
        if k == 0:      # a free curve: a random walk
            steps = rng.normal(0, 0.25, (int(rng.integers(6, 16)), 2)).cumsum(0)
            d.line([(x + u * sx, y + v * sy) for u, v in steps], fill=ink, width=w, joint="curve")
        elif k == 1:    # a house: walls, roof, door
            d.rectangle([x - sx / 2, y - sy / 3, x + sx / 2, y + sy / 2], outline=ink, width=w)
            d.line([(x - sx / 2, y - sy / 3), (x, y - sy), (x + sx / 2, y - sy / 3)], fill=ink, width=w)
            d.rectangle([x - sx / 10, y + sy / 8, x + sx / 10, y + sy / 2], outline=ink, width=w)
        elif k == 2:    # an outlined ellipse
            d.ellipse([x - sx / 2, y - sy / 2, x + sx / 2, y + sy / 2], outline=ink, width=w)
        elif k == 3:    # a wave
            u = np.linspace(-1, 1, 40)
            d.line([(x + a * sx, y + 0.3 * sy * math.sin(a * rng.uniform(4, 12))) for a in u], fill=ink, width=w)
        else:           # hatching
            for j in range(int(rng.integers(4, 10))):
                o = j * sx / 8
                d.line([(x + o, y), (x + o + sx / 4, y - sy / 3)], fill=ink, width=w)
    return np.asarray(img, np.uint8)


TRANSPARENT_VARIANTS = ["empty", "hole", "blob", "text"]


def draw_transparent(rng, size):
    """RGBA pixels, one of TRANSPARENT_VARIANTS: all transparent over random colours (white once
    composited), a value-noise photo with a transparent hole, a soft colour blob on a transparent
    background, black text on a transparent background; -> (RGBA8, variant)."""
    Wd, Hd = size
    variant = TRANSPARENT_VARIANTS[int(rng.integers(len(TRANSPARENT_VARIANTS)))]
    rgba = np.zeros((Hd, Wd, 4), np.uint8)
    if variant == "empty":
        rgba[..., :3] = rng.integers(0, 256, (Hd, Wd, 3))
    elif variant == "hole":
        acc = noise_layers(rng, size, 4)
        rgba[..., :3] = np.clip(acc / acc.max() * 255, 0, 255).astype(np.uint8)
        rgba[..., 3] = 255
        x0, y0 = int(rng.uniform(0, 0.5) * Wd), int(rng.uniform(0, 0.5) * Hd)
        rgba[y0:y0 + int(rng.uniform(0.3, 0.5) * Hd), x0:x0 + int(rng.uniform(0.3, 0.5) * Wd)] = 0
    elif variant == "blob":
        acc = noise_layers(rng, size, 3)
        rgba[..., :3] = np.clip(acc / acc.max() * 255, 0, 255).astype(np.uint8)
        mask = Image.fromarray(((unit_noise(rng, size, 3)[..., 0] > 0.5) * 255).astype(np.uint8), "L")
        rgba[..., 3] = np.asarray(mask.filter(ImageFilter.GaussianBlur(max(1.0, min(Wd, Hd) / 40))), np.uint8)
    else:
        img = Image.new("RGBA", size, (0, 0, 0, 0))
        write_lines(rng, ImageDraw.Draw(img), size, (20, 20, 20, 255))
        rgba = np.asarray(img, np.uint8)
    return rgba, variant


def draw_filled(rng, size):
    """One shape of the world on a world background, centred, radius 0.36..0.46 of the shorter side
    (shrunk to stay inside); -> (RGB8, the caption it would have as a world scene)."""
    scene = W.random_scene(rng, 1)
    scene["shapes"][0]["pos"] = (1, 1)
    layout = lay_out(rng, scene, size, (0.36, 0.46))
    s = layout["shapes"][0]
    shrink = min(1.0, (min(size) / 2 - 2) / (REACH[s["shape"]] * max(s["rx"], s["ry"])))
    s["rx"], s["ry"] = s["rx"] * shrink, s["ry"] * shrink
    fit_inside(layout)
    return finish(rng, layout), W.caption_of(scene)


def eval_size(rng, smallest=16, longest=3000):
    """Aspect 1:4..4:1 log-uniform (one in six exactly 1:4 or 4:1), shorter side log-uniform from
    smallest, longer side at most longest."""
    u = rng.random()
    ar = 4.0 if u < 1 / 12 else 0.25 if u < 1 / 6 else math.exp(rng.uniform(-math.log(4), math.log(4)))
    long_over_short = max(ar, 1 / ar)
    short = math.exp(rng.uniform(math.log(smallest), math.log(longest / long_over_short)))
    s, l_ = int(round(short)), int(round(short * long_over_short))
    return (l_, s) if ar >= 1 else (s, l_)


def save(rng, pixels, path_base):
    """PNG (two in five, and every picture with alpha) or JPEG of quality 30..95; -> file name."""
    if pixels.shape[2] == 4:
        path = path_base + ".png"
        Image.fromarray(pixels, "RGBA").save(path, compress_level=1)
        return path
    img = Image.fromarray(pixels, "RGB")
    if rng.random() < 0.4:
        path = path_base + ".png"
        img.save(path, compress_level=1)
    else:
        path = path_base + ".jpg"
        img.save(path, quality=int(rng.integers(30, 96)), subsampling=int(rng.choice([0, 2])))
    return path


# ---------------------------------------------------------------------------------------------------
# cases

def aspect_bucket(w, h):
    r = w / h
    edges = [(1 / 4.01, "1:4..1:3"), (1 / 3, "1:3..1:2"), (1 / 2, "1:2..1:1.25"), (1 / 1.25, "1:1.25..1.25:1"),
             (1.25, "1.25:1..2:1"), (2, "2:1..3:1"), (3, "3:1..4:1")]
    name = edges[0][1]
    for lo, n in edges:
        if r >= lo:
            name = n
    return name


SIZE_ORDER = ["short side 16-31", "32-63", "64-127", "128-499", "500+ (long side to 3000)"]


def size_bucket(w, h):
    s = min(w, h)
    for hi, n in zip((32, 64, 128, 500), SIZE_ORDER):
        if s < hi:
            return n
    return SIZE_ORDER[-1]


def make_cases(out, seed, n_caption, n_question, n_which, n_chat, n_outside, photos, n_long_chat=0, long_turns=6,
               n_large=0, n_outside_kind=0):
    rng = np.random.default_rng([seed, 1])
    cases = []

    def picture(tag, sc=None):
        size = eval_size(rng)
        sc = sc or W.random_scene(rng)
        rgb, layout = draw(rng, sc, size)
        path = save(rng, rgb, os.path.join(out, tag))
        return dict(file=path, w=size[0], h=size[1], scene=sc, layout=layout)

    for i in range(n_caption):
        p = picture(f"caption-{i}")
        prompt = W.CAPTION_PROMPTS[i % len(W.CAPTION_PROMPTS)]
        cases.append(dict(kind="caption", files=[p["file"]], turns=[prompt], expected=W.caption_of(p["scene"]),
                          w=p["w"], h=p["h"], n_shapes=len(p["scene"]["shapes"]), scene=p["scene"],
                          layout=p["layout"]))
    kinds = ["colour", "shape", "count", "position", "background", "exists"]
    for i in range(n_question):
        p = picture(f"question-{i}")
        kind, q, a = W.random_question(rng, p["scene"], [kinds[i % len(kinds)]])
        cases.append(dict(kind="question", qkind=kind, files=[p["file"]], turns=[q], expected=a, w=p["w"], h=p["h"],
                          n_shapes=len(p["scene"]["shapes"])))
    for i in range(n_which):
        n = 2 + i % 2
        while True:
            kind = list(W.WHICH)[int(rng.integers(len(W.WHICH)))]
            vals = W.which_values(kind)
            value = vals[int(rng.integers(len(vals)))]
            scenes = [W.random_scene(rng) for _ in range(n)]
            ans = W.which_answer(scenes, kind, value)
            if ans is not None and (ans != "none of them" or rng.random() < 0.15):
                break
        ps = [picture(f"which-{i}-{j}", scenes[j]) for j in range(n)]
        cases.append(dict(kind="which", qkind=kind, files=[p["file"] for p in ps], turns=[W.which_question(kind, value)],
                          expected=ans, w=ps[-1]["w"], h=ps[-1]["h"], n_images=n))
    for i in range(n_chat):
        a = picture(f"chat-{i}-0")
        if i % 2 == 0:      # a picture in each turn; the second answer is checked
            b = picture(f"chat-{i}-1")
            _, q, ans = W.random_question(rng, b["scene"])
            cases.append(dict(kind="chat", files=[a["file"], b["file"]], turns=[W.CANONICAL_PROMPT, q],
                              attach=[1, 1], expected=ans, first=W.caption_of(a["scene"]), w=b["w"], h=b["h"]))
        else:               # a follow-up question about the first picture, no new one
            _, q, ans = W.random_question(rng, a["scene"])
            cases.append(dict(kind="chat", files=[a["file"]], turns=[W.CANONICAL_PROMPT, q], attach=[1, 0],
                              expected=ans, first=W.caption_of(a["scene"]), w=a["w"], h=a["h"]))
    for i in range(n_outside):
        kind = ["photo", "text", "screen"][i % 3]
        size = eval_size(rng)
        path = save(rng, draw_outside(rng, size, kind)[0], os.path.join(out, f"outside-{i}"))
        prompt = [W.CANONICAL_PROMPT, "What colour is the circle?", "How many shapes are there?"][i % 3]
        cases.append(dict(kind="outside", okind=kind, files=[path], turns=[prompt], expected=None, w=size[0], h=size[1]))
    for path in photos:
        with Image.open(path) as im:
            w, h = im.size
        cases.append(dict(kind="outside", okind="photo file", files=[path], turns=[W.CANONICAL_PROMPT], expected=None, w=w, h=h))
    cases += long_chats(out, np.random.default_rng([seed, 2]), n_long_chat, long_turns)
    cases += large_shapes(out, np.random.default_rng([seed, 3]), n_large)
    cases += outside_kinds(out, np.random.default_rng([seed, 4]), n_outside_kind)
    return cases


# The limits' sets (long chats, large shapes, outside kinds) draw pictures 64..1000 pixels a side,
# where the model captions about 98% of world pictures right: what fails there is the limit measured,
# not the picture's size.
LIMITS_SIZES = dict(smallest=64, longest=1000)


def long_chats(out, rng, n, turns):
    """Chats of `turns` turns: the first attaches a picture; each later one attaches a new picture
    (half of them) or asks a follow-up about the last picture shown. A turn with a picture asks for a
    caption or a question (half each, as training's single turns). Each turn's answer follows from the
    scene of the last picture shown (a text row sees the last picture before it)."""
    cases = []
    for i in range(n):
        files, asked, attach, expected, tkinds = [], [], [], [], []
        scene = None
        for t in range(turns):
            if t == 0 or rng.random() < 0.5:
                size = eval_size(rng, **LIMITS_SIZES)
                scene = W.random_scene(rng)
                files.append(save(rng, draw(rng, scene, size)[0], os.path.join(out, f"long-{i}-{t}")))
                attach.append(1)
                if rng.random() < 0.5:
                    q, a, tk = W.CAPTION_PROMPTS[int(rng.integers(len(W.CAPTION_PROMPTS)))], W.caption_of(scene), "caption"
                else:
                    _, q, a = W.random_question(rng, scene)
                    tk = "question"
            else:
                _, q, a = W.random_question(rng, scene)
                attach.append(0)
                tk = "follow-up"
            asked.append(q)
            expected.append(a)
            tkinds.append(tk)
        cases.append(dict(kind="long chat", files=files, turns=asked, attach=attach, expected=expected, turn_kinds=tkinds,
                          w=size[0], h=size[1]))
    return cases


LARGE_RADIUS = (0.14, 0.20)


def large_shapes(out, rng, n):
    """n pairs of the same scene at the same picture size: shapes of radius LARGE_RADIUS of the shorter
    side (kept inside the picture and apart: fit_inside; a scene that does not fit is drawn anew), and
    of the world's W.RADIUS. One to three shapes, a third each; captions with the canonical prompt."""
    cases = []
    for i in range(n):
        n_shapes = 1 + i % 3
        while True:
            size = eval_size(rng, **LIMITS_SIZES)
            scene = W.random_scene(rng, n_shapes)
            layout = lay_out(rng, scene, size, LARGE_RADIUS)
            if fit_inside(layout):
                break
        biggest = max(math.sqrt(s["rx"] * s["ry"]) for s in layout["shapes"]) / min(size)     # the radius before stretching
        for tag, pixels in (("large", finish(rng, layout)), ("in-world", draw(rng, scene, size)[0])):
            path = save(rng, pixels, os.path.join(out, f"{tag}-{i}"))
            cases.append(dict(kind=tag, files=[path], turns=[W.CANONICAL_PROMPT], expected=W.caption_of(scene), w=size[0],
                              h=size[1], n_shapes=n_shapes, scene=scene, radius=round(biggest, 3), pair=i))
    return cases


def outside_kinds(out, rng, n_per_kind):
    """n_per_kind pictures of each of OUTSIDE_KINDS: two in three asked for a caption (the caption
    prompts in turn), one in three "How many shapes are there?" or "What colour is the circle?"."""
    cases = []
    questions = ["How many shapes are there?", "What colour is the circle?"]
    for kind in OUTSIDE_KINDS:
        for i in range(n_per_kind):
            size = eval_size(rng, **LIMITS_SIZES)
            if kind == "filled":    # most of the picture: at most 4:3
                side = min(size)
                size = (side, int(side * rng.uniform(1, 4 / 3)))[::1 if rng.random() < 0.5 else -1]
            pixels, note = draw_outside(rng, size, kind)
            path = save(rng, pixels, os.path.join(out, f"kind-{kind}-{i}"))
            prompt = questions[(i // 3) % 2] if i % 3 == 2 else W.CAPTION_PROMPTS[(i - i // 3) % len(W.CAPTION_PROMPTS)]
            cases.append(dict(kind="outside", okind=kind, note=note, by_kind=True, files=[path], turns=[prompt],
                              expected=None, w=size[0], h=size[1]))
    return cases


# ---------------------------------------------------------------------------------------------------
# running and scoring

def run_case(cli, model, threads, c, timeout=120):
    if "attach" in c:
        lines = []
        k = 0
        for t, n in zip(c["turns"], c["attach"]):
            for _ in range(n):
                lines.append(f"/image {c['files'][k]}")
                k += 1
            lines.append(t)
        p = subprocess.run([cli, "-m", model, "-i", "-q", "-t", str(threads), "--max-images", str(max(2, len(c["files"])))],
                           input="\n".join(lines) + "\n/quit\n", capture_output=True, text=True, timeout=timeout)
        answers = p.stdout.split("\n")[:-1]
    else:
        args = [cli, "-m", model, "-q", "-t", str(threads)]
        for f in c["files"]:
            args += ["--image", f]
        p = subprocess.run(args + [c["turns"][0]], capture_output=True, text=True, timeout=timeout)
        answers = p.stdout.split("\n")[:-1]
    return p.returncode, answers, p.stderr


def runaway(text):
    words = text.split()
    if len(words) > 40:
        return True
    run = 1
    for a, b in zip(words, words[1:]):
        run = run + 1 if a == b else 1
        if run >= 4:
            return True
    return False


CAPTION_RE = None


def parse_caption(text):
    """A caption in the world's grammar -> (shapes [(colour, shape, position)], background), or None."""
    global CAPTION_RE
    if CAPTION_RE is None:
        col = "|".join(W.COLOURS)
        shp = "|".join(W.SHAPES)
        pos = "|".join(re.escape(p) for p in W.POSITIONS.values())
        one = rf"an? ({col}) ({shp}) ({pos})"
        CAPTION_RE = (re.compile(one), re.compile(rf" on an? ({'|'.join(W.BACKGROUNDS)}) background$"))
    m_bg = CAPTION_RE[1].search(text)
    if not m_bg:
        return None
    body = text[:m_bg.start()]
    parts = re.split(r", | and ", body)
    shapes = []
    for part in parts:
        m = CAPTION_RE[0].fullmatch(part)
        if not m:
            return None
        shapes.append(m.groups())
    return shapes, m_bg.group(1)


def caption_attributes(c, text):
    want = [(s["colour"], s["shape"], W.POSITIONS[s["pos"]]) for s in W.sort_shapes(c["scene"]["shapes"])]
    got = parse_caption(text)
    if got is None:
        return dict(count=False, shapes=False, colours=False, places=False, background=False, grammar=False)
    shapes, bg = got
    same_n = len(shapes) == len(want)
    return dict(grammar=True, count=same_n,
                shapes=same_n and sorted(s[1] for s in shapes) == sorted(s[1] for s in want),
                colours=same_n and sorted(s[0] for s in shapes) == sorted(s[0] for s in want),
                places=same_n and sorted(s[2] for s in shapes) == sorted(s[2] for s in want),
                background=bg == c["scene"]["bg"])


WORD_RE = re.compile(r"\w+|[^\w\s]")
ANSWERS = ({W.NOT_A_SCENE, W.NO_PICTURE, "none of them", "yes", "no"} | set(W.NUMBERS) | set(W.POSITIONS.values())
           | set(W.COLOURS) | set(W.BACKGROUNDS) | {f"a {s}" for s in W.SHAPES} | {f"there is no {s}" for s in W.SHAPES}
           | {f"there is no {c} shape" for c in W.COLOURS} | {f"the {o} one" for o in W.ORDINALS})
ANSWER_WORDS = {w for t in ANSWERS | {"an", "and", "on", "background", ","} | set(W.SHAPES) for w in WORD_RE.findall(t)}
BROKEN = ("empty", "runaway", "foreign words")


def answer_form(text):
    """An answer in the world's terms: "empty", "runaway", "foreign words" (a word or mark no answer
    of the world has: BROKEN, these three), "not an answer" (the world's words, but neither one of its
    answers nor a caption in its grammar), or "answer"."""
    if not text.strip():
        return "empty"
    if runaway(text):
        return "runaway"
    if any(w not in ANSWER_WORDS for w in WORD_RE.findall(text)):
        return "foreign words"
    if text not in ANSWERS and parse_caption(text) is None:
        return "not an answer"
    return "answer"


# Answers that claim a shape is there, to "How many shapes are there?" or "What colour is the circle?"
CLAIMS = set(W.NUMBERS[1:]) | set(W.COLOURS) | set(W.BACKGROUNDS)
OUTSIDE_REPLIES = ["cannot tell", "names shapes", "says none", "garbled"]


def outside_reply(answers):
    """What a one-turn answer about a picture outside the world does (OUTSIDE_REPLIES): "cannot tell"
    (the world's W.NOT_A_SCENE), "names shapes" (a caption, a count from one, a colour for the
    circle), "says none" (another answer of the world: "zero", "there is no circle"), "garbled"
    (BROKEN, no answer of the world, or not one line)."""
    if len(answers) != 1 or answer_form(answers[0]) != "answer":
        return "garbled"
    if answers[0] == W.NOT_A_SCENE:
        return "cannot tell"
    if answers[0] in CLAIMS or parse_caption(answers[0]) is not None:
        return "names shapes"
    return "says none"


def filled_answer(caption, prompt):
    """The answer a world scene of one shape (its caption given) gets to one of outside_kinds' prompts."""
    colour, shape, _ = parse_caption(caption)[0][0]
    if prompt == "How many shapes are there?":
        return "one"
    if prompt == "What colour is the circle?":
        return colour if shape == "circle" else "there is no circle"
    return caption


def table(title, rows, header=("", "right", "cases", "%")):
    out = [f"\n### {title}\n", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, ok, n in rows:
        out.append(f"| {name} | {ok} | {n} | {100.0 * ok / max(1, n):.1f} |")
    return "\n".join(out)


def tally(cases, key, score=lambda c: int(c["ok"])):
    """(group, sum of score, cases) per group of key, groups sorted by name."""
    groups = {}
    for c in cases:
        k = key(c)
        g = groups.setdefault(k, [0, 0])
        g[0] += score(c)
        g[1] += 1
    return [(k, v[0], v[1]) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))]


def in_order(rows, order):
    """tally's rows in the order of the bucket names given."""
    by_name = {r[0]: r for r in rows}
    return [by_name[k] for k in order if k in by_name]


ASPECT_ORDER = ["1:4..1:3", "1:3..1:2", "1:2..1:1.25", "1:1.25..1.25:1", "1.25:1..2:1", "2:1..3:1", "3:1..4:1"]


def ideal_table(caps):
    """Captions right per size beside the share an ideal observer names every shape of (ideal_caption)."""
    out = ["\n### Captions per size, beside an ideal observer's shape names\n",
           "| | model right | ideal observer | cases | model % | ideal % |", "|---|---|---|---|---|---|"]
    size = lambda c: size_bucket(c["w"], c["h"])
    ideal = {k: v for k, v, _ in tally(caps, size, lambda c: c["ideal"])}
    ideal["all"] = sum(c["ideal"] for c in caps)
    for name, ok, n in in_order(tally(caps, size), SIZE_ORDER) + [("all", sum(int(c["ok"]) for c in caps), len(caps))]:
        out.append(f"| {name} | {ok} | {ideal[name]:.1f} | {n} | {100.0 * ok / n:.1f} | {100.0 * ideal[name] / n:.1f} |")
    out.append("\n(The ideal observer knows each shape's place, size, rotation and colour and the background, and "
               "picks the one of the six shapes nearest to the file's pixels: what the pixels allow at most.)")
    return "\n".join(out)


def pct(ok, n):
    return f"{ok}/{n} ({100.0 * ok / n:.1f}%)" if n else "-"


def long_chat_report(chats):
    """Per turn: right answers, by what the turn asks, and the broken ones; then examples."""
    n_turns = len(chats[0]["turns"])
    kinds = ["caption", "question", "follow-up"]
    out = [f"\n### Chats of {n_turns} turns, per turn ({len(chats)} chats)\n",
           "| turn | right | caption (new picture) | question (new picture) | follow-up (no picture) | broken | "
           "no answer of the world (broken included) |", "|---|---|---|---|---|---|---|"]
    for t in range(n_turns):
        ok = sum(c["turn_ok"][t] for c in chats)
        by = [pct(sum(c["turn_ok"][t] for c in chats if c["turn_kinds"][t] == k),
                  sum(c["turn_kinds"][t] == k for c in chats)) for k in kinds]
        broken = sum(c["turn_form"][t] in BROKEN for c in chats)
        odd = sum(c["turn_form"][t] != "answer" for c in chats)
        out.append(f"| {t + 1} | {pct(ok, len(chats))} | {' | '.join(by)} | {broken} | {odd} |")
    forms = [f for c in chats for f in c["turn_form"]]
    out.append(f"\nAll {n_turns} turns right: {pct(sum(c['ok'] for c in chats), len(chats))}. Broken answers: "
               + ", ".join(f"{k} {forms.count(k)}" for k in BROKEN) + f" of {len(forms)}; other answers outside the "
               f"world's sentences: {forms.count('not an answer')}; chats whose output was not one line a turn or "
               f"that exited non-zero: {forms.count('misaligned') // n_turns}.")
    odd = [(c, t) for c in chats for t in range(n_turns) if c["turn_form"][t] not in ("answer", "misaligned")]
    if odd:
        out.append("\nSome of them (turn, what it asked, what it said, what was right):\n")
        for c, t in odd[:10]:
            out.append(f"- turn {t + 1} ({c['turn_kinds'][t]}) \"{c['turns'][t]}\": said \"{c['answers'][t]}\", "
                       f"want \"{c['expected'][t]}\"")
    return "\n".join(out)


def large_report(cases):
    """The same scenes and picture sizes with the world's shapes and with large ones, side by side."""
    sets = {k: [c for c in cases if c["kind"] == k] for k in ("in-world", "large")}
    head = (f"\n### Large shapes (radius {LARGE_RADIUS[0]}-{LARGE_RADIUS[1]} of the shorter side) beside the world's "
            f"({W.RADIUS[0]}-{W.RADIUS[1]}): the same {len(sets['large'])} scenes at the same picture sizes, "
            "\"Describe this image.\"\n")
    out = [head, "| caption | in-world sizes | large shapes |", "|---|---|---|"]
    rows = [("right word for word", lambda c: c["ok"])] + [
        (f"{a} right" if a != "grammar" else "in the world's grammar", lambda c, a=a: c["attrs"][a])
        for a in ("count", "shapes", "colours", "places", "background", "grammar")]
    for name, f in rows:
        out.append(f"| {name} | " + " | ".join(pct(sum(bool(f(c)) for c in cs), len(cs)) for cs in sets.values()) + " |")
    for sign, word in ((1, "more"), (-1, "fewer")):
        out.append(f"| names {word} shapes than drawn | " + " | ".join(
            pct(sum(c["extra_shapes"] * sign > 0 for c in cs), len(cs)) for cs in sets.values()) + " |")
    out += ["\n| shapes drawn | in-world: right / count right | large: right / count right |", "|---|---|---|"]
    for n in sorted({c["n_shapes"] for c in sets["large"]}):
        cols = []
        for cs in sets.values():
            g = [c for c in cs if c["n_shapes"] == n]
            cols.append(f"{pct(sum(c['ok'] for c in g), len(g))} / {pct(sum(c['attrs']['count'] for c in g), len(g))}")
        out.append(f"| {n} | {' | '.join(cols)} |")
    out += ["\n| largest radius (large shapes) | right | count right |", "|---|---|---|"]
    edges = np.linspace(LARGE_RADIUS[0], LARGE_RADIUS[1], 4)
    for lo, hi in zip(edges, edges[1:]):
        g = [c for c in sets["large"] if lo <= c["radius"] < hi or (hi == edges[-1] and c["radius"] == hi)]
        out.append(f"| {lo:.2f}-{hi:.2f} | {pct(sum(c['ok'] for c in g), len(g))} | "
                   f"{pct(sum(c['attrs']['count'] for c in g), len(g))} |")
    wrong = [c for c in sets["large"] if not c["ok"]]
    if wrong:
        out.append("\nSome wrong captions of large shapes:\n")
        for c in wrong[:6]:
            out.append(f"- {c['w']}x{c['h']}: said \"{c['answers'][-1] if c['answers'] else ''}\", want \"{c['expected']}\"")
    return "\n".join(out)


def outside_kind_report(cases):
    """Per kind of picture: how often the model says it cannot tell, names shapes, or breaks; examples."""
    replies = OUTSIDE_REPLIES
    out = [f"\n### Pictures outside the world, by kind ({len(cases)} pictures; \"cannot tell\" is \"{W.NOT_A_SCENE}\")\n",
           "| kind | cases | " + " | ".join(replies) + " | cannot tell, caption prompts | cannot tell, questions |",
           "|---|---|" + "---|" * (len(replies) + 2)]
    for kind in OUTSIDE_KINDS:
        g = [c for c in cases if c["okind"] == kind]
        if not g:
            continue
        cap = [c for c in g if c["turns"][0] in W.CAPTION_PROMPTS]
        qs = [c for c in g if c["turns"][0] not in W.CAPTION_PROMPTS]
        out.append(f"| {kind} | {len(g)} | " + " | ".join(pct(sum(c["reply"] == r for c in g), len(g)) for r in replies)
                   + f" | {pct(sum(c['reply'] == 'cannot tell' for c in cap), len(cap))} | "
                   f"{pct(sum(c['reply'] == 'cannot tell' for c in qs), len(qs))} |")
    tr = [c for c in cases if c["okind"] == "transparent"]
    if tr:
        out.append("\nTransparent pictures by variant (cannot tell): " + ", ".join(
            f"{v} {pct(sum(c['reply'] == 'cannot tell' for c in tr if c['note'] == v), sum(c['note'] == v for c in tr))}"
            for v in TRANSPARENT_VARIANTS) + ".")
    fi = [c for c in cases if c["okind"] == "filled"]
    if fi:
        right = lambda g: pct(sum(c["answers"] == [filled_answer(c["note"], c["turns"][0])] for c in g), len(g))
        out.append(f"\nOne shape filling most of the picture: the answer a world scene of that one shape in the center "
                   f"would get {right(fi)} (caption prompts {right([c for c in fi if c['turns'][0] in W.CAPTION_PROMPTS])}).")
    out.append("\nExamples (the first answers of each kind that are not \"cannot tell\", verbatim):\n")
    for kind in OUTSIDE_KINDS:
        g = [c for c in cases if c["okind"] == kind and c["reply"] != "cannot tell"]
        if not g and any(c["okind"] == kind for c in cases):
            out.append(f"- {kind}: every answer \"{W.NOT_A_SCENE}\"")
        for c in g[:3]:
            note = f" ({c['note']})" if c["note"] and kind == "transparent" else ""
            out.append(f"- {kind}{note} {c['w']}x{c['h']} \"{c['turns'][0]}\" → \"{' / '.join(c['answers'])}\"")
    return "\n".join(out)


def report(cases, elapsed):
    lines = [f"# Demo model evaluation ({len(cases)} cases through the C program, {elapsed:.0f} s)"]
    summary = []
    for kind in ("caption", "question", "which", "chat", "long chat", "in-world", "large"):
        cs = [c for c in cases if c["kind"] == kind]
        if cs:
            ok = sum(c["ok"] for c in cs)
            summary.append((kind, ok, len(cs)))
    ra = sum(c["runaway"] for c in cases)
    fails = sum(c["status"] != 0 for c in cases)
    lines.append(table("Accuracy by task", summary))
    outs = [c for c in cases if c["kind"] == "outside"]
    lines.append(f"\nRunaway answers (> 40 words, or a word 4+ times in a row): {ra} of {len(cases)} "
                 f"(pictures outside the world: {sum(c['runaway'] for c in outs)} of {len(outs)}); "
                 f"non-zero exits: {fails}.")
    caps = [c for c in cases if c["kind"] == "caption"]
    if caps:
        attrs = ["grammar", "count", "shapes", "colours", "places", "background"]
        lines.append(table("Captions per attribute", [(a, sum(c["attrs"][a] for c in caps), len(caps)) for a in attrs]))
        lines.append(table("Captions per aspect ratio (width:height)",
                           in_order(tally(caps, lambda c: aspect_bucket(c["w"], c["h"])), ASPECT_ORDER)))
        lines.append(ideal_table(caps))
        lines.append(table("Captions per number of shapes", tally(caps, lambda c: c["n_shapes"])))
        lines.append(table("Captions per file type", tally(caps, lambda c: os.path.splitext(c["files"][0])[1])))
    qs = [c for c in cases if c["kind"] == "question"]
    if qs:
        lines.append(table("Questions per kind", tally(qs, lambda c: c["qkind"])))
        lines.append(table("Questions per aspect ratio", in_order(tally(qs, lambda c: aspect_bucket(c["w"], c["h"])), ASPECT_ORDER)))
        lines.append(table("Questions per size", in_order(tally(qs, lambda c: size_bucket(c["w"], c["h"])), SIZE_ORDER)))
    wh = [c for c in cases if c["kind"] == "which"]
    if wh:
        lines.append(table("Which-picture questions", tally(wh, lambda c: f"{c['n_images']} pictures, {c['qkind']}")))
    longs = [c for c in cases if c["kind"] == "long chat"]
    if longs:
        lines.append(long_chat_report(longs))
    if any(c["kind"] == "large" for c in cases):
        lines.append(large_report(cases))
    by_kind = [c for c in outs if c.get("by_kind")]
    if by_kind:
        lines.append(outside_kind_report(by_kind))
    outs = [c for c in outs if not c.get("by_kind")]
    if outs:
        lines.append("\n### Pictures outside the world (answers)\n")
        for c in outs:
            lines.append(f"- {c['okind']} {c['w']}x{c['h']} \"{c['turns'][0]}\" → \"{' / '.join(c['answers'])}\"")
    wrong = [c for c in cases if c["kind"] in ("caption", "question", "which", "chat") and not c["ok"]]
    if wrong:
        lines.append("\n### Wrong answers\n")
        for c in wrong[:80]:
            lines.append(f"- {c['kind']} {c['w']}x{c['h']} {[os.path.basename(f) for f in c['files']]} "
                         f"\"{c['turns'][-1]}\": said \"{c['answers'][-1] if c['answers'] else ''}\", want \"{c['expected']}\"")
    return "\n".join(lines) + "\n"


def evaluate(a):
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    cases = make_cases(a.out, a.seed, a.n_caption, a.n_question, a.n_which, a.n_chat, a.n_outside, a.photos,
                       a.n_long_chat, a.long_chat_turns, a.n_large, a.n_outside_kind)
    print(f"drew {len(cases)} cases in {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    for k, c in enumerate(cases):
        c["status"], c["answers"], err = run_case(a.cli, a.model, a.threads, c)
        last = c["answers"][-1] if c["answers"] else ""
        c["runaway"] = any(runaway(x) for x in c["answers"]) or (c["status"] == 0 and not c["answers"])
        if c["kind"] == "long chat":
            aligned = c["status"] == 0 and len(c["answers"]) == len(c["turns"])
            c["turn_ok"] = [aligned and x == e for x, e in zip(c["answers"], c["expected"])] if aligned else [False] * len(c["turns"])
            c["turn_form"] = [answer_form(x) for x in c["answers"]] if aligned else ["misaligned"] * len(c["turns"])
            c["ok"] = all(c["turn_ok"])
        elif c["kind"] == "chat":
            c["ok"] = c["status"] == 0 and len(c["answers"]) == 2 and last == c["expected"]
        elif c["kind"] != "outside":
            c["ok"] = c["status"] == 0 and len(c["answers"]) == 1 and last == c["expected"]
        else:
            c["ok"] = c["status"] == 0 and not c["runaway"]
            c["reply"] = outside_reply(c["answers"]) if c["status"] == 0 else "garbled"
        if c["kind"] in ("caption", "large", "in-world"):
            c["attrs"] = caption_attributes(c, last)
            got = parse_caption(last)
            c["extra_shapes"] = len(got[0]) - c["n_shapes"] if got else 0
        if c["kind"] == "caption":
            c["ideal"] = ideal_caption(c["files"][0], c["layout"])
        if c["status"] != 0:
            print(f"case {k}: exit {c['status']}: {err.strip()[-300:]}", flush=True)
        if (k + 1) % 100 == 0:
            print(f"{k + 1}/{len(cases)} run ({time.time() - t0:.0f} s)", flush=True)
    text = report(cases, time.time() - t0)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)
    for c in cases:
        c.pop("scene", None)
        c.pop("layout", None)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(text)


# ---------------------------------------------------------------------------------------------------
# structured output (--json): the same pictures answered as a caption and as JSON under a schema whose
# enums are the world's words; the model was trained on captions only and has never seen JSON

# The JSON answer's fields and their values: the world's own words (a place as the caption says it)
JSON_VALUES = {"shape": list(W.SHAPES), "colour": list(W.COLOURS), "position": list(W.POSITIONS.values())}
FIELDS_PROMPT = "Give the shape, its colour and its position."


def demo_schema(order):
    """A JSON Schema (2020-12) for one shape: every field required, its values an enum of the world's
    words; the engine writes the properties in this order."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {k: {"enum": JSON_VALUES[k]} for k in order}, "required": list(order),
            "additionalProperties": False}


def caption_pattern():
    """The world's caption grammar (one to three shapes) as a JSON Schema pattern."""
    one = "an? (%s) (%s) (%s)" % ("|".join(W.COLOURS), "|".join(W.SHAPES), "|".join(W.POSITIONS.values()))
    return "^%s((, %s)? and %s)? on an? (%s) background$" % (one, one, one, "|".join(W.BACKGROUNDS))


# The JSON variants asked of every picture: name -> (file name, schema, prompt). The objects are the
# issue's order and the caption's order (colour before shape, as "a red circle" says), each with the
# caption's prompt and with one that names the fields; "caption string" is the caption itself as one
# JSON string in the world's grammar: what the constraint alone costs a model that writes captions.
SHAPE_FIRST = ("schema-shape-colour-position.json", demo_schema(["shape", "colour", "position"]))
COLOUR_FIRST = ("schema-colour-shape-position.json", demo_schema(["colour", "shape", "position"]))
CAPTION_STRING = ("schema-caption-string.json", {"type": "string", "pattern": caption_pattern()})
JSON_VARIANTS = {
    "shape, colour, position": (*SHAPE_FIRST, W.CANONICAL_PROMPT),
    "shape, colour, position; fields named": (*SHAPE_FIRST, FIELDS_PROMPT),
    "colour, shape, position": (*COLOUR_FIRST, W.CANONICAL_PROMPT),
    "colour, shape, position; fields named": (*COLOUR_FIRST, FIELDS_PROMPT),
    "caption string": (*CAPTION_STRING, W.CANONICAL_PROMPT),
}


def run_batch(a, files, prompt, schema_path=None):
    """build/batch over the files with one prompt -> {file: answer}; a picture it did not answer is absent."""
    args = [a.batch, "-m", a.model, "-K", "8", "--threads", str(a.threads), "-p", prompt]
    if schema_path:
        args += ["--json-schema", schema_path]
    p = subprocess.run(args + files, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        print(f"batch exited {p.returncode}: {p.stderr.strip()[-500:]}", flush=True)
    out, ours = {}, set(files)
    for line in p.stdout.split("\n"):     # "PATH: ANSWER", in the order they finish; our paths hold no ": "
        path, _, answer = line.partition(": ")
        if path in ours:
            out[path] = answer
    return out


def json_scene_cases(out, seed, n_one, n_multi):
    """n_one fresh scenes of one shape and n_multi of two or three, at eval_size's sizes."""
    rng = np.random.default_rng([seed, 5])
    cases = []
    for i in range(n_one + n_multi):
        size = eval_size(rng)
        scene = W.random_scene(rng, 1 if i < n_one else 2 + i % 2)
        path = save(rng, draw(rng, scene, size)[0], os.path.join(out, f"json-{i}"))
        want = [dict(shape=s["shape"], colour=s["colour"], position=W.POSITIONS[s["pos"]]) for s in W.sort_shapes(scene["shapes"])]
        cases.append(dict(files=[path], w=size[0], h=size[1], scene=scene, n_shapes=len(want), want=want))
    return cases


def json_scores(answer, want):
    """Per field, for a parsed JSON answer: right for the first shape in reading order ("first") and for
    some shape of the picture ("any"); "one shape": all three fields those of one shape of the picture."""
    s = {f"{k} first": answer.get(k) == want[0][k] for k in JSON_VALUES}
    s.update({f"{k} any": any(answer.get(k) == w[k] for w in want) for k in JSON_VALUES})
    s["all first"] = all(s[f"{k} first"] for k in JSON_VALUES)
    s["one shape"] = any(all(answer.get(k) == w[k] for k in JSON_VALUES) for w in want)
    return s


def caption_scores(c, text):
    """The same fields read from the plain caption. One shape: the existing scoring (caption_attributes:
    the caption must name one shape, and that shape's word right). Several: the caption's first phrase
    against the first shape in reading order."""
    want = c["want"]
    if len(want) == 1:
        attrs = caption_attributes(c, text)
        s = {"shape first": attrs["shapes"], "colour first": attrs["colours"], "position first": attrs["places"]}
    else:
        got = parse_caption(text)
        first = dict(zip(("colour", "shape", "position"), got[0][0])) if got else {}
        s = {f"{k} first": first.get(k) == want[0][k] for k in JSON_VALUES}
    s["all first"] = all(s[f"{k} first"] for k in JSON_VALUES)
    return s


def json_evaluate(a):
    """--json: the captions and every JSON_VARIANTS answer over the same fresh pictures."""
    import jsonschema
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    cases = json_scene_cases(a.out, a.seed, a.n_json, a.n_json_multi)
    files = [c["files"][0] for c in cases]
    print(f"drew {len(cases)} pictures in {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    captions = run_batch(a, files, W.CANONICAL_PROMPT)
    answers = {}
    for name, (file, schema, prompt) in JSON_VARIANTS.items():
        path = os.path.join(a.out, file)
        with open(path, "w") as f:
            json.dump(schema, f, indent=1)
        answers[name] = run_batch(a, files, prompt, path)
    elapsed = time.time() - t0
    failures = []
    for c in cases:
        f = c["files"][0]
        c["caption"] = captions.get(f)
        c["caption_scores"] = caption_scores(c, c["caption"] or "")
        c["json"] = {}
        for name, (_, schema, _) in JSON_VARIANTS.items():
            text = answers[name].get(f)
            try:
                doc = json.loads(text)
                jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
            except (TypeError, ValueError, jsonschema.ValidationError) as e:
                failures.append(f"{name}: {f}: {text!r}: {str(e).splitlines()[0]}")
                c["json"][name] = dict(text=text, scores=None)
                continue
            scores = caption_scores(c, doc) if isinstance(doc, str) else json_scores(doc, c["want"])
            c["json"][name] = dict(text=text, scores=scores)
    text = json_report(a, cases, failures, elapsed)
    with open(os.path.join(a.out, "json-report.md"), "w") as f:
        f.write(text)
    for c in cases:
        c.pop("scene", None)
    with open(os.path.join(a.out, "json-results.json"), "w") as f:
        json.dump(dict(seed=a.seed, variants={k: dict(schema=v[0], prompt=v[2]) for k, v in JSON_VARIANTS.items()},
                       cases=cases, failures=failures), f, indent=1)
    print(text)
    return 1 if failures else 0


def json_report(a, cases, failures, elapsed):
    names = list(JSON_VARIANTS)
    given = sum(c["json"][k]["text"] is not None for c in cases for k in names)
    lines = [f"# The demo model's JSON answers ({len(cases)} pictures, seed {a.seed}; the caption and {len(names)} JSON "
             f"variants through build/batch, {elapsed:.0f} s)",
             f"\nJSON answers: {given} of {len(cases) * len(names)} given; {len(failures)} did not parse or validate "
             "(json.loads, then jsonschema's Draft202012Validator against the schema asked for)."]
    lines += [f"- {x}" for x in failures[:20]]
    fields = list(JSON_VALUES) + ["all"]
    chance = [1 / len(JSON_VALUES[k]) for k in JSON_VALUES]
    groups = [("one shape, every size", lambda c: c["n_shapes"] == 1),
              ("one shape, shorter side 64 pixels or more", lambda c: c["n_shapes"] == 1 and min(c["w"], c["h"]) >= 64)]
    if any(c["n_shapes"] > 1 for c in cases):
        groups.append(("two or three shapes, the first in reading order", lambda c: c["n_shapes"] > 1))
    right = lambda cs, key, k: sum(bool(c["json"][key]["scores"] and c["json"][key]["scores"][f"{k} first"]) for c in cs)
    for title, keep in groups:
        cs = [c for c in cases if keep(c)]
        lines += [f"\n### {title} ({len(cs)} pictures): right per field\n",
                  "| answer | " + " | ".join(fields) + " |", "|---|" + "---|" * len(fields)]
        lines.append("| caption | " + " | ".join(pct(sum(c["caption_scores"][f"{k} first"] for c in cs), len(cs))
                                                for k in fields) + " |")
        for key in names:
            lines.append(f"| JSON, {key} | " + " | ".join(pct(right(cs, key, k), len(cs)) for k in fields) + " |")
        if title.startswith("one shape"):
            lines.append("| a uniform guess | " + " | ".join(f"{100 * p:.1f}%" for p in chance + [math.prod(chance)]) + " |")
    multi = [c for c in cases if c["n_shapes"] > 1]
    objects = [k for k in names if JSON_VARIANTS[k][1]["type"] == "object"]
    if multi:
        lines += [f"\n### two or three shapes ({len(multi)} pictures): the JSON field names some shape of the picture\n",
                  "| answer | shape | colour | position | all three of one shape |", "|---|---|---|---|---|"]
        for key in objects:
            sc = [c["json"][key]["scores"] or {} for c in multi]
            lines.append(f"| JSON, {key} | " + " | ".join(pct(sum(bool(s.get(f"{k} any")) for s in sc), len(sc))
                                                         for k in JSON_VALUES) + f" | {pct(sum(bool(s.get('one shape')) for s in sc), len(sc))} |")
    lines.append(f"\nPrompts: \"{W.CANONICAL_PROMPT}\" (the caption, and each variant unless \"fields named\": "
                 f"\"{FIELDS_PROMPT}\"). A field of the caption: with one shape, the existing caption scoring (the "
                 "caption must name one shape, with the right word); with several, its first phrase against the first "
                 "shape in reading order. The schemas are written beside the pictures: "
                 + ", ".join(sorted({v[0] for v in JSON_VARIANTS.values()})) + ".")
    lines.append("\nThe first answers (picture, size, what is there, caption, then each JSON variant):\n")
    for c in cases[:6]:
        lines.append(f"- {os.path.basename(c['files'][0])} {c['w']}x{c['h']} {json.dumps(c['want'][0])}: \"{c['caption']}\"; "
                     + "; ".join(f"{k}: {c['json'][k]['text']}" for k in names))
    return "\n".join(lines) + "\n"


SLICE_SIDE = 240


def write_slice(a):
    """A handful of fresh pictures per task for tests/test_cli.c: the files and cases.tsv, one case a
    line: kind, files (space separated), the user turns (' | ' between chat turns; '+' in front of a
    turn that attaches the next file), the expected answer (empty for pictures outside the world)."""
    out = a.slice
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    cases = make_cases(out, a.seed + 1000, 8, 12, 6, 4, 3, [])
    # keep the committed files small: shrink the big ones (sizes still vary from 16 pixels up)
    rows = []
    for c in cases:
        files = []
        for f in c["files"]:
            with Image.open(f) as im:
                w, h = im.size
                if max(w, h) > SLICE_SIDE:
                    s = SLICE_SIDE / max(w, h)
                    small = im.convert("RGB").resize((max(16, round(w * s)), max(16, round(h * s))), Image.BOX)
                    small.save(f, quality=90) if f.endswith(".jpg") else small.save(f)
            files.append(os.path.basename(f))
        if c["kind"] == "chat":
            turns = " | ".join(("+" if n else "") + t for t, n in zip(c["turns"], c["attach"]))
        else:
            turns = c["turns"][0]
        rows.append("\t".join([c["kind"], " ".join(files), turns, c["expected"] or ""]))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("# written by tools/eval_demo.py --slice (seed %d): kind, files, turns, expected answer\n" % (a.seed + 1000))
        f.write("\n".join(rows) + "\n")
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{len(rows)} cases, {len(os.listdir(out))} files, {total} bytes in {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="folder for the pictures, report.md and results.json")
    ap.add_argument("--slice", help="write the small test set into this folder instead")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "mllama"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mllama-demo.gguf"))
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--n-caption", type=int, default=400)
    ap.add_argument("--n-question", type=int, default=300)
    ap.add_argument("--n-which", type=int, default=120)
    ap.add_argument("--n-chat", type=int, default=60)
    ap.add_argument("--n-outside", type=int, default=30)
    ap.add_argument("--photos", nargs="*", default=[], help="real photos (not in the repository) to try as well")
    ap.add_argument("--n-long-chat", type=int, default=0, help="chats of --long-chat-turns turns, scored per turn")
    ap.add_argument("--long-chat-turns", type=int, default=6)
    ap.add_argument("--n-large", type=int, default=0, help="scenes captioned with large shapes and with the world's")
    ap.add_argument("--n-outside-kind", type=int, default=0, help="pictures of each kind outside the world")
    ap.add_argument("--limits", action="store_true", help="only the model's limits: --n-long-chat 200 --n-large 300 "
                    "--n-outside-kind 40 unless given, no other cases (a few minutes on one core)")
    ap.add_argument("--json", action="store_true", help="only the JSON answers beside the captions, through --batch: "
                    "json-report.md, json-results.json")
    ap.add_argument("--n-json", type=int, default=300, help="--json: scenes of one shape")
    ap.add_argument("--n-json-multi", type=int, default=0, help="--json: scenes of two or three shapes as well")
    ap.add_argument("--batch", default=os.path.join(ROOT, "build", "batch"))
    # one thread: the cases run one after another, and the program's default (every core) collapses on
    # a machine that is busy with something else
    ap.add_argument("--threads", type=int, default=1, help="the program's -t")
    a = ap.parse_args()
    if a.limits:
        given = {x.split("=")[0] for x in sys.argv[1:]}
        for flag, n in (("--n-long-chat", 200), ("--n-large", 300), ("--n-outside-kind", 40)):
            if flag not in given:
                setattr(a, flag[2:].replace("-", "_"), n)
        for flag in ("--n-caption", "--n-question", "--n-which", "--n-chat", "--n-outside"):
            if flag not in given:
                setattr(a, flag[2:].replace("-", "_"), 0)
    if a.slice:
        write_slice(a)
    elif a.json and a.out:
        sys.exit(json_evaluate(a))
    elif a.out:
        evaluate(a)
    else:
        ap.error("--out or --slice is required")


if __name__ == "__main__":
    main()
