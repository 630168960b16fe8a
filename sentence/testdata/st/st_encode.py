#!/usr/bin/env python3
"""Prints sentence-transformers' vectors for a folder as JSON.

  st_encode.py FOLDER TEXTS.json [--prompt-name NAME] [--prompt TEXT] [--batch-size N]

TEXTS.json holds a JSON list of strings, or an object with a "texts" list (an
expected.json works). "-" reads it from standard input. The output is
{"st_version": ..., "prompt_name": ..., "vectors": [[...], ...]} where vectors is
SentenceTransformer(FOLDER, device="cpu").encode(texts, prompt_name=NAME,
convert_to_numpy=True, normalize_embeddings=False). Without --prompt-name (and
--prompt) the folder's default prompt, if any, applies, as in ST. --prompt-name and
--prompt need sentence-transformers >= 2.4.

Run it on the harness described in make_fixtures.py's header, for example:
  PYTHONPATH=$H/st270:$H/shim:$H/tf/src:$H/hub/src HF_HUB_OFFLINE=1 \\
      /usr/bin/python3 st_encode.py mean mean/expected.json
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("texts")
    ap.add_argument("--prompt-name", default=None)
    ap.add_argument("--prompt", default=None)
    ap.add_argument("--batch-size", type=int, default=4)
    args = ap.parse_args()

    if args.texts == "-":
        data = json.load(sys.stdin)
    else:
        with open(args.texts, encoding="utf-8") as f:
            data = json.load(f)
    texts = data["texts"] if isinstance(data, dict) else data
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit(f"{args.texts}: want a JSON list of strings or an object with a \"texts\" list")

    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(args.folder, device="cpu")
    model.eval()
    kw = {}
    if args.prompt_name is not None:
        kw["prompt_name"] = args.prompt_name
    if args.prompt is not None:
        kw["prompt"] = args.prompt
    vecs = model.encode(texts, batch_size=args.batch_size, convert_to_numpy=True,
                        normalize_embeddings=False, show_progress_bar=False, **kw)
    out = {
        "st_version": sentence_transformers.__version__,
        "prompt_name": args.prompt_name,
        "vectors": [[float(x) for x in row] for row in vecs],
    }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
