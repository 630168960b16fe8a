#!/usr/bin/env python3
"""Regenerates the sentence-transformers (ST) fixture folders in this directory.

Every folder is a tiny random RoFormer encoder (transformers' RoFormerModel) wrapped in
ST's own module classes (models.Transformer, Pooling, Dense, Normalize) and written by
ST's own SentenceTransformer.save(); expected.json in each folder holds what
SentenceTransformer(folder).encode(TEXTS, ...) returns after loading the folder back.
The script is deterministic: the same harness gives the same bytes (except the
model-card README.md, which ST writes, and pickling in pytorch_model.bin).

Versions: transformers 4.30.2, huggingface_hub 0.15.1, sentence-transformers 2.2.2 and
2.7.0, Debian 12 python3 (3.11) with python3-torch (1.13) and python3-numpy.

Harness set-up (scratch, never committed; /work/scratch/st below):
  apt-get install -y python3-torch python3-numpy python3-jieba python3-nltk python3-sklearn \
      python3-scipy python3-tqdm python3-requests python3-filelock python3-yaml \
      python3-packaging python3-regex
  Sources (bare git mirrors of the upstream repositories), one folder each:
    git --git-dir=<transformers mirror> archive v4.30.2 src | tar -x -C $H/tf
    git --git-dir=<huggingface_hub mirror> archive v0.15.1 src | tar -x -C $H/hub
    git --git-dir=<sentence-transformers mirror> archive v2.2.2 | tar -x -C $H/st222
    git --git-dir=<sentence-transformers mirror> archive v2.7.0 | tar -x -C $H/st270
  Shim folder $H/shim (ours, small):
    - rjieba.py: cut(text, hmm) = jieba.lcut(text, cut_all=False, HMM=hmm)
      (only imported by RoFormerTokenizer; these fixtures use BertTokenizer).
    - safetensors/ (+ a safetensors-0.3.1.dist-info/METADATA so transformers sees it):
      a minimal pure-Python reader/writer of the format (8-byte little-endian header
      length, JSON header {name: {dtype, shape, data_offsets}, __metadata__}, raw
      little-endian data): safe_open, safetensors.torch.{save_file, load_file,
      storage_ptr, storage_size}.
    - sitecustomize.py, for ST 2.7.0 on transformers 4.30.2: adds
      transformers.is_torch_npu_available (returns False) and
      transformers.utils.import_utils.{is_nltk_available, NLTK_IMPORT_ERROR}; wraps
      AutoConfig/AutoModel/AutoTokenizer.from_pretrained to drop `token=` (4.30.2
      calls it use_auth_token).
    - tokenizers (Rust) is not installed: AutoTokenizer falls back to the slow
      (pure-Python) BertTokenizer by itself.
  Environment:
    export PYTHONPATH=$H/shim:$H/tf/src:$H/hub/src HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

Command (run from this directory; once per ST version, 2.2.2 first):
  PYTHONPATH=$H/st222:$PYTHONPATH /usr/bin/python3 make_fixtures.py
  PYTHONPATH=$H/st270:$PYTHONPATH /usr/bin/python3 make_fixtures.py
Each run rebuilds the folders that belong to the ST version it finds on the path.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

import sentence_transformers
import transformers
from sentence_transformers import SentenceTransformer, models

HERE = os.path.dirname(os.path.abspath(__file__))
ST_VERSION = sentence_transformers.__version__

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = [".", ",", "!", "?", ":", ";", "'", "-"]
WORDS = (
    "the a an is are was be to of and in on at for with by it this that he she they we you i "
    "my your their will not near about cat dog bird fish sat mat ran jump over under quick "
    "brown fox lazy red blue green big small good bad day night sun moon sky tree house car "
    "road city river water fire book read write walk talk play game music song love like eat "
    "food apple bread milk tea cafe morning evening today tomorrow time year people man woman "
    "child friend school teacher student query passage hello world model text word search "
    "find ask answer question"
).split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##est", "##en", "##y", "##es", "##ion"]
CJK = list("我你他们的是在有人中国北京天大学好喜欢爱猫狗水山")

# The same texts for every folder: short, long (> 10 tokens, < 60 with a prompt),
# unknown words, CJK, uppercase with an accent, leading/trailing spaces.
TEXTS = [
    "the cat sat on the mat.",
    "hello world",
    "a quick brown fox jumped over the lazy dog, and the dog ran to the river in the morning.",
    "the zebra played a xylophone near the house.",
    "i love 北京 and 猫, 你好!",
    "The Quick Brown Fox Likes Green Apples at the Café",
    "   the sun is in the sky   ",
    "today the teacher read a good book to the students at school, and they talked about "
    "music, food and the big city by the river; tomorrow they will walk under the blue sky "
    "and eat bread with milk and tea in the evening.",
]

BATCH_SIZE = 4

# name -> (ST version, builder). Builders get the base encoder folder and return the module list.
FOLDERS = {}


def folder(name, version):
    def register(fn):
        FOLDERS[name] = (version, fn)
        return fn
    return register


def vocab():
    toks = SPECIAL + PUNCT + WORDS + PIECES + CJK
    assert len(toks) == len(set(toks)), "duplicate vocab token"
    return toks


def make_base(path, lower=True):
    """Writes the tiny random RoFormer encoder and a BertTokenizer to path."""
    os.makedirs(path, exist_ok=True)
    toks = vocab()
    vocab_file = os.path.join(path, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(toks) + "\n")
    config = transformers.RoFormerConfig(
        vocab_size=len(toks),
        embedding_size=16,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=24,
        hidden_act="gelu",
        max_position_embeddings=64,
        type_vocab_size=2,
        initializer_range=0.5,
        rotary_value=False,
        pad_token_id=0,
    )
    torch.manual_seed(20240601)
    model = transformers.RoFormerModel(config)
    # Give every bias and LayerNorm a random value too (the init leaves 0 and 1), so a
    # loader that drops one of them is caught. The sinusoidal table is left alone.
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
    model.eval()
    model.save_pretrained(path)
    tok = transformers.BertTokenizer(vocab_file, do_lower_case=lower)
    tok.save_pretrained(path)
    return path


def transformer(base, **kw):
    return models.Transformer(base, **kw)


def dense(in_f, out_f, bias, act, seed):
    torch.manual_seed(seed)
    d = models.Dense(in_f, out_f, bias=bias, activation_function=act)
    with torch.no_grad():
        d.linear.weight.mul_(2.0)  # wider spread than the default uniform init
    return d


# ---- ST 2.2.2 folders (pytorch_model.bin) ----

def pooling_only(mode):
    def build(base):
        t = transformer(base)
        return [t, models.Pooling(t.get_word_embedding_dimension(), pooling_mode=mode)]
    return build


for _mode in ["mean", "max"]:
    folder(_mode, "2.2.2")(pooling_only(_mode))


@folder("mean_sqrt_len_tokens", "2.2.2")
def _mean_sqrt(base):
    # 2.2.2's pooling_mode string knows only mean/max/cls.
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode_mean_tokens=False, pooling_mode_mean_sqrt_len_tokens=True)]


@folder("cls", "2.2.2")
def _cls(base):
    t = transformer(base)
    # sentence_bert_config.json gets "max_seq_length": null, so ST infers
    # min(max_position_embeddings, tokenizer.model_max_length) on load.
    t.max_seq_length = None
    return [t, models.Pooling(16, pooling_mode="cls")]


@folder("cls_max_mean", "2.2.2")
def _cls_max_mean(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode_cls_token=True, pooling_mode_max_tokens=True,
                              pooling_mode_mean_tokens=True)]


@folder("dense_tanh_normalize", "2.2.2")
def _dense_tanh_normalize(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="mean"),
            dense(16, 8, True, torch.nn.Tanh(), 11), models.Normalize()]


@folder("dense_nobias_relu_two", "2.2.2")
def _dense_nobias_relu_two(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="cls"),
            dense(16, 12, False, torch.nn.ReLU(), 12),
            dense(12, 6, True, torch.nn.Identity(), 13)]


@folder("maxlen_lower", "2.2.2")
def _maxlen_lower(base_lower_false):
    # The tokenizer itself does not lowercase; only ST's do_lower_case (str.lower) does.
    t = transformer(base_lower_false, max_seq_length=10, do_lower_case=True)
    return [t, models.Pooling(16, pooling_mode="mean")]


# ---- ST 2.7.0 folders (model.safetensors) ----
# weightedmean and lasttoken do not exist in 2.2.2's Pooling, so they are 2.7.0 saves.

@folder("weightedmean", "2.7.0")
def _weightedmean(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="weightedmean")]


@folder("lasttoken", "2.7.0")
def _lasttoken(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="lasttoken")]


PROMPTS = {"query": "query: ", "passage": "passage: "}


@folder("prompts", "2.7.0")
def _prompts(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="mean")]


@folder("prompts_exclude", "2.7.0")
def _prompts_exclude(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="mean", include_prompt=False)]


@folder("lasttoken_dense_normalize_st", "2.7.0")
def _lasttoken_dense_normalize(base):
    t = transformer(base)
    return [t, models.Pooling(16, pooling_mode="lasttoken"),
            dense(16, 8, True, torch.nn.Tanh(), 14), models.Normalize()]


def vectors(model, prompt_name):
    kw = {}
    if prompt_name is not None:
        kw["prompt_name"] = prompt_name
    v = model.encode(TEXTS, batch_size=BATCH_SIZE, convert_to_numpy=True,
                     normalize_embeddings=False, show_progress_bar=False, **kw)
    assert v.dtype == np.float32 and v.shape[0] == len(TEXTS)
    return [[float(x) for x in row] for row in v]


def build(name, fn, bases):
    out = os.path.join(HERE, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    base = bases["lower_false"] if name == "maxlen_lower" else bases["lower"]
    mods = fn(base)
    prompts = name.startswith("prompts")
    if prompts:
        st = SentenceTransformer(modules=mods, prompts=dict(PROMPTS), default_prompt_name="query")
        # 2.7.0 has no similarity_fn_name (it came with ST 3.0); it is put into the
        # model config by hand so that save() writes it into
        # config_sentence_transformers.json like a 3.x save would.
        st._model_config["similarity_fn_name"] = "cosine"
    else:
        st = SentenceTransformer(modules=mods)
    st.eval()
    st.save(out)
    loaded = SentenceTransformer(out, device="cpu")
    loaded.eval()
    cases = [{"prompt_name": None, "vectors": vectors(loaded, None)}]
    if prompts:
        for p in PROMPTS:
            cases.append({"prompt_name": p, "vectors": vectors(loaded, p)})
    # The freshly built model must agree with the loaded one.
    fresh = st.encode(TEXTS, batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
    assert np.allclose(fresh, np.array(cases[0]["vectors"], dtype=np.float32), atol=1e-6), name
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"st_version": ST_VERSION, "texts": TEXTS, "cases": cases}, f,
                  indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{name}: ST {ST_VERSION}, dim {len(cases[0]['vectors'][0])}, {len(cases)} case(s)")


def main():
    want = {n: fn for n, (v, fn) in FOLDERS.items() if v == ST_VERSION}
    if not want:
        sys.exit(f"no fixture folder is made with sentence-transformers {ST_VERSION}")
    torch.set_num_threads(1)
    # A fixed path: it ends up in each config.json as "_name_or_path".
    tmp = os.path.join(tempfile.gettempdir(), "st_fixture_base")
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    try:
        bases = {"lower": make_base(os.path.join(tmp, "lower"), lower=True),
                 "lower_false": make_base(os.path.join(tmp, "lower_false"), lower=False)}
        for name in sorted(want):
            build(name, want[name], bases)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
