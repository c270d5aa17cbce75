#!/usr/bin/env python3
"""Write a Llama 3.2 Vision ("mllama") GGUF exactly as Ollama's converter writes it: an independent
reference for mmsched's loader, written from Ollama's Go code rule by rule and sharing nothing with
tools/convert_hf_to_gguf.py (mmsched's own converter).

    python tools/ollama_mllama_gguf.py HF_DIR OUT.gguf

HF_DIR is a Hugging Face checkpoint folder (config.json, *.safetensors in F32, F16 or BF16,
tokenizer.json, and optionally tokenizer_config.json and generation_config.json). Needs numpy only.

The rules, with where they are in ollama/ollama (read at commit fb3076099; the mllama parts are
unchanged since 55760195e "fix mllama conversion (#10716)", May 2025, and 2717dce6f, Sep 2025):

  convert/reader_safetensors.go  the *.safetensors files in name order, each header's keys sorted;
        0-dim tensors become 1-dim. Kind (storage type): tensorBase.Kind in convert/reader.go
        (F32 for 1-D tensors, names ending .bias and v.{,tile_,pre_tile_,post_tile_}position_embd
        .weight; F16 for every other tensor), then BF16 instead of F16 when the source is BF16 and
        the name does not start with v., s. or mm. Data: copied when F32 -> F32 or F16 -> F16 with
        no repacker, else decoded to float32, repacked, encoded (F16 round to nearest even:
        x448/float16; BF16 by dropping the low 16 bits: d4l3k/go-bfloat16).
  convert/convert_llama.go, convert_mllama.go  Replacements(): names rewritten by Go's
        strings.NewReplacer (left to right; at each position the first pair in argument order whose
        old string matches). llamaModel.Tensors: rope_freqs.weight (llama3 rope factors, F32) first;
        names ending attn_q.weight, attn_k.weight, attn_q_proj.weight or attn_k_proj.weight get
        llamaModel.repack: rows viewed (heads, 2, rows/heads/2), the two middle axes swapped: row
        h*d + 2i + p of the output is row h*d + p*d/2 + i of the input; q with num_attention_heads,
        k with num_key_value_heads. This reaches the cross-attention q/k (blk.N.cross_attn_{q,k}_proj
        .weight); cross_attn_{q,k}_norm are NOT permuted. mllamaModel.Tensors: vision tensors (v.*,
        mm.*) keep their names; v.*attn_{q,k}.weight get the same permutation with the vision heads;
        v.{pre,post}_tile_position_embd.gate and v.*.{attn,ffn}_gate hold tanh(g) (math32.Tanh);
        v.position_embd.gate is written twice: as v.position_embd.gate = 1 - tanh(g) and as
        v.tile_position_embd.gate = tanh(g). Text gates stay raw.
  convert/convert.go  ModelParameters.KV + llamaModel.KV (llama.* keys renamed mllama.*) +
        mllamaModel.KV; tokenizer from convert/tokenizer.go (tokens by id, scores = id, types
        control/user-defined/normal, merges, pre from the sha256 of the Split regexes, special token
        ids from tokenizer_config.json when they name added tokens, *_token_ids lists from
        generation_config.json, chat_template). general.file_type is 1 whatever the types.
  fs/ggml/gguf.go WriteGGUF  version 3; keys sorted, tensors sorted by block number ("blk.N."
        prefix; others after) then name; shapes reversed (ggml order); each tensor padded to 32
        bytes; the data section starts at the next multiple of 32; padding is never written (zeros:
        Ollama writes with WriteAt), so the file ends where the last tensor ends.

Gates: math32 v1.11.0 as built for amd64 (its Exp in assembly, emulated here instruction by
instruction in float32, including the ADDSS that starts its Taylor evaluation from k + T4). An arm64
build of Ollama uses math32's Go Exp and may differ in the last bit for |g| >= 0.625.
"""

import glob
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

F32 = np.float32

KIND_F32, KIND_F16, KIND_BF16 = 0, 1, 30

# ---------------------------------------------------------------------------------------------------
# names: Go's strings.NewReplacer

LLAMA_REPLACEMENTS = [
    "lm_head", "output",
    "model.embed_tokens", "token_embd",
    "model.norm", "output_norm",
    "model.layers", "blk",
    "input_layernorm", "attn_norm",
    "self_attn.q_proj", "attn_q",
    "self_attn.k_proj", "attn_k",
    "self_attn.v_proj", "attn_v",
    "self_attn.o_proj", "attn_output",
    "mlp.gate_proj", "ffn_gate",
    "mlp.down_proj", "ffn_down",
    "mlp.up_proj", "ffn_up",
    "post_attention_layernorm", "ffn_norm",
]

MLLAMA_REPLACEMENTS = LLAMA_REPLACEMENTS + [
    "language_model.", "",
    "gate_attn", "attn_gate",
    "gate_ffn", "ffn_gate",
    "cross_attn.", "cross_attn_",
    "vision_model", "v",
    "class_embedding", "class_embd",
    "patch_embedding", "patch_embd",
    "gated_positional_embedding.tile_embedding", "tile_position_embd",
    "gated_positional_embedding.embedding", "position_embd.weight",
    "gated_positional_embedding", "position_embd",
    "embedding.weight", "weight",
    "pre_tile_positional_embedding", "pre_tile_position_embd",
    "post_tile_positional_embedding", "post_tile_position_embd",
    "layernorm_pre", "pre_ln",
    "layernorm_post", "post_ln",
    "global_transformer.layers", "global.blk",
    "transformer.layers", "blk",
    "mlp.fc1", "ffn_up",
    "mlp.fc2", "ffn_down",
    "multi_modal_projector", "mm.0",
]


def go_replace(s, oldnew):
    pairs = list(zip(oldnew[0::2], oldnew[1::2]))
    out, i = [], 0
    while i < len(s):
        for old, new in pairs:            # argument order is priority order
            if old and s.startswith(old, i):
                out.append(new)
                i += len(old)
                break
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------------
# math32.Tanh (chewxy/math32 v1.11.0, amd64)

def _f(x):
    return F32(x)


def math32_exp_amd64(x):
    """exp_amd64.s, one float32 operation per instruction."""
    x = _f(x)
    if math.isnan(x) or x == np.inf:
        return x
    if x == -np.inf:
        return _f(0)
    x1 = _f(_f(1.44269502162933349609375) * x)          # MOVSS $LOG2E, X1; MULSS X0, X1
    k = int(np.rint(x1))                                  # CVTSS2SL: round to nearest even
    x1 = _f(k)                                            # CVTSL2SS
    x0 = _f(x - _f(_f(0.693145751953125) * x1))          # LN2U
    x0 = _f(x0 - _f(_f(1.428606765330187045e-06) * x1))  # LN2L
    x0 = _f(x0 * _f(0.0625))
    x1 = _f(x1 + _f(0.00836596917361021041870117))      # ADDSS $T4, X1 (X1 still holds k)
    for t in (0.0416710823774337768554688, 0.166665524244308471679688, 0.5, 1.0):
        x1 = _f(x1 * x0)
        x1 = _f(x1 + _f(t))
    x0 = _f(x1 * x0)
    for _ in range(4):
        x1 = _f(_f(2.0) + x0)
        x0 = _f(x0 * x1)
    x0 = _f(x0 + _f(1.0))
    e = k + 0x7F
    if e <= 0:
        return _f(0)
    if e >= 0xFF:
        return _f(np.inf)
    return _f(x0 * np.array([e << 23], np.uint32).view(np.float32)[0])


def math32_tanh(x):
    x = _f(x)
    z = abs(x)
    if z > 0.5 * 88.02969187150841:
        return _f(-1.0) if x < 0 else _f(1.0)
    if z >= 0.625:
        s = math32_exp_amd64(_f(z + z))
        z = _f(_f(1) - _f(_f(2) / _f(s + _f(1))))
        return -z if x < 0 else z
    if x == 0:
        return x
    s = _f(x * x)
    c = [-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1]
    p = _f(_f(c[0]) * s)
    for ci in c[1:]:
        p = _f(_f(p + _f(ci)) * s)
    return _f(_f(p * x) + x)


def tanh_vec(a):
    return np.array([math32_tanh(v) for v in np.asarray(a, F32).ravel()], F32).reshape(np.shape(a))


# ---------------------------------------------------------------------------------------------------
# safetensors (convert/reader_safetensors.go)

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class Source:
    def __init__(self, path, key, dtype, shape, begin, end):
        self.path, self.key, self.dtype, self.shape = path, key, dtype, list(shape) or [1]
        self.begin, self.end = begin, end
        self.name = None
        self.repacker = None

    def raw(self):
        with open(self.path, "rb") as f:
            f.seek(self.begin)
            return f.read(self.end - self.begin)

    def floats(self):
        b = self.raw()
        if self.dtype == "F32":
            return np.frombuffer(b, "<f4").astype(F32)
        if self.dtype == "F16":
            return np.frombuffer(b, "<f2").astype(F32)
        if self.dtype == "BF16":
            return (np.frombuffer(b, "<u2").astype(np.uint32) << 16).view(F32)
        raise SystemExit(f"{self.path}: {self.key}: unknown data type {self.dtype}")


def parse_safetensors(folder, oldnew):
    out, names = [], set()
    for p in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with open(p, "rb") as f:
            n = struct.unpack("<q", f.read(8))[0]
            header = json.loads(f.read(n))
        for key in sorted(header):
            v = header[key]
            if not isinstance(v, dict) or not v.get("dtype"):
                continue                          # __metadata__
            s = Source(p, key, v["dtype"], v["shape"], 8 + n + v["data_offsets"][0], 8 + n + v["data_offsets"][1])
            s.name = go_replace(key, oldnew)
            if s.name in names:
                raise SystemExit(f"duplicate tensor name '{s.name}' was found for this model")
            names.add(s.name)
            out.append(s)
    return out


ALWAYS_F32 = {"token_types.weight", "v.positional_embedding_vlm", "v.position_embd.weight",
              "v.tile_position_embd.weight", "v.pre_tile_position_embd.weight",
              "v.post_tile_position_embd.weight", "s.position_embd"}


def kind(name, shape, src_dtype):
    if (name.endswith(".ffn_gate_inp.weight") or name.endswith(".bias") or name in ALWAYS_F32
            or name.endswith("rel_pos_h") or name.endswith("rel_pos_w")):
        k = KIND_F32
    else:
        k = KIND_F32 if len(shape) == 1 else KIND_F16
    if (src_dtype == "BF16" and not name.startswith(("v.", "s.", "mm."))
            and "ffn_gate_inp_shexp.weight" not in name and k != KIND_F32):
        k = KIND_BF16
    return k


def encode(f32s, k):
    if k == KIND_F32:
        return np.asarray(f32s, "<f4").tobytes()
    if k == KIND_F16:
        return np.asarray(f32s, F32).astype("<f2").tobytes()
    return (np.asarray(f32s, F32).view(np.uint32) >> 16).astype("<u2").tobytes()


def heads_repack(heads):
    def fn(data, shape):
        rows = shape[0]
        a = data.reshape([heads, 2, rows // heads // 2] + list(shape[1:]))
        return np.ascontiguousarray(a.swapaxes(1, 2)).ravel()
    return fn


class Out:
    """A ggml.Tensor: name, kind, shape (safetensors order until written), bytes."""

    def __init__(self, name, k, shape, data_fn):
        self.name, self.kind, self.shape, self.data_fn = name, k, list(shape), data_fn


def source_out(s, name=None):
    name = name or s.name
    k = kind(s.name, s.shape, s.dtype)

    def data():
        if s.repacker is None and ((s.dtype == "F32" and k == KIND_F32) or (s.dtype == "F16" and k == KIND_F16)):
            return s.raw()
        f = s.floats()
        if s.repacker is not None:
            f = s.repacker(f, s.shape)
        return encode(f, k)
    return Out(name, k, s.shape, data)


# ---------------------------------------------------------------------------------------------------
# the model converter

def rope_factors(t):
    rs = t.get("rope_scaling") or {}
    theta = float(F32(t.get("rope_theta") or 0))
    hidden, heads = int(t.get("hidden_size") or 0), int(t.get("num_attention_heads") or 0)
    if rs.get("rope_type") != "llama3" or hidden == 0 or heads == 0 or theta == 0:
        return None
    dim = hidden // heads
    if dim == 0:
        return None
    factor = F32(rs.get("factor") or 8)
    lo = F32(rs.get("low_freq_factor") or 1)
    hi = F32(rs.get("high_freq_factor") or 4)
    original = int(rs.get("original_max_position_embeddings") or 8192)
    lambda_lo = F32(F32(original) / lo)
    lambda_hi = F32(F32(original) / hi)
    out = []
    for i in range(0, dim, 2):
        lam = 2 * math.pi * math.pow(theta, i / dim)
        if lam < float(lambda_hi):
            out.append(F32(1))
        elif lam > float(lambda_lo):
            out.append(factor)
        else:
            smooth = F32(F32(F32(original) / F32(lam)) - lo) / F32(hi - lo)
            smooth = F32(smooth)
            out.append(F32(F32(1) / F32(F32(F32(1) - smooth) / factor + smooth)))
    return np.array(out, F32)


def tensors(cfg, ts):
    t, v = cfg["text_config"], cfg["vision_config"]
    n_head = int(t.get("num_attention_heads") or 0)
    n_head_kv = int(t.get("num_key_value_heads") or 0) or n_head
    v_heads = int(v.get("attention_heads") or 0)
    out, text = [], []
    for s in ts:
        if not s.name.startswith("v.") and not s.name.startswith("mm."):
            text.append(s)
        elif s.name == "v.position_embd.gate":
            for name, one_minus in (("v.position_embd.gate", True), ("v.tile_position_embd.gate", False)):
                def data(s=s, one_minus=one_minus):
                    g = tanh_vec(s.floats())
                    if one_minus:
                        g = (F32(1) - g).astype(F32)
                    return encode(g, KIND_F32)
                out.append(Out(name, kind(s.name, s.shape, s.dtype), s.shape, data))
        else:
            if s.name in ("v.pre_tile_position_embd.gate", "v.post_tile_position_embd.gate") or \
                    s.name.endswith("attn_gate") or s.name.endswith("ffn_gate"):
                s.repacker = lambda d, shape: tanh_vec(d)
            elif s.name.endswith("attn_q.weight") or s.name.endswith("attn_k.weight"):
                s.repacker = heads_repack(v_heads)
            out.append(source_out(s))
    # llamaModel.Tensors on the text part
    text_out = []
    rf = rope_factors(t)
    if rf is not None:
        text_out.append(Out("rope_freqs.weight", KIND_F32, [len(rf)], lambda: rf.astype("<f4").tobytes()))
    for s in text:
        if s.name.endswith(("attn_q.weight", "attn_q_proj.weight")):
            s.repacker = heads_repack(n_head)
        elif s.name.endswith(("attn_k.weight", "attn_k_proj.weight")):
            s.repacker = heads_repack(n_head_kv)
        text_out.append(source_out(s))
    return out + text_out


# ---------------------------------------------------------------------------------------------------
# metadata: values carry their Go type, ("u32", v), ("f32", v), ("str", s), ("i32[]", [...]) ...

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4
PRE_DIGESTS = {
    "d98f9631be1e9607a9848c26c1f9eac1aa9fc21ac6ba82a2fc0741af9780a48f": "llama-bpe",
    "03df5c5863ad70781dcfdef491ead25140f895fe8010964be0daefe27be32b02": "deepseek-llm",
    "21cde974d587f0d54dc8d56b183cc1e6239600172035c68fbd6d4b9f8da0576e": "deepseek-coder",
    "1ff7f41064896984db5d1bb6ff64fa4bc29007d08c1b439e505b7392777a319e": "qwen2",
}
SPECIAL_TYPES = ["bos", "eos", "unk", "sep", "pad", "cls", "mask"]
SPECIAL_KEY = {"bos": "bos", "eos": "eos", "cls": "cls", "mask": "mask", "unk": "unknown", "sep": "seperator",
               "pad": "padding"}


def read_json(folder, name):
    p = os.path.join(folder, name)
    if not os.path.exists(p):
        return None
    with open(p, encoding="utf-8") as f:
        return json.load(f)


def tokenizer_kv(folder):
    tj = read_json(folder, "tokenizer.json")
    if tj is None:
        raise SystemExit(f"{folder}: no tokenizer.json (Ollama's converter needs a tokenizer)")
    by_id = {}
    for content, i in tj["model"]["vocab"].items():
        by_id[i] = (content, False, False)
    added = {}
    for a in tj.get("added_tokens", []):
        by_id[a["id"]] = (a["content"], bool(a.get("special")), True)
        added[a["content"]] = a["id"]
    tokens, scores, types = [], [], []
    for i in sorted(by_id):
        content, special, user = by_id[i]
        tokens.append(content)
        scores.append(float(i))
        types.append(TOKEN_CONTROL if special else TOKEN_USER_DEFINED if user else TOKEN_NORMAL)
    merges = tj["model"].get("merges") or []
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    digest = hashlib.sha256()
    pre = tj.get("pre_tokenizer") or {}
    for pt in pre.get("pretokenizers") or []:
        if pt.get("type") == "Split":
            regex = (pt.get("pattern") or {}).get("Regex") or ""
            if regex:
                digest.update(regex.encode("utf-8"))
    pre_name = PRE_DIGESTS.get(digest.hexdigest(), "default")
    kv = {"tokenizer.ggml.pre": ("str", pre_name), "tokenizer.ggml.model": ("str", "gpt2"),
          "tokenizer.ggml.tokens": ("str[]", tokens), "tokenizer.ggml.scores": ("f32[]", scores),
          "tokenizer.ggml.token_type": ("i32[]", types)}
    if merges:
        kv["tokenizer.ggml.merges"] = ("str[]", merges)
    tc = read_json(folder, "tokenizer_config.json")
    specials = []
    if tc is not None:
        tmpl = tc.get("chat_template")
        if isinstance(tmpl, str) and tmpl:
            kv["tokenizer.chat_template"] = ("str", tmpl)
        elif isinstance(tmpl, list):
            for e in tmpl:
                if e.get("name") == "default" and e.get("template"):
                    kv["tokenizer.chat_template"] = ("str", e["template"])
                    break
        for st in SPECIAL_TYPES:
            sv = {"type": st, "add": None, "id": None, "ids": []}
            if f"add_{st}_token" in tc:
                sv["add"] = bool(tc[f"add_{st}_token"])
            content = ""
            if f"{st}_token" in tc:
                c = tc[f"{st}_token"]
                if isinstance(c, str):
                    content = c
                elif isinstance(c, dict) and isinstance(c.get("content"), str):
                    content = c["content"]
            if content in added:
                sv["id"] = added[content]
                specials.append(sv)
    gc = read_json(folder, "generation_config.json")
    if gc is not None:
        for st in SPECIAL_TYPES:
            ids = gc.get(f"{st}_token_id")
            if isinstance(ids, list):
                for sv in specials:
                    if sv["type"] == st:
                        sv["ids"] = [int(x) for x in ids]
                        break
    for sv in specials:
        key = SPECIAL_KEY[sv["type"]]
        if sv["add"] is not None:
            kv[f"tokenizer.ggml.add_{key}_token"] = ("bool", sv["add"])
        kv[f"tokenizer.ggml.{key}_token_id"] = ("u32", sv["id"])
        if sv["ids"]:
            kv[f"tokenizer.ggml.{key}_token_ids"] = ("i32[]", sv["ids"])
    return kv


def model_kv(cfg, folder):
    t, v = cfg["text_config"], cfg["vision_config"]
    kv = {"general.file_type": ("u32", 1), "general.quantization_version": ("u32", 2)}
    kv.update(tokenizer_kv(folder))
    kv["general.architecture"] = ("str", "mllama")

    def u(x):
        return int(x or 0)
    # llamaModel.KV, llama.* renamed mllama.*
    kv["mllama.vocab_size"] = ("u32", u(t.get("vocab_size")))
    kv["mllama.block_count"] = ("u32", u(t.get("n_layers")) or u(t.get("num_hidden_layers")) or u(t.get("n_layer")))
    for key, names in (("context_length", ("max_position_embeddings", "n_ctx")), ("embedding_length", ("hidden_size", "n_embd")),
                       ("feed_forward_length", ("intermediate_size", "n_inner"))):
        n = u(t.get(names[0])) or u(t.get(names[1]))     # cmp.Or, written only when > 0
        if n > 0:
            kv["mllama." + key] = ("u32", n)
    heads = u(t.get("num_attention_heads")) or u(t.get("n_head"))
    if heads > 0:
        kv["mllama.attention.head_count"] = ("u32", heads)
        kv["mllama.rope.dimension_count"] = ("u32", u(t.get("hidden_size")) // heads)
    if u(t.get("head_dim")) > 0:
        kv["mllama.attention.head_dim"] = ("u32", u(t.get("head_dim")))
    if float(t.get("rope_theta") or 0) > 0:
        kv["mllama.rope.freq_base"] = ("f32", t["rope_theta"])
    rs = t.get("rope_scaling") or {}
    if rs.get("type") == "linear":
        kv["mllama.rope.scaling.type"] = ("str", "linear")
        kv["mllama.rope.scaling.factor"] = ("f32", rs.get("factor") or 0)
    if u(t.get("num_key_value_heads")) > 0:
        kv["mllama.attention.head_count_kv"] = ("u32", u(t.get("num_key_value_heads")))
    if float(t.get("rms_norm_eps") or 0) > 0:
        kv["mllama.attention.layer_norm_rms_epsilon"] = ("f32", t["rms_norm_eps"])
    ln = float(t.get("layer_norm_eps") or 0) or float(t.get("layer_norm_epsilon") or 0) or float(t.get("norm_epsilon") or 0)
    if ln > 0:
        kv["mllama.attention.layer_norm_epsilon"] = ("f32", ln)
    if u(t.get("head_dim")) > 0:
        kv["mllama.attention.key_length"] = ("u32", u(t.get("head_dim")))
        kv["mllama.attention.value_length"] = ("u32", u(t.get("head_dim")))
    # mllamaModel.KV
    kv["mllama.attention.cross_attention_layers"] = ("i32[]", [int(x) for x in t.get("cross_attention_layers") or []])
    kv["mllama.vision.block_count"] = ("u32", u(v.get("num_hidden_layers")))
    kv["mllama.vision.global.block_count"] = ("u32", u(v.get("num_global_layers")))
    kv["mllama.vision.intermediate_layers_indices"] = ("i32[]", [int(x) for x in v.get("intermediate_layers_indices") or []])
    kv["mllama.vision.embedding_length"] = ("u32", u(v.get("hidden_size")))
    kv["mllama.vision.feed_forward_length"] = ("u32", u(v.get("intermediate_size")))
    kv["mllama.vision.attention.head_count"] = ("u32", u(v.get("attention_heads")))
    kv["mllama.vision.attention.layer_norm_epsilon"] = ("f32", v.get("norm_eps") or 0)
    kv["mllama.vision.image_size"] = ("u32", u(v.get("image_size")))
    kv["mllama.vision.patch_size"] = ("u32", u(v.get("patch_size")))
    kv["mllama.vision.max_num_tiles"] = ("u32", u(v.get("max_num_tiles")))
    kv["mllama.vision.num_channels"] = ("u32", u(v.get("num_channels")))
    return kv


# ---------------------------------------------------------------------------------------------------
# fs/ggml/gguf.go WriteGGUF

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STR, GGUF_ARR = 4, 5, 6, 7, 8, 9


def pack_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def pack_value(typ, v):
    if typ == "u32":
        return struct.pack("<II", GGUF_U32, v)
    if typ == "f32":
        return struct.pack("<If", GGUF_F32, float(F32(v)))
    if typ == "bool":
        return struct.pack("<IB", GGUF_BOOL, 1 if v else 0)
    if typ == "str":
        return struct.pack("<I", GGUF_STR) + pack_str(v)
    sub = {"i32[]": (GGUF_I32, "<i"), "f32[]": (GGUF_F32, "<f"), "str[]": (GGUF_STR, None)}[typ]
    head = struct.pack("<IIQ", GGUF_ARR, sub[0], len(v))
    if sub[1] is None:
        return head + b"".join(pack_str(e) for e in v)
    return head + b"".join(struct.pack(sub[1], e) for e in v)


def block_of(name):
    if name.startswith("blk."):
        digits = ""
        for ch in name[4:]:
            if ch.isdigit():
                digits += ch
            else:
                break
        if digits and name[4 + len(digits):].startswith("."):
            return int(digits)
    return sys.maxsize


def tensor_size(o):
    n = 1
    for d in o.shape:
        n *= d
    return n * {KIND_F32: 4, KIND_F16: 2, KIND_BF16: 2}[o.kind]


def pad(n, align=32):
    return (align - n % align) % align


def write_gguf(path, kv, outs):
    def gokey(k):
        return k.encode("utf-8")        # Go compares strings bytewise
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(outs), len(kv)))
    for k in sorted(kv, key=gokey):
        head += pack_str(k) + pack_value(*kv[k])
    outs = sorted(outs, key=lambda o: (block_of(o.name), gokey(o.name)))
    off = 0
    offsets = []
    for o in outs:
        shape = list(reversed(o.shape))
        head += pack_str(o.name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        head += struct.pack("<IQ", o.kind, off)
        offsets.append(off)
        off += tensor_size(o)
        off += pad(off)
    base = len(head) + pad(len(head))
    with open(path, "wb") as f:
        f.write(head)
        for o, at in zip(outs, offsets):
            data = o.data_fn()
            if len(data) != tensor_size(o):
                raise SystemExit(f"{o.name}: {len(data)} bytes, expected {tensor_size(o)}")
            f.seek(base + at)
            f.write(data)
    return outs


def convert(folder, out_path):
    cfg = read_json(folder, "config.json")
    if cfg is None or (cfg.get("architectures") or [None])[0] != "MllamaForConditionalGeneration":
        raise SystemExit(f"{folder}: config.json is not an MllamaForConditionalGeneration")
    ts = parse_safetensors(folder, MLLAMA_REPLACEMENTS)
    outs = tensors(cfg, ts)
    kv = model_kv(cfg, folder)
    return write_gguf(out_path, kv, outs)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    written = convert(sys.argv[1], sys.argv[2])
    print(f"wrote {sys.argv[2]}: {len(written)} tensors, {os.path.getsize(sys.argv[2])} bytes")
