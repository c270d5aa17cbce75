#!/usr/bin/env python3
"""Writes the tokenizer fixtures in tests/fixtures/text/, with Hugging Face `tokenizers` as the
reference for every id and decoded text (CI never runs this: the outputs are committed).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -r tools/requirements.txt tiktoken
    /tmp/venv/bin/pip download --no-deps llama-models==0.3.0 -d /tmp/llama-models   # optional, see below
    /tmp/venv/bin/python tools/gen_tokenizer_fixtures.py [--llama-models WHEEL_OR_DIR]

Files:
  tok-bpe.gguf     a small Llama-3-format byte-level BPE vocabulary trained here with HF tokenizers'
                   BpeTrainer (the Llama 3 Split pre-tokenizer + ByteLevel, ignore_merges as Llama 3)
                   on the multilingual corpus below; then the Llama 3 special tokens (control) with
                   <|image|> last, and three user-defined tokens (type 4): "<|image|><|image|>" (longer
                   than a control token it starts with), "ÿþ" (decodes to two invalid bytes) and
                   "<tool>" (not byte-level: decodes as its text).
  tok-llama3.gguf  the genuine Llama 3 vocabulary (Meta's tokenizer.model, tiktoken ranks, from the
                   PyPI package llama-models 0.3.0, under the Llama 3 Community License; converted with
                   transformers' TikTokenConverter, laid out as Llama 3.2 Vision's tokenizer.json:
                   128000 BPE tokens, 256 control tokens, <|image|> = 128256), PRUNED: every id keeps
                   its place, but only the tokens that occur in the corpus's bytes are kept (a superset
                   of those inside its pre-tokenized pieces, so that wrong piece boundaries still show),
                   with the merges among them, in their order; the others are "[PAD<id>]" placeholders
                   of type UNUSED. BPE never looks outside a piece, so on this corpus the pruned
                   vocabulary gives the full one's ids: the script asserts it with HF on both (and the
                   full one against Meta's tiktoken). The full file would be ~7.5 MB. Without llama-models this file is not
                   written (and its keys are absent from the cases file).
  models/mllama-demo.gguf  the bundled demo model's vocabulary (V "demo"; tools/train_demo.py trains it
                   the same way every time: the script retrains it and checks that the model file
                   holds the same tokens and merges). Needs torch; --no-demo skips it.
  tok-cases.gguf   the cases and the expected results.
Both vocabularies are written by tools/convert_hf_to_gguf.py's add_tokenizer_kv (imported).

Keys of tok-cases.gguf (k counts cases from 0; V is "bpe", "llama3" or "demo"):
  fixture.generator, fixture.tokenizers_version, fixture.transformers_version (str)
  cases.count (u32); cases.text (str[]: raw bytes, some not UTF-8); cases.valid_utf8 (i32[]: 1/0)
  V.file (str): the vocabulary file, relative to tests/fixtures/text/; V.n_tokens, V.bos, V.eos (i32); V.eog (i32[]): the ids that
      must be end-of-generation (eos, eos_token_ids, <|eot_id|>, <|eom_id|>, <|end_of_text|>)
  V.on.offsets, V.on.ids (i32[]): the ids of case k are ids[offsets[k] .. offsets[k+1]), with the
      added tokens split out (HF encode, add_special_tokens=False) = mms_tokenize parse_special
  V.off.offsets, V.off.ids: without (HF with no added tokens at all) = parse_special false
  V.decode_special (str[]): HF decode(on ids, skip_special_tokens=False) = render_special true
  V.decode_plain (str[]): HF decode(on ids, skip_special_tokens=True) = render_special false
  V.decode_off (str[]): HF decode(off ids)
HF takes only str, so for bytes that are not UTF-8 the ids are made with HF's own parts: the text is
decoded with errors="replace" (one U+FFFD per maximal invalid subpart), HF cuts the added tokens and
pre-tokenizes that, each piece goes back to its original bytes, and HF's BPE model tokenizes the
byte-level form of those bytes. The script checks this route against plain HF encode on every valid
case first. Deterministic: the same packages write the same bytes.
"""

import argparse
import glob
import json
import os
import random
import sys
import tempfile
import types
import zipfile

import gguf
import tokenizers
from tokenizers import Tokenizer, Regex, models, trainers, pre_tokenizers, decoders, AddedToken

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "text")
DEMO_MODEL = os.path.join(ROOT, "models", "mllama-demo.gguf")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from convert_hf_to_gguf import add_tokenizer_kv, ARCH  # noqa: E402
from byte_level import bytes_to_unicode  # noqa: E402

PAT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
NAMED_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                 "<|eom_id|>", "<|finetune_right_pad_id|>", "<|python_tag|>"]
USER_DEFINED = ["<|image|><|image|>", "\u00ff\u00fe", "<tool>"]
N_MERGES = 1500

# -- corpus ------------------------------------------------------------------------------------------

TRAIN_TEXT = [
    "The quick brown fox jumps over the lazy dog. It's what they've said; we'll see, I'm sure you'd agree.",
    "Hello world! This is a tokenizer test with numbers 1234567890 and 3.14159, dates 2024-09-25, $1,000,000.",
    "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en canoë au delà des îles, près du mälström.",
    "Falsches Üben von Xylophonmusik quält jeden größeren Zwerg. Straße, Mädchen, Fußgängerübergänge.",
    "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Η γλώσσα μου έδωσαν ελληνική, το σπίτι φτωχικό στις αμμουδιές.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Широкая электрификация южных губерний.",
    "我能吞下玻璃而不伤身体。人工智能正在改变世界，机器学习模型需要大量的数据。東京は日本の首都です。",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナとひらがなと漢字を混ぜて書きます。",
    "키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다. 한국어 문장입니다.",
    "أبجد هوز حطي كلمن سعفص قرشت ثخذ ضظغ. اللغة العربية جميلة جدا، والكتابة من اليمين إلى اليسار.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम। नमस्ते दुनिया।",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "עברית היא שפה שמית. Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. Tiếng Việt có dấu.",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷🇯🇵 🤖 and symbols ©®™ ±×÷ → ← ∞ ≠ ≤ ≥ √ ∑ ∫ π ∆ °C €£¥ ½ ¾ ² ³.",
    "def tokenize(text: str) -> list[int]:\n    return [ord(c) for c in text]  # comment\n\nif __name__ == '__main__':\n\tprint(tokenize('hi'))\n",
    "int main(void) { printf(\"%d\\n\", 42); return 0; }   /* C code */ x += y * (z - 1); a[i] = b[j] >> 2;",
    "    indented    with   many     spaces\t\tand\ttabs\r\nwindows line\r\nendings\n\n\nand blank lines   \n",
    "THE LOUD SENTENCE'S SHOUTING, IT'S DON'T WON'T CAN'T SHOULDN'T WE'LL THEY'VE YOU'RE I'M HE'D.",
    "Numbers: 0 1 12 123 1234 12345 123456 1234567 3,141,592 0.000001 1e-9 -42 +7 100% 24/7 1st 2nd 3rd.",
    "URLs https://example.com/path?query=1&b=2#frag, emails name@example.org, paths /usr/local/bin and C:\\Windows.",
    "<html><body><p class=\"x\">Hello &amp; welcome!</p></body></html> {\"json\": [1, 2, 3], \"ok\": true}",
    "Punctuation runs!!! ??? ... --- *** ### @@@ ((())) [[[]]] {{{}}} ''' \"\"\" ``` ~~~ ^^^ ;;; ::: ,,,",
]

BASE_CASES = [
    "", " ", "  ", "a", "Hello", " Hello", "Hello world", "hello  world", "Hello, world!", "Hello world\n",
    "\n", "\n\n", "\r\n", "\r", "\t", "\t\t", " \n", "\n ", " \n ", "a\n\nb", "a \n b", "a  \n\n  b", "x\r\n\r\ny",
    "trailing spaces   ", "   leading", "  two  spaces  ", "tabs\tand\t\tmore", "mixed \t \n \r\n end",
    " " * 17, " " * 100, "\n" * 12, "a" + " " * 33 + "b", "\t" * 9 + "x", " \t \t x",
    "it's", "It's", "IT'S", "don't", "DON'T", "we're", "WE'RE", "they've", "THEY'VE", "I'm", "I'M", "we'll",
    "WE'LL", "We'Ll", "he'd", "HE'D", "'s", "'S", "'t", "'re", "'Re", "'ve", "'m", "'ll", "'LL", "'d", "'x",
    "''s", "'", "''", "' s", "'sa", "'ss", "'llama", "'dog", "'Dog", "'tis", "'Tis", "'much", "'reel", "'VERY",
    "'veal", "'ſo", "'Sſ", "y'all'd've", "'sear", "'ton", "'ream", "'mon", "'llog", "'day", "'Don", "'Save",
    "'Took", "'Mon", "'LLine", "'ſear", "x'Day y'Mon", "'ſ", "x'ſ", "'ſt", "cat's toy", "O'Neil's", "rock'n'roll",
    "1", "12", "123", "1234", "12345", "123456789", "1234567890123", "3.14159", "1,000,000", "-42", "+7",
    "x1y22z333w4444", "2024-09-25", "v1.2.3", "0x1F", "1e-9", "١٢٣٤٥", "٣.١٤", "१२३४५", "Ⅻ ⅷ", "½ ¾ ²³",
    "①②③④", "𝟙𝟚𝟛", "12½", "a1b2c3",
    "café", "naïve", "Ångström", "Crème brûlée", "Zürich", "São Paulo", "façade", "résumé", "ﬁnance",
    "Ελληνικά", "Привет, мир!", "ПРИВЕТ", "Здравствуйте", "中文测试", "你好，世界！", "日本語のテキスト",
    "カタカナ", "한국어", "مرحبا بالعالم", "السلام عليكم", "नमस्ते दुनिया", "हिन्दी", "สวัสดีครับ",
    "ภาษาไทย", "שלום עולם", "Tiếng Việt", "Türkçe", "ǅemal", "ﬀ ﬃ",
    "😀", "😀😀", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷", "🇫🇷🇯🇵🇺🇸", "hi😀", "😀hi", "a 😀 b",
    "🤖🦙", "🧑🏽‍💻", "☺", "✨ sparkles ✨", "😀\n😀", "  😀",
    "!!!", "...", "?!", "hello!!!", "hello...world", "(a)", "[b]", "{c}", "a-b-c", "a_b_c", "a/b\\c",
    "@user #tag $5 %20 ^2 &amp; *bold* ~tilde~ `code`", " !", " !!", "  !!", "!\n", "!\r\n\r\n", "x!\n\ny",
    "«quoted»", "“curly” ‘quotes’", "—dash–", "…", "• bullet", "→ arrow", "©2024", "™", "°C",
    "\u00a0", "a\u00a0b", "a\u00a0\u00a0b", "\u2003em space", "a\u2009b", "\u3000全角", "a\u3000b",
    "\u2028", "a\u2029b", "\u0085", "a\u0085b", "\u1680x", "\u202f", "\u205f", "\u180e", "a\u200bb",
    "\ufeffbom", "\u001c\u001d\u001e\u001f", "a\u001fb", "\u000b\u000c", "a\u000bb", "x \u00a0\n y",
    "\u0000", "a\u0000b", "\u007f", "\u0301", "e\u0301", "a\u0301b", "\u0915\u094d\u0937",
    "\U0001F600\u0301", "\uFFFD", "a\uFFFDb", "\U0010FFFD", "\uE000", "\U000E0041",
    "<|begin_of_text|>", "<|begin_of_text|>Hello", "Hello<|begin_of_text|>", "<|begin_of_text|><|begin_of_text|>",
    "<|image|>", "<|image|><|image|>", "<|image|><|image|><|image|>", "<|image|>Describe this image.",
    "<|start_header_id|>user<|end_header_id|>\n\n<|image|>What is this?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|python_tag|>print(1)", "<|finetune_right_pad_id|>",
    "<|reserved_special_token_5|>", "<|reserved_special_token_247|>", "<|image|", "<|imag", "< |image|>",
    "<|IMAGE|>", "<<|image|>>", " <|image|> ", "\n<|eot_id|>\n", "a<|eot_id|>b", "<tool>call</tool>", "ÿþ",
    "xÿþy", "ÿþÿþ", "<|image|><|image|", "<|eot_id|><|eom_id|>",
]


def train_cases():
    out = list(BASE_CASES)
    out += [t for t in TRAIN_TEXT]
    out += [t[: len(t) // 2] for t in TRAIN_TEXT]
    return out


INVALID_CASES = [
    b"\xff", b"\xfe\xff", b"abc\x80def", b"\x80", b"\x80\x80\x80", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\x80",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82",
    b"\xe2\x82abc", b"abc\xe2\x82", b"\xe2\x82 abc", b"\xf0\x9f\x98", b"\xf0\x9f\x98 x", b"\xf0\x9f", b"\xf0",
    b"hello \xfe\xff world", b"<|image|>\xe2", b"\xe2<|image|>", b"\xe2\x82<|eot_id|>\x82\xac", b"\x80 \xe2\x82\xac",
    b"caf\xe9", b"na\xefve", b"'\xc5", b"'\xc5s", b"12\x803", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1",
    b"\xe2\x82\x28", b"\xf0\x28\x8c\xbc", b"\xf0\x90\x28\xbc", b"\xf0\x28\x8c\x28", b" \xff\xff\xff\n",
    b"\n\x80\n", b"\x80\x80abc def\x80", b"\xef\xbb\xbf\xef\xbb", "😀".encode()[:3] + b" " + "😀".encode()[3:],
    "😀".encode()[:2], "é".encode()[:1] + b"x", b"\xc3\xa9\xc3",
]


def random_cases(seed=1234, count=160):
    rng = random.Random(seed)
    words = ["hello", "World", "the", "naïve", "café", "Straße", "мир", "Привет", "世界", "日本", "한국", "مرحبا",
             "नमस्ते", "สวัสดี", "Ελλάδα", "it's", "DON'T", "we'LL", "'s", "'Re", "x'VE", "1234567", "42", "3.14",
             "١٢٣", "٤٥٦٧", "Ⅷ", "½", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵", "❤️", "<|image|>", "<|eot_id|>",
             "<|begin_of_text|>", "<|image|><|image|>", "ÿþ", "<tool>", "!!!", "...", "->", "(x)", "#", "$", "\\n"]
    spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2009", "\u0085", "\u2028",
              "\u000b", "\u001f", " " * 9, "\t\n"]
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
              (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x2070, 0x218f), (0x2190, 0x23ff),
              (0x3000, 0x30ff), (0x4e00, 0x4fff), (0xac00, 0xacff), (0xff00, 0xffef), (0x1f300, 0x1f64f),
              (0x1f900, 0x1f9ff), (0x1d400, 0x1d7ff)]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 14)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(words))
            elif r < 0.6:
                parts.append(rng.choice(spaces))
            elif r < 0.75:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            else:
                lo, hi = rng.choice(blocks)
                s = ""
                for _ in range(rng.randint(1, 6)):
                    c = rng.randint(lo, hi)
                    if 0xd800 <= c <= 0xdfff:
                        c = 0x41
                    s += chr(c)
                parts.append(s)
        out.append("".join(parts))
    raw = []
    for _ in range(24):   # random bytes, mostly ASCII with invalid bytes mixed in
        b = bytearray()
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            b += bytes([rng.randint(0x80, 0xff)]) if r < 0.3 else rng.choice(words).encode() if r < 0.6 else \
                bytes([rng.randint(0x20, 0x7e)])
        raw.append(bytes(b))
    return out, raw


# -- HF helpers --------------------------------------------------------------------------------------

class HF:
    """A tokenizer.json as HF tokenizers with its added tokens (on) and without them (off). The JSON is
    kept as given: HF cannot write a vocabulary with holes back out."""
    def __init__(self, j):
        self.json = j
        self.on = Tokenizer.from_str(json.dumps(j))
        self.added_ids = {a["id"] for a in j["added_tokens"]}
        j2 = dict(j)
        j2["added_tokens"] = []
        self.off = Tokenizer.from_str(json.dumps(j2))


BYTE_ENCODER = None




def utf8_units(b):
    """(char, start, end): b decoded with errors='replace', each char with its byte span."""
    out = []
    i = 0
    n = len(b)
    while i < n:
        b0 = b[i]
        if b0 < 0x80:
            out.append((chr(b0), i, i + 1)); i += 1; continue
        if b0 < 0xC2 or b0 > 0xF4:
            out.append(("\ufffd", i, i + 1)); i += 1; continue
        need = 1 if b0 < 0xE0 else 2 if b0 < 0xF0 else 3
        lo = {0xE0: 0xA0, 0xF0: 0x90}.get(b0, 0x80)
        hi = {0xED: 0x9F, 0xF4: 0x8F}.get(b0, 0xBF)
        k = 1
        while k <= need and i + k < n and (lo if k == 1 else 0x80) <= b[i + k] <= (hi if k == 1 else 0xBF):
            k += 1
        if k == need + 1:
            out.append((b[i:i + k].decode("utf-8"), i, i + k))
        else:
            out.append(("\ufffd", i, i + k))
        i += k
    assert "".join(c for c, _, _ in out) == b.decode("utf-8", "replace"), b
    return out


SPLIT = pre_tokenizers.Split(Regex(PAT), behavior="isolated", invert=False)


def encode_bytes(hf, b, special):
    """HF's ids for any bytes, through HF's parts (see the header)."""
    units = utf8_units(b)
    text = "".join(c for c, _, _ in units)
    bound = [s for _, s, _ in units] + [len(b)]
    enc = (hf.on if special else hf.off).encode(text, add_special_tokens=False)
    added_ids = hf.added_ids if special else set()
    segs, ids_special = [], []
    pos = 0
    for tid, (s, e) in zip(enc.ids, enc.offsets):
        if tid in added_ids:
            segs.append((pos, s))
            ids_special.append(tid)
            pos = e
    segs.append((pos, len(text)))
    model = hf.on.model
    out = []
    for k, (s, e) in enumerate(segs):
        for piece, (ps, pe) in SPLIT.pre_tokenize_str(text[s:e]):
            assert piece == text[s + ps:s + pe]
            raw = b[bound[s + ps]:bound[s + pe]]
            out += [t.id for t in model.tokenize("".join(BYTE_ENCODER[x] for x in raw))]
        if k < len(ids_special):
            out.append(ids_special[k])
    return out


def eog_ids(hf, eos_name, gen_eos):
    v = hf.on.get_vocab()
    ids = set(gen_eos)
    ids.add(v[eos_name])
    for name in ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"):
        if name in v:
            ids.add(v[name])
    return sorted(ids)


def write_vocab_gguf(hf, path, bos, eos, gen_eos):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(getattr(hf, "gguf_json", hf.json), f, ensure_ascii=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"bos_token": bos, "eos_token": eos}, f)
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump({"eos_token_id": gen_eos}, f)
        hp = types.SimpleNamespace(text_bos=None, text_eos=None, text_pad=None)
        w = gguf.GGUFWriter(path, ARCH)
        w.add_name(os.path.basename(path))
        add_tokenizer_kv(w, hp, d)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


# -- the vocabularies ----------------------------------------------------------------------------------

def build_small(train_texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PAT), behavior="isolated", invert=False),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + N_MERGES, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(train_texts, trainer)
    j = json.loads(tok.to_str())
    j["model"]["ignore_merges"] = True      # as Llama 3's tokenizer.json
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in NAMED_SPECIAL + ["<|image|>"]])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in USER_DEFINED])
    return HF(json.loads(tok.to_str()))


LLAMA3_SPECIAL_NAMED = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
                        6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>",
                        10: "<|python_tag|>"}


def find_llama_models(arg):
    cands = [arg] if arg else glob.glob("/tmp/llama-models/*.whl") + glob.glob("/tmp/llm_dl/*.whl")
    for c in cands:
        if c and os.path.isdir(c):
            p = os.path.join(c, "llama_models", "llama3", "tokenizer.model")
            if os.path.exists(p):
                return p, c
        elif c and c.endswith(".whl") and os.path.exists(c):
            d = tempfile.mkdtemp()
            with zipfile.ZipFile(c) as z:
                z.extract("llama_models/llama3/tokenizer.model", d)
            return os.path.join(d, "llama_models", "llama3", "tokenizer.model"), c
    return None, None


def build_llama3(model_path):
    from transformers.convert_slow_tokenizer import TikTokenConverter
    specials, r = [], 0
    for i in range(256):
        if i in LLAMA3_SPECIAL_NAMED:
            specials.append(LLAMA3_SPECIAL_NAMED[i])
        else:
            specials.append(f"<|reserved_special_token_{r}|>")
            r += 1
    specials.append("<|image|>")       # Llama 3.2 Vision: id 128256
    tok = TikTokenConverter(vocab_file=model_path, pattern=PAT, additional_special_tokens=specials).converted()
    assert tok.token_to_id("<|begin_of_text|>") == 128000 and tok.token_to_id("<|image|>") == 128256
    return HF(json.loads(tok.to_str()))


def prune(hf, texts_bytes):
    """The vocabulary restricted to substrings of the corpus's pieces, with the same ids."""
    j = json.loads(json.dumps(hf.json))
    vocab = j["model"]["vocab"]
    maxlen = max(len(t) for t in vocab)
    keep = set(BYTE_ENCODER.values())
    for b in texts_bytes:
        # every token inside the text, not only inside its pieces: then a tokenizer that cut the text
        # into wrong pieces gets different ids from this vocabulary too, as from the full one
        bl = "".join(BYTE_ENCODER[x] for x in b)
        for i in range(len(bl)):
            for k in range(i + 1, min(len(bl), i + maxlen) + 1):
                if bl[i:k] in vocab:
                    keep.add(bl[i:k])
    merges = []
    for m in j["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    j["model"]["vocab"] = {t: i for t, i in vocab.items() if t in keep}
    j["model"]["merges"] = merges
    print(f"pruned: {len(j['model']['vocab'])} of {len(vocab)} tokens, {len(merges)} merges")
    # HF renumbers added tokens when the vocabulary has holes, so HF gets the holes filled with the
    # "[PAD<id>]" texts that add_tokenizer_kv gives them (the GGUF is written from the holey JSON)
    jf = json.loads(json.dumps(j))
    have = set(j["model"]["vocab"].values())
    for i in range(len(vocab)):
        if i not in have:
            jf["model"]["vocab"][f"[PAD{i}]"] = i
    hf = HF(jf)
    hf.gguf_json = j
    return hf


# -- main ------------------------------------------------------------------------------------------------

def demo_vocab():
    """The demo model's vocabulary as tools/train_demo.py trains it (deterministic), checked against
    the tokens and merges that models/mllama-demo.gguf carries."""
    import train_demo
    hf = HF(json.loads(train_demo.train_tokenizer().backend_tokenizer.to_str()))
    r = gguf.GGUFReader(DEMO_MODEL)
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.merges"]
    merges = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    vocab = hf.on.get_vocab(with_added_tokens=True)
    assert len(tokens) == len(vocab) and all(vocab[t] == i for i, t in enumerate(tokens)), "demo model: other tokens"
    want = [m if isinstance(m, str) else " ".join(m) for m in hf.json["model"]["merges"]]
    assert merges == want, "demo model: other merges"
    return hf


def expected(hf, cases, name, eos_name, gen_eos):
    tok, tok_off = hf.on, hf.off
    on, off, dec_s, dec_p, dec_o = [], [], [], [], []
    for b, valid in cases:
        if valid:
            t = b.decode("utf-8")
            ids_on = tok.encode(t, add_special_tokens=False).ids
            ids_off = tok_off.encode(t, add_special_tokens=False).ids
            # our route for invalid bytes must agree with HF where HF can be asked directly
            assert encode_bytes(hf, b, True) == ids_on, (name, t)
            assert encode_bytes(hf, b, False) == ids_off, (name, t)
            assert tok_off.decode(ids_off) == t, (name, t)
        else:
            ids_on = encode_bytes(hf, b, True)
            ids_off = encode_bytes(hf, b, False)
            assert tok_off.decode(ids_off) == b.decode("utf-8", "replace"), (name, b)
        on.append(ids_on)
        off.append(ids_off)
        dec_s.append(tok.decode(ids_on, skip_special_tokens=False))
        dec_p.append(tok.decode(ids_on, skip_special_tokens=True))
        dec_o.append(tok_off.decode(ids_off))
    eog = eog_ids(hf, eos_name, gen_eos)
    return dict(on=on, off=off, dec_s=dec_s, dec_p=dec_p, dec_o=dec_o, eog=eog,
                bos=tok.token_to_id("<|begin_of_text|>"), eos=tok.token_to_id(eos_name), n=tok.get_vocab_size())


def add_expected(w, prefix, fname, e):
    def flat(lists):
        offs, ids = [0], []
        for l in lists:
            ids += l
            offs.append(len(ids))
        return offs, ids
    w.add_string(f"{prefix}.file", fname)
    w.add_int32(f"{prefix}.n_tokens", e["n"])
    w.add_int32(f"{prefix}.bos", e["bos"])
    w.add_int32(f"{prefix}.eos", e["eos"])
    w.add_key_value(f"{prefix}.eog", e["eog"], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    for mode in ("on", "off"):
        offs, ids = flat(e[mode])
        w.add_key_value(f"{prefix}.{mode}.offsets", offs, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
        w.add_key_value(f"{prefix}.{mode}.ids", ids if ids else [0], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    for key, k in (("decode_special", "dec_s"), ("decode_plain", "dec_p"), ("decode_off", "dec_o")):
        w.add_key_value(f"{prefix}.{key}", [s.encode("utf-8") for s in e[k]], gguf.GGUFValueType.ARRAY,
                        sub_type=gguf.GGUFValueType.STRING)


def main():
    global BYTE_ENCODER
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-models", help="llama-models wheel or unpacked directory (default: /tmp/llama-models/*.whl)")
    ap.add_argument("--no-demo", action="store_true", help="skip the demo model's vocabulary (needs torch)")
    args = ap.parse_args()
    BYTE_ENCODER = bytes_to_unicode()
    os.makedirs(OUT_DIR, exist_ok=True)

    rnd, rnd_bytes = random_cases()
    cases = [(t.encode("utf-8"), True) for t in BASE_CASES + TRAIN_TEXT + rnd]
    cases += [(b, False) for b in INVALID_CASES]
    for b in rnd_bytes:      # random bytes that happen to be UTF-8 stay, as UTF-8 cases
        try:
            cases.append((b, b.decode("utf-8") is not None))
        except UnicodeDecodeError:
            cases.append((b, False))
    for b, v in cases:
        try:
            b.decode("utf-8")
            ok = True
        except UnicodeDecodeError:
            ok = False
        assert ok == v, b
    print(f"{len(cases)} cases ({sum(1 for _, v in cases if not v)} not UTF-8)")

    small = build_small(train_cases() + rnd)
    small_path = os.path.join(OUT_DIR, "tok-bpe.gguf")
    eot = [small.on.token_to_id("<|end_of_text|>")]
    write_vocab_gguf(small, small_path, "<|begin_of_text|>", "<|eot_id|>", eot)
    results = {"bpe": ("tok-bpe.gguf", expected(small, cases, "bpe", "<|eot_id|>", eot))}

    model_path, src = find_llama_models(args.llama_models)
    if model_path:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        full = build_llama3(model_path)
        gen_eos = [128001, 128008, 128009]
        e_full = expected(full, cases, "llama3", "<|eot_id|>", gen_eos)
        # the conversion against Meta's own tokenizer (tiktoken), special tokens as text
        enc = tiktoken.Encoding(name="llama3", pat_str=PAT, mergeable_ranks=load_tiktoken_bpe(model_path), special_tokens={})
        for (b, v), ids in zip(cases, e_full["off"]):
            if v:
                assert enc.encode(b.decode("utf-8"), disallowed_special=()) == ids, b
        pruned = prune(full, [b for b, _ in cases])
        e_pruned = expected(pruned, cases, "llama3-pruned", "<|eot_id|>", gen_eos)
        for k in ("on", "off", "dec_s", "dec_p", "dec_o", "eog", "bos", "eos"):
            assert e_pruned[k] == e_full[k], k
        print(f"llama3: full and pruned vocabularies agree on all {len(cases)} cases (and tiktoken on the UTF-8 ones); from {src}")
        write_vocab_gguf(pruned, os.path.join(OUT_DIR, "tok-llama3.gguf"), "<|begin_of_text|>", "<|eot_id|>", gen_eos)
        e_full["n"] = 128257
        results["llama3"] = ("tok-llama3.gguf", e_full)
    else:
        print("note: llama-models not found: tok-llama3.gguf not written")

    if not args.no_demo:
        results["demo"] = (os.path.relpath(DEMO_MODEL, OUT_DIR), expected(demo_vocab(), cases, "demo", "<|eot_id|>", []))
    else:
        print("note: --no-demo: the demo vocabulary's cases not written")

    import transformers
    path = os.path.join(OUT_DIR, "tok-cases.gguf")
    w = gguf.GGUFWriter(path, "mmstest")
    w.add_string("fixture.generator", "tools/gen_tokenizer_fixtures.py")
    w.add_string("fixture.tokenizers_version", tokenizers.__version__)
    w.add_string("fixture.transformers_version", transformers.__version__)
    w.add_uint32("cases.count", len(cases))
    w.add_key_value("cases.text", [b for b, _ in cases], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.STRING)
    w.add_key_value("cases.valid_utf8", [int(v) for _, v in cases], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    for prefix, (fname, e) in results.items():
        add_expected(w, prefix, fname, e)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    total = 0
    for f in sorted(glob.glob(os.path.join(OUT_DIR, "tok-*.gguf"))):
        sz = os.path.getsize(f)
        total += sz
        print(f"{os.path.relpath(f, ROOT)}: {sz} bytes")
    n_ids = sum(len(x) for _, e in results.values() for m in ("on", "off") for x in e[m])
    print(f"total {total} bytes; {n_ids} expected ids")


if __name__ == "__main__":
    main()
