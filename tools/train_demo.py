#!/usr/bin/env python3
"""Train the bundled demo model: a tiny Llama 3.2 Vision ("mllama") that captions synthetic pictures.

    python tools/train_demo.py [--work DIR] [--resume] [--export-only] [--steps N]

CPU only (2 threads), deterministic from --seed with the pinned packages. It
 1. draws pictures with Pillow from a seed: one shape (SHAPES) of a colour (COLOURS) and a size
    (small/large) at one of nine places (POSITIONS, a 3x3 grid) on a slightly noisy background
    (BACKGROUNDS), with jitter, in several sizes and aspect ratios; the caption follows from the
    picture, e.g. "a small red circle at the top left on a white background";
 2. trains a byte-level BPE tokenizer in Llama 3's format (Llama 3 split regex + ByteLevel, all 256
    byte tokens, the Llama 3 special tokens, <|image|> last) on prompts, captions and some English;
    tokenizer_config.json carries the chat template of meta-llama/Llama-3.2-11B-Vision-Instruct;
 3. trains MllamaForConditionalGeneration (config in make_config) with AdamW on the answer tokens of
    chat-templated prompts (image first, then one of PROMPTS), checkpointing to --work;
 4. saves the Hugging Face checkpoint and converts it with tools/convert_hf_to_gguf.py to
    models/mllama-demo.gguf and (--split) tests/fixtures/demo/mllama-demo-{text,proj}.gguf;
 5. writes examples/images/ (sample pictures and a README with their captions) and
    tests/fixtures/demo/demo-ref.gguf (below), with transformers' greedy captions (float32, eager
    attention, the PIL image processor; transformers 4.46 takes the vision taps by Meta's rule).

Reference file tests/fixtures/demo/demo-ref.gguf (read by tests/test_demo.c; names are a contract):
  keys   ref.transformers_version, ref.torch_version, ref.pillow_version, ref.numpy_version,
         ref.tokenizers_version, ref.gguf_version (str);
         ref.n_cases, ref.n_samples (u32: cases 0..n_samples-1 are the files of examples/images/),
         ref.max_new_tokens (u32), ref.eos_ids (int32[]), ref.canonical_prompt (str),
         ref.cases_correct (u32: cases whose greedy caption equals the true caption),
         ref.heldout_n, ref.heldout_correct (u32), ref.heldout_accuracy (f32): exact-match accuracy of
         transformers' greedy captions on fresh pictures never used in training (canonical prompt),
         ref.train_steps (u32), ref.train_seconds (f32), ref.seed (u32), ref.n_params (u32)
  case k case.{k}.rgb (I8 tensor, ne {3*W, H}: RGB8 bytes, alpha already composited over white),
         case.{k}.width, case.{k}.height (u32), case.{k}.name (str: file name, or "test-N"),
         case.{k}.prompt (str: the user text), case.{k}.templated (str: the chat-templated prompt),
         case.{k}.prompt_ids (int32[]: its ids, add_special_tokens=False), case.{k}.greedy_ids
         (int32[]: transformers' greedy tokens, the eos id included when one came within
         max_new_tokens), case.{k}.greedy_text (str: decoded, special tokens skipped),
         case.{k}.caption (str: the true caption), case.{k}.caption_ids (int32[]: its ids followed by
         <|eot_id|>; equal to greedy_ids exactly when the caption is right, checked),
         case.{k}.correct (u32: 1 when greedy_text equals caption),
         case.{k}.min_margin (f32: smallest top-1 minus top-2 logit along the greedy path)
"""

import argparse
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
import sys
import tempfile
import time

# OpenMP threads that spin while waiting are very slow on shared cores (set before torch loads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import PIL  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MllamaConfig, MllamaForConditionalGeneration  # noqa: E402

TESTED_TRANSFORMERS = "4.46.3"

# ---------------------------------------------------------------------------------------------------
# the task

SHAPES = ["circle", "square", "triangle", "cross", "diamond", "ring"]   # a star was too often taken for a triangle
COLOURS = {"red": (215, 35, 35), "orange": (245, 135, 20), "yellow": (240, 215, 35), "green": (35, 160, 60),
           "blue": (35, 75, 215), "purple": (135, 45, 175), "black": (20, 20, 20)}
BACKGROUNDS = {"white": (245, 245, 245), "gray": (128, 128, 128), "brown": (115, 75, 45), "pink": (245, 185, 200)}
SIZES = {"small": (0.115, 0.125), "large": (0.175, 0.19)}      # radius / shorter side
POSITIONS = {(0, 0): "at the top left", (0, 1): "at the top", (0, 2): "at the top right",
             (1, 0): "on the left", (1, 1): "in the center", (1, 2): "on the right",
             (2, 0): "at the bottom left", (2, 1): "at the bottom", (2, 2): "at the bottom right"}
GRID = [0.22, 0.5, 0.78]          # centres of the places, as fractions of width / height
JITTER = 0.02
ASPECTS = [(1, 1)] * 3 + [(2, 1), (1, 2)]     # these fill their tile canvases: no padding

POOL_VERSION = 5                # bump when the pictures or their tiles change

CANONICAL_PROMPT = "Describe this image."
PROMPTS = [CANONICAL_PROMPT, "Describe the picture.", "What do you see?", "What is in this image?",
           "Caption this image.", "What does the picture show?", "Describe the image in one sentence.",
           "What is shown here?"]


def caption_of(a):
    return f"a {a['size']} {a['colour']} {a['shape']} {POSITIONS[a['pos']]} on a {a['bg']} background"


def all_captions():
    return [caption_of(dict(size=s, colour=c, shape=sh, pos=p, bg=b)) for s in SIZES for c in COLOURS
            for sh in SHAPES for p in POSITIONS for b in BACKGROUNDS]


def shape_polygon(shape, cx, cy, r, rot):
    """Vertices (or None for the circle) of a shape of 'radius' r centred at (cx, cy), rotated by rot."""
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
    return [(cx + r * (x * c - y * s), cy + r * (x * s + y * c)) for x, y in pts]


def draw_picture(rng, size=None, attrs=None, alpha_bg=False):
    """-> (PIL image, attributes). size: (W, H) or None for a random one; attrs: fixed attributes."""
    a = dict(attrs or {})
    a.setdefault("shape", SHAPES[rng.integers(len(SHAPES))])
    a.setdefault("colour", list(COLOURS)[rng.integers(len(COLOURS))])
    a.setdefault("size", list(SIZES)[rng.integers(len(SIZES))])
    a.setdefault("pos", list(POSITIONS)[rng.integers(len(POSITIONS))])
    a.setdefault("bg", list(BACKGROUNDS)[rng.integers(len(BACKGROUNDS))])
    if size is None:
        aw, ah = ASPECTS[rng.integers(len(ASPECTS))]
        short = int(rng.integers(36, 181)) if aw == ah else int(rng.integers(IMAGE_SIZE, 121))
        size = (short * aw, short * ah)
    W, H = size
    ss = 4                                                   # supersampling for smooth edges
    bg = np.array(BACKGROUNDS[a["bg"]], np.float64) + rng.uniform(-8, 8, 3)
    fg = np.array(COLOURS[a["colour"]], np.float64) + rng.uniform(-12, 12, 3)
    fg_t = tuple(int(v) for v in np.clip(np.rint(fg), 0, 255))
    mask = Image.new("L", (W * ss, H * ss), 0)
    d = ImageDraw.Draw(mask)
    lo, hi = SIZES[a["size"]]
    r = rng.uniform(lo, hi) * min(W, H) * ss
    row, col = a["pos"]
    cx = (GRID[col] + rng.uniform(-JITTER, JITTER)) * W * ss
    cy = (GRID[row] + rng.uniform(-JITTER, JITTER)) * H * ss
    rot = math.radians(rng.uniform(-10, 10))
    poly = shape_polygon(a["shape"], cx, cy, r, rot)
    if poly is None:
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
        if a["shape"] == "ring":
            h = 0.55 * r
            d.ellipse([cx - h, cy - h, cx + h, cy + h], fill=0)
    else:
        d.polygon(poly, fill=255)
    m = np.asarray(mask.resize((W, H), Image.BOX), np.float64)[..., None] / 255.0
    noise = rng.normal(0, 4.0, (H, W, 1)) + rng.normal(0, 2.0, (H, W, 3))
    img = np.clip(np.rint(bg * (1 - m) + np.array(fg_t) * m + noise * (1 - 0.5 * m)), 0, 255).astype(np.uint8)
    if alpha_bg:                                             # background transparent, shape opaque
        alpha = np.clip(np.rint(m[..., 0] * 255), 0, 255).astype(np.uint8)
        return Image.fromarray(np.dstack([img, alpha]), "RGBA"), a
    return Image.fromarray(img, "RGB"), a


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
BPE_VOCAB = 512                 # byte tokens + merges; the specials and <|image|> follow
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")

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
    corpus = []
    for cap in all_captions():
        corpus.append(cap)
    for p in PROMPTS:
        corpus += [p] * 50
    corpus += ["user", "assistant", "system", "ipython"] * 50
    corpus += ["Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"] * 10
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


def render_prompt(tokenizer, text):
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


# ---------------------------------------------------------------------------------------------------
# model

IMAGE_SIZE, PATCH, MAX_TILES = 48, 8, 2
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]


def make_config(tokenizer):
    V = BPE_VOCAB + len(SPECIALS)
    T = MAX_TILES
    sar = [list(r) for r in supported_ratios()]
    taps = [1, 2]
    vision = dict(hidden_size=64, hidden_act="gelu", num_hidden_layers=3, num_global_layers=1,
                  attention_heads=4, num_channels=3, intermediate_size=128, vision_output_dim=64 * (1 + len(taps)),
                  image_size=IMAGE_SIZE, patch_size=PATCH, norm_eps=1e-5, max_num_tiles=T,
                  intermediate_layers_indices=taps, supported_aspect_ratios=sar, initializer_range=0.02)
    eos = [ids_of(tokenizer, "<|end_of_text|>"), ids_of(tokenizer, "<|eom_id|>"), ids_of(tokenizer, "<|eot_id|>")]
    text = dict(vocab_size=V, hidden_size=80, hidden_act="silu", num_hidden_layers=5, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=144, rope_theta=500000.0,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=512),
                rms_norm_eps=1e-5, max_position_embeddings=4096, tie_word_embeddings=False,
                cross_attention_layers=[1, 3], bos_token_id=ids_of(tokenizer, "<|begin_of_text|>"),
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
    """transformers' list: (width, height) pairs, width outer; ids look up (rows, cols) in it (spec §3)."""
    T = MAX_TILES
    return [(w, h) for w in range(1, T + 1) for h in range(1, T + 1) if w * h <= T]


def canvas_tiles(rgb):
    """The processor's resize + pad + tile cut on uint8 (normalisation happens later in torch):
    -> (tiles uint8 (MAX_TILES, 3, S, S), aspect_ratio_id, n_tiles)."""
    from transformers.models.mllama import image_processing_mllama as ipm
    H, W = rgb.shape[:2]
    S = IMAGE_SIZE
    ch, cw = ipm.get_optimal_tiled_canvas(image_height=H, image_width=W, max_image_tiles=MAX_TILES, tile_size=S)
    nh, nw = ipm.get_image_size_fit_to_canvas(image_height=H, image_width=W, canvas_height=ch, canvas_width=cw,
                                              tile_size=S)
    img = Image.fromarray(rgb, "RGB")
    if (nw, nh) != (W, H):
        img = img.resize((nw, nh), Image.BILINEAR)
    canvas = np.zeros((ch, cw, 3), np.uint8)
    canvas[:nh, :nw] = np.asarray(img)
    rows, cols = ch // S, cw // S
    tiles = np.zeros((MAX_TILES, 3, S, S), np.uint8)
    for r in range(rows):
        for c in range(cols):
            tiles[r * cols + c] = canvas[r * S:(r + 1) * S, c * S:(c + 1) * S].transpose(2, 0, 1)
    arid = supported_ratios().index((rows, cols)) + 1
    return tiles, arid, rows * cols


def normalise(tiles_u8, ntiles):
    """uint8 tiles (B, T, 3, S, S), tile counts (B,) -> float pixel values (B, 1, T, 3, S, S)."""
    x = tiles_u8.float() * (1.0 / 255.0)
    mean = torch.tensor(MEAN).view(1, 1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 1, 3, 1, 1)
    x = (x - mean) / std
    keep = (torch.arange(MAX_TILES)[None, :] < ntiles[:, None]).float().view(-1, MAX_TILES, 1, 1, 1)
    return (x * keep).unsqueeze(1)


def aspect_mask(ntiles):
    return (torch.arange(MAX_TILES)[None, :] < ntiles[:, None]).long().unsqueeze(1)


def cross_mask(ids, img_pos, ntiles, L):
    """(B, L, 1, T): tokens from the image token on see the image's tiles."""
    B = len(ids)
    m = torch.zeros(B, L, 1, MAX_TILES, dtype=torch.long)
    for b in range(B):
        m[b, img_pos[b]:, 0, :int(ntiles[b])] = 1
    return m


# ---------------------------------------------------------------------------------------------------
# data

class Pool:
    """Training pictures, drawn once (cached in the work folder)."""

    def __init__(self, tiles, arid, ntiles, caps):
        self.tiles, self.arid, self.ntiles, self.caps = tiles, arid, ntiles, caps


def picture_rng(seed, stream, i):
    return np.random.default_rng([seed, stream, i])


STREAM_TRAIN, STREAM_VAL, STREAM_HELDOUT, STREAM_TEST, STREAM_SAMPLES = 1, 2, 3, 4, 5


def make_pool(seed, n, stream, log):
    tiles = np.zeros((n, MAX_TILES, 3, IMAGE_SIZE, IMAGE_SIZE), np.uint8)
    arid = np.zeros(n, np.int64)
    ntiles = np.zeros(n, np.int64)
    caps = []
    t0 = time.time()
    for i in range(n):
        img, a = draw_picture(picture_rng(seed, stream, i))
        tiles[i], arid[i], ntiles[i] = canvas_tiles(to_rgb(img))
        caps.append(caption_of(a))
        if (i + 1) % 5000 == 0:
            log(f"pictures: {i + 1}/{n} ({time.time() - t0:.0f} s)")
    return Pool(tiles, arid, ntiles, caps)


class Encoder:
    """Prompt and caption token ids."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.prompt_ids = [tokenizer(render_prompt(tokenizer, p), add_special_tokens=False)["input_ids"] for p in PROMPTS]
        self.image_id = ids_of(tokenizer, IMAGE_TOKEN_TEXT)
        self.eot = ids_of(tokenizer, "<|eot_id|>")
        self.pad = ids_of(tokenizer, "<|finetune_right_pad_id|>")
        self.cache = {}

    def caption_ids(self, cap):
        if cap not in self.cache:
            self.cache[cap] = self.tok(cap, add_special_tokens=False)["input_ids"]
        return self.cache[cap]

    def batch(self, tiles, ntiles, arid, caps, prompt_idx):
        seqs, labels, img_pos = [], [], []
        for cap, p in zip(caps, prompt_idx):
            pr = self.prompt_ids[p]
            ans = self.caption_ids(cap) + [self.eot]
            seqs.append(pr + ans)
            labels.append([-100] * len(pr) + ans)
            img_pos.append(pr.index(self.image_id))
        L = max(len(s) for s in seqs)
        B = len(seqs)
        ids = torch.full((B, L), self.pad, dtype=torch.long)
        lab = torch.full((B, L), -100, dtype=torch.long)
        att = torch.zeros((B, L), dtype=torch.long)
        for b, (s, lb) in enumerate(zip(seqs, labels)):
            ids[b, :len(s)] = torch.tensor(s)
            lab[b, :len(s)] = torch.tensor(lb)
            att[b, :len(s)] = 1
        nt = torch.as_tensor(ntiles)
        return dict(input_ids=ids, attention_mask=att, labels=lab,
                    pixel_values=normalise(torch.as_tensor(tiles), nt),
                    aspect_ratio_ids=torch.as_tensor(arid).view(-1, 1), aspect_ratio_mask=aspect_mask(nt),
                    cross_attention_mask=cross_mask(seqs, img_pos, nt, L))


@torch.no_grad()
def batch_greedy_accuracy(model, enc, pool, max_new=24):
    """Exact-match accuracy of batched greedy captions (canonical prompt) with transformers' generate."""
    model.eval()
    pr = enc.prompt_ids[0]
    n = len(pool.caps)
    correct = 0
    for s in range(0, n, 100):
        e = min(n, s + 100)
        B = e - s
        nt = torch.as_tensor(pool.ntiles[s:e])
        ids = torch.tensor([pr] * B)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             pixel_values=normalise(torch.as_tensor(pool.tiles[s:e]), nt),
                             aspect_ratio_ids=torch.as_tensor(pool.arid[s:e]).view(-1, 1),
                             aspect_ratio_mask=aspect_mask(nt),
                             cross_attention_mask=cross_mask([pr] * B, [pr.index(enc.image_id)] * B, nt, len(pr)),
                             max_new_tokens=max_new, do_sample=False, num_beams=1,
                             eos_token_id=model.config.text_config.eos_token_id, pad_token_id=enc.pad)
        for b in range(B):
            text = enc.tok.decode(out[b, len(pr):], skip_special_tokens=True)
            correct += text == pool.caps[s + b]
    model.train()
    return correct / n


# ---------------------------------------------------------------------------------------------------
# training

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
    return peak * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * p)))


def lr_at(step, a):
    """A cosine cycle of a.steps, then (warm restart) one of a.restart_steps at a.restart_lr."""
    if step < a.steps:
        return cosine(step, a.steps, a.lr, a.warmup)
    return cosine(step - a.steps, a.restart_steps, a.restart_lr, 100)


PROMPT_WEIGHTS = np.array([0.3] + [0.7 / (len(PROMPTS) - 1)] * (len(PROMPTS) - 1))


def train(a, tokenizer, cfg, log):
    os.makedirs(a.work, exist_ok=True)
    pool_path = os.path.join(a.work, f"pool-{a.seed}-{a.pool}-{IMAGE_SIZE}-{POOL_VERSION}.npz")
    if os.path.exists(pool_path):
        z = np.load(pool_path)
        pool = Pool(z["tiles"], z["arid"], z["ntiles"], [str(c) for c in z["caps"]])
        log(f"pool: {len(pool.caps)} pictures from {pool_path}")
    else:
        pool = make_pool(a.seed, a.pool, STREAM_TRAIN, log)
        np.savez(pool_path + ".tmp.npz", tiles=pool.tiles, arid=pool.arid, ntiles=pool.ntiles, caps=np.array(pool.caps))
        os.replace(pool_path + ".tmp.npz", pool_path)
        log(f"pool: {len(pool.caps)} pictures drawn, cached in {pool_path}")
    val = make_pool(a.seed, 200, STREAM_VAL, log)
    enc = Encoder(tokenizer)

    model = build_model(cfg, a.seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98), eps=1e-8)
    ckpt = os.path.join(a.work, "ckpt.pt")
    start, elapsed = 0, 0.0
    if a.resume and os.path.exists(ckpt):
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        start, elapsed = st["step"], st["elapsed"]
        log(f"resumed at step {start} ({elapsed:.0f} s of training so far)")
    total_steps = a.steps + a.restart_steps
    log(f"model: {n_params(model)} parameters; training {total_steps} steps of {a.batch}")

    def save(step, elapsed):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed},
                   ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)

    t0 = time.time() - elapsed
    run_loss, run_n = 0.0, 0
    for step in range(start, total_steps):
        rng = np.random.default_rng([a.seed, 100, step])
        idx = np.sort(rng.integers(0, len(pool.caps), a.batch))
        pidx = rng.choice(len(PROMPTS), a.batch, p=PROMPT_WEIGHTS)
        batch = enc.batch(pool.tiles[idx], pool.ntiles[idx], pool.arid[idx], [pool.caps[i] for i in idx], pidx)
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = model(**batch, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        run_loss += float(loss)
        run_n += 1
        done = step + 1
        if done % 50 == 0 or done == total_steps:
            log(f"step {done}/{total_steps} loss {run_loss / run_n:.4f} lr {lr:.2e} {time.time() - t0:.0f} s")
            run_loss, run_n = 0.0, 0
        if done % a.eval_every == 0 or done == total_steps:
            acc = batch_greedy_accuracy(model, enc, val)
            log(f"step {done} val accuracy {acc * 100:.1f}% (200 held-out pictures, batched greedy)")
        if done % a.ckpt_every == 0 or done == total_steps:
            save(done, time.time() - t0)
    total = time.time() - t0
    if start < total_steps:
        log(f"training done: {total_steps} steps in {total:.0f} s")
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


def save_checkpoint(model, tokenizer, hf_dir):
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


class Reference:
    """transformers' greedy captions, one picture at a time, as a user of the real model would run it."""

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
    def run(self, rgb, prompt):
        templated = render_prompt(self.tok, prompt)
        ids = self.tok(templated, add_special_tokens=False)["input_ids"]
        inputs = self.proc(images=[[Image.fromarray(rgb, "RGB")]], text=templated, add_special_tokens=False,
                           return_tensors="pt")
        assert inputs["input_ids"][0].tolist() == ids
        nt = inputs["aspect_ratio_mask"][0].sum(-1)
        # what training saw must be what the processor gives (tiles, aspect ratio id)
        tiles, arid, ntiles = canvas_tiles(rgb)
        assert int(inputs["aspect_ratio_ids"][0, 0]) == arid and int(nt) == ntiles, (inputs["aspect_ratio_ids"], arid)
        own_px = normalise(torch.as_tensor(tiles)[None], torch.as_tensor([ntiles]))
        assert torch.allclose(inputs["pixel_values"].float(), own_px, atol=1e-5), "training tiles differ from the processor's"
        own = cross_mask([ids], [ids.index(self.image_id)], nt, len(ids))
        assert torch.equal(inputs["cross_attention_mask"].long(), own)
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
        cam = inputs["cross_attention_mask"]
        kw["cross_attention_mask"] = torch.cat([cam, cam[:, -1:].repeat(1, len(greedy) - 1, 1, 1)], dim=1)
        lg = self.model(**kw, use_cache=False).logits[0, len(ids) - 1:]
        am = lg.argmax(-1).tolist()
        assert am == greedy, (am, greedy)
        top2 = lg.topk(2, dim=-1).values
        return float((top2[:, 0] - top2[:, 1]).min())


SAMPLES = [  # file, (W, H), attributes, alpha
    ("circle.png", (128, 128), dict(shape="circle", colour="red", size="large", pos=(0, 0), bg="white"), False),
    ("ring-wide.png", (200, 100), dict(shape="ring", colour="yellow", size="large", pos=(1, 2), bg="gray"), False),
    ("triangle.jpg", (120, 120), dict(shape="triangle", colour="blue", size="small", pos=(2, 1), bg="pink"), False),
    ("cross-transparent.png", (96, 96), dict(shape="cross", colour="green", size="large", pos=(1, 1), bg="white"), True),
    ("square-tiny.png", (36, 36), dict(shape="square", colour="purple", size="large", pos=(2, 2), bg="brown"), False),
    ("diamond-tall.png", (90, 180), dict(shape="diamond", colour="orange", size="small", pos=(0, 1), bg="gray"), False),
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
    cases = []
    for k, (name, size, attrs, alpha) in enumerate(SAMPLES):
        for tries in range(20):
            img, at = draw_picture(picture_rng(a.seed, STREAM_SAMPLES, 100 * k + tries), size=size, attrs=attrs,
                                   alpha_bg=alpha)
            path = os.path.join(out_dir, name)
            rgb = save_sample(img, path)
            r = ref.run(rgb, CANONICAL_PROMPT)
            cap = caption_of(at)
            if r["text"] == cap:
                break
            log(f"sample {name}: the model said {r['text']!r} for {cap!r}; drawing it again")
        else:
            log(f"sample {name}: kept a picture the model gets wrong")
        cases.append(dict(name=name, rgb=rgb, prompt=CANONICAL_PROMPT, caption=cap, redraws=tries, **r))
        log(f"sample {name} {size[0]}x{size[1]}: {r['text']!r} (truth {cap!r})")
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("# Sample pictures for the demo model\n\n"
                "Drawn by `tools/train_demo.py` (do not edit: it rewrites this folder). `models/mllama-demo.gguf`\n"
                f"captions each with the prompt \"{CANONICAL_PROMPT}\"; the expected captions (transformers' greedy\n"
                + ("output, which is also the true caption of every picture here):\n\n" if all(c["text"] == c["caption"] for c in cases)
                   else "output; the true caption follows where the model gets it wrong):\n\n")
                + "| file | size | caption |\n|---|---|---|\n")
        for c in cases:
            h, w = c["rgb"].shape[:2]
            wrong = "" if c["text"] == c["caption"] else f" (truth: {c['caption']})"
            f.write(f"| `{c['name']}` | {w}x{h} | {c['text']}{wrong} |\n")
        f.write("\n`cross-transparent.png` has a transparent background (composited over white, as the runtime does);\n"
                "`triangle.jpg` is a JPEG, so a decoder other than Pillow's may give slightly different pixels.\n")
        if any(c["redraws"] for c in cases):
            f.write("Some of these were redrawn (next seed) because the model got the first drawing wrong.\n")
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
    w.add_string("ref.canonical_prompt", CANONICAL_PROMPT)
    w.add_uint32("ref.cases_correct", sum(int(c["text"] == c["caption"]) for c in cases))
    w.add_uint32("ref.heldout_n", heldout[1])
    w.add_uint32("ref.heldout_correct", heldout[0])
    w.add_float32("ref.heldout_accuracy", heldout[0] / heldout[1])
    w.add_uint32("ref.train_steps", train_info[0])
    w.add_float32("ref.train_seconds", train_info[1])
    w.add_uint32("ref.seed", a.seed)
    w.add_uint32("ref.n_params", n_par)
    for k, c in enumerate(cases):
        h, wd = c["rgb"].shape[:2]
        w.add_tensor(f"case.{k}.rgb", np.ascontiguousarray(c["rgb"].reshape(h, wd * 3)).view(np.int8))
        w.add_uint32(f"case.{k}.width", wd)
        w.add_uint32(f"case.{k}.height", h)
        w.add_string(f"case.{k}.name", c["name"])
        w.add_string(f"case.{k}.prompt", c["prompt"])
        w.add_string(f"case.{k}.templated", c["templated"])
        for key, vals in (("prompt_ids", c["ids"]), ("greedy_ids", c["greedy"]), ("caption_ids", c["caption_ids"])):
            w.add_key_value(f"case.{k}.{key}", [int(x) for x in vals], gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType.INT32)
        w.add_string(f"case.{k}.greedy_text", c["text"])
        w.add_string(f"case.{k}.caption", c["caption"])
        w.add_uint32(f"case.{k}.correct", int(c["text"] == c["caption"]))
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
        save_checkpoint(model, tokenizer, hf_dir)
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
            img, at = draw_picture(picture_rng(a.seed, STREAM_HELDOUT, i))
            r = ref.run(to_rgb(img), CANONICAL_PROMPT)
            ok = r["text"] == caption_of(at)
            correct += ok
            if not ok:
                log(f"held-out {i}: {r['text']!r} != {caption_of(at)!r}")
        log(f"held-out accuracy: {correct}/{a.heldout} = {100.0 * correct / a.heldout:.1f}% "
            f"(transformers greedy, {time.time() - t0:.0f} s)")

        cases = write_samples(a, ref, log)
        n_samples = len(cases)
        for i in range(a.n_test):
            img, at = draw_picture(picture_rng(a.seed, STREAM_TEST, i))
            rgb = to_rgb(img)
            prompt = PROMPTS[i % len(PROMPTS)]
            r = ref.run(rgb, prompt)
            cases.append(dict(name=f"test-{i}", rgb=rgb, prompt=prompt, caption=caption_of(at), **r))
        for c in cases:
            c["caption_ids"] = ref.tok(c["caption"], add_special_tokens=False)["input_ids"] + [eot]
            same_ids = c["greedy"] == c["caption_ids"]
            assert same_ids == (c["text"] == c["caption"]), (c["name"], c["greedy"], c["caption_ids"])
        n_ok = sum(c["text"] == c["caption"] for c in cases)
        log(f"reference cases: {len(cases)} ({n_samples} samples), {n_ok} captioned correctly; smallest logit gap "
            f"{min(c['margin'] for c in cases):.3f}")
        ref_path = os.path.join(fix_dir, "demo-ref.gguf")
        write_reference(ref_path, a, cases, n_samples, (correct, a.heldout), (a.steps + a.restart_steps, train_seconds), a.max_new,
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
    ap.add_argument("--steps", type=int, default=9000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--restart-steps", type=int, default=0, help="a second cosine cycle after --steps")
    ap.add_argument("--restart-lr", type=float, default=6e-4)
    ap.add_argument("--pool", type=int, default=40000, help="training pictures")
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--ckpt-every", type=int, default=250)
    ap.add_argument("--heldout", type=int, default=200, help="fresh pictures for the accuracy figure")
    ap.add_argument("--n-test", type=int, default=32, help="test pictures in the reference file")
    ap.add_argument("--max-new", type=int, default=24)
    ap.add_argument("--resume", action="store_true", help="continue from WORK/ckpt.pt")
    ap.add_argument("--export-only", action="store_true", help="export WORK/ckpt.pt (a finished run)")
    ap.add_argument("--keep-hf", help="also keep the Hugging Face checkpoint in this folder")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    os.makedirs(a.work, exist_ok=True)
    log = Log(os.path.join(a.work, "train.log"))
    if transformers.__version__ != TESTED_TRANSFORMERS:
        log(f"warning: transformers {transformers.__version__}; the demo was made with {TESTED_TRANSFORMERS} "
            f"(Meta's vision tap rule; 4.55+ shifted it)")
    assert hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest() == CHAT_TEMPLATE_SHA256
    tokenizer = train_tokenizer()
    cfg = make_config(tokenizer)
    if a.export_only:
        a.resume = True
        done = torch.load(os.path.join(a.work, "ckpt.pt"), weights_only=False)["step"]
        a.restart_steps = max(0, done - a.steps)
        a.steps = min(a.steps, done)
    model, secs = train(a, tokenizer, cfg, log)
    files = export(a, model, tokenizer, secs, log)
    log("=== files ===")
    for f in files:
        log(f"{os.path.relpath(f, ROOT):45s} {os.path.getsize(f):9d} bytes  sha256 {sha(f)}")
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}, "
        f"pillow {PIL.__version__}, tokenizers {importlib.metadata.version('tokenizers')}, "
        f"gguf {importlib.metadata.version('gguf')}")


if __name__ == "__main__":
    main()
