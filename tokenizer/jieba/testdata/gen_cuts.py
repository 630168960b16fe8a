"""Regenerates cuts.json: jieba 0.42.1 reference cuts for the Go segmenter.

Run with Debian's python3-jieba (0.42.1):  /usr/bin/python3 gen_cuts.py > cuts.json
The sentences are synthetic: seeded random pieces of dictionary words (so
every license question reduces to jieba's MIT dict.txt), ASCII letters,
digits, the symbols of jieba's re_han class, punctuation and whitespace.
"""
import json
import random
import sys

import jieba

jieba.setLogLevel(60)
rng = random.Random(20240314)
words = [l.split(' ')[0] for l in open(jieba.get_dict_file().name, encoding='utf-8')]
ascii_bits = ['a', 'b', 'x', 'ab', 'abc', '3', '14', '2024', 'c++', 'c#', 'at&t', 'e.g.', '3.14%',
              'hello-world', 'foo_bar', 'iphone', 'T恤', 'b超', 'A股']
other_bits = [' ', '  ', '\t', '\n', '\r\n', '，', '。', '、', '！', '？', '：', '“', '”', '（', '）',
              ',', '!', '?', '(', ')', '[', ']', '«', '»', '…', 'é', 'ü', 'Ω', '😀', '\u200b', '\u3000', 'の', '한']
cases = []
for i in range(400):
    parts = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.6:
            w = rng.choice(words)
            a = rng.randint(0, len(w) - 1)
            b = rng.randint(a + 1, len(w))
            parts.append(w[a:b] if rng.random() < 0.4 else w)
        elif r < 0.8:
            parts.append(rng.choice(ascii_bits))
        else:
            parts.append(rng.choice(other_bits))
    text = ''.join(parts)
    cases.append({'text': text, 'words': jieba.lcut(text, cut_all=False, HMM=False)})
json.dump({'generator': 'gen_cuts.py with jieba %s' % jieba.__version__, 'cases': cases},
          sys.stdout, ensure_ascii=False, indent=0)
sys.stdout.write('\n')
