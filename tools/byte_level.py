"""GPT-2's byte-to-character map, which byte-level BPE vocabularies (Llama 3's) write tokens in;
shared by tools/gen_tokenizer_fixtures.py and tools/gen_bench_vocab.py."""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))
