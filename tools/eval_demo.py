#!/usr/bin/env python3
"""Evaluate the bundled demo model through the C program, on pictures it has never seen, drawn by a
renderer unlike the training one.

    python tools/eval_demo.py --out DIR [--cli build/mllama] [--model models/mllama-demo.gguf] [--seed N]
    python tools/eval_demo.py --slice tests/fixtures/demo/fresh        # the small set test_cli runs

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
the world (generated ones and any photos given with --photos) included. Needs numpy and Pillow only.
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
from PIL import Image, ImageDraw, ImageFont

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


def draw(rng, scene, size):
    """A scene as RGB8 (H, W, 3), and its layout: what paint() and ideal_caption() need."""
    Wd, Hd = size
    bg = np.array(W.BACKGROUNDS[scene["bg"]], np.float32) * rng.uniform(0.93, 1.07) + rng.uniform(-6, 6, 3)
    layout = dict(size=size, bg=bg, gradient=rng.uniform(-5, 5), shapes=[])
    short = min(Wd, Hd)
    for sh in scene["shapes"]:
        fg = np.array(W.COLOURS[sh["colour"]], np.float32) * rng.uniform(0.9, 1.1) + rng.uniform(-10, 10, 3)
        r = rng.uniform(*W.RADIUS) * short
        st = math.exp(rng.uniform(-math.log(W.STRETCH), math.log(W.STRETCH)))
        row, col = sh["pos"]
        layout["shapes"].append(dict(shape=sh["shape"], fg=fg, rx=r * math.sqrt(st), ry=r / math.sqrt(st),
                                     cx=(W.GRID[col] + rng.uniform(-W.JITTER, W.JITTER)) * Wd,
                                     cy=(W.GRID[row] + rng.uniform(-W.JITTER, W.JITTER)) * Hd,
                                     rot=math.radians(rng.uniform(-W.ROTATE, W.ROTATE))))
    img = paint(layout)
    amp = rng.uniform(0, 10)
    img += rng.uniform(-amp, amp, (Hd, Wd, 1)).astype(np.float32)
    out = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    salt = rng.random((Hd, Wd)) < 0.002
    out[salt] = rng.choice([0, 255], size=(int(salt.sum()), 1)).astype(np.uint8)
    return out, layout


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


def draw_outside(rng, size, kind):
    """Pictures outside the world: value-noise 'photos', TrueType text, a window-like screenshot."""
    Wd, Hd = size
    if kind == "photo":
        acc = np.zeros((Hd, Wd, 3), np.float32)
        for octave in range(4):
            g = rng.uniform(0, 1, (2 ** (octave + 2), 2 ** (octave + 2), 3)).astype(np.float32)
            layer = np.asarray(Image.fromarray((g * 255).astype(np.uint8), "RGB").resize((Wd, Hd), Image.BILINEAR), np.float32)
            acc += layer / (2 ** octave)
        acc = acc / acc.max() * 255
        return np.clip(acc + rng.normal(0, 3, acc.shape), 0, 255).astype(np.uint8)
    img = Image.new("RGB", (Wd, Hd), (250, 250, 248) if kind == "text" else (60, 63, 65))
    d = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", max(8, Hd // 12))
    except OSError:
        font = ImageFont.load_default()
    words = "Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt".split()
    if kind == "screen":
        d.rectangle([0, 0, Wd, Hd // 10], fill=(200, 200, 205))
        for i in range(6):
            y = Hd // 8 + i * Hd // 8
            d.rectangle([Wd // 20, y, Wd // 20 + int(rng.uniform(0.3, 0.9) * Wd), y + Hd // 20], fill=(90, 140, 200))
        return np.asarray(img, np.uint8)
    y = 2
    while y < Hd:
        d.text((4, y), " ".join(rng.choice(words, 7)), fill=(20, 20, 20), font=font)
        y += max(10, Hd // 9)
    return np.asarray(img, np.uint8)


def eval_size(rng):
    """Aspect 1:4..4:1 log-uniform (one in six exactly 1:4 or 4:1), shorter side log-uniform from 16,
    longer side at most 3000."""
    u = rng.random()
    ar = 4.0 if u < 1 / 12 else 0.25 if u < 1 / 6 else math.exp(rng.uniform(-math.log(4), math.log(4)))
    long_over_short = max(ar, 1 / ar)
    short = math.exp(rng.uniform(math.log(16), math.log(3000 / long_over_short)))
    s, l_ = int(round(short)), int(round(short * long_over_short))
    return (l_, s) if ar >= 1 else (s, l_)


def save(rng, rgb, path_base):
    """PNG (two in five) or JPEG of quality 30..95; -> file name."""
    img = Image.fromarray(rgb, "RGB")
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


def make_cases(out, seed, n_caption, n_question, n_which, n_chat, n_outside, photos):
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
        path = save(rng, draw_outside(rng, size, kind), os.path.join(out, f"outside-{i}"))
        prompt = [W.CANONICAL_PROMPT, "What colour is the circle?", "How many shapes are there?"][i % 3]
        cases.append(dict(kind="outside", okind=kind, files=[path], turns=[prompt], expected=None, w=size[0], h=size[1]))
    for path in photos:
        with Image.open(path) as im:
            w, h = im.size
        cases.append(dict(kind="outside", okind="photo file", files=[path], turns=[W.CANONICAL_PROMPT], expected=None, w=w, h=h))
    return cases


# ---------------------------------------------------------------------------------------------------
# running and scoring

def run_case(cli, model, c, timeout=120):
    if c["kind"] == "chat":
        lines = []
        k = 0
        for t, n in zip(c["turns"], c["attach"]):
            for _ in range(n):
                lines.append(f"/image {c['files'][k]}")
                k += 1
            lines.append(t)
        p = subprocess.run([cli, "-m", model, "-i", "-q"], input="\n".join(lines) + "\n/quit\n", capture_output=True,
                           text=True, timeout=timeout)
        answers = p.stdout.split("\n")[:-1]
    else:
        args = [cli, "-m", model, "-q"]
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


def report(cases, elapsed):
    lines = [f"# Demo model evaluation ({len(cases)} cases through the C program, {elapsed:.0f} s)"]
    summary = []
    for kind in ("caption", "question", "which", "chat"):
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
    if outs:
        lines.append("\n### Pictures outside the world (answers)\n")
        for c in outs:
            lines.append(f"- {c['okind']} {c['w']}x{c['h']} \"{c['turns'][0]}\" → \"{' / '.join(c['answers'])}\"")
    wrong = [c for c in cases if c["kind"] != "outside" and not c["ok"]]
    if wrong:
        lines.append("\n### Wrong answers\n")
        for c in wrong[:80]:
            lines.append(f"- {c['kind']} {c['w']}x{c['h']} {[os.path.basename(f) for f in c['files']]} "
                         f"\"{c['turns'][-1]}\": said \"{c['answers'][-1] if c['answers'] else ''}\", want \"{c['expected']}\"")
    return "\n".join(lines) + "\n"


def evaluate(a):
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    cases = make_cases(a.out, a.seed, a.n_caption, a.n_question, a.n_which, a.n_chat, a.n_outside, a.photos)
    print(f"drew {len(cases)} cases in {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    for k, c in enumerate(cases):
        c["status"], c["answers"], err = run_case(a.cli, a.model, c)
        last = c["answers"][-1] if c["answers"] else ""
        c["runaway"] = any(runaway(x) for x in c["answers"]) or (c["status"] == 0 and not c["answers"])
        if c["kind"] == "chat":
            c["ok"] = c["status"] == 0 and len(c["answers"]) == 2 and last == c["expected"]
        elif c["kind"] != "outside":
            c["ok"] = c["status"] == 0 and len(c["answers"]) == 1 and last == c["expected"]
        else:
            c["ok"] = c["status"] == 0 and not c["runaway"]
        if c["kind"] == "caption":
            c["attrs"] = caption_attributes(c, last)
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
    a = ap.parse_args()
    if a.slice:
        write_slice(a)
    elif a.out:
        evaluate(a)
    else:
        ap.error("--out or --slice is required")


if __name__ == "__main__":
    main()
