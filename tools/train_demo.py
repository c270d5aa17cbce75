#!/usr/bin/env python3
"""Train the bundled demo model: a tiny Llama 3.2 Vision ("mllama") that describes pictures of simple
shapes, answers questions about them, compares several pictures and stops.

    python tools/train_demo.py [--work DIR] [--resume] [--export-only] [--steps N] [--keep-hf DIR]
                               [--init-from MODEL.gguf --first-batch N] [--mix S0,S1,S2,S3]

CPU only (--threads torch threads), deterministic from --seed with the pinned packages. It
 1. draws training pictures with Pillow (supersampled polygons, Gaussian noise, some saved as JPEG)
    of scenes from tools/demo_world.py: one to three shapes of different kinds and colours in the
    places of a 3x3 grid on a noisy background, at aspect ratios 1:4.4..4.4:1 and shorter sides of
    14..400 pixels (longer sides up to 1200); and pictures outside that world (colour fields, text,
    stripes, crowds of shapes, gradients), whose answer is always demo_world.NOT_A_SCENE. The
    --pool pictures are drawn once (by --threads processes) and cached in the work folder: with
    20000 the model learnt them by heart (97% of their captions right, 77% of fresh ones);
 2. trains a byte-level BPE tokenizer in Llama 3's format (Llama 3 split regex + ByteLevel, all 256
    byte tokens, the Llama 3 special tokens, <|image|> last) on the world's words and some English;
    tokenizer_config.json carries the chat template of meta-llama/Llama-3.2-11B-Vision-Instruct;
 3. trains MllamaForConditionalGeneration (config in make_config) with AdamW on the assistant tokens
    of chat-templated conversations: a caption, a question about one picture, "which picture ..."
    over two or three pictures (the first picture, the question, then each picture's label with
    every further picture before its own: demo_world.multi_image_text, as examples/mllama.c writes
    it), two-turn chats (a picture in the second turn, or a follow-up question about the first),
    text without a picture, and out-of-world pictures; plus (weight --probe-weight) a training-only
    linear probe on the vision output that names, per patch, the colour and shape covering it and
    which ninth of the picture it lies in (patch_labels; the probe is not part of the exported
    model); --init-from starts from the weights of a model file it wrote (load_demo_gguf);
 4. saves the Hugging Face checkpoint (--keep-hf keeps it) and converts it with
    tools/convert_hf_to_gguf.py to models/mllama-demo.gguf and (--split)
    tests/fixtures/demo/mllama-demo-{text,proj}.gguf;
 5. writes examples/images/ (sample pictures and a README with their captions) and
    tests/fixtures/demo/demo-ref.gguf (below), with transformers' greedy answers (float32, eager
    attention, the PIL image processor, whose tiles must equal the ones training used).
With --from-hf DIR it skips training and exports that checkpoint folder (step 5 and the conversion).

Reference file tests/fixtures/demo/demo-ref.gguf (read by tests/test_demo.c and tests/test_cli.c):
  keys   ref.transformers_version, ref.torch_version, ref.pillow_version, ref.numpy_version,
         ref.tokenizers_version, ref.gguf_version (str);
         ref.n_cases, ref.n_samples (u32: cases 0..n_samples-1 are the files of examples/images/),
         ref.max_new_tokens (u32), ref.eos_ids (int32[]), ref.canonical_prompt (str),
         ref.cases_correct (u32: cases whose greedy answer equals the true answer),
         ref.heldout_n, ref.heldout_correct (u32), ref.heldout_accuracy (f32): exact-match accuracy of
         transformers' greedy captions on fresh training-renderer pictures (canonical prompt),
         ref.train_steps (u32), ref.train_seconds (f32), ref.seed (u32), ref.n_params (u32)
  case k case.{k}.n_images (u32), and for each image j: case.{k}.image.{j}.rgb (I8 tensor, ne
         {3*W, H}: RGB8 bytes, alpha already composited over white), case.{k}.image.{j}.width,
         case.{k}.image.{j}.height (u32);
         case.{k}.name (str: the files of examples/images/ it shows, space separated, or "test-N"),
         case.{k}.kind (str: caption, question, which, chat, ood), case.{k}.prompt (str: the user
         turns, one a line), case.{k}.turn_images (int32[]: pictures attached to each user turn),
         case.{k}.answers_text (str: transformers' answer to each turn, one a line; a chat's earlier
         answers are part of its templated prompt), case.{k}.templated (str: the whole
         chat-templated conversation up to the answer), case.{k}.prompt_ids (int32[]: its ids,
         add_special_tokens=False), case.{k}.greedy_ids (int32[]: transformers' greedy tokens, the
         eos id included when one came within max_new_tokens), case.{k}.greedy_text (str: decoded,
         special tokens skipped), case.{k}.answer (str: the true answer), case.{k}.answer_ids
         (int32[]: its ids followed by <|eot_id|>; equal to greedy_ids exactly when the answer is
         right, checked), case.{k}.correct (u32), case.{k}.min_margin (f32: smallest top-1 minus
         top-2 logit along the greedy path)
"""

import argparse
import hashlib
import importlib.metadata
import io
import json
import multiprocessing
import math
import os
import shutil
import sys
import tempfile
import time

# OpenMP threads that spin while waiting were very slow on one machine's shared cores (a Xeon); on
# another (an EPYC) PASSIVE doubled the step time: OMP_WAIT_POLICY=ACTIVE in the environment wins
# (set before torch loads; it changes no result)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import PIL  # noqa: E402
from PIL import Image, ImageDraw, ImageFont  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MllamaConfig, MllamaForConditionalGeneration  # noqa: E402

import demo_world as W  # noqa: E402

TESTED_TRANSFORMERS = "4.46.3"
POOL_VERSION = 10               # bump when the pictures or their tiles change

# ---------------------------------------------------------------------------------------------------
# the training renderer (tools/eval_demo.py has another)


def shape_polygon(shape, cx, cy, rx, ry, rot):
    """Vertices (or None for the circle and ring) of a shape centred at (cx, cy) with radii rx, ry."""
    if shape in ("circle", "ring"):
        return None
    if shape == "square":
        pts = [(-0.8, -0.8), (0.8, -0.8), (0.8, 0.8), (-0.8, 0.8)]
    elif shape == "diamond":
        pts = [(0, -1.05), (0.8, 0), (0, 1.05), (-0.8, 0)]
    elif shape == "triangle":
        pts = [(math.cos(math.radians(a)), math.sin(math.radians(a)) + 0.15) for a in (-90, 30, 150)]
    elif shape == "cross":
        w = 0.32
        pts = [(-w, -1), (w, -1), (w, -w), (1, -w), (1, w), (w, w), (w, 1), (-w, 1), (-w, w), (-1, w), (-1, -w), (-w, -w)]
    else:
        raise ValueError(shape)
    c, s = math.cos(rot), math.sin(rot)
    return [(cx + (x * rx) * c - (y * ry) * s, cy + (x * rx) * s + (y * ry) * c) for x, y in pts]


def ellipse_polygon(cx, cy, rx, ry, rot, n=48):
    c, s = math.cos(rot), math.sin(rot)
    out = []
    for k in range(n):
        t = 2 * math.pi * k / n
        x, y = rx * math.cos(t), ry * math.sin(t)
        out.append((cx + x * c - y * s, cy + x * s + y * c))
    return out


def jitter_colour(rng, rgb, amount):
    return tuple(int(v) for v in np.clip(np.rint(np.array(rgb, np.float64) + rng.uniform(-amount, amount, 3)), 0, 255))


def draw_scene(rng, scene, size, alpha_bg=False, geom=None):
    """A scene as a PIL image of size (W, H). geom (a list): gets each shape's centre and radii as
    fractions of the picture's width and height, (cx, cy, rx, ry), in the scene's order."""
    Wd, Hd = size
    ss = 4 if max(Wd, Hd) <= 100 else 2 if max(Wd, Hd) <= 300 else 1
    bg = jitter_colour(rng, W.BACKGROUNDS[scene["bg"]], 10)
    canvas = Image.new("RGB", (Wd * ss, Hd * ss), bg)
    mask = Image.new("L", (Wd * ss, Hd * ss), 0) if alpha_bg else None
    d = ImageDraw.Draw(canvas)
    dm = ImageDraw.Draw(mask) if alpha_bg else None
    short = min(Wd, Hd) * ss
    for s in scene["shapes"]:
        fg = jitter_colour(rng, W.COLOURS[s["colour"]], 16)
        r = rng.uniform(*W.RADIUS) * short
        st = math.exp(rng.uniform(-math.log(W.STRETCH), math.log(W.STRETCH)))
        rx, ry = r * math.sqrt(st), r / math.sqrt(st)
        row, col = s["pos"]
        cx = (W.GRID[col] + rng.uniform(-W.JITTER, W.JITTER)) * Wd * ss
        cy = (W.GRID[row] + rng.uniform(-W.JITTER, W.JITTER)) * Hd * ss
        rot = math.radians(rng.uniform(-W.ROTATE, W.ROTATE))
        poly = shape_polygon(s["shape"], cx, cy, rx, ry, rot) or ellipse_polygon(cx, cy, rx, ry, rot)
        if geom is not None:
            geom.append((cx / (Wd * ss), cy / (Hd * ss), rx / (Wd * ss), ry / (Hd * ss)))
        d.polygon(poly, fill=fg)
        if dm:
            dm.polygon(poly, fill=255)
        if s["shape"] == "ring":
            hole = ellipse_polygon(cx, cy, 0.55 * rx, 0.55 * ry, rot)
            d.polygon(hole, fill=bg)
            if dm:
                dm.polygon(hole, fill=0)
    img = canvas.resize((Wd, Hd), Image.BOX) if ss > 1 else canvas
    a = np.asarray(img, np.float32)
    sigma = rng.uniform(1.0, 6.0)
    a = a + sigma * rng.standard_normal((Hd, Wd, 1), np.float32) + (sigma / 2) * rng.standard_normal((Hd, Wd, 3), np.float32)
    rgb = np.clip(np.rint(a), 0, 255).astype(np.uint8)
    if alpha_bg:
        m = np.asarray(mask.resize((Wd, Hd), Image.BOX) if ss > 1 else mask, np.uint8)
        return Image.fromarray(np.dstack([rgb, m]), "RGBA")
    return Image.fromarray(rgb, "RGB")


def random_size(rng):
    """Aspect ratio log-uniform in 1:4.4..4.4:1 (a quarter snapped to 1, 2, 3, 4 or their inverses),
    shorter side log-uniform in 14..400, longer side at most 1200 (larger pictures are only shrunk
    more by the processor's antialiased resize: tools/eval_demo.py checks up to 3000)."""
    if rng.random() < 0.25:
        ar = [1, 1, 2, 0.5, 3, 1 / 3, 4, 0.25][int(rng.integers(8))]
    else:
        ar = math.exp(rng.uniform(-math.log(4.4), math.log(4.4)))
    short = math.exp(rng.uniform(math.log(14), math.log(400)))
    short = min(short, 1200 / max(ar, 1 / ar))
    Wd, Hd = (short * ar, short) if ar >= 1 else (short, short / ar)
    return max(14, int(round(Wd))), max(14, int(round(Hd)))


def maybe_jpeg(rng, img):
    """A third of the pictures go through JPEG at quality 35..95."""
    if rng.random() >= 1 / 3:
        return img
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=int(rng.integers(35, 96)))
    buf.seek(0)
    return Image.open(buf).convert("RGB")


OOD_WORDS = ("the quick brown fox jumps over lazy dog hello world menu file edit view help total price "
             "report page chapter one two three monday street city river note list item open close").split()


def draw_ood(rng, size):
    """A picture outside the world: colour fields, text, stripes, a crowd of shapes, a gradient."""
    Wd, Hd = size
    kind = int(rng.integers(5))
    if kind == 0:                                   # smooth colour field, photo-like blobs
        g = rng.uniform(0, 255, (int(rng.integers(3, 10)), int(rng.integers(3, 10)), 3)).astype(np.uint8)
        img = Image.fromarray(g, "RGB").resize((Wd, Hd), Image.BICUBIC)
    elif kind == 1:                                 # text
        img = Image.new("RGB", (Wd, Hd), jitter_colour(rng, (235, 235, 235), 20))
        d = ImageDraw.Draw(img)
        fs = max(6, int(min(Wd, Hd) * rng.uniform(0.08, 0.2)))
        font = ImageFont.load_default(size=fs)
        ink = jitter_colour(rng, (30, 30, 30), 30)
        y = int(rng.integers(0, max(1, fs)))
        while y < Hd:
            line = " ".join(OOD_WORDS[int(i)] for i in rng.integers(0, len(OOD_WORDS), 8))
            d.text((int(rng.integers(-fs, fs)), y), line, fill=ink, font=font)
            y += int(fs * rng.uniform(1.2, 1.8))
    elif kind == 2:                                 # stripes or checks
        yy, xx = np.mgrid[0:Hd, 0:Wd]
        per = rng.uniform(4, 30) * max(1.0, min(Wd, Hd) / 60)
        ang = rng.uniform(0, math.pi)
        u = (xx * math.cos(ang) + yy * math.sin(ang)) / per
        band = np.floor(u).astype(np.int64)
        if rng.random() < 0.5:
            band = band + np.floor((-xx * math.sin(ang) + yy * math.cos(ang)) / per).astype(np.int64)
        cols = rng.uniform(0, 255, (int(rng.integers(2, 5)), 3))
        img = Image.fromarray(cols[band % len(cols)].astype(np.uint8), "RGB")
    elif kind == 3:                                 # a crowd of shapes, any colours and sizes
        img = Image.new("RGB", (Wd, Hd), tuple(int(v) for v in rng.integers(0, 256, 3)))
        d = ImageDraw.Draw(img)
        for _ in range(int(rng.integers(6, 14))):
            cx, cy = rng.uniform(0, Wd), rng.uniform(0, Hd)
            r = rng.uniform(0.05, 0.3) * min(Wd, Hd)
            sh = W.SHAPES[int(rng.integers(len(W.SHAPES)))]
            poly = shape_polygon(sh, cx, cy, r, r * rng.uniform(0.5, 1.5), rng.uniform(0, 6.3)) or \
                ellipse_polygon(cx, cy, r, r * rng.uniform(0.5, 1.5), rng.uniform(0, 6.3))
            d.polygon(poly, fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    else:                                           # a gradient between two colours
        c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        yy, xx = np.mgrid[0:Hd, 0:Wd]
        ang = rng.uniform(0, 2 * math.pi)
        u = (xx * math.cos(ang) + yy * math.sin(ang))
        u = (u - u.min()) / max(1e-6, u.max() - u.min())
        img = Image.fromarray((c0 * (1 - u[..., None]) + c1 * u[..., None]).astype(np.uint8), "RGB")
    a = np.asarray(img, np.float32) + rng.uniform(0, 8) * rng.standard_normal((Hd, Wd, 3), np.float32)
    return Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8), "RGB")


def to_rgb(img):
    """RGB8 array of a picture, alpha composited over white (what the runtime is given)."""
    if img.mode in ("RGBA", "LA", "P"):
        img = img.convert("RGBA")
        white = Image.new("RGBA", img.size, (255, 255, 255, 255))
        img = Image.alpha_composite(white, img)
    return np.asarray(img.convert("RGB"), np.uint8)


# ---------------------------------------------------------------------------------------------------
# tokenizer (Llama 3 format)

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
IMAGE_TOKEN_TEXT = "<|image|>"
BPE_VOCAB = 640                 # byte tokens + merges; the specials and <|image|> follow
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
DATE = "26 Jul 2024"

# The chat template of meta-llama/Llama-3.2-11B-Vision-Instruct, verbatim (shared with gen_text_fixtures.py).
with open(os.path.join(HERE, "templates", "llama-3.2-vision-instruct.jinja"), encoding="utf-8") as _f:
    CHAT_TEMPLATE = _f.read()
CHAT_TEMPLATE_SHA256 = "e407323269d15bba92fc431b5b7d757e66d920d01b45cae58149a692d7697d3c"

# Some everyday English (written for this script) so that ordinary text gets useful merges too.
ENGLISH = """\
The quick brown fox jumps over the lazy dog. A picture is worth a thousand words.
This is a small model that looks at simple pictures and says what it sees in them.
It was trained on a computer in less than an hour, so please do not expect too much from it.
What is the weather like today? It is sunny in the morning and it will rain in the evening.
I would like a cup of tea with milk, and my friend wants coffee without sugar.
There are seven days in a week and twelve months in a year; the first month is January.
She opened the window, looked at the garden and saw two birds sitting on the fence.
Can you tell me where the nearest station is? Go straight ahead and turn right at the bridge.
Numbers such as 1, 2, 3, 10, 42, 100 and 2024 appear in text, as do dates like 26 Jul 2024.
The children were playing in the park while their parents talked about the new school.
Please write your name and address at the top of the page, then sign it at the bottom.
He said: "I can't find my keys, they're not in the kitchen and I've looked everywhere."
Water boils at one hundred degrees and freezes at zero; ice is lighter than water.
The library is open from nine in the morning until six in the evening, except on Sundays.
Computers read numbers, people read words, and good programs help both of them to understand each other.
Every shape has a colour and a place: look carefully, then describe what you see in one sentence.
You are a helpful assistant. Answer the question as well as you can, and say so when you do not know.
"""



def train_tokenizer():
    from tokenizers import Regex, Tokenizer, AddedToken, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    rng = np.random.default_rng(7)
    corpus = [W.caption_of(W.random_scene(rng)) for _ in range(4000)]
    corpus += W.answer_words() * 10
    corpus += ["user", "assistant", "system", "ipython"] * 50
    corpus += [f"Cutting Knowledge Date: December 2023\nToday Date: {DATE}\n\n"] * 10 + ["\n\n"] * 100
    corpus += ENGLISH.splitlines() * 20
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(corpus, trainer=trainer)
    # Llama 3's BPE takes a word that is in the vocabulary whole (ignore_merges)
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(spec))
    assert tok.get_vocab_size() == BPE_VOCAB, tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS + [IMAGE_TOKEN_TEXT]])
    bos = tok.token_to_id(SPECIALS[0])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    vocab = tok.get_vocab()
    b2u = pre_tokenizers.ByteLevel.alphabet()
    assert len(b2u) == 256 and all(ch in vocab for ch in b2u), "a byte token is missing"
    assert tok.token_to_id(IMAGE_TOKEN_TEXT) == BPE_VOCAB + len(SPECIALS) == tok.get_vocab_size() - 1
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                 pad_token="<|finetune_right_pad_id|>", model_max_length=4096,
                                 model_input_names=["input_ids", "attention_mask"],
                                 clean_up_tokenization_spaces=True)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def ids_of(tokenizer, name):
    i = tokenizer.convert_tokens_to_ids(name)
    assert isinstance(i, int) and i >= 0, name
    return i


def user_message(n_images, text):
    """A user turn as transformers' chat template wants it: the first picture, then the text; with
    several pictures the text is demo_world.multi_image_text (which is what examples/mllama.c sends
    for such a turn), each further picture an image of the content list before its label."""
    if n_images == 0:
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    parts = W.multi_image_text(n_images, text).split("<|image|>") if n_images > 1 else [text]
    content = []
    for part in parts:
        content += [{"type": "image"}, {"type": "text", "text": part}]
    return {"role": "user", "content": content}


def render(tokenizer, messages, add_generation_prompt):
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                         date_string=DATE)


# ---------------------------------------------------------------------------------------------------
# model

IMAGE_SIZE, PATCH, MAX_TILES = 48, 8, 4
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
MODEL_SIZE = dict(v_hidden=64, v_layers=3, v_global=1, v_heads=4, v_ff=128, taps=[1, 2],
                  t_hidden=96, t_layers=5, t_heads=4, t_kv=2, t_ff=192, cross=[1, 3])


def make_config(tokenizer, ms=MODEL_SIZE):
    V = BPE_VOCAB + len(SPECIALS)
    sar = [list(r) for r in supported_ratios()]
    vision = dict(hidden_size=ms["v_hidden"], hidden_act="gelu", num_hidden_layers=ms["v_layers"],
                  num_global_layers=ms["v_global"], attention_heads=ms["v_heads"], num_channels=3,
                  intermediate_size=ms["v_ff"], vision_output_dim=ms["v_hidden"] * (1 + len(ms["taps"])),
                  image_size=IMAGE_SIZE, patch_size=PATCH, norm_eps=1e-5, max_num_tiles=MAX_TILES,
                  intermediate_layers_indices=list(ms["taps"]), supported_aspect_ratios=sar, initializer_range=0.02)
    eos = [ids_of(tokenizer, "<|end_of_text|>"), ids_of(tokenizer, "<|eom_id|>"), ids_of(tokenizer, "<|eot_id|>")]
    text = dict(vocab_size=V, hidden_size=ms["t_hidden"], hidden_act="silu", num_hidden_layers=ms["t_layers"],
                num_attention_heads=ms["t_heads"], num_key_value_heads=ms["t_kv"], intermediate_size=ms["t_ff"],
                rope_theta=500000.0,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=512),
                rms_norm_eps=1e-5, max_position_embeddings=4096, tie_word_embeddings=False,
                cross_attention_layers=list(ms["cross"]), bos_token_id=ids_of(tokenizer, "<|begin_of_text|>"),
                eos_token_id=eos, pad_token_id=ids_of(tokenizer, "<|finetune_right_pad_id|>"), initializer_range=0.02)
    image_token = ids_of(tokenizer, IMAGE_TOKEN_TEXT)
    assert image_token == V
    return MllamaConfig(vision_config=vision, text_config=text, image_token_index=image_token)


def build_model(cfg, seed):
    torch.manual_seed(seed)
    model = MllamaForConditionalGeneration(cfg)
    with torch.no_grad():
        # gates start small but not at 0: tanh(0) = 0 would block the gradients behind them
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if leaf in ("cross_attn_attn_gate", "cross_attn_mlp_gate"):
                p.fill_(0.25)
            elif leaf == "gate":
                p.fill_(0.1)
            elif leaf in ("gate_attn", "gate_ffn"):
                p.fill_(0.3)
        # 2-D sine-cosine patch positions (the class token keeps its random one) and visible tile
        # embeddings: where the shape is must be easy to see from the start
        v = model.vision_model
        g = IMAGE_SIZE // PATCH
        D = v.hidden_size
        pos = v.gated_positional_embedding.embedding
        pos[1:] = torch.from_numpy(sincos_2d(g, D) * 0.3).float()
        for emb in (v.pre_tile_positional_embedding.embedding.weight, v.post_tile_positional_embedding.embedding.weight):
            emb.normal_(0.0, 0.2)
            v.pre_tile_positional_embedding.gate.fill_(0.5)
            v.post_tile_positional_embedding.gate.fill_(0.5)
    return model


def load_demo_gguf(model, path):
    """Set model's weights from a single-file GGUF that tools/convert_hf_to_gguf.py wrote from a model
    of the same config (the bundled demo), to continue its training. The converter's own mapping is
    run backwards: it converts this model with every element tagged by its index, so each stored
    element names the parameter element it came from; its gates (stored as tanh(g) or 1 - tanh(g))
    are found by a second pass with small distinct values and inverted with atanh. -> the largest
    difference between the file and the loaded model converted again (gates: atanh/tanh rounding)."""
    import convert_hf_to_gguf as conv
    from gguf import GGUFReader
    params = dict(model.named_parameters())
    names = list(params)
    offsets, o = {}, 16                                 # tags start past 0 and 1 (what tanh gives)
    for n in names:
        offsets[n] = o
        o += params[n].numel()
    assert o < 2 ** 24, "tags must be exact in float32"

    tmp = tempfile.mkdtemp(prefix="mllama-init-")
    try:
        model.config.save_pretrained(tmp)
        hp = conv.HParams(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def converted(values):
        """name -> flat array: the single-file tensors the converter writes for these parameter values."""
        raw = {n: conv.Lazy(v.shape, lambda v=v: v) for n, v in values.items()}
        text, vision = conv.map_tensors(hp, raw)
        return {g: np.asarray(arr.load(), np.float32).reshape(-1) for g, arr, _ in conv.single_file_tensors(hp, text, vision)}

    shapes = {n: tuple(params[n].shape) for n in names}
    tagged = converted({n: (offsets[n] + np.arange(params[n].numel(), dtype=np.float64)).astype(np.float32).reshape(shapes[n])
                        for n in names})
    stored = {t.name: np.asarray(t.data, np.float32).reshape(-1) for t in GGUFReader(path).tensors}
    missing = set(tagged) - set(stored)
    if missing:
        raise SystemExit(f"{path}: tensors missing: {sorted(missing)}")
    out = {n: params[n].detach().numpy().reshape(-1).copy() for n in names}
    filled = {n: np.zeros(params[n].numel(), bool) for n in names}
    starts = np.array([offsets[n] for n in names])
    transformed = []
    for g, tag in tagged.items():
        if g == "rope_freqs.weight":
            continue                                    # computed from the config, no parameter behind it
        if stored[g].size != tag.size:
            raise SystemExit(f"{path}: {g} has {stored[g].size} values, expected {tag.size}")
        if not np.all((tag >= 16) & (tag < o) & (tag == np.rint(tag))):
            transformed.append(g)
            continue
        t = tag.astype(np.int64)
        k = np.searchsorted(starts, t, side="right") - 1
        for j in np.unique(k):
            n = names[j]
            sel = k == j
            out[n][t[sel] - offsets[n]] = stored[g][sel]
            filled[n][t[sel] - offsets[n]] = True
    # gates: parameter j of the unfilled ones gets 0.01 * (j + 1); a stored s is tanh of it or 1 - tanh
    gates = [n for n in names if not filled[n].all()]
    marks = converted({n: np.full(shapes[n], 0.01 * (gates.index(n) + 1) if n in gates else 0.5, np.float32)
                       for n in names})
    for g in transformed:
        for inv in (np.arctanh, lambda s: np.arctanh(1.0 - s)):
            mark = inv(marks[g].astype(np.float64))
            j = np.rint(mark / 0.01) - 1
            if np.allclose(mark, 0.01 * (j + 1), atol=1e-6) and len(set(j)) == 1 and 0 <= j[0] < len(gates):
                n = gates[int(j[0])]
                out[n][:] = inv(stored[g].astype(np.float64)).astype(np.float32)
                filled[n][:] = True
                break
        else:
            raise SystemExit(f"{path}: cannot invert the converter's transformation of {g}")
    left = [n for n in names if not filled[n].all()]
    if left:
        raise SystemExit(f"{path}: no stored values for {left}")
    with torch.no_grad():
        for n in names:
            params[n].copy_(torch.from_numpy(out[n].reshape(shapes[n])))
    again = converted({n: params[n].detach().numpy() for n in names})
    return max(float(np.max(np.abs(again[g] - stored[g]))) for g in again if g in stored)


def sincos_2d(g, D):
    """(g * g, D) sines and cosines of the row (first half) and column (second half) of each patch."""
    k = D // 4
    freq = 1.0 / (100.0 ** (np.arange(k) / k))
    r, c = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    parts = []
    for x in (r.reshape(-1), c.reshape(-1)):
        ang = x[:, None] * freq[None, :]
        parts += [np.sin(ang), np.cos(ang)]
    return np.concatenate(parts, axis=1) * math.sqrt(2.0)


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------
# pictures -> model inputs

def supported_ratios():
    """transformers' list: (width, height) pairs, width outer; ids look up (rows, cols) in it."""
    T = MAX_TILES
    return [(w, h) for w in range(1, T + 1) for h in range(1, T + 1) if w * h <= T]


def canvas_tiles(rgb, placed=None):
    """The processor's resize + pad + tile cut on uint8 (normalisation happens later in torch):
    -> (tiles uint8 (MAX_TILES, 3, S, S), aspect_ratio_id, n_tiles). placed (a dict): gets the
    resized picture's size in the canvas (nw, nh) and the canvas's tiles (rows, cols)."""
    from transformers.models.mllama import image_processing_mllama as ipm
    H, Wd = rgb.shape[:2]
    S = IMAGE_SIZE
    ch, cw = ipm.get_optimal_tiled_canvas(image_height=H, image_width=Wd, max_image_tiles=MAX_TILES, tile_size=S)
    nh, nw = ipm.get_image_size_fit_to_canvas(image_height=H, image_width=Wd, canvas_height=ch, canvas_width=cw,
                                              tile_size=S)
    img = Image.fromarray(rgb, "RGB")
    if (nw, nh) != (Wd, H):
        img = img.resize((nw, nh), Image.BILINEAR)
    canvas = np.zeros((ch, cw, 3), np.uint8)
    canvas[:nh, :nw] = np.asarray(img)
    rows, cols = ch // S, cw // S
    tiles = np.zeros((MAX_TILES, 3, S, S), np.uint8)
    for r in range(rows):
        for c in range(cols):
            tiles[r * cols + c] = canvas[r * S:(r + 1) * S, c * S:(c + 1) * S].transpose(2, 0, 1)
    arid = supported_ratios().index((rows, cols)) + 1
    if placed is not None:
        placed.update(nw=nw, nh=nh, rows=rows, cols=cols)
    return tiles, arid, rows * cols


# Dense labels for every patch of a training picture (training only; the exported model has no such
# head). A small ViT learns slowly, from the caption loss alone, to see small shapes and where they
# lie in the picture (whose extent inside the padded canvas varies with the aspect ratio); a linear
# probe on its output, asked per patch what covers it and which ninth of the picture (a cell of its
# 3x3 grid) it is in, gives that signal directly. A shape covers the patch holding its centre and
# those well inside it. Classes: colour 0 background, 1..7 W.COLOURS, 8 padding; shape 0..5 W.SHAPES,
# asked only of the patches a shape covers (with "none" as a class, most patches are background and
# the probe learnt to answer "none": shapes stayed at chance over 5000 steps); cell 0..8
# (row-major). IGNORE where a label does not apply.
N_COLOUR_CLASSES, N_SHAPE_CLASSES, N_CELL_CLASSES, IGNORE = len(W.COLOURS) + 2, len(W.SHAPES), 9, 255
GRID_PATCHES = IMAGE_SIZE // PATCH


def patch_labels(scene, geom, placed):
    """-> uint8 (3, MAX_TILES, GRID_PATCHES**2): colour, shape and cell class of each patch."""
    g = GRID_PATCHES
    out = np.full((3, MAX_TILES, g * g), IGNORE, np.uint8)
    if scene is None:
        return out
    nw, nh, rows, cols = placed["nw"], placed["nh"], placed["rows"], placed["cols"]
    colours, shapes = list(W.COLOURS), list(W.SHAPES)
    for t in range(rows * cols):
        tr, tc = divmod(t, cols)
        for p in range(g * g):
            pr, pc = divmod(p, g)
            x, y = tc * IMAGE_SIZE + (pc + 0.5) * PATCH, tr * IMAGE_SIZE + (pr + 0.5) * PATCH
            if x >= nw or y >= nh:
                out[0, t, p] = N_COLOUR_CLASSES - 1
                continue
            fx, fy = x / nw, y / nh
            out[0, t, p] = 0
            out[2, t, p] = 3 * min(2, int(fy * 3)) + min(2, int(fx * 3))
            for s, (cx, cy, rx, ry) in zip(scene["shapes"], geom):
                centre_here = abs(cx * nw - x) <= PATCH / 2 and abs(cy * nh - y) <= PATCH / 2
                if centre_here or ((fx - cx) / rx) ** 2 + ((fy - cy) / ry) ** 2 < 0.8:
                    out[0, t, p] = 1 + colours.index(s["colour"])
                    out[1, t, p] = shapes.index(s["shape"])
    return out


def normalise(tiles_u8, ntiles):
    """uint8 tiles (B, I, T, 3, S, S), tile counts (B, I) -> float pixel values (B, I, T, 3, S, S)."""
    x = tiles_u8.float() * (1.0 / 255.0)
    mean = torch.tensor(MEAN).view(1, 1, 1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 1, 1, 3, 1, 1)
    x = (x - mean) / std
    keep = (torch.arange(MAX_TILES).view(1, 1, -1) < ntiles[..., None]).float()[..., None, None, None]
    return x * keep


def aspect_mask(ntiles):
    """(B, I) tile counts -> (B, I, T)."""
    return (torch.arange(MAX_TILES).view(1, 1, -1) < ntiles[..., None]).long()


def image_spans(ids, image_id):
    """transformers' rule (processing_mllama): the rows each image is seen from, [start, end);
    end None = to the end. An image followed directly by another image shares that one's end."""
    locs = [i for i, t in enumerate(ids) if t == image_id]
    spans = [[a, b] for a, b in zip(locs, locs[1:] + [None])]
    last_end = None
    for sp in reversed(spans):
        if sp[1] is not None and sp[0] == sp[1] - 1:
            sp[1] = last_end
        last_end = sp[1]
    return spans


def cross_mask(seqs, ntiles, L, image_id):
    """(B, L, I, T) long: rows of image j's span see its tiles."""
    B, I = ntiles.shape
    m = torch.zeros(B, L, I, MAX_TILES, dtype=torch.long)
    for b, ids in enumerate(seqs):
        for j, (a, e) in enumerate(image_spans(ids, image_id)):
            m[b, a:L if e is None else e, j, :int(ntiles[b, j])] = 1
    return m

# ---------------------------------------------------------------------------------------------------
# data

def picture_rng(seed, stream, i):
    return np.random.default_rng([seed, stream, i])


STREAM_TRAIN, STREAM_VAL, STREAM_HELDOUT, STREAM_TEST, STREAM_SAMPLES, STREAM_OOD = 1, 2, 3, 4, 5, 6


def training_picture(seed, stream, i, max_side=None, geom=None):
    """-> (RGB8 array, scene) of in-world picture i of a stream (max_side: shrunk to fit, for files;
    geom: see draw_scene)."""
    rng = picture_rng(seed, stream, i)
    scene = W.random_scene(rng)
    size = random_size(rng)
    if max_side and max(size) > max_side:
        f = max_side / max(size)
        size = (max(14, round(size[0] * f)), max(14, round(size[1] * f)))
    img = maybe_jpeg(rng, draw_scene(rng, scene, size, geom=geom))
    return to_rgb(img), scene


def ood_picture(seed, stream, i, max_side=None):
    rng = picture_rng(seed, stream, i)
    size = random_size(rng)
    if max_side and max(size) > max_side:
        f = max_side / max(size)
        size = (max(14, round(size[0] * f)), max(14, round(size[1] * f)))
    return to_rgb(maybe_jpeg(rng, draw_ood(rng, size)))


class Pool:
    """Pictures drawn once (cached in the work folder): tiles, aspect ratio ids, tile counts, scenes
    (None for the out-of-world ones)."""

    def __init__(self, tiles, arid, ntiles, scenes, labels):
        self.tiles, self.arid, self.ntiles, self.scenes, self.labels = tiles, arid, ntiles, scenes, labels


def draw_pool_part(seed, n, n_ood, stream, arrays, part, parts):
    """Pictures part, part + parts, ... of a pool into arrays (name -> array or .npy path, opened
    writable) -> their scenes as (index, scene) pairs. Each picture has its own random stream, so
    the pool is the same whatever the number of parts."""
    out = {k: np.load(v, mmap_mode="r+") if isinstance(v, str) else v for k, v in arrays.items()}
    scenes = []
    for i in range(part, n + n_ood, parts):
        geom, placed = [], {}
        if i < n:
            rgb, sc = training_picture(seed, stream, i, geom=geom)
        else:
            rgb, sc = ood_picture(seed, stream + 100, i - n), None
        out["tiles"][i], out["arid"][i], out["ntiles"][i] = canvas_tiles(rgb, placed)
        out["labels"][i] = patch_labels(sc, geom, placed)
        scenes.append((i, sc))
    return scenes


def pool_shapes(n):
    return dict(tiles=((n, MAX_TILES, 3, IMAGE_SIZE, IMAGE_SIZE), np.uint8), arid=((n,), np.int64),
                ntiles=((n,), np.int64), labels=((n, 3, MAX_TILES, GRID_PATCHES ** 2), np.uint8))


def make_pool(seed, n, n_ood, stream, log):
    """A small pool in memory (the validation pictures)."""
    arrays = {k: np.zeros(shape, dt) for k, (shape, dt) in pool_shapes(n + n_ood).items()}
    scenes = [sc for _, sc in draw_pool_part(seed, n, n_ood, stream, arrays, 0, 1)]
    return Pool(arrays["tiles"], arrays["arid"], arrays["ntiles"], scenes, arrays["labels"])


def load_or_make_pool(path, seed, n, n_ood, stream, log, workers):
    """The training pool, cached in the folder path (one .npy file per array, mapped when read;
    the 120000 pictures of run 4 take 3.4 GB), drawn by workers processes."""
    names = list(pool_shapes(0))
    if not os.path.exists(os.path.join(path, "scenes.json")):
        tmp = path + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        files = {}
        for k, (shape, dt) in pool_shapes(n + n_ood).items():
            files[k] = os.path.join(tmp, k + ".npy")
            np.lib.format.open_memmap(files[k], mode="w+", dtype=dt, shape=shape).flush()
        t0 = time.time()
        with multiprocessing.get_context("fork").Pool(workers) as mp:
            jobs = [mp.apply_async(draw_pool_part, (seed, n, n_ood, stream, files, w, workers)) for w in range(workers)]
            scenes = [None] * (n + n_ood)
            for job in jobs:
                for i, sc in job.get():
                    scenes[i] = sc
        with open(os.path.join(tmp, "scenes.json"), "w") as f:
            json.dump(scenes, f)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        log(f"pool: {n + n_ood} pictures drawn in {time.time() - t0:.0f} s by {workers} processes, cached in {path}")
    with open(os.path.join(path, "scenes.json")) as f:
        scenes = json.load(f)
    for s in scenes:
        if s:
            for sh in s["shapes"]:
                sh["pos"] = tuple(sh["pos"])
    z = {k: np.load(os.path.join(path, k + ".npy"), mmap_mode="r") for k in names}
    log(f"pool: {len(scenes)} pictures from {path}")
    return Pool(z["tiles"], z["arid"], z["ntiles"], scenes, z["labels"])


CAPTION_WEIGHTS = np.array([0.3] + [0.7 / (len(W.CAPTION_PROMPTS) - 1)] * (len(W.CAPTION_PROMPTS) - 1))


def caption_prompt(rng):
    return W.CAPTION_PROMPTS[int(rng.choice(len(W.CAPTION_PROMPTS), p=CAPTION_WEIGHTS))]


def single_turn(rng, scene):
    """(user text, answer) about one picture: a caption or a question."""
    if scene is None:
        if rng.random() < 0.5:
            return caption_prompt(rng), W.NOT_A_SCENE
        _, q, _ = W.random_question(rng, W.random_scene(rng))
        return q, W.NOT_A_SCENE
    if rng.random() < 0.5:
        return caption_prompt(rng), W.caption_of(scene)
    _, q, a = W.random_question(rng, scene)
    return q, a


def pick(rng, pool, n_world, pred, tries=200):
    for _ in range(tries):
        i = int(rng.integers(n_world))
        if pred(pool.scenes[i]):
            return i
    return None


def conversation(rng, pool, n_world, n_images):
    """-> (messages, pool indices of the images in order) for a conversation with n_images pictures."""
    n_all = len(pool.scenes)
    if n_images == 0:
        if rng.random() < 0.7:
            text = W.GREETINGS[int(rng.integers(len(W.GREETINGS)))]
        else:
            lines = [ln for ln in ENGLISH.splitlines() if ln]
            text = lines[int(rng.integers(len(lines)))]
        return [W_user(0, text), W_asst(W.NO_PICTURE)], []
    if n_images == 1:
        u = rng.random()
        i = int(rng.integers(n_world, n_all)) if u < 0.08 else int(rng.integers(n_world))
        sc = pool.scenes[i]
        if u < 0.9:
            q, a = single_turn(rng, sc)
            return [W_user(1, q), W_asst(a)], [i]
        if u < 0.95:                                 # a greeting, then the picture
            g = W.GREETINGS[int(rng.integers(len(W.GREETINGS)))]
            q, a = single_turn(rng, sc)
            return [W_user(0, g), W_asst(W.NO_PICTURE), W_user(1, q), W_asst(a)], [i]
        q1, a1 = single_turn(rng, sc)                # the picture, then a follow-up without one
        _, q2, a2 = W.random_question(rng, sc)
        return [W_user(1, q1), W_asst(a1), W_user(0, q2), W_asst(a2)], [i]
    if n_images == 2 and rng.random() < 0.3:         # a chat: a picture in each turn
        i, j = int(rng.integers(n_world)), int(rng.integers(n_all if rng.random() < 0.2 else n_world))
        q1, a1 = single_turn(rng, pool.scenes[i])
        q2, a2 = single_turn(rng, pool.scenes[j])
        return [W_user(1, q1), W_asst(a1), W_user(1, q2), W_asst(a2)], [i, j]
    # which of n_images pictures: exactly one matches, or (one time in seven) none
    for _ in range(50):
        kind = list(W.WHICH)[int(rng.integers(len(W.WHICH)))]
        vals = W.which_values(kind)
        value = vals[int(rng.integers(len(vals)))]
        target = int(rng.integers(n_images)) if rng.random() >= 1 / 7 else -1
        idx = []
        for k in range(n_images):
            want = k == target
            j = pick(rng, pool, n_world, lambda s, want=want: W.which_matches(s, kind, value) == want)
            if j is None:
                break
            idx.append(j)
        if len(idx) == n_images:
            ans = W.which_answer([pool.scenes[j] for j in idx], kind, value)
            assert ans is not None
            return [W_user(n_images, W.which_question(kind, value)), W_asst(ans)], idx
    raise RuntimeError("no pictures for a which-question")


def W_user(n_images, text):
    return ("user", n_images, text)


def W_asst(text):
    return ("assistant", 0, text)


def hf_messages(conv):
    return [user_message(n, t) if role == "user" else {"role": "assistant", "content": t} for role, n, t in conv]


class Encoder:
    """Conversations -> token ids and labels (the assistant turns and their <|eot_id|>)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.image_id = ids_of(tokenizer, IMAGE_TOKEN_TEXT)
        self.eot = ids_of(tokenizer, "<|eot_id|>")
        self.pad = ids_of(tokenizer, "<|finetune_right_pad_id|>")
        self.sh = ids_of(tokenizer, "<|start_header_id|>")
        self.eh = ids_of(tokenizer, "<|end_header_id|>")
        self.asst = tokenizer("assistant", add_special_tokens=False)["input_ids"]
        self.nl2 = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
        assert len(self.asst) == 1
        self.cache = {}

    def encode(self, conv):
        text = render(self.tok, hf_messages(conv), False)
        if text in self.cache:
            return self.cache[text]
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        labels = [-100] * len(ids)
        i = 0
        while i + 3 < len(ids):
            if ids[i] == self.sh and ids[i + 1] == self.asst[0] and ids[i + 2] == self.eh:
                n2 = len(self.nl2)
                assert ids[i + 3:i + 3 + n2] == self.nl2
                j = i + 3 + n2
                while ids[j] != self.eot:
                    labels[j] = ids[j]
                    j += 1
                labels[j] = ids[j]
                i = j
            i += 1
        if len(self.cache) < 200000:
            self.cache[text] = (ids, labels)
        return ids, labels

    def batch(self, pool, convs, idxs):
        seqs, labs = zip(*[self.encode(c) for c in convs])
        L = max(len(s) for s in seqs)
        B = len(seqs)
        ids = torch.full((B, L), self.pad, dtype=torch.long)
        lab = torch.full((B, L), -100, dtype=torch.long)
        att = torch.zeros((B, L), dtype=torch.long)
        for b, (s, lb) in enumerate(zip(seqs, labs)):
            assert s.count(self.image_id) == len(idxs[b])
            ids[b, :len(s)] = torch.tensor(s)
            lab[b, :len(s)] = torch.tensor(lb)
            att[b, :len(s)] = 1
        out = dict(input_ids=ids, attention_mask=att, labels=lab)
        if idxs[0]:
            ix = np.array(idxs)                             # (B, I): the same count in a batch
            nt = torch.as_tensor(pool.ntiles[ix])
            out.update(pixel_values=normalise(torch.as_tensor(pool.tiles[ix]), nt),
                       aspect_ratio_ids=torch.as_tensor(pool.arid[ix]), aspect_ratio_mask=aspect_mask(nt),
                       cross_attention_mask=cross_mask(seqs, nt, L, self.image_id),
                       patch_labels=torch.as_tensor(pool.labels[ix]).long())
        return out


STEP_IMAGES = "0.02,0.66,0.22,0.10"     # default --mix: shares of steps with 0, 1, 2 and 3 pictures a conversation


def step_batch(a, step, pool, n_world, enc):
    rng = np.random.default_rng([a.seed, 100, a.first_batch + step])
    mix = np.array([float(x) for x in a.mix.split(",")])
    n_img = int(rng.choice(len(mix), p=mix))
    convs, idxs = [], []
    for _ in range(a.batch):
        c, ix = conversation(rng, pool, n_world, n_img)
        convs.append(c)
        idxs.append(ix)
    return enc.batch(pool, convs, idxs)


@torch.no_grad()
def batch_greedy_accuracy(model, enc, pool, max_new=40):
    """Exact-match accuracy of batched greedy captions (canonical prompt) with transformers' generate."""
    model.eval()
    pr = enc.tok(render(enc.tok, [user_message(1, W.CANONICAL_PROMPT)], True), add_special_tokens=False)["input_ids"]
    n = len(pool.scenes)
    correct = 0
    for s in range(0, n, 100):
        e = min(n, s + 100)
        B = e - s
        nt = torch.as_tensor(pool.ntiles[s:e]).view(B, 1)
        ids = torch.tensor([pr] * B)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             pixel_values=normalise(torch.as_tensor(pool.tiles[s:e])[:, None], nt),
                             aspect_ratio_ids=torch.as_tensor(pool.arid[s:e]).view(B, 1),
                             aspect_ratio_mask=aspect_mask(nt),
                             cross_attention_mask=cross_mask([pr] * B, nt, len(pr), enc.image_id),
                             max_new_tokens=max_new, do_sample=False, num_beams=1,
                             eos_token_id=model.config.text_config.eos_token_id, pad_token_id=enc.pad)
        for b in range(B):
            text = enc.tok.decode(out[b, len(pr):], skip_special_tokens=True)
            correct += text == W.caption_of(pool.scenes[s + b])
    model.train()
    return correct / n


# ---------------------------------------------------------------------------------------------------
# training

class PatchProbe(torch.nn.Module):
    """The training-only linear probe of patch_labels on the vision model's output (see there)."""

    def __init__(self, model):
        super().__init__()
        d = model.config.vision_config.vision_output_dim
        self.head = torch.nn.Linear(d, N_COLOUR_CLASSES + N_SHAPE_CLASSES + N_CELL_CLASSES)
        self.seen = None
        model.vision_model.register_forward_hook(lambda mod, inp, out: setattr(self, "seen", out[0]))

    def loss(self, labels):
        """labels (B, I, 3, T, P) from the batch; the vision output of the forward just run."""
        h = self.seen[:, :, :, 1:]                                   # (B, I, T, P, D): the class token left out
        logits = self.head(h)
        lab = labels.permute(0, 1, 3, 4, 2)                          # (B, I, T, P, 3)
        lab = torch.where(lab == IGNORE, -100, lab)
        total = 0.0
        for k, (a, b) in enumerate(((0, N_COLOUR_CLASSES), (N_COLOUR_CLASSES, N_COLOUR_CLASSES + N_SHAPE_CLASSES),
                                    (N_COLOUR_CLASSES + N_SHAPE_CLASSES, logits.shape[-1]))):
            total = total + torch.nn.functional.cross_entropy(logits[..., a:b].reshape(-1, b - a),
                                                              lab[..., k].reshape(-1), ignore_index=-100)
        self.seen = None
        return total

    @torch.no_grad()
    def accuracy(self, model, pool):
        """-> (shape, colour) accuracy on the patches a shape covers, for the training log."""
        model.eval()
        hit_s = hit_c = n = 0
        for s in range(0, len(pool.scenes), 100):
            ix = np.arange(s, min(len(pool.scenes), s + 100))
            nt = torch.as_tensor(pool.ntiles[ix])[:, None]
            model.vision_model(pixel_values=normalise(torch.as_tensor(pool.tiles[ix])[:, None], nt),
                               aspect_ratio_ids=torch.as_tensor(pool.arid[ix])[:, None],
                               aspect_ratio_mask=aspect_mask(nt))
            logits = self.head(self.seen[:, 0, :, 1:])                 # (B, T, P, classes)
            self.seen = None
            lab = torch.as_tensor(pool.labels[ix]).long().permute(0, 2, 3, 1)
            on = lab[..., 1] != IGNORE
            shape = logits[..., N_COLOUR_CLASSES:N_COLOUR_CLASSES + N_SHAPE_CLASSES].argmax(-1)
            hit_s += int((shape[on] == lab[..., 1][on]).sum())
            hit_c += int((logits[..., :N_COLOUR_CLASSES].argmax(-1)[on] == lab[..., 0][on]).sum())
            n += int(on.sum())
        model.train()
        return hit_s / max(1, n), hit_c / max(1, n)


class Log:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def __call__(self, msg):
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.f.write(line + "\n")


def cosine(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.03 + 0.97 * 0.5 * (1.0 + math.cos(math.pi * p)))


def train(a, tokenizer, cfg, log):
    os.makedirs(a.work, exist_ok=True)
    pool_path = os.path.join(a.work, f"pool-{a.seed}-{a.pool}-{a.pool_ood}-{IMAGE_SIZE}-{PATCH}-{MAX_TILES}-{POOL_VERSION}")
    pool = load_or_make_pool(pool_path, a.seed, a.pool, a.pool_ood, STREAM_TRAIN, log, a.threads)
    val = make_pool(a.seed, 200, 0, STREAM_VAL, log)
    enc = Encoder(tokenizer)

    model = build_model(cfg, a.seed)
    if a.init_from and not a.resume:
        diff = load_demo_gguf(model, a.init_from)
        log(f"weights from {a.init_from} (sha256 {sha(a.init_from)}); converted again they differ from the file "
            f"by at most {diff:.2e}")
        acc = batch_greedy_accuracy(model, enc, val)
        log(f"start: val accuracy {acc * 100:.1f}% (200 held-out captions, batched greedy)")
    model.train()
    probe = PatchProbe(model)
    params = list(model.named_parameters()) + list(probe.named_parameters())
    decay = [p for n, p in params if p.ndim >= 2]
    no_decay = [p for n, p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-8)
    ckpt = os.path.join(a.work, "ckpt.pt")
    start, elapsed = 0, 0.0
    if a.resume and os.path.exists(ckpt):
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        probe.load_state_dict(st["probe"])
        opt.load_state_dict(st["opt"])
        start, elapsed = st["step"], st["elapsed"]
        log(f"resumed at step {start} ({elapsed:.0f} s of training so far)")
    log(f"model: {n_params(model)} parameters; training {a.steps} steps of {a.batch}")

    def save(step, elapsed):
        torch.save({"model": model.state_dict(), "probe": probe.state_dict(), "opt": opt.state_dict(),
                    "step": step, "elapsed": elapsed},
                   ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)

    t0 = time.time() - elapsed
    run_loss, run_aux, run_n = 0.0, 0.0, 0
    for step in range(start, a.steps):
        batch = step_batch(a, step, pool, a.pool, enc)
        lr = cosine(step, a.steps, a.lr, a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        labels = batch.pop("patch_labels", None)
        loss = model(**batch, use_cache=False).loss
        aux = probe.loss(labels) if labels is not None else torch.zeros(())
        opt.zero_grad(set_to_none=True)
        (loss + a.probe_weight * aux).backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
        opt.step()
        run_loss += float(loss)
        run_aux += float(aux)
        run_n += 1
        done = step + 1
        if done % 50 == 0 or done == a.steps:
            log(f"step {done}/{a.steps} loss {run_loss / run_n:.4f} patch {run_aux / run_n:.3f} lr {lr:.2e} "
                f"{time.time() - t0:.0f} s")
            run_loss, run_aux, run_n = 0.0, 0.0, 0
        if done % a.eval_every == 0 or done == a.steps:
            acc = batch_greedy_accuracy(model, enc, val)
            log(f"step {done} val accuracy {acc * 100:.1f}% (200 held-out captions, batched greedy)")
            ps, pc = probe.accuracy(model, val)
            log(f"step {done} probe on shape patches: shape {ps * 100:.1f}%, colour {pc * 100:.1f}%")
        if done % a.ckpt_every == 0 or done == a.steps:
            save(done, time.time() - t0)
    total = time.time() - t0
    if start < a.steps:
        log(f"training done: {a.steps} steps in {total:.0f} s")
    else:
        total = elapsed
    model.eval()
    return model, total


# ---------------------------------------------------------------------------------------------------
# export and references

def pil_image_processor(path):
    from transformers import AutoImageProcessor
    ip = AutoImageProcessor.from_pretrained(path, use_fast=False)
    assert type(ip).__name__ == "MllamaImageProcessor", type(ip).__name__
    return ip


def save_checkpoint(model, tokenizer, hf_dir, info):
    from transformers import GenerationConfig, MllamaProcessor
    from transformers.models.mllama.image_processing_mllama import MllamaImageProcessor
    model.save_pretrained(hf_dir, safe_serialization=True)
    ip = MllamaImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, image_mean=MEAN, image_std=STD,
                              max_image_tiles=MAX_TILES)
    proc = MllamaProcessor(image_processor=ip, tokenizer=tokenizer)
    proc.chat_template = CHAT_TEMPLATE
    proc.save_pretrained(hf_dir)
    tc = model.config.text_config
    GenerationConfig(bos_token_id=tc.bos_token_id, eos_token_id=list(tc.eos_token_id),
                     pad_token_id=tc.pad_token_id).save_pretrained(hf_dir)
    with open(os.path.join(hf_dir, "tokenizer_config.json")) as f:
        assert json.load(f)["chat_template"] == CHAT_TEMPLATE
    with open(os.path.join(hf_dir, "training.json"), "w") as f:
        json.dump(info, f, indent=1)


class Reference:
    """transformers' greedy answers, one conversation at a time, as a user of the real model would run it."""

    def __init__(self, hf_dir, max_new):
        from transformers import AutoProcessor
        self.model = MllamaForConditionalGeneration.from_pretrained(hf_dir, attn_implementation="eager",
                                                                    torch_dtype=torch.float32).eval()
        self.proc = AutoProcessor.from_pretrained(hf_dir, use_fast=False)
        self.ip = pil_image_processor(hf_dir)
        self.proc.image_processor = self.ip
        self.tok = self.proc.tokenizer
        self.max_new = max_new
        self.eos = list(self.model.config.text_config.eos_token_id)
        self.pad = self.model.config.text_config.pad_token_id
        self.image_id = self.model.config.image_token_index

    @torch.no_grad()
    def run(self, messages, rgbs):
        templated = render(self.tok, messages, True)
        ids = self.tok(templated, add_special_tokens=False)["input_ids"]
        if rgbs:
            inputs = self.proc(images=[[Image.fromarray(r, "RGB") for r in rgbs]], text=templated,
                               add_special_tokens=False, return_tensors="pt")
        else:
            inputs = self.proc(text=templated, add_special_tokens=False, return_tensors="pt")
        assert inputs["input_ids"][0].tolist() == ids
        assert ids.count(self.image_id) == len(rgbs)
        if rgbs:
            # what training saw must be what the processor gives (tiles, aspect ratio ids, masks)
            own = [canvas_tiles(r) for r in rgbs]
            nt = torch.tensor([[o[2] for o in own]])
            assert inputs["aspect_ratio_ids"][0].tolist() == [o[1] for o in own], inputs["aspect_ratio_ids"]
            assert torch.equal(inputs["aspect_ratio_mask"].long(), aspect_mask(nt))
            own_px = normalise(torch.as_tensor(np.stack([o[0] for o in own]))[None], nt)
            assert torch.allclose(inputs["pixel_values"].float(), own_px, atol=1e-5), "training tiles differ from the processor's"
            assert torch.equal(inputs["cross_attention_mask"].long(), cross_mask([ids], nt, len(ids), self.image_id))
        inputs.pop("token_type_ids", None)
        out = self.model.generate(**inputs, max_new_tokens=self.max_new, do_sample=False, num_beams=1,
                                  eos_token_id=self.eos, pad_token_id=self.pad)
        greedy = [int(x) for x in out[0, len(ids):]]
        margin = self.check_nocache(inputs, ids, greedy)
        text = self.tok.decode(greedy, skip_special_tokens=True)
        return dict(templated=templated, ids=ids, greedy=greedy, text=text, margin=margin)

    def check_nocache(self, inputs, ids, greedy):
        """Each greedy token is the argmax of a fresh forward pass; returns the smallest top-2 gap."""
        full = ids + greedy[:-1]
        kw = dict(inputs)
        kw["input_ids"] = torch.tensor([full])
        kw["attention_mask"] = torch.ones(1, len(full), dtype=torch.long)
        if "cross_attention_mask" in inputs:
            cam = inputs["cross_attention_mask"]
            kw["cross_attention_mask"] = torch.cat([cam, cam[:, -1:].repeat(1, len(greedy) - 1, 1, 1)], dim=1)
        lg = self.model(**kw, use_cache=False).logits[0, len(ids) - 1:]
        am = lg.argmax(-1).tolist()
        assert am == greedy, (am, greedy)
        top2 = lg.topk(2, dim=-1).values
        return float((top2[:, 0] - top2[:, 1]).min())

    def chat(self, turns, rgbs):
        """turns: [(n_images, user text)]; each answer is transformers' own greedy one, fed to the next
        turn. -> the last turn's result, with every answer in 'answers'."""
        conv, answers, used = [], [], 0
        for n_img, text in turns:
            conv.append(W_user(n_img, text))
            used += n_img
            r = self.run(hf_messages(conv), rgbs[:used])
            answers.append(r["text"])
            conv.append(W_asst(r["text"]))
        r["answers"] = answers
        return r


def scene(bg, *shapes):
    return dict(bg=bg, shapes=[dict(shape=s, colour=c, pos=p) for s, c, p in shapes])


SAMPLES = [  # file, (W, H), scene, alpha
    ("circle.png", (128, 128), scene("white", ("circle", "red", (0, 0))), False),
    ("ring-wide.png", (200, 100), scene("gray", ("ring", "yellow", (1, 2))), False),
    ("triangle.jpg", (120, 120), scene("pink", ("triangle", "blue", (2, 1))), False),
    ("cross-transparent.png", (96, 96), scene("white", ("cross", "green", (1, 1))), True),
    ("square-tiny.png", (36, 36), scene("brown", ("square", "purple", (2, 2))), False),
    ("diamond-tall.png", (90, 180), scene("gray", ("diamond", "orange", (0, 1))), False),
    ("three-shapes.png", (240, 160), scene("white", ("circle", "red", (0, 0)), ("square", "blue", (1, 2)),
                                           ("triangle", "green", (2, 1))), False),
    ("banner.jpg", (320, 80), scene("pink", ("cross", "black", (1, 0)), ("ring", "yellow", (1, 2))), False),
]
# Sample conversations over those files (README, test_cli): (files, [(n_images, user text)], true answers)
SAMPLE_CHATS = [
    (["ring-wide.png", "circle.png"], [(2, "Which picture shows a red shape?")], ["the second one"]),
    (["three-shapes.png", "triangle.jpg"], [(1, W.CANONICAL_PROMPT), (1, "What colour is the triangle?")], None),
]


def save_sample(img, path):
    if path.endswith(".jpg"):
        img.save(path, quality=92, subsampling=0, optimize=False)
    else:
        img.save(path, optimize=False)
    with Image.open(path) as f:
        f.load()
        return to_rgb(f)


def write_samples(a, ref, log):
    """examples/images/: sample pictures; a sample the model gets wrong is redrawn with the next seed."""
    out_dir = os.path.join(ROOT, "examples", "images")
    os.makedirs(out_dir, exist_ok=True)
    cases, by_name = [], {}
    for k, (name, size, sc, alpha) in enumerate(SAMPLES):
        cap = W.caption_of(sc)
        for tries in range(20):
            img = draw_scene(picture_rng(a.seed, STREAM_SAMPLES, 100 * k + tries), sc, size, alpha_bg=alpha)
            path = os.path.join(out_dir, name)
            rgb = save_sample(img, path)
            r = ref.run(hf_messages([W_user(1, W.CANONICAL_PROMPT)]), [rgb])
            if r["text"] == cap:
                break
            log(f"sample {name}: the model said {r['text']!r} for {cap!r}; drawing it again")
        else:
            log(f"sample {name}: kept a picture the model gets wrong")
        by_name[name] = (rgb, sc)
        cases.append(dict(name=name, kind="caption", rgbs=[rgb], prompt=W.CANONICAL_PROMPT, answer=cap, redraws=tries,
                          answers_text=r["text"], turn_images=[1], **r))
        log(f"sample {name} {size[0]}x{size[1]}: {r['text']!r} (truth {cap!r})")
    for files, turns, truth in SAMPLE_CHATS:
        rgbs = [by_name[f][0] for f in files]
        r = ref.chat(turns, rgbs)
        if truth is None:
            scs = [by_name[f][1] for f in files]
            truth = [W.caption_of(scs[0]), W.ask(scs[1], "colour", W.QUESTIONS["colour"][0], "triangle", "")[1]]
        kind = "which" if len(turns) == 1 else "chat"
        cases.append(dict(name=" ".join(files), kind=kind, rgbs=rgbs, prompt="\n".join(t for _, t in turns),
                          answer=truth[-1], answers_text="\n".join(r["answers"]), redraws=0,
                          turn_images=[n for n, _ in turns], **r))
        log(f"sample {' + '.join(files)}: {r['answers']!r} (truth {truth!r})")
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("# Sample pictures for the demo model\n\n"
                "Drawn by `tools/train_demo.py` (do not edit: it rewrites this folder). `models/mllama-demo.gguf`\n"
                f"captions each with the prompt \"{W.CANONICAL_PROMPT}\" (transformers' greedy output; the true\n"
                "caption follows where the model gets it wrong):\n\n| file | size | caption |\n|---|---|---|\n")
        for c in cases[:len(SAMPLES)]:
            h, w = c["rgbs"][0].shape[:2]
            wrong = "" if c["text"] == c["answer"] else f" (truth: {c['answer']})"
            f.write(f"| `{c['name']}` | {w}x{h} | {c['text']}{wrong} |\n")
        f.write("\nConversations over several of them (the answers are transformers'):\n\n")
        for c in cases[len(SAMPLES):]:
            f.write(f"- {', '.join('`' + n + '`' for n in c['name'].split())}: "
                    + "; ".join(f"\"{q}\" → \"{ans}\"" for q, ans in zip(c["prompt"].split("\n"), c["answers_text"].split("\n")))
                    + "\n")
        f.write("\n`cross-transparent.png` has a transparent background (composited over white, as the runtime does);\n"
                "the `.jpg` files are JPEGs, so a decoder other than Pillow's may give slightly different pixels.\n")
        if any(c["redraws"] for c in cases):
            f.write("Some of these were redrawn (next seed) because the model got the first drawing wrong.\n")
    return cases


REF_SIDE = 160     # the reference file's pictures are at most this big (they are stored as RGB8)


def test_cases(a, ref, pool_scenes_rng):
    """Fresh conversations for the reference: single pictures, which-questions, chats, out-of-world pictures."""
    cases = []
    rng = pool_scenes_rng
    for i in range(a.n_test):
        rgb, sc = training_picture(a.seed, STREAM_TEST, i, REF_SIDE)
        if i % 2 == 0:
            prompt, ans, kind = W.CAPTION_PROMPTS[i // 2 % len(W.CAPTION_PROMPTS)], W.caption_of(sc), "caption"
        else:
            _, prompt, ans = W.random_question(rng, sc)
            kind = "question"
        r = ref.run(hf_messages([W_user(1, prompt)]), [rgb])
        cases.append(dict(name=f"test-{i}", kind=kind, rgbs=[rgb], prompt=prompt, answer=ans, answers_text=r["text"],
                          turn_images=[1], **r))
    k = a.n_test
    for i in range(6):                               # which of 2 or 3 pictures
        n = 2 if i < 4 else 3
        for attempt in range(100):
            pics = [training_picture(a.seed, STREAM_TEST + 10, 100 * i + 10 * attempt + j, REF_SIDE) for j in range(n)]
            kind = list(W.WHICH)[i % len(W.WHICH)]
            vals = W.which_values(kind)
            value = vals[int(rng.integers(len(vals)))]
            ans = W.which_answer([p[1] for p in pics], kind, value)
            if ans is not None and ans != "none of them":
                break
        prompt = W.which_question(kind, value)
        r = ref.run(hf_messages([W_user(n, prompt)]), [p[0] for p in pics])
        cases.append(dict(name=f"test-{k}", kind="which", rgbs=[p[0] for p in pics], prompt=prompt, answer=ans,
                          answers_text=r["text"], turn_images=[n], **r))
        k += 1
    for i in range(4):                               # two-turn chats
        p1, p2 = (training_picture(a.seed, STREAM_TEST + 20, 2 * i + j, REF_SIDE) for j in (0, 1))
        if i < 2:                                    # a picture in each turn
            turns, rgbs = [(1, W.CANONICAL_PROMPT), (1, W.CANONICAL_PROMPT if i == 0 else "How many shapes are there?")], [p1[0], p2[0]]
            ans = W.caption_of(p2[1]) if i == 0 else W.NUMBERS[len(p2[1]["shapes"])]
        elif i == 2:                                 # a greeting, then a picture
            turns, rgbs, ans = [(0, "Hello."), (1, W.CANONICAL_PROMPT)], [p2[0]], W.caption_of(p2[1])
        else:                                        # a follow-up question without a new picture
            turns, rgbs, ans = [(1, W.CANONICAL_PROMPT), (0, "What colour is the background?")], [p1[0]], p1[1]["bg"]
        r = ref.chat(turns, rgbs)
        cases.append(dict(name=f"test-{k}", kind="chat", rgbs=rgbs, prompt="\n".join(t for _, t in turns), answer=ans,
                          answers_text="\n".join(r["answers"]), turn_images=[n for n, _ in turns], **r))
        k += 1
    for i in range(4):                               # outside the world
        rgb = ood_picture(a.seed, STREAM_TEST + 30, i, REF_SIDE)
        prompt = W.CANONICAL_PROMPT if i % 2 == 0 else "What colour is the circle?"
        r = ref.run(hf_messages([W_user(1, prompt)]), [rgb])
        cases.append(dict(name=f"test-{k}", kind="ood", rgbs=[rgb], prompt=prompt, answer=W.NOT_A_SCENE,
                          answers_text=r["text"], turn_images=[1], **r))
        k += 1
    return cases


def write_reference(path, a, cases, n_samples, heldout, train_info, max_new, eos, n_par):
    import gguf
    w = gguf.GGUFWriter(path, "mllama_demo_ref")
    w.add_string("ref.transformers_version", transformers.__version__)
    w.add_string("ref.torch_version", torch.__version__)
    w.add_string("ref.pillow_version", PIL.__version__)
    w.add_string("ref.numpy_version", np.__version__)
    w.add_string("ref.tokenizers_version", importlib.metadata.version("tokenizers"))
    w.add_string("ref.gguf_version", importlib.metadata.version("gguf"))
    w.add_uint32("ref.n_cases", len(cases))
    w.add_uint32("ref.n_samples", n_samples)
    w.add_uint32("ref.max_new_tokens", max_new)
    w.add_key_value("ref.eos_ids", [int(x) for x in eos], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_string("ref.canonical_prompt", W.CANONICAL_PROMPT)
    w.add_uint32("ref.cases_correct", sum(int(c["text"] == c["answer"]) for c in cases))
    w.add_uint32("ref.heldout_n", heldout[1])
    w.add_uint32("ref.heldout_correct", heldout[0])
    w.add_float32("ref.heldout_accuracy", heldout[0] / heldout[1])
    w.add_uint32("ref.train_steps", train_info[0])
    w.add_float32("ref.train_seconds", train_info[1])
    w.add_uint32("ref.seed", a.seed)
    w.add_uint32("ref.n_params", n_par)
    for k, c in enumerate(cases):
        w.add_uint32(f"case.{k}.n_images", len(c["rgbs"]))
        for j, rgb in enumerate(c["rgbs"]):
            h, wd = rgb.shape[:2]
            w.add_tensor(f"case.{k}.image.{j}.rgb", np.ascontiguousarray(rgb.reshape(h, wd * 3)).view(np.int8))
            w.add_uint32(f"case.{k}.image.{j}.width", wd)
            w.add_uint32(f"case.{k}.image.{j}.height", h)
        # add_key_value: gguf's add_string leaves out empty strings (an untrained model's answer)
        for key, val in (("name", c["name"]), ("kind", c["kind"]), ("prompt", c["prompt"]), ("templated", c["templated"]),
                         ("answer", c["answer"]), ("greedy_text", c["text"]), ("answers_text", c["answers_text"])):
            w.add_key_value(f"case.{k}.{key}", val, gguf.GGUFValueType.STRING)
        for key, vals in (("prompt_ids", c["ids"]), ("greedy_ids", c["greedy"]), ("answer_ids", c["answer_ids"]),
                          ("turn_images", c["turn_images"])):
            w.add_key_value(f"case.{k}.{key}", [int(x) for x in vals], gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType.INT32)
        w.add_uint32(f"case.{k}.correct", int(c["text"] == c["answer"]))
        w.add_float32(f"case.{k}.min_margin", c["margin"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def export(a, model, tokenizer, train_seconds, log):
    import convert_hf_to_gguf as conv
    tmp = tempfile.mkdtemp(prefix="mllama-demo-")
    hf_dir = os.path.join(tmp, "mllama-demo")
    try:
        info = dict(train_steps=a.steps, train_seconds=train_seconds, seed=a.seed,
                    train_command=(f"python tools/train_demo.py --seed {a.seed} --threads {a.threads} --steps {a.steps} "
                                   f"--batch {a.batch} --lr {a.lr} --warmup {a.warmup} --probe-weight {a.probe_weight} "
                                   f"--pool {a.pool} --pool-ood {a.pool_ood}" +
                                   (f" --mix {a.mix}" if a.mix != STEP_IMAGES else "") +
                                   (f" --init-from {a.init_from} --first-batch {a.first_batch}" if a.init_from else "")))
        if a.init_from:
            info.update(train_steps=a.first_batch + a.steps, init_from_sha256=a.init_from_sha256)
        save_checkpoint(model, tokenizer, hf_dir, info)
        models_dir = os.path.join(ROOT, "models")
        fix_dir = os.path.join(ROOT, "tests", "fixtures", "demo")
        os.makedirs(models_dir, exist_ok=True)
        os.makedirs(fix_dir, exist_ok=True)
        files = conv.convert(hf_dir, os.path.join(models_dir, "mllama-demo.gguf"), "f32")
        files += conv.convert(hf_dir, os.path.join(fix_dir, "mllama-demo-text.gguf"), "f32", split=True,
                              proj_outfile=os.path.join(fix_dir, "mllama-demo-proj.gguf"))

        ref = Reference(hf_dir, a.max_new)
        eot = ids_of(ref.tok, "<|eot_id|>")
        # held-out accuracy: fresh pictures, canonical prompt
        t0 = time.time()
        correct = 0
        for i in range(a.heldout):
            rgb, sc = training_picture(a.seed, STREAM_HELDOUT, i)
            r = ref.run(hf_messages([W_user(1, W.CANONICAL_PROMPT)]), [rgb])
            ok = r["text"] == W.caption_of(sc)
            correct += ok
            if not ok:
                log(f"held-out {i} {rgb.shape[1]}x{rgb.shape[0]}: {r['text']!r} != {W.caption_of(sc)!r}")
        log(f"held-out accuracy: {correct}/{a.heldout} = {100.0 * correct / a.heldout:.1f}% "
            f"(transformers greedy, {time.time() - t0:.0f} s)")

        cases = write_samples(a, ref, log)
        n_samples = len(cases)
        cases += test_cases(a, ref, np.random.default_rng([a.seed, 77]))
        for c in cases:
            c["answer_ids"] = ref.tok(c["answer"], add_special_tokens=False)["input_ids"] + [eot]
            same_ids = c["greedy"] == c["answer_ids"]
            assert same_ids == (c["text"] == c["answer"]), (c["name"], c["greedy"], c["answer_ids"])
            if c["text"] != c["answer"]:
                log(f"reference case {c['name']} ({c['kind']}): {c['text']!r}, truth {c['answer']!r}")
        n_ok = sum(c["text"] == c["answer"] for c in cases)
        log(f"reference cases: {len(cases)} ({n_samples} samples), {n_ok} answered correctly; smallest logit gap "
            f"{min(c['margin'] for c in cases):.3f}")
        ref_path = os.path.join(fix_dir, "demo-ref.gguf")
        write_reference(ref_path, a, cases, n_samples, (correct, a.heldout), (a.first_batch + a.steps, train_seconds), a.max_new,
                        ref.eos, n_params(ref.model))
        files.append(ref_path)
        files += [os.path.join(ROOT, "examples", "images", n) for n, *_ in SAMPLES]
        files.append(os.path.join(ROOT, "examples", "images", "README.md"))
        if a.keep_hf:
            shutil.rmtree(a.keep_hf, ignore_errors=True)
            shutil.copytree(hf_dir, a.keep_hf)
        return files
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/tmp/mllama-demo-train", help="checkpoints, picture cache and train.log")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (results depend on it)")
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--mix", default=STEP_IMAGES, help="shares of steps with 0, 1, 2 and 3 pictures a conversation")
    ap.add_argument("--probe-weight", type=float, default=0.5, help="weight of the patch-label loss (PatchProbe)")
    ap.add_argument("--pool", type=int, default=120000, help="training pictures of the world")
    ap.add_argument("--pool-ood", type=int, default=1200, help="training pictures outside it")
    ap.add_argument("--eval-every", type=int, default=2500)
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--heldout", type=int, default=200, help="fresh pictures for the accuracy figure")
    ap.add_argument("--n-test", type=int, default=24, help="single-picture test cases in the reference file")
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--init-from", help="start from the weights of this demo model file (a GGUF the script wrote; the "
                    "probe and the optimizer start anew) instead of random ones")
    ap.add_argument("--first-batch", type=int, default=0,
                    help="number of the first batch (with --init-from: the steps that file was trained, so that the "
                         "batches are new ones)")
    ap.add_argument("--resume", action="store_true", help="continue from WORK/ckpt.pt")
    ap.add_argument("--train-only", action="store_true", help="stop after training (export later with --export-only)")
    ap.add_argument("--export-only", action="store_true", help="export WORK/ckpt.pt (a finished run)")
    ap.add_argument("--from-hf", help="export this Hugging Face checkpoint folder (a --keep-hf copy) instead")
    ap.add_argument("--keep-hf", help="also keep the Hugging Face checkpoint in this folder")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    os.makedirs(a.work, exist_ok=True)
    log = Log(os.path.join(a.work, "train.log"))
    log("command: " + " ".join(sys.argv))
    if transformers.__version__ != TESTED_TRANSFORMERS:
        log(f"warning: transformers {transformers.__version__}; the demo was made with {TESTED_TRANSFORMERS} "
            f"(Meta's vision tap rule; 4.55+ shifted it)")
    assert hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest() == CHAT_TEMPLATE_SHA256
    tokenizer = train_tokenizer()
    cfg = make_config(tokenizer)
    if a.from_hf:
        model = MllamaForConditionalGeneration.from_pretrained(a.from_hf, torch_dtype=torch.float32).eval()
        with open(os.path.join(a.from_hf, "training.json")) as f:
            info = json.load(f)
        secs, a.steps, a.seed = info["train_seconds"], info["train_steps"], info["seed"]
        for key in ("threads", "batch", "lr", "warmup", "pool", "pool_ood", "mix", "init_from", "first_batch"):   # as they were
            parts = info["train_command"].split(f"--{key.replace('_', '-')} ")
            if len(parts) > 1:
                setattr(a, key, (int if key == "first_batch" else type(getattr(a, key) or ""))(parts[1].split()[0]))
        a.steps -= a.first_batch
        a.init_from_sha256 = info.get("init_from_sha256")
    else:
        a.init_from_sha256 = sha(a.init_from) if a.init_from else None
        if a.export_only:
            a.resume = True
            done = torch.load(os.path.join(a.work, "ckpt.pt"), weights_only=False)["step"]
            assert done == a.steps, f"the checkpoint is at step {done} of {a.steps}"
        model, secs = train(a, tokenizer, cfg, log)
    if a.train_only:
        return
    files = export(a, model, tokenizer, secs, log)
    log("=== files ===")
    for f in files:
        log(f"{os.path.relpath(f, ROOT):45s} {os.path.getsize(f):9d} bytes  sha256 {sha(f)}")
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}, "
        f"pillow {PIL.__version__}, tokenizers {importlib.metadata.version('tokenizers')}, "
        f"gguf {importlib.metadata.version('gguf')}")


if __name__ == "__main__":
    main()
