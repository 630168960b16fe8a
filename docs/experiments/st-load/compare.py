#!/usr/bin/env python3
"""Compare sentence-transformers' encode with `roformer embed` on folders
written by `roformer finetune --objective ...`.

Plain script, not part of the Go build or tests. Usage:

    PYTHONPATH=SHIM:TRANSFORMERS/src:HFHUB/src:ST python3 compare.py \
        --rf /tmp/rf --out result.json FOLDER [FOLDER ...]

SHIM holds a read-only `safetensors` stand-in (see README.md). The shims
below only patch what transformers 4.30.2 lacks for sentence-transformers
2.7.0 (which asks for transformers >= 4.34) and the missing `tokenizers`
package; each is applied only when the attribute is missing.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import transformers
import transformers.utils.import_utils as iu

SHIMS = []
if not hasattr(transformers, "is_torch_npu_available"):
    transformers.is_torch_npu_available = lambda: False
    SHIMS.append("transformers.is_torch_npu_available = lambda: False")
if not hasattr(iu, "is_nltk_available"):
    iu.is_nltk_available = lambda: importlib.util.find_spec("nltk") is not None
    iu.NLTK_IMPORT_ERROR = "{0} requires the NLTK library"
    SHIMS.append("transformers.utils.import_utils.is_nltk_available / NLTK_IMPORT_ERROR")


def _wrap(cls, name, slow):
    orig = cls.from_pretrained.__func__

    def from_pretrained(klass, *a, **kw):
        if "token" in kw:  # transformers < 4.31 knows only use_auth_token
            tok = kw.pop("token")
            if tok is not None:
                kw["use_auth_token"] = tok
        if slow:
            kw.setdefault("use_fast", False)
        return orig(klass, *a, **kw)

    cls.from_pretrained = classmethod(from_pretrained)


_old = tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (4, 31)
_no_fast = not transformers.utils.is_tokenizers_available()
if _old:
    SHIMS.append("Auto{Config,Model,Tokenizer}.from_pretrained: token= -> use_auth_token=")
if _no_fast:
    SHIMS.append("AutoTokenizer.from_pretrained: use_fast=False (no `tokenizers` package)")
if _old or _no_fast:
    _wrap(transformers.AutoConfig, "AutoConfig", False)
    _wrap(transformers.AutoModel, "AutoModel", False)
    _wrap(transformers.AutoTokenizer, "AutoTokenizer", _no_fast)

import sentence_transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

LONG = " ".join(
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, "
    "and nothing particular to interest me on shore, I thought I would sail about a little and see the watery "
    "part of the world.".split()
    * 4
)
TEXTS = [
    "hello",
    "The whale swam under the ship.",
    "THE WHALE SWAM UNDER THE SHIP!!!",
    "What?! No... really; (yes) -- \"quoted\" [brackets] {braces} 3.14 $5 #tag @user",
    "  leading and trailing spaces   ",
    "Café naïve résumé — über straße",
    "a",
    LONG,  # > 128 tokens
    LONG + " " + LONG,  # far beyond both max lengths
    "We must grow our economy, said the president of the United States.",
    "中文 text mixed with 日本語",
]


def rf_embed(rf, folder, texts, extra):
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.jsonl"), os.path.join(d, "out.jsonl")
        with open(inp, "w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"text": t, "id": str(i)}) + "\n")
        cmd = [rf, "embed", "--model", folder, "--input", inp, "--output", out, "--threads", "1"] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rows = [json.loads(l) for l in open(out)]
    rows.sort(key=lambda r: r["index"])
    return np.array([r["embedding"] for r in rows], dtype=np.float64), " ".join(cmd[1:2] + ["--model", folder] + extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rf", default="/tmp/rf")
    ap.add_argument("--out")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("folders", nargs="+")
    a = ap.parse_args()
    res = {"sentence_transformers": sentence_transformers.__version__, "transformers": transformers.__version__,
           "shims": SHIMS, "texts": len(TEXTS), "folders": []}
    for folder in a.folders:
        r = {"folder": folder}
        try:
            m = SentenceTransformer(folder, device="cpu")
        except Exception as e:  # report the exact error
            r["load_error"] = f"{type(e).__name__}: {e}"
            res["folders"].append(r)
            continue
        r["modules"] = [type(x).__name__ for x in m]
        r["max_seq_length"] = m.max_seq_length
        r["st_tokenizer"] = type(m.tokenizer).__name__
        r["st_default_prompt_name"] = getattr(m, "default_prompt_name", None)
        st = m.encode(TEXTS, convert_to_numpy=True, batch_size=4).astype(np.float64)
        runs = [[]]
        if r["st_default_prompt_name"] is None and os.path.exists(os.path.join(folder, "config_sentence_transformers.json")):
            if json.load(open(os.path.join(folder, "config_sentence_transformers.json"))).get("default_prompt_name"):
                runs.append(["--prompt", ""])  # this ST ignores prompts: compare with none too
        r["comparisons"] = []
        for extra in runs:
            go, cmd = rf_embed(a.rf, folder, TEXTS, extra)
            d = np.abs(go - st)
            r["comparisons"].append({"rf": cmd, "shape": list(go.shape), "max_abs_diff": float(d.max()),
                                     "per_text_max": [float(x) for x in d.max(axis=1)],
                                     "within_tol": bool(go.shape == st.shape and d.max() <= a.tol)})
        res["folders"].append(r)
    s = json.dumps(res, indent=2)
    print(s)
    if a.out:
        open(a.out, "w").write(s + "\n")


if __name__ == "__main__":
    main()
