#!/usr/bin/env python3
"""Generate the mllama test fixtures in tests/fixtures/mllama/ (not run by CI; its outputs are committed).

    pip install -r tools/requirements.txt
    python tools/gen_mllama_fixtures.py [--out tests/fixtures/mllama] [--keep-hf DIR] [--only tiny1,tiny4]

For each configuration (tiny1: max_num_tiles 1; tiny4: max_num_tiles 4, 8 aspect ratios) it
 1. builds a tiny random MllamaForConditionalGeneration with transformers (deterministic weights,
    scaled so that logits are informative), saves it as a Hugging Face checkpoint (safetensors,
    config, generation config, preprocessor config and a tiny byte-level BPE tokenizer) in a
    temporary folder;
 2. converts it with tools/convert_hf_to_gguf.py: <cfg>.gguf (single-file layout, f32); for tiny4
    also tiny4-text.gguf + tiny4-proj.gguf (two-file layout) and tiny4-f16.gguf;
 3. reloads the checkpoint in float32 with eager attention, processes images with the PIL
    (slow) image processor, and dumps reference tensors into <cfg>-ref.gguf (contract below);
 4. self-checks: reads every produced model GGUF back with gguf's reader, undoes the layout
    transformations in numpy and compares with the HF state dict; checks the metadata; checks with
    torch that NORMAL-pairing RoPE on the permuted q/k (rope_freqs.weight as divisors) gives HF's
    rotate-half attention scores; checks greedy generation against a no-cache recomputation; checks
    the cross-attention mask against the processor's own functions and one full processor call.

Vision taps: mmsched follows Meta's rule (the intermediate taps are the INPUTS of the listed
local layers; transformers <= 4.54 does this, 4.55+ takes layer outputs). Forward pre-hooks capture
the inputs of the tapped layers and a forward hook on the vision model rebuilds the tap part of its
output from them: under a Meta-rule transformers this must be bit-identical to what the model
computed (asserted), under a shifted-rule transformers the hook replaces the taps, so the vision
output, the projector output, the logits and the greedy tokens all follow Meta's rule.

Reference file <cfg>-ref.gguf (read by the C tests; names are a contract):
  keys    ref.transformers_version, ref.torch_version (str), ref.tap_rule = "meta",
          ref.n_images, ref.n_prompts (u32); extra: ref.pillow_version, ref.numpy_version,
          ref.tap_rule_source ("native" or "hooks"), ref.config (the HF config.json text),
          prompt.{p}.greedy_min_margin (f32: the smallest top-1 minus top-2 logit gap along the greedy
          path, to judge how close a C implementation may come to a tie)
  image k img.{k}.rgb (I8, ne {3*W, H}: the RGB8 bytes), img.{k}.width/height/aspect_ratio_id/
          num_tiles (u32), img.{k}.aspect_ratio_mask (int32[max_num_tiles]),
          img.{k}.pixel_values_fnv1a64 (u64: FNV-1a 64 of the F32 pixel values, ne {S, S, 3, max_num_tiles}),
          img.{k}.vision_out (F32 ne {vision_output_dim, tokens per tile (pads dropped), max_num_tiles}),
          img.{k}.proj_out (F32 ne {text_hidden, tokens per tile * max_num_tiles});
          extra: img.{k}.resized_width/resized_height (u32: the image inside its canvas)
  prompt p prompt.{p}.tokens (int32[]), prompt.{p}.images (int32[], image indices in the order of
          their <|image|> tokens; EMPTY for text-only), prompt.{p}.logits (F32 ne {vocab, n_tokens}),
          prompt.{p}.greedy (int32[16]), prompt.{p}.cross_attention_mask (F32 ne {max_num_tiles,
          n_images_in_prompt, n_tokens}; NOT written for a text-only prompt, whose mask would have
          a zero dimension)
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gguf  # noqa: E402
import PIL  # noqa: E402
from PIL import Image  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import GenerationConfig, MllamaConfig, MllamaForConditionalGeneration  # noqa: E402
from transformers.models.mllama import modeling_mllama, processing_mllama  # noqa: E402

import convert_hf_to_gguf as conv  # noqa: E402

TESTED_TRANSFORMERS = "4.46.3"
N_GREEDY = 16

# special tokens of the tiny tokenizer (Llama 3 names), placed after 256 byte tokens and 8 merges
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
MERGES = [("h", "e"), ("Ġ", "t"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("Ġ", "i")]
VOCAB = 256 + len(MERGES) + len(SPECIALS)          # 272 = text vocab_size = lm_head rows
BOS, EOT_TEXT, PAD, EOM, EOT = 256 + 8, 256 + 9, 256 + 10, 256 + 13, 256 + 14
IMAGE_TOKEN = VOCAB                                 # <|image|>, the tokenizer's last entry

MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]

# Images (W, H). With image_size 56 and 4 tiles they pick these canvases (rows x cols, id):
# 56x56 (1x1, 1: scale exactly 1), 64x48 (1x2, 2: wide, not resized), 130x60 (1x3, 3: downscaled
# to 121x56), 300x8 (1x4, 4: to 224x5), 120x100 (2x2, 6: to 112x93), 50x150 (3x1, 7: tall).
# tiny1 adds 1x1 (upscaled to 56x56) and 30x20 (upscaled to 56x37).
CONFIGS = {
    "tiny1": dict(seed=1001, max_num_tiles=1, taps=[1, 3], cross=[1, 4],
                  images=[(56, 56), (130, 60), (1, 1), (30, 20), (300, 8)],
                  # prompts: list of segments: int = that many random text tokens, "I<k>" = image k
                  prompts=[["I0", 9],            # image first after BOS
                           [4, "I1", 7],         # image after text (rows before it fully masked)
                           [12],                 # text only
                           [2, "I2", 3, "I3", 4]]),  # two images
    "tiny4": dict(seed=1004, max_num_tiles=4, taps=[0, 2, 3], cross=[0, 3, 5],
                  images=[(56, 56), (64, 48), (130, 60), (300, 8), (120, 100), (50, 150)],
                  prompts=[["I4", 10],           # image first after BOS, 4 tiles (nothing masked)
                           [5, "I2", 6],         # image after text, 3 of 4 tiles
                           [11],                 # text only
                           [3, "I1", 4, "I5", 3],    # two images
                           ["I0", "I3", 6]]),    # two consecutive image tokens
}



def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits: how the C test compares large tensors that must match exactly."""
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h

def base_config(c):
    T = c["max_num_tiles"]
    if T == 4:
        sar = [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]
    else:
        sar = [[h, w] for w in range(1, T + 1) for h in range(1, T + 1) if w * h <= T]
    vision = dict(hidden_size=32, hidden_act="gelu", num_hidden_layers=4, num_global_layers=2,
                  num_attention_heads=2, attention_heads=2, num_channels=3, intermediate_size=64,
                  vision_output_dim=32 * (1 + len(c["taps"])), image_size=56, patch_size=14, norm_eps=1e-5,
                  max_num_tiles=T, intermediate_layers_indices=list(c["taps"]), supported_aspect_ratios=sar)
    text = dict(vocab_size=VOCAB, hidden_size=64, hidden_act="silu", num_hidden_layers=6, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=128, rope_theta=10000.0,
                rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=64),
                rms_norm_eps=1e-5, max_position_embeddings=512, tie_word_embeddings=False,
                cross_attention_layers=list(c["cross"]), bos_token_id=BOS, eos_token_id=[EOT_TEXT, EOM, EOT],
                pad_token_id=PAD)
    return MllamaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN)


# ---------------------------------------------------------------------------------------------------
# weights

def init_value(name, shape, seed):
    """Deterministic random value for one parameter, by name (independent of iteration order)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    leaf = name.split(".")[-1]
    n = lambda std: rng.standard_normal(shape) * std  # noqa: E731
    if leaf in ("gate", "gate_attn", "gate_ffn", "cross_attn_attn_gate", "cross_attn_mlp_gate"):
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return sign * rng.uniform(0.3, 1.2, shape)
    if name.endswith("embed_tokens.weight"):
        return n(1.0)
    if name.endswith("lm_head.weight"):
        return n(2.0 / np.sqrt(shape[1]))
    if name.endswith("patch_embedding.weight"):
        return n(1.0 / np.sqrt(np.prod(shape[1:])))
    if leaf == "class_embedding" or name.endswith("gated_positional_embedding.embedding") or \
            name.endswith("embedding.weight"):      # tile / pre / post tables
        return n(0.5)
    if leaf == "bias":
        return n(0.1)
    if len(shape) == 1:                              # norm weights (LayerNorm, RMSNorm, q/k norm)
        return 1.0 + n(0.1)
    if len(shape) == 2:                              # Linear (out, in)
        return n(1.0 / np.sqrt(shape[1]))
    raise ValueError(f"no init rule for {name} {shape}")


def build_model(c):
    torch.manual_seed(0)
    model = MllamaForConditionalGeneration(base_config(c)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = init_value(ondisk_name(name), tuple(p.shape), c["seed"]).astype(np.float32)
            p.copy_(torch.from_numpy(v))
    return model


# ---------------------------------------------------------------------------------------------------
# tokenizer (tiny byte-level BPE with Llama 3's special tokens)

def bytes_to_unicode():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def build_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, processors, AddedToken
    from transformers import PreTrainedTokenizerFast
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for i, (a, b) in enumerate(MERGES):
        vocab[a + b] = 256 + i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=list(MERGES), fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS + ["<|image|>"]])
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                       special_tokens=[("<|begin_of_text|>", BOS)])
    assert tok.token_to_id("<|begin_of_text|>") == BOS and tok.token_to_id("<|image|>") == IMAGE_TOKEN
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|finetune_right_pad_id|>")


# ---------------------------------------------------------------------------------------------------
# images

def make_image(w, h, seed):
    rng = np.random.default_rng([seed, w, h])
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = x * 255.0 / max(w - 1, 1)
    g = y * 255.0 / max(h - 1, 1)
    b = 127.5 + 127.5 * np.sin((x + 2 * y) * 0.35)
    img = np.stack([r, g, b], -1) + rng.integers(-48, 49, (h, w, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def pil_image_processor(path):
    """The PIL (slow) MllamaImageProcessor, whatever the transformers version defaults to."""
    from transformers import AutoImageProcessor
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        ip = AutoImageProcessor.from_pretrained(path, backend="pil")
    else:
        ip = AutoImageProcessor.from_pretrained(path, use_fast=False)
    name = type(ip).__name__
    assert "Fast" not in name and name in ("MllamaImageProcessor", "MllamaImageProcessorPil"), name
    if hasattr(ip, "backend"):
        assert ip.backend == "pil", ip.backend
    if major >= 5:
        assert name == "MllamaImageProcessorPil", name
    return ip


def process_image(ip, rgb):
    """The processor on one RGB8 image (H, W, 3). It is given channels-first with the format stated:
    transformers 4.46 guesses the channel axis, and an image 1 or 3 pixels high looks channels-first
    to it (a 1x1 image is then garbage); stating channels_last instead breaks its normalize step,
    which reuses the input format after converting to channels-first. For ordinary images the result
    is identical to passing the PIL image (checked)."""
    feat = ip(images=[[np.ascontiguousarray(rgb.transpose(2, 0, 1))]], return_tensors="np",
              input_data_format="channels_first")
    if rgb.shape[0] not in (1, 3):
        via_pil = ip(images=[[Image.fromarray(rgb, "RGB")]], return_tensors="np")
        assert np.array_equal(via_pil["pixel_values"], feat["pixel_values"])
        assert np.array_equal(via_pil["aspect_ratio_ids"], feat["aspect_ratio_ids"])
    return feat


def fit_size(ip, w, h, T, S):
    """(resized_w, resized_h) the processor's own helpers choose."""
    from transformers.models.mllama import image_processing_mllama as ipm
    canvas_h, canvas_w = ipm.get_optimal_tiled_canvas(image_height=h, image_width=w, max_image_tiles=T, tile_size=S)
    nh, nw = ipm.get_image_size_fit_to_canvas(image_height=h, image_width=w, canvas_height=canvas_h,
                                              canvas_width=canvas_w, tile_size=S)
    return int(nw), int(nh), int(canvas_w) // S, int(canvas_h) // S


# ---------------------------------------------------------------------------------------------------
# model pieces (transformers 4.46 layout; v5 moved them under model.model)

def parts(model):
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "multi_modal_projector"):     # 4.52+
        return inner.vision_model, inner.multi_modal_projector, inner.language_model
    return model.vision_model, model.multi_modal_projector, model.language_model.model


def ondisk_name(name):
    """State-dict names of newer transformers (model.language_model.*, lm_head.*, ...) -> the on-disk
    names that transformers 4.46 uses in memory too."""
    for a, b in (("model.language_model.", "language_model.model."), ("model.vision_model.", "vision_model."),
                 ("model.multi_modal_projector.", "multi_modal_projector.")):
        if name.startswith(a):
            return b + name[len(a):]
    return "language_model.lm_head.weight" if name == "lm_head.weight" else name


class MetaTaps:
    """Pre-hooks capture the inputs of the tapped local layers; a hook on the vision model rebuilds
    the tap part of its output from them (asserting equality when transformers already uses Meta's
    rule)."""

    def __init__(self, vision, taps, dim):
        self.taps, self.dim = list(taps), dim
        self.captured, self.hidden_counts, self.native, self.calls = {}, [], None, 0
        n_local = len(vision.transformer.layers)
        self.n_local = n_local
        for i in self.taps:
            vision.transformer.layers[i].register_forward_pre_hook(self._pre(i), with_kwargs=True)
        vision.transformer.register_forward_hook(self._enc)
        vision.register_forward_hook(self._vis)

    def _pre(self, i):
        def hook(module, args, kwargs):
            h = args[0] if args else kwargs.get("hidden_state", kwargs.get("hidden_states"))
            self.captured[i] = h.detach().clone()
        return hook

    def _enc(self, module, args, output):
        hs = getattr(output, "hidden_states", None)
        if hs is None and isinstance(output, tuple) and len(output) > 1:
            hs = output[1]
        self.hidden_counts.append(None if hs is None else len(hs))

    def _vis(self, module, args, output):
        out = output[0] if isinstance(output, tuple) else output.last_hidden_state
        B, M, T, P, _ = out.shape
        st = torch.stack([self.captured[i] for i in self.taps], dim=-1)      # (B*M, T*Pp, D, K)
        Pp = st.shape[1] // T
        rebuilt = st.reshape(B * M, T, Pp, -1)[:, :, :P].reshape(B, M, T, P, -1)
        same = torch.equal(out[..., self.dim:], rebuilt)
        count = self.hidden_counts[-1]
        if count == self.n_local + 1:           # Meta's rule: inputs of every layer + the final output
            assert same, "transformers reports 33-style hidden states but its taps differ from the layer inputs"
            native = True
        else:
            assert count == self.n_local, f"unexpected number of vision hidden states: {count}"
            assert not same, "shifted-rule transformers, yet its taps equal the layer inputs"
            with torch.no_grad():
                out[..., self.dim:] = rebuilt    # in place: the projector sees Meta's taps
            native = False
        assert self.native in (None, native)
        self.native = native
        self.calls += 1
        self.captured = {}
        return output


# ---------------------------------------------------------------------------------------------------
# cross-attention mask

def cross_mask(ids, num_tiles, T):
    """Dense (n_tokens, n_images, T) 0/1 mask, transformers' rule: image j covers [p_j, start of the next group of
    image tokens) -- a group of consecutive image tokens shares the range; the last group runs to the end."""
    locs = [i for i, t in enumerate(ids) if t == IMAGE_TOKEN]
    n = len(ids)
    m = np.zeros((n, len(locs), T), np.float32)
    groups = []
    for p in locs:
        if groups and groups[-1][-1] == p - 1:
            groups[-1].append(p)
        else:
            groups.append([p])
    j = 0
    for g, grp in enumerate(groups):
        end = groups[g + 1][0] if g + 1 < len(groups) else n
        for p in grp:
            m[p:end, j, :num_tiles[j]] = 1
            j += 1
    return m


def hf_cross_mask(ids, num_tiles, T):
    sparse = processing_mllama.get_cross_attention_token_mask(list(ids), IMAGE_TOKEN)
    dense = processing_mllama.convert_sparse_cross_attention_mask_to_dense([sparse], [list(num_tiles)], T, len(ids))
    return dense[0].astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# GGUF writing with empty arrays allowed (gguf's writer refuses them)

class RefWriter(gguf.GGUFWriter):
    def _pack_val(self, val, vtype, add_vtype, sub_type=None):
        if vtype == gguf.GGUFValueType.ARRAY and len(val) == 0:
            assert sub_type is not None
            kv = bytearray()
            if add_vtype:
                kv += self._pack("I", vtype)
            kv += self._pack("I", sub_type)
            kv += self._pack("Q", 0)
            return bytes(kv)
        return super()._pack_val(val, vtype, add_vtype, sub_type=sub_type)


def i32_array(w, key, vals):
    w.add_key_value(key, [int(v) for v in vals], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)


# ---------------------------------------------------------------------------------------------------

def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def generate_config(cfg_name, c, out_dir, keep_hf=None):
    print(f"=== {cfg_name} ===")
    T, S = c["max_num_tiles"], 56
    tmp = tempfile.mkdtemp(prefix=f"mllama-{cfg_name}-")
    hf_dir = os.path.join(tmp, cfg_name)
    try:
        # 1. checkpoint
        model = build_model(c)
        model.save_pretrained(hf_dir, safe_serialization=True)
        from transformers.models.mllama.image_processing_mllama import MllamaImageProcessor
        MllamaImageProcessor(size={"height": S, "width": S}, image_mean=MEAN, image_std=STD,
                             max_image_tiles=T).save_pretrained(hf_dir)
        tokenizer = build_tokenizer()
        tokenizer.save_pretrained(hf_dir)
        del model

        # 2. conversion
        files = conv.convert(hf_dir, os.path.join(out_dir, f"{cfg_name}.gguf"), "f32")
        if cfg_name == "tiny4":
            files += conv.convert(hf_dir, os.path.join(out_dir, f"{cfg_name}-text.gguf"), "f32", split=True,
                                  proj_outfile=os.path.join(out_dir, f"{cfg_name}-proj.gguf"))
            files += conv.convert(hf_dir, os.path.join(out_dir, f"{cfg_name}-f16.gguf"), "f16")

        # 3. reference model
        dtype_kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
        model = MllamaForConditionalGeneration.from_pretrained(hf_dir, attn_implementation="eager",
                                                               **{dtype_kw: torch.float32}).eval()
        for name, p in model.named_parameters():
            assert p.dtype == torch.float32, name
        cfgs = [model.config, model.config.vision_config, model.config.text_config]
        for cf in cfgs:
            assert cf._attn_implementation == "eager", (type(cf).__name__, cf._attn_implementation)
        for name, mod in model.named_modules():
            tn = type(mod).__name__
            assert not any(s in tn for s in ("Sdpa", "Flash", "Flex")), (name, tn)
        assert model.config.vision_config.attention_heads == 2
        vision, projector, text_model = parts(model)
        taps = MetaTaps(vision, c["taps"], model.config.vision_config.hidden_size)
        ip = pil_image_processor(hf_dir)
        sd = {ondisk_name(k): v.detach().numpy().copy() for k, v in model.state_dict().items()}

        ref_path = os.path.join(out_dir, f"{cfg_name}-ref.gguf")
        w = RefWriter(ref_path, "mllama_ref")
        w.add_string("ref.transformers_version", transformers.__version__)
        w.add_string("ref.torch_version", torch.__version__)
        w.add_string("ref.pillow_version", PIL.__version__)
        w.add_string("ref.numpy_version", np.__version__)
        w.add_string("ref.tap_rule", "meta")
        w.add_uint32("ref.n_images", len(c["images"]))
        w.add_uint32("ref.n_prompts", len(c["prompts"]))
        with open(os.path.join(hf_dir, "config.json")) as f:
            w.add_string("ref.config", json.dumps(json.loads(f.read()), sort_keys=True))

        # images
        img_inputs = []
        with torch.no_grad():
            for k, (W, H) in enumerate(c["images"]):
                rgb = make_image(W, H, c["seed"])
                feat = process_image(ip, rgb)
                pv = feat["pixel_values"].astype(np.float32)
                assert pv.shape == (1, 1, T, 3, S, S) and pv.dtype == np.float32, pv.shape
                arid = int(feat["aspect_ratio_ids"][0, 0])
                armask = [int(x) for x in feat["aspect_ratio_mask"][0, 0]]
                ntiles = int(feat["num_tiles"][0][0])
                rw, rh, cols, rows = fit_size(ip, W, H, T, S)
                assert rows * cols == ntiles and armask == [1] * ntiles + [0] * (T - ntiles)
                assert np.all(pv[0, 0, ntiles:] == 0.0)
                vo = vision(pixel_values=torch.from_numpy(pv), aspect_ratio_ids=torch.tensor([[arid]]),
                            aspect_ratio_mask=torch.tensor([armask]))[0]
                po = projector(vo)
                vo_np = vo[0, 0].numpy()                                   # (T, 17, vision_output_dim)
                po_np = po[0, 0].reshape(-1, po.shape[-1]).numpy()        # (T*17, hidden)
                img_inputs.append(dict(pv=pv, arid=arid, armask=armask, ntiles=ntiles, vo=vo_np))
                w.add_tensor(f"img.{k}.rgb", np.ascontiguousarray(rgb.reshape(H, W * 3)).view(np.int8))
                w.add_uint32(f"img.{k}.width", W)
                w.add_uint32(f"img.{k}.height", H)
                w.add_uint32(f"img.{k}.aspect_ratio_id", arid)
                w.add_uint32(f"img.{k}.num_tiles", ntiles)
                i32_array(w, f"img.{k}.aspect_ratio_mask", armask)
                w.add_uint32(f"img.{k}.resized_width", rw)
                w.add_uint32(f"img.{k}.resized_height", rh)
                # an exact comparison needs no copy of the values: their FNV-1a 64 hash (the bytes of the
                # float32 tensor in ggml order) keeps the fixtures small
                w.add_uint64(f"img.{k}.pixel_values_fnv1a64", fnv1a64(np.ascontiguousarray(pv[0, 0]).tobytes()))
                w.add_tensor(f"img.{k}.vision_out", np.ascontiguousarray(vo_np))
                w.add_tensor(f"img.{k}.proj_out", np.ascontiguousarray(po_np))
                print(f"img.{k}: {W}x{H} -> canvas {rows}x{cols} (id {arid}, {ntiles} tiles), resized {rw}x{rh}; "
                      f"vision_out sum {vo_np.sum():.6f} proj_out sum {po_np.sum():.6f}")
        assert taps.calls == len(c["images"])
        tap_source = "native" if taps.native else "hooks"
        w.add_string("ref.tap_rule_source", tap_source)
        print(f"vision taps: transformers' encoder returned {taps.hidden_counts[0]} hidden states for "
              f"{taps.n_local} layers -> Meta rule {tap_source}")

        # prompts
        rng = np.random.default_rng([c["seed"], 7])
        # eos = the image token: lm_head has no row for it, so it is never generated and generation never
        # stops early (eos_token_id=None is not enough in newer transformers, which then take the model's)
        gen_cfg = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=N_GREEDY, min_new_tokens=0,
                                   eos_token_id=[IMAGE_TOKEN], pad_token_id=PAD, bos_token_id=BOS, use_cache=True,
                                   repetition_penalty=1.0)
        model.generation_config.eos_token_id = [IMAGE_TOKEN]
        for p, segs in enumerate(c["prompts"]):
            ids, used = [BOS], []
            for s in segs:
                if isinstance(s, str):
                    ids.append(IMAGE_TOKEN)
                    used.append(int(s[1:]))
                else:
                    ids += [int(x) for x in rng.integers(0, BOS, s)]      # bytes and merges only
            assert ids.count(BOS) == 1 and ids[0] == BOS
            n = len(ids)
            inputs = dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, n, dtype=torch.long))
            cam = None
            if used:
                nt = [img_inputs[k]["ntiles"] for k in used]
                cam = cross_mask(ids, nt, T)
                assert np.array_equal(cam, hf_cross_mask(ids, nt, T)), f"prompt {p}: cross mask differs from HF's"
                inputs.update(
                    pixel_values=torch.from_numpy(np.concatenate([img_inputs[k]["pv"] for k in used], axis=1)),
                    aspect_ratio_ids=torch.tensor([[img_inputs[k]["arid"] for k in used]]),
                    aspect_ratio_mask=torch.tensor([[img_inputs[k]["armask"] for k in used]]),
                    cross_attention_mask=torch.from_numpy(cam[None].astype(np.int64)))
            with torch.no_grad():
                logits = model(**inputs, use_cache=False).logits[0].float().numpy()
                assert logits.shape == (n, VOCAB)
                gen = model.generate(**inputs, generation_config=gen_cfg)
            greedy = [int(x) for x in gen[0, n:]]
            assert len(greedy) == N_GREEDY, greedy
            assert greedy[0] == int(np.argmax(logits[-1])), "first greedy token != argmax of the last logits"
            margin = check_greedy_nocache(model, inputs, ids, greedy, cam)
            i32_array(w, f"prompt.{p}.tokens", ids)
            i32_array(w, f"prompt.{p}.images", used)
            w.add_tensor(f"prompt.{p}.logits", np.ascontiguousarray(logits))
            i32_array(w, f"prompt.{p}.greedy", greedy)
            w.add_float32(f"prompt.{p}.greedy_min_margin", margin)
            if used:
                w.add_tensor(f"prompt.{p}.cross_attention_mask", np.ascontiguousarray(cam))
            print(f"prompt.{p}: {n} tokens, images {used}, logits std {logits.std():.3f} sum {logits.sum():.5f}, "
                  f"greedy {greedy} ({len(set(greedy))} distinct, smallest top-1/top-2 logit gap {margin:.4f})")
            if len(set(greedy)) < 4:
                print("warning: greedy tokens barely vary")

        if cfg_name == "tiny4":
            check_full_processor(hf_dir, ip, c, img_inputs)

        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        files.append(ref_path)

        # 4. self-checks of the model files
        hp = conv.HParams(hf_dir)
        check_model_gguf(os.path.join(out_dir, f"{cfg_name}.gguf"), sd, hp, "single", "f32", tokenizer)
        if cfg_name == "tiny4":
            check_model_gguf(os.path.join(out_dir, "tiny4-f16.gguf"), sd, hp, "single", "f16", tokenizer)
            check_model_gguf(os.path.join(out_dir, "tiny4-text.gguf"), sd, hp, "text", "f32", tokenizer)
            check_model_gguf(os.path.join(out_dir, "tiny4-proj.gguf"), sd, hp, "proj", "f32", tokenizer)
        check_rope(os.path.join(out_dir, f"{cfg_name}.gguf"), model, sd, hp)
        check_ref_gguf(ref_path, c)
        if keep_hf:
            dst = os.path.join(keep_hf, cfg_name)
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(hf_dir, dst)
        return files
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_greedy_nocache(model, inputs, ids, greedy, cam):
    """Each greedy token is the argmax of a fresh full forward pass over the prompt plus the tokens
    before it (the mask row of a generated token repeats the last prompt row)."""
    full = list(ids) + greedy[:-1]
    kw = dict(inputs)
    kw["input_ids"] = torch.tensor([full])
    kw["attention_mask"] = torch.ones(1, len(full), dtype=torch.long)
    if cam is not None:
        ext = np.concatenate([cam, np.repeat(cam[-1:], len(greedy) - 1, axis=0)], axis=0)
        kw["cross_attention_mask"] = torch.from_numpy(ext[None].astype(np.int64))
    with torch.no_grad():
        lg = model(**kw, use_cache=False).logits[0].numpy()
    steps = lg[len(ids) - 1:]
    am = [int(x) for x in np.argmax(steps, axis=-1)]
    assert am == greedy, f"cached greedy {greedy} != recomputed {am}"
    top2 = np.sort(steps, axis=-1)[:, -2:]
    return float(np.min(top2[:, 1] - top2[:, 0]))


def check_full_processor(hf_dir, ip, c, img_inputs):
    """One text prompt through MllamaProcessor (tokenizer + PIL image processor): its input ids, pixel
    values and cross-attention mask agree with what this script builds."""
    from transformers import AutoTokenizer, MllamaProcessor
    tok = AutoTokenizer.from_pretrained(hf_dir)
    proc = MllamaProcessor(image_processor=ip, tokenizer=tok)
    ks = [1, 5]
    text = "<|begin_of_text|>in the<|image|> he on<|image|> the in"
    imgs = [[Image.fromarray(make_image(*c["images"][k], c["seed"]), "RGB") for k in ks]]
    out = proc(images=imgs, text=text, add_special_tokens=False, return_tensors="np")
    ids = [int(x) for x in out["input_ids"][0]]
    assert ids.count(BOS) == 1 and ids[0] == BOS and ids.count(IMAGE_TOKEN) == 2, ids
    nt = [img_inputs[k]["ntiles"] for k in ks]
    assert np.array_equal(out["cross_attention_mask"][0].astype(np.float32), cross_mask(ids, nt, c["max_num_tiles"]))
    assert np.array_equal(out["pixel_values"][0], np.concatenate([img_inputs[k]["pv"][0] for k in ks], axis=0))
    print(f"processor check: ids {ids}: cross-attention mask and pixel values agree")


# ---------------------------------------------------------------------------------------------------
# self-checks of the GGUF files

def hf_permute_for_rope(w, n_heads):
    """HF's direction (Meta interleaved -> rotate-half): view(n, d/2, 2, in).transpose(1, 2)."""
    rows = w.shape[0]
    d = rows // n_heads
    return w.reshape(n_heads, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def expected_from_hf(sd, hp, layout):
    """GGUF name -> (HF state-dict name, kind) for the given layout ("single", "text", "proj")."""
    exp = {}
    T = "language_model.model."
    if layout in ("single", "text"):
        exp["token_embd.weight"] = (T + "embed_tokens.weight", "copy")
        exp["output_norm.weight"] = (T + "norm.weight", "copy")
        exp["output.weight"] = ("language_model.lm_head.weight", "copy")
        exp["rope_freqs.weight"] = (None, "rope")
        for il in range(hp.n_layer):
            p = f"{T}layers.{il}."
            g = f"blk.{il}."
            exp[g + "attn_norm.weight"] = (p + "input_layernorm.weight", "copy")
            exp[g + "ffn_norm.weight"] = (p + "post_attention_layernorm.weight", "copy")
            for a, b in (("gate", "gate"), ("up", "up"), ("down", "down")):
                exp[g + f"ffn_{a}.weight"] = (p + f"mlp.{b}_proj.weight", "copy")
            if il in hp.cross_layers:
                for x in "qkvo":      # the single file holds q/k permuted per head, as Ollama's converter
                    heads = {"q": hp.n_head, "k": hp.n_head_kv}.get(x) if layout == "single" else None
                    exp[g + f"cross_attn_{x}_proj.weight"] = (p + f"cross_attn.{x}_proj.weight", ("perm", heads) if heads else "copy")
                for x in "qk":
                    exp[g + f"cross_attn_{x}_norm.weight"] = (p + f"cross_attn.{x}_norm.weight", "copy")
                exp[g + "cross_attn_attn_gate"] = (p + "cross_attn_attn_gate", "copy")
                exp[g + "cross_attn_mlp_gate"] = (p + "cross_attn_mlp_gate", "copy")
            else:
                exp[g + "attn_q.weight"] = (p + "self_attn.q_proj.weight", ("perm", hp.n_head))
                exp[g + "attn_k.weight"] = (p + "self_attn.k_proj.weight", ("perm", hp.n_head_kv))
                exp[g + "attn_v.weight"] = (p + "self_attn.v_proj.weight", "copy")
                exp[g + "attn_output.weight"] = (p + "self_attn.o_proj.weight", "copy")
    if layout in ("single", "proj"):
        V = "vision_model."
        exp["v.patch_embd.weight"] = (V + "patch_embedding.weight", "copy")
        exp["v.class_embd"] = (V + "class_embedding", "copy")
        exp["v.position_embd.weight"] = (V + "gated_positional_embedding.embedding", "copy")
        exp["v.position_embd.gate"] = (V + "gated_positional_embedding.gate", "one_minus_tanh")
        exp["v.tile_position_embd.weight"] = (V + "gated_positional_embedding.tile_embedding.weight", "copy")
        exp["v.tile_position_embd.gate"] = (V + "gated_positional_embedding.gate", "tanh")
        for x in ("pre", "post"):
            exp[f"v.{x}_tile_position_embd.weight"] = (V + f"{x}_tile_positional_embedding.embedding.weight", "copy")
            exp[f"v.{x}_tile_position_embd.gate"] = (V + f"{x}_tile_positional_embedding.gate", "tanh")
            for y in ("weight", "bias"):
                exp[f"v.{x}_ln.{y}"] = (V + f"layernorm_{x}.{y}", "copy")
        legacy = layout == "proj"
        for enc, n, gp in (("transformer", hp.v_n_layer, "v.blk"), ("global_transformer", hp.v_n_global, "v.global.blk")):
            for il in range(n):
                p = f"{V}{enc}.layers.{il}."
                g = f"{gp}.{il}."
                for y in ("weight", "bias"):
                    exp[g + ("ln1." if legacy else "attn_norm.") + y] = (p + "input_layernorm." + y, "copy")
                    exp[g + ("ln2." if legacy else "ffn_norm.") + y] = (p + "post_attention_layernorm." + y, "copy")
                    exp[g + ("ffn_down." if legacy else "ffn_up.") + y] = (p + "mlp.fc1." + y, "copy")
                    exp[g + ("ffn_up." if legacy else "ffn_down.") + y] = (p + "mlp.fc2." + y, "copy")
                for x in "qkv":
                    perm = layout == "single" and x in "qk"
                    exp[g + f"attn_{x}.weight"] = (p + f"self_attn.{x}_proj.weight", ("perm", hp.v_n_head) if perm else "copy")
                exp[g + ("attn_out.weight" if legacy else "attn_output.weight")] = (p + "self_attn.o_proj.weight", "copy")
                if enc == "global_transformer":
                    exp[g + "attn_gate"] = (p + "gate_attn", "tanh")
                    exp[g + "ffn_gate"] = (p + "gate_ffn", "tanh")
        exp["mm.0.weight"] = ("multi_modal_projector.weight", "copy")
        exp["mm.0.bias"] = ("multi_modal_projector.bias", "copy")
    return exp


F32_ALWAYS = {"rope_freqs.weight", "v.position_embd.weight", "v.tile_position_embd.weight",
              "v.pre_tile_position_embd.weight", "v.post_tile_position_embd.weight"}


def check_model_gguf(path, sd, hp, layout, outtype, tokenizer):
    r = gguf.GGUFReader(path)
    exp = expected_from_hf(sd, hp, layout)
    names = [t.name for t in r.tensors]
    assert len(names) == len(set(names))
    assert set(names) == set(exp), f"{path}: missing {sorted(set(exp) - set(names))}, extra {sorted(set(names) - set(exp))}"
    for t in r.tensors:
        hf_name, kind = exp[t.name]
        data = np.array(t.data)
        ne = [int(x) for x in t.shape]
        keep32 = t.name in F32_ALWAYS or len(ne) == 1
        want_type = gguf.GGMLQuantizationType.F32 if (outtype == "f32" or keep32) else gguf.GGMLQuantizationType.F16
        assert t.tensor_type == want_type, (path, t.name, t.tensor_type)
        if kind == "rope":
            continue
        ref = sd[hf_name]
        assert ne == list(reversed(ref.shape)), (t.name, ne, ref.shape)   # ggml order
        data = data.reshape(ref.shape).astype(np.float32)
        if kind == "copy":
            back = data
        elif kind[0] == "perm":
            back = hf_permute_for_rope(data, kind[1])
        elif kind == "tanh":
            assert np.array_equal(data, np.tanh(ref)), t.name
            back = np.arctanh(data.astype(np.float64))
        elif kind == "one_minus_tanh":
            assert np.array_equal(data, np.float32(1) - np.tanh(ref)), t.name
            back = np.arctanh(1.0 - data.astype(np.float64))
        if kind in ("tanh", "one_minus_tanh"):
            assert np.allclose(back, ref, rtol=1e-5, atol=1e-6), (t.name, back, ref)
        elif t.tensor_type == gguf.GGMLQuantizationType.F16:
            assert np.array_equal(back, ref.astype(np.float16).astype(np.float32)), t.name
        else:
            assert np.array_equal(back, ref), (path, t.name)
    # a few shapes spelled out (ggml order)
    sh = {t.name: [int(x) for x in t.shape] for t in r.tensors}
    D, T = hp.v_n_embd, hp.v_max_tiles
    if layout in ("single", "proj"):
        assert sh["v.patch_embd.weight"] == [14, 14, 3, D]
        assert sh["v.tile_position_embd.weight"] == [T * 17 * D, len(sd["vision_model.gated_positional_embedding.tile_embedding.weight"])]
        assert sh["mm.0.weight"] == [hp.v_output_dim, hp.n_embd]
    if layout in ("single", "text"):
        assert sh["token_embd.weight"] == [hp.n_embd, hp.vocab_size + 8]
        assert sh["output.weight"] == [hp.n_embd, hp.vocab_size]
        assert sh["rope_freqs.weight"] == [hp.head_dim // 2]

    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    assert kv["general.architecture"] == "mllama"
    want = {}
    if layout in ("single", "text"):
        want.update({
            "mllama.vocab_size": hp.vocab_size, "mllama.block_count": hp.n_layer,
            "mllama.context_length": 512, "mllama.embedding_length": 64, "mllama.feed_forward_length": 128,
            "mllama.attention.head_count": 4, "mllama.attention.head_count_kv": 2,
            "mllama.rope.dimension_count": 16, "mllama.rope.freq_base": 10000.0,
            "mllama.attention.layer_norm_rms_epsilon": np.float32(1e-5),
            "mllama.attention.cross_attention_layers": hp.cross_layers,
            "mllama.image_token_index": IMAGE_TOKEN,
            "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "default",   # GPT-2's regex, not Llama 3's Split
            "tokenizer.ggml.bos_token_id": BOS, "tokenizer.ggml.eos_token_id": EOT,
            "tokenizer.ggml.padding_token_id": PAD, "tokenizer.ggml.eos_token_ids": [EOT_TEXT, EOM, EOT],
            "mmsched.mllama.qk_rows": "ollama" if layout == "single" else "hf",
        })
        toks = kv["tokenizer.ggml.tokens"]
        assert len(toks) == VOCAB + 1 and toks[IMAGE_TOKEN] == "<|image|>" and toks[BOS] == "<|begin_of_text|>"
        assert toks == tokenizer.convert_ids_to_tokens(list(range(VOCAB + 1)))
        types = kv["tokenizer.ggml.token_type"]
        assert types[:BOS] == [1] * BOS and types[BOS:] == [3] * (VOCAB + 1 - BOS)
        assert kv["tokenizer.ggml.merges"] == [f"{a} {b}" for a, b in MERGES]
    if layout in ("single", "proj"):
        want.update({
            "mllama.vision.block_count": 4, "mllama.vision.global.block_count": 2,
            "mllama.vision.intermediate_layers_indices": hp.v_taps, "mllama.vision.embedding_length": 32,
            "mllama.vision.feed_forward_length": 64, "mllama.vision.attention.head_count": 2,
            "mllama.vision.attention.layer_norm_epsilon": np.float32(1e-5), "mllama.vision.image_size": 56,
            "mllama.vision.patch_size": 14, "mllama.vision.max_num_tiles": hp.v_max_tiles,
            "mllama.vision.num_channels": 3,
            "mllama.vision.image_mean": [np.float32(x) for x in MEAN],
            "mllama.vision.image_std": [np.float32(x) for x in STD],
        })
    if layout == "proj":
        assert kv["general.type"] == "projector" and kv["mllama.vision.projection_dim"] == 64
        assert kv["mmsched.mllama.qk_rows"] == "hf"
        assert not any(k.startswith("tokenizer.") for k in kv)
        assert not any(k.startswith("mllama.") and not k.startswith("mllama.vision.") for k in kv)
    if layout == "single":
        assert "mllama.vision.projection_dim" not in kv
    if layout == "text":
        assert not any(k.startswith("mllama.vision.") for k in kv)
    for k, v in want.items():
        got = kv.get(k)
        if isinstance(v, list):
            assert list(got) == list(v), (path, k, got, v)
        elif isinstance(v, float) or isinstance(v, np.floating):
            assert np.float32(got) == np.float32(v), (path, k, got, v)
        else:
            assert got == v, (path, k, got, v)
    # integer arrays must be int32
    for k in ("mllama.attention.cross_attention_layers", "mllama.vision.intermediate_layers_indices",
              "tokenizer.ggml.eos_token_ids"):
        if k in r.fields:
            assert r.fields[k].types == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32], k
    print(f"self-check {os.path.basename(path)} ({layout}, {outtype}): {len(names)} tensors reproduce the HF "
          f"state dict, metadata ok")


def check_rope(path, model, sd, hp):
    """NORMAL (adjacent-pair) RoPE on the GGUF's permuted q/k, with rope_freqs.weight as divisors, gives
    the attention scores of HF's rotate-half RoPE on HF's weights."""
    r = gguf.GGUFReader(path)
    t = {x.name: np.array(x.data) for x in r.tensors}
    div = t["rope_freqs.weight"].astype(np.float32)
    d, base = hp.head_dim, hp.rope_theta
    theta = (1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))).numpy()
    _, _, text_model = parts(model)
    hf_inv = text_model.rotary_emb.inv_freq.detach().numpy()
    assert np.allclose(theta / div, hf_inv, rtol=2e-6, atol=0), (theta / div, hf_inv)
    n1 = int(np.sum(div == 1.0))
    n8 = int(np.sum(div == 8.0))
    nmid = len(div) - n1 - n8
    assert n1 > 0 and n8 > 0 and nmid > 0, (n1, nmid, n8)

    layer = next(i for i in range(hp.n_layer) if i not in hp.cross_layers)
    pre = f"language_model.model.layers.{layer}.self_attn."
    Wq, Wk = sd[pre + "q_proj.weight"], sd[pre + "k_proj.weight"]
    Gq, Gk = t[f"blk.{layer}.attn_q.weight"], t[f"blk.{layer}.attn_k.weight"]
    rng = np.random.default_rng(5)
    pos = np.array([0, 1, 2, 5, 17, 40, 63, 64, 65, 100, 200, 333, 511])
    x = rng.standard_normal((len(pos), hp.n_embd))
    H, Hk = hp.n_head, hp.n_head_kv

    def scores(q, k):
        q = q.reshape(len(pos), H, d).transpose(1, 0, 2)
        k = k.reshape(len(pos), Hk, d).transpose(1, 0, 2)
        k = np.repeat(k, H // Hk, axis=0)
        return q @ k.transpose(0, 2, 1)

    def rot_half(v, n_heads, freq):
        v = v.reshape(len(pos), n_heads, d)
        ang = pos[:, None] * freq[None, :]
        c = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]
        s = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
        rh = np.concatenate([-v[..., d // 2:], v[..., :d // 2]], -1)
        return (v * c + rh * s).reshape(len(pos), -1)

    def rot_normal(v, n_heads, freq):
        v = v.reshape(len(pos), n_heads, d // 2, 2)
        ang = (pos[:, None] * freq[None, :])[:, None, :]
        c, s = np.cos(ang), np.sin(ang)
        x0, x1 = v[..., 0], v[..., 1]
        return np.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).reshape(len(pos), -1)

    # (a) exact algebra in float64 with one frequency vector: the permutation is right
    f64 = theta.astype(np.float64) / div.astype(np.float64)
    s_hf = scores(rot_half(x @ Wq.T.astype(np.float64), H, f64), rot_half(x @ Wk.T.astype(np.float64), Hk, f64))
    s_gg = scores(rot_normal(x @ Gq.T.astype(np.float64), H, f64), rot_normal(x @ Gk.T.astype(np.float64), Hk, f64))
    err64 = np.abs(s_hf - s_gg).max() / np.abs(s_hf).max()
    assert err64 < 1e-12, err64

    # (b) HF's own float32 code path (rotary_emb + apply_rotary_pos_emb) vs NORMAL mode in float32
    xt = torch.from_numpy(x.astype(np.float32))[None]
    q = torch.from_numpy(x.astype(np.float32) @ Wq.T).view(1, len(pos), H, d).transpose(1, 2)
    k = torch.from_numpy(x.astype(np.float32) @ Wk.T).view(1, len(pos), Hk, d).transpose(1, 2)
    cos, sin = text_model.rotary_emb(xt, torch.from_numpy(pos)[None])
    qr, kr = modeling_mllama.apply_rotary_pos_emb(q, k, cos, sin)
    kr = modeling_mllama.repeat_kv(kr, H // Hk)
    s_torch = (qr @ kr.transpose(2, 3))[0].numpy()
    f32 = (theta / div).astype(np.float32)
    s_g32 = scores(rot_normal((x.astype(np.float32) @ Gq.T).astype(np.float32), H, f32),
                   rot_normal((x.astype(np.float32) @ Gk.T).astype(np.float32), Hk, f32))
    err32 = np.abs(s_torch - s_g32).max() / np.abs(s_torch).max()
    assert err32 < 1e-4, err32
    print(f"rope check: divisors {np.round(div, 4).tolist()} ({n1} high-freq = 1, {nmid} smoothed, {n8} = factor); "
          f"NORMAL-pair RoPE on permuted q/k == HF rotate-half: rel err {err64:.1e} (f64), {err32:.1e} (HF f32 path)")


def check_ref_gguf(path, c):
    r = gguf.GGUFReader(path)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    tens = {t.name: t for t in r.tensors}
    T = c["max_num_tiles"]
    assert kv["ref.tap_rule"] == "meta" and kv["ref.n_images"] == len(c["images"])
    for k, (W, H) in enumerate(c["images"]):
        assert [int(x) for x in tens[f"img.{k}.rgb"].shape] == [3 * W, H]
        assert tens[f"img.{k}.rgb"].tensor_type == gguf.GGMLQuantizationType.I8
        assert isinstance(kv[f"img.{k}.pixel_values_fnv1a64"], int)
        assert [int(x) for x in tens[f"img.{k}.vision_out"].shape][1:] == [17, T]
        assert [int(x) for x in tens[f"img.{k}.proj_out"].shape] == [64, 17 * T]
        assert len(kv[f"img.{k}.aspect_ratio_mask"]) == T
    for p in range(len(c["prompts"])):
        n = len(kv[f"prompt.{p}.tokens"])
        assert [int(x) for x in tens[f"prompt.{p}.logits"].shape] == [VOCAB, n]
        assert len(kv[f"prompt.{p}.greedy"]) == N_GREEDY
        nimg = len(kv[f"prompt.{p}.images"]) if f"prompt.{p}.images" in kv else -1
        f = r.fields[f"prompt.{p}.images"]      # parts: key length, key, type, element type, count, ...
        assert f.types[0] == gguf.GGUFValueType.ARRAY and int(f.parts[3][0]) == gguf.GGUFValueType.INT32
        assert int(f.parts[4][0]) == nimg
        if nimg:
            assert [int(x) for x in tens[f"prompt.{p}.cross_attention_mask"].shape] == [T, nimg, n]
        else:
            assert f"prompt.{p}.cross_attention_mask" not in tens
    print(f"self-check {os.path.basename(path)}: {len(r.tensors)} tensors, {len(kv)} keys, layout ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures", "mllama"))
    ap.add_argument("--keep-hf", help="also keep the Hugging Face checkpoints in this folder")
    ap.add_argument("--only", help="comma-separated configuration names")
    a = ap.parse_args()

    if transformers.__version__ != TESTED_TRANSFORMERS:
        print(f"note: transformers {transformers.__version__} (the fixtures were made with {TESTED_TRANSFORMERS}); "
              f"Meta's tap rule is enforced with hooks either way")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    names = a.only.split(",") if a.only else list(CONFIGS)
    files = []
    for name in names:
        files += generate_config(name, CONFIGS[name], out, a.keep_hf)
    print("=== files ===")
    for f in files:
        print(f"{os.path.relpath(f, os.getcwd()):50s} {os.path.getsize(f):9d} bytes  sha256 {sha(f)}")
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"total in {os.path.relpath(out, os.getcwd())}: {total} bytes ({total / 2**20:.2f} MiB)")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}, "
          f"pillow {PIL.__version__}, gguf {importlib.metadata.version('gguf')}")


if __name__ == "__main__":
    main()
