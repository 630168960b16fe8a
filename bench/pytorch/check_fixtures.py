"""Shows that roformer_torch.py is the model Hugging Face computes.

For every case under shared/fixtures/hf-roformer/cases (or the folders given),
from both weight files (model.safetensors through our own reader, and
pytorch_model.bin through torch.load), it runs RoFormerForMaskedLM in eval mode
and compares with fixture.json:

    RoFormerModel.last_hidden_state      max abs diff <= 1e-5
    RoFormerModel.hidden_states          max abs diff <= 1e-5 (where stored)
    RoFormerForMaskedLM.logits           max abs diff <= 1e-4
    RoFormerForMaskedLM.loss             abs diff     <= 1e-5
    gradients of the MLM loss            max abs diff <= 1e-4 x max|grad| per tensor (where stored)

Usage: /usr/bin/python3 bench/pytorch/check_fixtures.py [CASE_DIR ...]
Exit status 0 when every case passes, 1 otherwise.
"""

import glob
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roformer_torch as rt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "hf-roformer", "cases"))


def tensor(obj):
    return torch.tensor(obj["data"], dtype=torch.float32).reshape(obj["shape"])


def max_diff(got, want):
    if tuple(got.shape) != tuple(want.shape):
        return float("inf")
    return (got.detach() - want).abs().max().item() if want.numel() else 0.0


def check_case(case_dir, weights):
    with open(os.path.join(case_dir, "fixture.json")) as f:
        fx = json.load(f)
    m, notes = rt.load_mlm(case_dir, os.path.join(case_dir, weights))
    m.eval()
    ids = torch.tensor(fx["input_ids"], dtype=torch.long)
    mask = torch.tensor(fx["attention_mask"], dtype=torch.long)
    types = torch.tensor(fx["token_type_ids"], dtype=torch.long)
    mlm = fx["outputs"]["RoFormerForMaskedLM"]
    base = fx["outputs"]["RoFormerModel"]
    labels = torch.tensor(mlm["labels"], dtype=torch.long)

    rows = []  # (what, diff, tolerance)
    hs = []
    m.zero_grad(set_to_none=True)
    hidden, logits, loss = m(ids, mask, types, labels=labels, hidden_states=hs)
    rows.append(("last_hidden_state", max_diff(hidden, tensor(base["last_hidden_state"])), 1e-5))
    if "hidden_states" in base:
        d = max(max_diff(g, tensor(w)) for g, w in zip(hs, base["hidden_states"]))
        if len(hs) != len(base["hidden_states"]):
            d = float("inf")
        rows.append(("hidden_states", d, 1e-5))
    rows.append(("mlm logits", max_diff(logits, tensor(mlm["logits"])), 1e-4))
    rows.append(("mlm loss", abs(loss.item() - mlm["loss"]), 1e-5))
    if fx.get("gradients"):
        loss.backward()
        params = dict(m.named_parameters())
        worst = 0.0
        for name, g in fx["gradients"]["params"].items():
            want = tensor(g)
            got = params[name].grad
            if got is None:
                got = torch.zeros_like(want)
            scale = max(want.abs().max().item(), 1e-30)
            worst = max(worst, max_diff(got, want) / scale)
        rows.append((f"grads ({len(fx['gradients']['params'])} tensors, relative)", worst, 1e-4))
    return rows, notes


def main(argv):
    torch.set_num_threads(1)
    dirs = argv or sorted(glob.glob(os.path.join(CASES, "*")))
    if not dirs:
        print(f"no fixture cases found under {CASES}", file=sys.stderr)
        return 1
    failed = 0
    for d in dirs:
        for weights in ("model.safetensors", "pytorch_model.bin"):
            try:
                rows, notes = check_case(d, weights)
            except Exception as e:  # report the case and go on
                print(f"FAIL {os.path.basename(d)} [{weights}]: {e}")
                failed += 1
                continue
            bad = [r for r in rows if not (r[1] <= r[2])]
            failed += bool(bad)
            summary = ", ".join(f"{w} {diff:.2g}{'' if diff <= tol else ' > ' + format(tol, 'g')}" for w, diff, tol in rows)
            print(f"{'FAIL' if bad else 'ok  '} {os.path.basename(d)} [{weights}]: {summary}" + (f" ({'; '.join(notes)})" if notes else ""))
    total = 2 * len(dirs)
    print(f"{total - failed}/{total} case×weight-file checks pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
