"""Regenerates unicode_cases.json, a cross-check of the Go tokenizer's
character handling against CPython's own str and unicodedata.

This is an independent Python restatement of the tokenize path of
transformers 4.30.2's slow BertTokenizer and RoFormerTokenizer (as described
in docs/tokenizer.md), not Hugging Face's code: what it adds is that
lower-casing, whitespace, categories, NFC and NFD come from CPython 3.11
(Unicode 14), the library HF runs on, and the word segmentation from jieba
0.42.1. Random texts mix code points from many scripts and blocks.

    /usr/bin/python3 gen_unicode_cases.py unicode_vocab.txt 1 600 > unicode_cases.json
"""
import json, re, sys, unicodedata, random
import jieba
jieba.setLogLevel(60)

def load_vocab(p):
    v = {}
    with open(p, encoding='utf-8') as f:
        for i, t in enumerate(f.readlines()):
            v[t.rstrip('\n')] = i
    return v

def ws_tok(t):
    t = t.strip()
    return t.split() if t else []

def is_ws(c):
    return c in ' \t\n\r' or unicodedata.category(c) == 'Zs'
def is_ctl(c):
    if c in '\t\n\r': return False
    return unicodedata.category(c).startswith('C')
def is_punc(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126: return True
    return unicodedata.category(c).startswith('P')
def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

class Basic:
    def __init__(s, lower=True, never=(), chinese=True, strip=None):
        s.lower, s.never, s.chinese, s.strip = lower, set(never), chinese, strip
    def tokenize(s, text, never_split=None):
        never = s.never.union(set(never_split)) if never_split else s.never
        text = ''.join(' ' if is_ws(c) else c for c in text if not (ord(c) == 0 or ord(c) == 0xFFFD or is_ctl(c)))
        if s.chinese:
            text = ''.join(' ' + c + ' ' if is_cjk(ord(c)) else c for c in text)
        text = unicodedata.normalize('NFC', text)
        out = []
        for tok in ws_tok(text):
            if tok not in never:
                if s.lower:
                    tok = tok.lower()
                    if s.strip is not False: tok = s.strip_acc(tok)
                elif s.strip:
                    tok = s.strip_acc(tok)
            out.extend(s.split_punc(tok, never))
        return ws_tok(' '.join(out))
    def strip_acc(s, t):
        return ''.join(c for c in unicodedata.normalize('NFD', t) if unicodedata.category(c) != 'Mn')
    def split_punc(s, t, never):
        if t in never: return [t]
        out, new = [], True
        for c in t:
            if is_punc(c): out.append([c]); new = True
            else:
                if new: out.append([])
                new = False
                out[-1].append(c)
        return [''.join(x) for x in out]

def wordpiece(vocab, text, unk='[UNK]', maxc=100):
    out = []
    for tok in ws_tok(text):
        chars = list(tok)
        if len(chars) > maxc: out.append(unk); continue
        bad, start, sub = False, 0, []
        while start < len(chars):
            end, cur = len(chars), None
            while start < end:
                ss = ''.join(chars[start:end])
                if start > 0: ss = '##' + ss
                if ss in vocab: cur = ss; break
                end -= 1
            if cur is None: bad = True; break
            sub.append(cur); start = end
        out.extend([unk] if bad else sub)
    return out

SPECIALS = ['[UNK]', '[SEP]', '[PAD]', '[CLS]', '[MASK]']
def tokenize(vocab, text, roformer):
    pat = '(' + '|'.join(re.escape(t) for t in SPECIALS) + ')|(.+?)'
    text = re.sub(pat, lambda m: m.groups()[0] or m.groups()[1].lower(), text)
    # split on specials (leftmost)
    parts = re.split('(' + '|'.join(re.escape(t) for t in sorted(SPECIALS, key=len, reverse=True)) + ')', text)
    toks = [p for p in parts]
    for i, p in enumerate(toks):
        if p in SPECIALS:
            if i + 1 < len(toks) and toks[i+1]: toks[i+1] = toks[i+1].lstrip()
            if i > 0 and toks[i-1]: toks[i-1] = toks[i-1].rstrip()
    basic = Basic()
    res = []
    def bert(t):
        r = []
        for w in basic.tokenize(t, never_split=SPECIALS):
            r += wordpiece(vocab, w)
        return r
    for p in toks:
        if not p: continue
        if p in SPECIALS: res.append(p); continue
        if roformer:
            for w in jieba.lcut(p, cut_all=False, HMM=False):
                if w in vocab: res.append(w)
                else: res += bert(w)
        else:
            res += bert(p)
    return res

if __name__ == '__main__':
    vocab = load_vocab(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    n = int(sys.argv[3])
    # random code points from interesting ranges
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff), (0x900, 0x97f),
              (0x1e00, 0x1fff), (0x2000, 0x206f), (0x2100, 0x214f), (0x3000, 0x303f), (0x3040, 0x30ff), (0x4e00, 0x4e40),
              (0xac00, 0xac10), (0xf900, 0xf910), (0xfe00, 0xfe6f), (0xff00, 0xffef), (0x1f600, 0x1f64f), (0x0, 0x1f), (0x80, 0x9f),
              (0x10000, 0x10100), (0xe000, 0xe010), (0xfff0, 0xffff), (0x1d400, 0x1d4ff)]
    words = ['hello', 'world', 'play', 'ing', 'cafe', '中国', '今天', '[MASK]', '[CLS]', ' ', '\t', '\r\n', 'İ', 'ΣΑΣ', 'ß', 'ǅ', 'K', 'Å', 'e\u0301']
    cases = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            if rng.random() < 0.5:
                a, b = rng.choice(ranges)
                parts.append(''.join(chr(rng.randint(a, b)) for _ in range(rng.randint(1, 4))))
            else:
                parts.append(rng.choice(words))
        text = ''.join(c for c in ''.join(parts) if not 0xD800 <= ord(c) <= 0xDFFF)
        cases.append({'text': text, 'bert': tokenize(vocab, text, False), 'roformer': tokenize(vocab, text, True)})
    json.dump(cases, sys.stdout, ensure_ascii=False)
