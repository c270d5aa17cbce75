#!/usr/bin/env python3
"""Convert a Hugging Face Llama 3.2 Vision ("mllama") checkpoint to GGUF for mmsched.

    python tools/convert_hf_to_gguf.py MODEL_DIR [--outfile OUT.gguf] [--outtype auto|f32|f16|bf16]
    python tools/convert_hf_to_gguf.py MODEL_DIR --split [--outfile TEXT.gguf] [--proj-outfile PROJ.gguf]

MODEL_DIR holds config.json and *.safetensors (F32, F16 or BF16), and optionally tokenizer.json,
tokenizer_config.json, generation_config.json and preprocessor_config.json. Only numpy and the
`gguf` package are needed (no torch). The layouts are those mms_mllama_model_load reads (the manual's
section 13, in mmsched.h):

Single file (default; Ollama's current layout)
  text:   token_embd.weight (all vocab + 8 rows), output.weight (lm_head), output_norm.weight,
          rope_freqs.weight, blk.N.attn_norm/attn_q/attn_k/attn_v/attn_output/ffn_norm/ffn_gate/
          ffn_up/ffn_down.weight; cross layers blk.N.cross_attn_{q,k,v,o}_proj.weight,
          blk.N.cross_attn_{q,k}_norm.weight, blk.N.cross_attn_attn_gate, blk.N.cross_attn_mlp_gate
          (raw gate values) and attn_norm/ffn_norm/ffn_{gate,up,down}.
  vision: v.patch_embd.weight, v.class_embd, v.position_embd.weight/.gate, v.tile_position_embd.
          weight/.gate, v.{pre,post}_tile_position_embd.weight/.gate, v.{pre,post}_ln.weight/.bias,
          v.blk.N.{attn_norm,ffn_norm}.{weight,bias}, v.blk.N.attn_{q,k,v,output}.weight,
          v.blk.N.ffn_up.{weight,bias} (= mlp.fc1), v.blk.N.ffn_down.{weight,bias} (= mlp.fc2),
          v.global.blk.N.* the same plus attn_gate and ffn_gate; mm.0.weight/bias (projector).

--split (Ollama's older pair)
  a text GGUF (the text tensors, text metadata and tokenizer) and a projector GGUF (the vision
  tensors, mm.0.* and the mllama.vision.* metadata) where the vision layers are named
  v[.global].blk.N.ln1 (= attn_norm), ln2 (= ffn_norm), attn_out (= attn_output), and
  ffn_down = fc1 (embd -> ff), ffn_up = fc2 (ff -> embd): swapped, as clip.cpp names them.

Shapes are ggml order (ne[0] is the contiguous, PyTorch-last dimension): a Linear weight (out, in)
is ne {in, out}; the patch conv (D, 3, p, p) is ne {p, p, 3, D}; the tile embedding table
(9, T*P*D) is ne {T*P*D, 9}.

Transformations (all others are copied as they are):
  * Gates, pre-transformed as Ollama does: v.pre_tile_position_embd.gate, v.post_tile_position_embd.
    gate and v.global.blk.N.{attn_gate,ffn_gate} hold tanh(g); the HF gate
    gated_positional_embedding.gate is written twice: v.position_embd.gate = 1 - tanh(g) and
    v.tile_position_embd.gate = tanh(g). The split layout's projector uses the same values (its
    loader multiplies by them directly). The text cross-attention gates are written RAW (the
    runtime applies tanh).
  * Text SELF-attention q/k rows are permuted from Hugging Face's rotate-half layout (pairs
    (i, i + d/2)) back to Meta's interleaved layout (pairs (2i, 2i + 1)): within each head, row
    2i + p of the output is HF row p * d/2 + i. With these weights ggml's NORMAL RoPE mode
    (adjacent pairs) gives exactly the attention scores of HF's rotate-half RoPE.
  * Cross-attention and vision q/k (single file): their rows are permuted within each head in
    the same way, as Ollama's converter does by its suffix rule: cross_attn_q_proj with
    num_attention_heads, cross_attn_k_proj with num_key_value_heads, v[.global].blk.N.attn_{q,k}
    with the vision heads; cross_attn_{q,k}_norm are not permuted. The loader puts those rows back.
    The two-file layout keeps them in HF order, as Ollama's legacy C++ code reads them (it applies
    q_norm/k_norm to each head's rows as they are).
  * rope_freqs.weight (F32, head_dim/2 values) holds the llama3 per-frequency DIVISORS computed
    from rope_scaling (Meta's llama3 rule): angle_i = pos * freq_base^(-2i/d) / rope_freqs[i]; 1 for
    wavelengths below original_max_position_embeddings / high_freq_factor, `factor` above
    original_max_position_embeddings / low_freq_factor, and 1 / ((1 - s) / factor + s) in between,
    s = (original_max_position_embeddings / wavelength - low) / (high - low). It is omitted when
    the checkpoint has no llama3 rope_scaling.

Types (--outtype): auto (default) is Ollama's rule: matrices F16, except the text matrices of a
BF16 checkpoint, which stay BF16 (vision and projector matrices become F16); f32, f16 or bf16 make
every matrix that type. 1-D tensors (norms, biases, gates, the class embedding, q/k norms),
rope_freqs and the vision tower's embedding tables (position, tile, pre/post tile) always stay F32.

Layout: keys in byte order, tensors ordered by block number (blk.N.) then name, each padded to 32
bytes, the file ending where the last tensor ends: as Ollama's writer lays them out, so that a file
from this script and one from Ollama's converter differ only where listed in tools/README.md.

Metadata (everything the C loader needs; `mllama.` keys are Ollama's unless marked OURS):
  general.architecture = "mllama", general.file_type (1 for auto and f16, as Ollama; 0 for f32, 32 for
  bf16), general.quantization_version = 2; the split files also general.name and general.type
  text:   mllama.vocab_size (lm_head rows; the embedding table has vocab_size + 8 rows),
          mllama.block_count, mllama.context_length, mllama.embedding_length,
          mllama.feed_forward_length, mllama.attention.head_count, mllama.attention.head_count_kv,
          mllama.rope.dimension_count (head_dim), mllama.rope.freq_base,
          mllama.attention.layer_norm_rms_epsilon, mllama.attention.cross_attention_layers (int32[])
  vision: mllama.vision.block_count, mllama.vision.global.block_count,
          mllama.vision.intermediate_layers_indices (int32[]), mllama.vision.embedding_length,
          mllama.vision.feed_forward_length, mllama.vision.attention.head_count,
          mllama.vision.attention.layer_norm_epsilon, mllama.vision.image_size,
          mllama.vision.patch_size, mllama.vision.max_num_tiles, mllama.vision.num_channels
  OURS:   mmsched.mllama.qk_rows = "ollama" (single file: q/k rows permuted as above) or "hf"
          (the two-file layout), mllama.vision.image_mean, mllama.vision.image_std (float32[3],
          from preprocessor_config.json when present), mllama.image_token_index (u32);
          the projector file also mllama.vision.projection_dim (u32, = the text hidden size).
  In the split layout the text file has the text keys, mllama.image_token_index and the tokenizer;
  the projector file has general.architecture = "mllama", general.type = "projector",
  general.description, general.file_type and all mllama.vision.* keys (projection_dim included).
  tokenizer (when tokenizer.json exists; skipped with a message otherwise), as Ollama writes it:
          tokenizer.ggml.model = "gpt2", tokenizer.ggml.pre ("llama-bpe" for Llama 3's Split
          regex, else "default"), tokenizer.ggml.tokens, tokenizer.ggml.scores (the ids),
          tokenizer.ggml.token_type (1 normal, 3 control = special added token, 4 user defined,
          5 unused = an id hole, which Ollama's converter cannot represent), tokenizer.ggml.merges,
          tokenizer.ggml.{bos,eos,padding,...}_token_id for the tokenizer_config.json tokens that are
          added tokens, tokenizer.ggml.add_*_token when tokenizer_config.json says,
          tokenizer.ggml.eos_token_ids (int32[]) when generation_config.json lists eos_token_id,
          tokenizer.chat_template when tokenizer_config.json has one.
"""

import argparse
import glob
import hashlib
import json
import math
import os
import re
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("convert_hf_to_gguf.py: the `gguf` package is required (pip install gguf)")

ARCH = "mllama"


# ---------------------------------------------------------------------------------------------------
# safetensors (read directly: no torch needed, bf16 handled)

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
              "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8}


def _bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


class Lazy:
    """A tensor known by its shape, loaded (as float32) only when written: the converter holds one
    tensor at a time, so an 11B checkpoint converts in a few GB of memory."""

    def __init__(self, shape, fn, src_dtype=None):
        self.shape = tuple(int(x) for x in shape)
        self.ndim = len(self.shape)
        self._fn = fn
        self.src_dtype = src_dtype          # the checkpoint's dtype ("F32", "F16", "BF16"), None if computed

    def load(self):
        a = self._fn()
        assert tuple(a.shape) == self.shape, (a.shape, self.shape)
        return a

    def then(self, fn, shape=None):
        return Lazy(self.shape if shape is None else shape, lambda: fn(self.load()), self.src_dtype)


def read_safetensors(path):
    """name -> Lazy float32 tensor, for one .safetensors file (read through a memory map)."""
    out = {}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    base = 8 + n
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        if dt not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        b, e = info["data_offsets"]

        def load(b=b, e=e, dt=dt, shape=tuple(info["shape"])):
            raw = np.frombuffer(buf[base + b: base + e].tobytes(), dtype=_ST_DTYPES[dt])
            arr = _bf16_to_f32(raw) if dt == "BF16" else raw.astype(np.float32)
            return arr.reshape(shape)
        out[name] = Lazy(info["shape"], load, dt)
    return out


def load_checkpoint(model_dir):
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise SystemExit(f"{model_dir}: no *.safetensors file")
    tensors = {}
    for p in files:
        for k, v in read_safetensors(p).items():
            if k in tensors:
                raise SystemExit(f"{p}: tensor {k} appears twice")
            tensors[k] = v
    return tensors


def canonical_name(name):
    """Old on-disk names (language_model.model.*, vision_model.*, ...) and newer ones
    (model.language_model.*, model.vision_model.*, lm_head.*) -> text.* / vision.* / proj.*"""
    for prefix, new in (("model.language_model.", "text."), ("language_model.model.", "text."),
                        ("model.vision_model.", "vision."), ("vision_model.", "vision."),
                        ("model.multi_modal_projector.", "proj."), ("multi_modal_projector.", "proj.")):
        if name.startswith(prefix):
            return new + name[len(prefix):]
    if name in ("lm_head.weight", "language_model.lm_head.weight"):
        return "text.lm_head.weight"
    return name


# ---------------------------------------------------------------------------------------------------
# hyper-parameters

class HParams:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        if "text_config" not in cfg or "vision_config" not in cfg:
            raise SystemExit("config.json: not an mllama checkpoint (text_config/vision_config missing)")
        self.cfg = cfg
        t, v = cfg["text_config"], cfg["vision_config"]
        self.vocab_size = int(t["vocab_size"])
        self.n_embd = int(t["hidden_size"])
        self.n_layer = int(t["num_hidden_layers"])
        self.n_head = int(t["num_attention_heads"])
        self.n_head_kv = int(t.get("num_key_value_heads") or self.n_head)
        self.n_ff = int(t["intermediate_size"])
        self.head_dim = int(t.get("head_dim") or self.n_embd // self.n_head)
        self.n_ctx = int(t.get("max_position_embeddings", 131072))
        self.rms_eps = float(t.get("rms_norm_eps", 1e-5))
        rp = t.get("rope_parameters") or {}          # newer transformers
        self.rope_theta = float(t.get("rope_theta") or rp.get("rope_theta") or 500000.0)
        rs = t.get("rope_scaling") or (rp if rp.get("rope_type") else None)
        self.rope_scaling = rs
        self.cross_layers = [int(x) for x in t["cross_attention_layers"]]
        self.text_bos = t.get("bos_token_id")
        self.text_eos = t.get("eos_token_id")
        self.text_pad = t.get("pad_token_id")

        self.v_n_layer = int(v["num_hidden_layers"])
        self.v_n_global = int(v["num_global_layers"])
        self.v_taps = [int(x) for x in v["intermediate_layers_indices"]]
        self.v_n_embd = int(v["hidden_size"])
        self.v_n_ff = int(v["intermediate_size"])
        self.v_n_head = int(v.get("attention_heads") or v.get("num_attention_heads"))
        self.v_eps = float(v.get("norm_eps", 1e-5))
        self.v_image_size = int(v["image_size"])
        self.v_patch_size = int(v["patch_size"])
        self.v_max_tiles = int(v["max_num_tiles"])
        self.v_channels = int(v.get("num_channels", 3))
        self.v_output_dim = int(v.get("vision_output_dim") or self.v_n_embd * (1 + len(self.v_taps)))
        self.image_token_index = int(cfg.get("image_token_index", self.vocab_size))

        self.image_mean = self.image_std = None
        pp = os.path.join(model_dir, "preprocessor_config.json")
        if os.path.exists(pp):
            with open(pp) as f:
                pcfg = json.load(f)
            if "image_mean" in pcfg and "image_std" in pcfg:
                self.image_mean = [float(x) for x in pcfg["image_mean"]]
                self.image_std = [float(x) for x in pcfg["image_std"]]
            size = pcfg.get("size") or {}
            if size.get("height") not in (None, self.v_image_size) or size.get("width") not in (None, self.v_image_size):
                print(f"warning: preprocessor size {size} differs from vision image_size {self.v_image_size}")
            if pcfg.get("max_image_tiles") not in (None, self.v_max_tiles):
                print(f"warning: preprocessor max_image_tiles {pcfg.get('max_image_tiles')} "
                      f"differs from max_num_tiles {self.v_max_tiles}")
        else:
            print("note: no preprocessor_config.json: mllama.vision.image_mean/image_std not written")

        if self.v_output_dim != self.v_n_embd * (1 + len(self.v_taps)):
            raise SystemExit(f"vision_output_dim {self.v_output_dim} != hidden_size * (1 + taps)")
        if self.n_head % self.n_head_kv:
            raise SystemExit("num_attention_heads is not a multiple of num_key_value_heads")


def llama3_rope_divisors(hp):
    """Per-frequency divisors (float32, head_dim/2) or None when the checkpoint has no llama3 scaling."""
    rs = hp.rope_scaling
    if not rs or (rs.get("rope_type") or rs.get("type")) != "llama3":
        return None
    factor = float(rs["factor"])
    low = float(rs.get("low_freq_factor", 1.0))
    high = float(rs.get("high_freq_factor", 4.0))
    old_ctx = float(rs["original_max_position_embeddings"])
    d = hp.head_dim
    inv = hp.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    wavelen = 2.0 * math.pi / inv
    low_wl, high_wl = old_ctx / low, old_ctx / high
    div = np.empty_like(inv)
    for i, wl in enumerate(wavelen):
        if wl < high_wl:
            div[i] = 1.0
        elif wl > low_wl:
            div[i] = factor
        else:
            s = (old_ctx / wl - low) / (high - low)
            div[i] = 1.0 / ((1.0 - s) / factor + s)
    return div.astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# tensor mapping

def unpermute_rope_rows(w, n_heads):
    """HF rotate-half row order -> Meta interleaved order (inverse of HF's permute_for_rope):
    within each head, output row 2i + p = input row p * d/2 + i."""
    rows = w.shape[0]
    d = rows // n_heads
    assert d * n_heads == rows and d % 2 == 0
    return np.ascontiguousarray(w.reshape(n_heads, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def f32_tanh(g):
    return np.tanh(g.astype(np.float32)).astype(np.float32)


_TEXT_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "cross_attn.q_proj.weight": "cross_attn_q_proj.weight",
    "cross_attn.k_proj.weight": "cross_attn_k_proj.weight",
    "cross_attn.v_proj.weight": "cross_attn_v_proj.weight",
    "cross_attn.o_proj.weight": "cross_attn_o_proj.weight",
    "cross_attn.q_norm.weight": "cross_attn_q_norm.weight",
    "cross_attn.k_norm.weight": "cross_attn_k_norm.weight",
    "cross_attn_attn_gate": "cross_attn_attn_gate",
    "cross_attn_mlp_gate": "cross_attn_mlp_gate",
}

# vision layer suffix -> (single-file name, legacy projector name)
_VISION_LAYER = {
    "input_layernorm.weight": ("attn_norm.weight", "ln1.weight"),
    "input_layernorm.bias": ("attn_norm.bias", "ln1.bias"),
    "post_attention_layernorm.weight": ("ffn_norm.weight", "ln2.weight"),
    "post_attention_layernorm.bias": ("ffn_norm.bias", "ln2.bias"),
    "self_attn.q_proj.weight": ("attn_q.weight", "attn_q.weight"),
    "self_attn.k_proj.weight": ("attn_k.weight", "attn_k.weight"),
    "self_attn.v_proj.weight": ("attn_v.weight", "attn_v.weight"),
    "self_attn.o_proj.weight": ("attn_output.weight", "attn_out.weight"),
    "mlp.fc1.weight": ("ffn_up.weight", "ffn_down.weight"),
    "mlp.fc1.bias": ("ffn_up.bias", "ffn_down.bias"),
    "mlp.fc2.weight": ("ffn_down.weight", "ffn_up.weight"),
    "mlp.fc2.bias": ("ffn_down.bias", "ffn_up.bias"),
    "gate_attn": ("attn_gate", "attn_gate"),
    "gate_ffn": ("ffn_gate", "ffn_gate"),
}

_VISION_TOP = {
    "patch_embedding.weight": "v.patch_embd.weight",
    "class_embedding": "v.class_embd",
    "gated_positional_embedding.embedding": "v.position_embd.weight",
    "gated_positional_embedding.tile_embedding.weight": "v.tile_position_embd.weight",
    "pre_tile_positional_embedding.embedding.weight": "v.pre_tile_position_embd.weight",
    "pre_tile_positional_embedding.gate": "v.pre_tile_position_embd.gate",
    "post_tile_positional_embedding.embedding.weight": "v.post_tile_position_embd.weight",
    "post_tile_positional_embedding.gate": "v.post_tile_position_embd.gate",
    "layernorm_pre.weight": "v.pre_ln.weight",
    "layernorm_pre.bias": "v.pre_ln.bias",
    "layernorm_post.weight": "v.post_ln.weight",
    "layernorm_post.bias": "v.post_ln.bias",
}

# tensors that stay F32 whatever --outtype says (besides every 1-D tensor)
_KEEP_F32 = {"rope_freqs.weight", "v.position_embd.weight", "v.tile_position_embd.weight",
             "v.pre_tile_position_embd.weight", "v.post_tile_position_embd.weight"}


def _natural_key(name):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def map_tensors(hp, raw):
    """raw: HF name -> Lazy f32 tensor. Returns (text, vision): two ordered lists of (gguf_name, Lazy,
    legacy_name), where legacy_name is the split layout's projector name (vision) or the same name."""
    text, vision = [], []
    seen = set()
    cross = set(hp.cross_layers)
    by_canon = {}
    for name, arr in raw.items():
        c = canonical_name(name)
        if c in by_canon:
            raise SystemExit(f"tensor {name}: duplicate after name normalisation ({c})")
        by_canon[c] = (name, arr)

    def take(c):
        if c not in by_canon:
            raise SystemExit(f"missing tensor: {c} (normalised name)")
        seen.add(c)
        return by_canon[c][1]

    # text
    emb = take("text.embed_tokens.weight")
    if emb.shape != (hp.vocab_size + 8, hp.n_embd):
        raise SystemExit(f"embed_tokens has shape {emb.shape}, expected ({hp.vocab_size + 8}, {hp.n_embd})")
    text.append(("token_embd.weight", emb, None))
    div = llama3_rope_divisors(hp)
    if div is not None:
        text.append(("rope_freqs.weight", Lazy(div.shape, lambda: div), None))
    else:
        print("note: no llama3 rope_scaling: rope_freqs.weight not written")
    for il in range(hp.n_layer):
        pre = f"text.layers.{il}."
        names = sorted([c for c in by_canon if c.startswith(pre)], key=_natural_key)
        suffixes = [c[len(pre):] for c in names]
        want_cross = il in cross
        has_cross = any(s.startswith("cross_attn") for s in suffixes)
        if want_cross != has_cross:
            raise SystemExit(f"text layer {il}: cross_attention_layers says {want_cross}, tensors say {has_cross}")
        order = list(_TEXT_LAYER)
        for s in sorted(suffixes, key=lambda s: order.index(s) if s in order else len(order)):
            if s not in _TEXT_LAYER:
                raise SystemExit(f"unknown text tensor: {pre}{s}")
            arr = take(pre + s)
            if s == "self_attn.q_proj.weight":
                arr = arr.then(lambda a: unpermute_rope_rows(a, hp.n_head))
            elif s == "self_attn.k_proj.weight":
                arr = arr.then(lambda a: unpermute_rope_rows(a, hp.n_head_kv))
            text.append((f"blk.{il}.{_TEXT_LAYER[s]}", arr, None))
    text.append(("output_norm.weight", take("text.norm.weight"), None))
    text.append(("output.weight", take("text.lm_head.weight"), None))

    # vision
    for c, g in _VISION_TOP.items():
        arr = take("vision." + c)
        if c.endswith(".gate"):
            arr = arr.then(f32_tanh)
        vision.append((g, arr, g))
        if c == "gated_positional_embedding.embedding":
            graw = take("vision.gated_positional_embedding.gate")
            vision.append(("v.position_embd.gate", graw.then(lambda a: (np.float32(1.0) - f32_tanh(a)).astype(np.float32)),
                           "v.position_embd.gate"))
        if c == "gated_positional_embedding.tile_embedding.weight":
            graw = take("vision.gated_positional_embedding.gate")
            vision.append(("v.tile_position_embd.gate", graw.then(f32_tanh), "v.tile_position_embd.gate"))
    for enc, n, gprefix in (("transformer", hp.v_n_layer, "v.blk"), ("global_transformer", hp.v_n_global, "v.global.blk")):
        order = list(_VISION_LAYER)
        for il in range(n):
            pre = f"vision.{enc}.layers.{il}."
            suffixes = [c[len(pre):] for c in by_canon if c.startswith(pre)]
            for s in sorted(suffixes, key=lambda s: order.index(s) if s in order else len(order)):
                if s not in _VISION_LAYER:
                    raise SystemExit(f"unknown vision tensor: {pre}{s}")
                if s in ("gate_attn", "gate_ffn") and enc != "global_transformer":
                    raise SystemExit(f"unexpected gate in a local vision layer: {pre}{s}")
                arr = take(pre + s)
                if s in ("gate_attn", "gate_ffn"):
                    arr = arr.then(f32_tanh)
                single, legacy = _VISION_LAYER[s]
                vision.append((f"{gprefix}.{il}.{single}", arr, f"{gprefix}.{il}.{legacy}"))
    vision.append(("mm.0.weight", take("proj.weight"), "mm.0.weight"))
    vision.append(("mm.0.bias", take("proj.bias"), "mm.0.bias"))

    left = sorted(set(by_canon) - seen)
    if left:
        raise SystemExit("unmapped tensors: " + ", ".join(by_canon[c][0] for c in left))
    return text, vision


def check_shapes(hp, text, vision):
    T, D, P = hp.v_max_tiles, hp.v_n_embd, (hp.v_image_size // hp.v_patch_size) ** 2 + 1
    n_ar = None
    exp = {
        "token_embd.weight": (hp.vocab_size + 8, hp.n_embd),
        "output.weight": (hp.vocab_size, hp.n_embd),
        "output_norm.weight": (hp.n_embd,),
        "rope_freqs.weight": (hp.head_dim // 2,),
        "v.patch_embd.weight": (D, hp.v_channels, hp.v_patch_size, hp.v_patch_size),
        "v.class_embd": (D,),
        "v.position_embd.weight": (P, D),
        "v.position_embd.gate": (1,),
        "v.tile_position_embd.gate": (1,),
        "mm.0.weight": (hp.n_embd, hp.v_output_dim),
        "mm.0.bias": (hp.n_embd,),
    }
    for name, arr, _ in text + vision:
        if name in exp and tuple(arr.shape) != exp[name]:
            raise SystemExit(f"{name}: shape {arr.shape}, expected {exp[name]}")
        if name == "v.tile_position_embd.weight":
            n_ar = arr.shape[0]
            if arr.shape[1] != T * P * D:
                raise SystemExit(f"{name}: shape {arr.shape}, second dim should be {T * P * D}")
        if name in ("v.pre_tile_position_embd.weight", "v.post_tile_position_embd.weight") and arr.shape[1] != T * D:
            raise SystemExit(f"{name}: shape {arr.shape}, second dim should be {T * D}")
    return n_ar


# ---------------------------------------------------------------------------------------------------
# q/k row order and output types

def ollama_qk_heads(name, hp):
    """Heads of a q/k projection whose rows Ollama's converter permutes per head (its RoPE rule,
    applied by name: the text self-attention, which unpermute_rope_rows already handles, and also
    the cross-attention and vision q/k, which have no RoPE), or None."""
    if name.endswith("cross_attn_q_proj.weight"):
        return hp.n_head
    if name.endswith("cross_attn_k_proj.weight"):
        return hp.n_head_kv
    if name.startswith("v.") and (name.endswith("attn_q.weight") or name.endswith("attn_k.weight")):
        return hp.v_n_head
    return None


def stored_type(name, lazy, outtype):
    """-> (numpy dtype, raw_dtype or None) a tensor is stored with. "auto" is Ollama's rule: F16
    matrices, BF16 for the text matrices of a BF16 checkpoint; 1-D tensors, biases and _KEEP_F32 F32."""
    keep32 = len(lazy.shape) == 1 or name in _KEEP_F32 or name.endswith(".bias")
    if outtype == "auto":
        outtype = "bf16" if lazy.src_dtype == "BF16" and not name.startswith(("v.", "mm.")) else "f16"
    if outtype == "f32" or keep32:
        return np.float32, None
    if outtype == "f16":
        return np.float16, None
    if outtype == "bf16":
        return np.uint16, gguf.GGMLQuantizationType.BF16
    raise SystemExit(f"unknown outtype {outtype}")


def to_stored(arr, dtype):
    if dtype == np.float32:
        return np.ascontiguousarray(arr, dtype=np.float32)
    if dtype == np.float16:
        return np.ascontiguousarray(arr.astype(np.float16))
    u = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32)        # bf16, round to nearest even
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


# general.file_type: Ollama's converter always writes 1; the explicit types say what they hold
FILE_TYPE = {"auto": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
             "f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16}


# ---------------------------------------------------------------------------------------------------
# metadata

class SortedKV:
    """Keys collected, then written in byte order as Ollama's writer does (general.architecture,
    which gguf's writer adds first, sorts first among these keys)."""

    def __init__(self):
        self.items = {}

    def __getattr__(self, method):                 # add_uint32, add_string, add_key_value, ...
        if not method.startswith("add_"):
            raise AttributeError(method)
        return lambda key, *a, **k: self.items.__setitem__(key, (method, a, k))

    def flush(self, w):
        for key in sorted(self.items, key=lambda k: k.encode("utf-8")):
            method, a, k = self.items[key]
            getattr(w, method)(key, *a, **k)


def add_i32_array(w, key, vals):
    w.add_key_value(key, [int(v) for v in vals], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)


def add_f32_array(w, key, vals):
    w.add_key_value(key, [float(v) for v in vals], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.FLOAT32)


def add_text_kv(w, hp):
    w.add_uint32("mllama.vocab_size", hp.vocab_size)
    w.add_uint32("mllama.block_count", hp.n_layer)
    w.add_uint32("mllama.context_length", hp.n_ctx)
    w.add_uint32("mllama.embedding_length", hp.n_embd)
    w.add_uint32("mllama.feed_forward_length", hp.n_ff)
    w.add_uint32("mllama.attention.head_count", hp.n_head)
    w.add_uint32("mllama.attention.head_count_kv", hp.n_head_kv)
    w.add_uint32("mllama.rope.dimension_count", hp.head_dim)
    w.add_float32("mllama.rope.freq_base", hp.rope_theta)
    w.add_float32("mllama.attention.layer_norm_rms_epsilon", hp.rms_eps)
    add_i32_array(w, "mllama.attention.cross_attention_layers", hp.cross_layers)
    w.add_uint32("mllama.image_token_index", hp.image_token_index)      # OURS


def add_vision_kv(w, hp, projector=False):
    w.add_uint32("mllama.vision.block_count", hp.v_n_layer)
    w.add_uint32("mllama.vision.global.block_count", hp.v_n_global)
    add_i32_array(w, "mllama.vision.intermediate_layers_indices", hp.v_taps)
    w.add_uint32("mllama.vision.embedding_length", hp.v_n_embd)
    w.add_uint32("mllama.vision.feed_forward_length", hp.v_n_ff)
    w.add_uint32("mllama.vision.attention.head_count", hp.v_n_head)
    w.add_float32("mllama.vision.attention.layer_norm_epsilon", hp.v_eps)
    w.add_uint32("mllama.vision.image_size", hp.v_image_size)
    w.add_uint32("mllama.vision.patch_size", hp.v_patch_size)
    w.add_uint32("mllama.vision.max_num_tiles", hp.v_max_tiles)
    w.add_uint32("mllama.vision.num_channels", hp.v_channels)
    if projector:
        w.add_uint32("mllama.vision.projection_dim", hp.n_embd)      # the legacy projector file's key
    if hp.image_mean is not None:                                     # OURS
        add_f32_array(w, "mllama.vision.image_mean", hp.image_mean)
        add_f32_array(w, "mllama.vision.image_std", hp.image_std)


def _token_id(tok, vocab):
    if tok is None:
        return None
    if isinstance(tok, dict):
        tok = tok.get("content")
    return vocab.get(tok)


# sha256 of the Split regexes of Llama 3's pre-tokenizer, as Ollama identifies it
LLAMA3_PRE_SHA256 = "d98f9631be1e9607a9848c26c1f9eac1aa9fc21ac6ba82a2fc0741af9780a48f"


def pre_tokenizer_name(tok):
    h = hashlib.sha256()
    for pt in (tok.get("pre_tokenizer") or {}).get("pretokenizers") or []:
        if pt.get("type") == "Split" and (pt.get("pattern") or {}).get("Regex"):
            h.update(pt["pattern"]["Regex"].encode("utf-8"))
    return "llama-bpe" if h.hexdigest() == LLAMA3_PRE_SHA256 else "default"


def add_tokenizer_kv(w, hp, model_dir):
    """The tokenizer keys as Ollama's converter writes them (tokens by id with scores = id, types,
    merges, pre, special ids named by tokenizer_config.json when they are added tokens, add_*_token,
    *_token_ids lists from generation_config.json, the chat template), except that an id hole gets a
    "[PAD<id>]" token of type unused (Ollama's list would shift the ids after it)."""
    tj = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(tj):
        print("note: no tokenizer.json: tokenizer metadata skipped")
        return False
    with open(tj, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise SystemExit(f"tokenizer.json: model type {model.get('type')}, expected BPE")
    vocab = dict(model["vocab"])
    added = {}
    for a in tok.get("added_tokens", []):
        vocab[a["content"]] = a["id"]
        added[a["id"]] = a
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for t, i in vocab.items():
        if tokens[i] is not None and tokens[i] != t:
            raise SystemExit(f"tokenizer.json: id {i} names both {tokens[i]!r} and {t!r}")
        tokens[i] = t
    types = []
    for i in range(n):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types.append(int(gguf.TokenType.UNUSED))
        elif i in added:
            types.append(int(gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED))
        else:
            types.append(int(gguf.TokenType.NORMAL))
    merges = []
    for m in model.get("merges", []):
        merges.append(m if isinstance(m, str) else " ".join(m))

    tcfg = {}
    tcp = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(tcp):
        with open(tcp, encoding="utf-8") as f:
            tcfg = json.load(f)
    gcfg = {}
    gcp = os.path.join(model_dir, "generation_config.json")
    if os.path.exists(gcp):
        with open(gcp) as f:
            gcfg = json.load(f)

    added_ids = {a["content"]: a["id"] for a in added.values()}
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", pre_tokenizer_name(tok))
    w.add_key_value("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.STRING)
    add_f32_array(w, "tokenizer.ggml.scores", [float(i) for i in range(n)])
    add_i32_array(w, "tokenizer.ggml.token_type", types)
    if merges:
        w.add_key_value("tokenizer.ggml.merges", merges, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.STRING)
    said = {}
    for st, key in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("sep", "seperator"), ("pad", "padding"),
                    ("cls", "cls"), ("mask", "mask")):
        content = tcfg.get(f"{st}_token")
        if isinstance(content, dict):
            content = content.get("content")
        if not isinstance(content, str) or content not in added_ids:
            continue
        if isinstance(tcfg.get(f"add_{st}_token"), bool):
            w.add_bool(f"tokenizer.ggml.add_{key}_token", tcfg[f"add_{st}_token"])
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", added_ids[content])
        said[st] = added_ids[content]
        ids = gcfg.get(f"{st}_token_id")
        if isinstance(ids, list) and ids:
            add_i32_array(w, f"tokenizer.ggml.{key}_token_ids", [int(x) for x in ids])
    if isinstance(tcfg.get("chat_template"), str):
        w.add_string("tokenizer.chat_template", tcfg["chat_template"])
    print(f"tokenizer: {n} tokens, {len(merges)} merges, special ids {said}")
    return True


# ---------------------------------------------------------------------------------------------------

def _block(name):
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else sys.maxsize


def write_gguf(path, hp, outtype, tensors, kv_fns, extra_general=None):
    """Keys in byte order, tensors by block number then name, 32-byte alignment, and the file ends
    where the last tensor ends: the layout of Ollama's writer (fs/ggml/gguf.go)."""
    w = gguf.GGUFWriter(path, ARCH)
    kv = SortedKV()
    kv.add_uint32("general.file_type", int(FILE_TYPE[outtype]))
    kv.add_uint32("general.quantization_version", 2)
    for k, v in (extra_general or {}).items():
        kv.add_string(k, v)
    for fn in kv_fns:
        fn(kv)
    kv.flush(w)
    tensors = sorted(tensors, key=lambda t: (_block(t[0]), t[0].encode("utf-8")))
    for tname, lazy, _ in tensors:                  # tensor infos first, data one tensor at a time
        dtype, raw_dtype = stored_type(tname, lazy, outtype)
        nbytes = int(np.prod(lazy.shape)) * np.dtype(dtype).itemsize
        w.add_tensor_info(tname, lazy.shape, np.dtype(dtype), nbytes, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    last = 0
    for tname, lazy, _ in tensors:
        data = to_stored(lazy.load(), stored_type(tname, lazy, outtype)[0])
        w.write_tensor_data(data)
        last = data.nbytes
    w.close()
    size = os.path.getsize(path)
    pad = (-last) % 32
    with open(path, "r+b") as f:                      # gguf's writer pads after the last tensor too
        f.seek(size - pad)
        if pad and f.read(pad) == bytes(pad):
            f.truncate(size - pad)
    print(f"wrote {path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


def single_file_tensors(hp, text, vision):
    """The single-file layout holds the cross-attention and vision q/k rows permuted per head, as
    Ollama's converter writes them."""
    out = []
    for name, arr, legacy in text + vision:
        heads = ollama_qk_heads(name, hp)
        if heads is not None:
            arr = arr.then(lambda a, heads=heads: unpermute_rope_rows(a, heads))
        out.append((name, arr, legacy))
    return out


def convert(model_dir, outfile=None, outtype="auto", split=False, proj_outfile=None):
    hp = HParams(model_dir)
    raw = load_checkpoint(model_dir)
    text, vision = map_tensors(hp, raw)
    check_shapes(hp, text, vision)
    name = os.path.basename(os.path.normpath(model_dir))
    if not split:
        outfile = outfile or os.path.join(model_dir, f"{name}-{outtype}.gguf")
        write_gguf(outfile, hp, outtype, single_file_tensors(hp, text, vision),
                   [lambda w: add_text_kv(w, hp), lambda w: add_vision_kv(w, hp),
                    lambda w: add_tokenizer_kv(w, hp, model_dir), lambda w: w.add_string(QK_ROWS_KEY, "ollama")])
        return [outfile]
    if outfile is None:
        outfile = os.path.join(model_dir, f"{name}-text-{outtype}.gguf")
        proj_outfile = proj_outfile or os.path.join(model_dir, f"{name}-proj-{outtype}.gguf")
    if proj_outfile is None:
        stem = outfile[:-5] if outfile.endswith(".gguf") else outfile
        stem = stem[:-5] if stem.endswith("-text") else stem
        proj_outfile = stem + "-proj.gguf"
    write_gguf(outfile, hp, outtype, text,
               [lambda w: add_text_kv(w, hp), lambda w: add_tokenizer_kv(w, hp, model_dir),
                lambda w: w.add_string(QK_ROWS_KEY, "hf")], {"general.name": name, "general.type": "model"})
    legacy = [(lname, arr, lname) for _, arr, lname in vision]
    write_gguf(proj_outfile, hp, outtype, legacy, [lambda w: add_vision_kv(w, hp, projector=True),
                                                    lambda w: w.add_string(QK_ROWS_KEY, "hf")],
               {"general.name": name + " vision projector", "general.type": "projector",
                "general.description": "mllama vision encoder and projector (two-file layout)"})
    return [outfile, proj_outfile]


# OURS: which q/k row order a file holds ("ollama": permuted per head as Ollama's converter writes
# them; "hf": the checkpoint's order). Ollama's reader ignores it; mmsched's loader reads it.
QK_ROWS_KEY = "mmsched.mllama.qk_rows"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Hugging Face mllama checkpoint -> GGUF (Ollama layouts)")
    ap.add_argument("model_dir")
    ap.add_argument("--outfile", help="output GGUF (with --split: the text GGUF)")
    ap.add_argument("--outtype", choices=["auto", "f32", "f16", "bf16"], default="auto",
                    help="auto (default): Ollama's types (F16 matrices; BF16 text matrices from a BF16 checkpoint)")
    ap.add_argument("--split", action="store_true", help="write the older pair: text GGUF + projector GGUF")
    ap.add_argument("--proj-outfile", help="with --split: the projector GGUF (default: OUTFILE less -text, + -proj.gguf)")
    a = ap.parse_args(argv)
    if a.proj_outfile and not a.split:
        ap.error("--proj-outfile needs --split")
    convert(a.model_dir, a.outfile, a.outtype, a.split, a.proj_outfile)


if __name__ == "__main__":
    main()
