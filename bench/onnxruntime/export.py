"""Exports the PyTorch RoFormer of bench/pytorch/roformer_torch.py to ONNX for the ONNX Runtime peer,
and checks once that ONNX Runtime's logits are PyTorch's.

    /usr/bin/python3 bench/onnxruntime/export.py --size base [--seed 1] [--max-seq 4096] [--threads 2]

The model is bench/pytorch/bench.py's: RoFormerForMaskedLM with a --size preset (tiny, small, base),
HF's random initialisation from --seed (the same weights as `bench.py --size S --seed N`), in eval
mode; its one output is the full MLM logits [B, T, V] (the tied decoder included). Exported with
torch.onnx.export, opset 13, one int64 input `input_ids` [batch, seq] and one output `logits`
[batch, seq, vocab], both axes dynamic. No attention mask or token types are inputs: the benchmark
has no padding and one segment, as `roformer bench` and bench.py (the all-ones mask and the zero
token types are built inside the graph, as the PyTorch model builds them).

The rotary sin/cos tables are Python-side caches in roformer_torch.py, so tracing bakes them into
the graph as constants; they are built to --max-seq rows (default 4096, the longest job) before
the export, and the graph slices the first seq rows. A longer sequence needs a new export.

Also exported: probe-matmul.onnx, one MatMul of two float32 inputs, which bench.js times as its
SGEMM probe for MFU (the same [threads*512, 1024] x [1024, 1024] products as the other peers).

The check: PyTorch and ONNX Runtime (through bench.js --check, with the benchmark's session
options) run the same random ids at two shapes, [2, 37] and [1, 520] (longer than
max_position_embeddings, to cover the extended rotary table); the largest absolute difference of
the logits must be below 1e-3. It is printed to stderr and kept in the sidecar .json; a model whose
check failed is deleted.

Everything goes in a cache folder, never in the repository: --cache, else $ROFORMER_BENCH_CACHE,
else $XDG_CACHE_HOME/roformer-bench, else ~/.cache/roformer-bench; files are named by size, seed,
table length and a hash of roformer_torch.py, this script and the torch version, so an edit of the
model re-exports (and removes the stale export). A cached, checked model is reused (--force exports
again). The last stdout line is the path of the .onnx file.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_DIR = os.path.join(os.path.dirname(HERE), "pytorch")
OPSET = 13
TOLERANCE = 1e-3
CHECK_SHAPES = ((2, 37), (1, 520))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", required=True, choices=["tiny", "small", "base"], help="random-initialised preset (as roformer bench)")
    p.add_argument("--seed", type=int, default=1, help="the initialisation's seed (bench.py's --seed)")
    p.add_argument("--max-seq", type=int, default=4096, help="rows of the rotary tables baked into the graph: the longest --seq it can run")
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime and PyTorch threads for the check")
    p.add_argument("--cache", help="folder for the exported files (see above for the default)")
    p.add_argument("--node", default="node", help="node binary for the check")
    p.add_argument("--force", action="store_true", help="export and check again even if a checked model is cached")
    a = p.parse_args(argv)
    if a.max_seq < max(t for _, t in CHECK_SHAPES) or a.threads < 1:
        p.error(f"--max-seq must be at least {max(t for _, t in CHECK_SHAPES)} and --threads at least 1")
    return a


def cache_dir(given):
    if given:
        return given
    if os.environ.get("ROFORMER_BENCH_CACHE"):
        return os.environ["ROFORMER_BENCH_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "roformer-bench")


def source_key(torch_version):
    """A short hash of what the exported graph depends on: the model code, this script, torch."""
    h = hashlib.sha256(torch_version.encode())
    for path in (os.path.join(TORCH_DIR, "roformer_torch.py"), os.path.abspath(__file__)):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:10]


def main(a):
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    import torch

    sys.path.insert(0, TORCH_DIR)
    sys.dont_write_bytecode = True  # no __pycache__ left in bench/pytorch
    import roformer_torch as rt

    torch.set_num_threads(a.threads)
    folder = os.path.join(cache_dir(a.cache), "onnx")
    os.makedirs(folder, exist_ok=True)
    key = source_key(torch.__version__)
    stem = os.path.join(folder, f"roformer-{a.size}-seed{a.seed}-maxseq{a.max_seq}-opset{OPSET}-{key}")
    onnx_path, meta_path = stem + ".onnx", stem + ".json"
    probe_path = os.path.join(folder, f"probe-matmul-opset{OPSET}-{key}.onnx")

    if not a.force and os.path.exists(onnx_path) and os.path.exists(meta_path) and os.path.exists(probe_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("check_passed"):
            print(f"export: cached {onnx_path} (checked at export: max abs diff of logits {meta['max_abs_diff']:.3g})", file=sys.stderr)
            print(onnx_path)
            return 0

    # bench.py's model: the same seeds, so the same weights as `bench.py --size S --seed N`.
    torch.manual_seed(a.seed)
    model = rt.RoFormerForMaskedLM(rt.Config.preset(a.size))
    model.init_weights(a.seed)
    model.eval()
    c = model.config
    model.roformer.rotary.tables(a.max_seq)  # baked into the graph: see the docstring

    class Logits(torch.nn.Module):
        """RoFormerForMaskedLM with one input (the ids) and one output (the [B, T, V] logits)."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids)[1]

    class MatMul(torch.nn.Module):
        """The SGEMM probe: one product of two inputs (nothing to fold at load time)."""

        def forward(self, x, y):
            return torch.matmul(x, y)

    tmp = tempfile.mkdtemp(prefix="roformer-onnx-", dir=folder)
    try:
        t0 = time.time()
        dummy = torch.randint(5, c.vocab_size, (2, 16), generator=torch.Generator().manual_seed(a.seed))
        tmp_onnx = os.path.join(tmp, "model.onnx")
        with warnings.catch_warnings():
            # "Converting a tensor to a Python boolean": Rotary.tables' `if T > self.n`, constant
            # here because the table already holds max_seq rows; the slice [:T] stays dynamic.
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            with torch.no_grad():
                # The wrapper in eval mode too: export restores the wrapper's mode afterwards, and a
                # wrapper in training mode would switch the whole model (dropout) back to training.
                torch.onnx.export(Logits(model).eval(), (dummy,), tmp_onnx, opset_version=OPSET, do_constant_folding=True,
                                  input_names=["input_ids"], output_names=["logits"],
                                  dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
                tmp_probe = os.path.join(tmp, "probe.onnx")
                torch.onnx.export(MatMul().eval(), (torch.zeros(4, 8), torch.zeros(8, 3)), tmp_probe, opset_version=OPSET,
                                  input_names=["a", "b"], output_names=["c"],
                                  dynamic_axes={"a": {0: "m", 1: "k"}, "b": {0: "k", 1: "n"}, "c": {0: "m", 1: "n"}})
        export_s = time.time() - t0
        print(f"export: {a.size} (seed {a.seed}, rotary table {a.max_seq} rows) exported in {export_s:.1f} s, "
              f"{os.path.getsize(tmp_onnx) / 2**20:.0f} MiB", file=sys.stderr)

        # The check: the same ids through PyTorch and through ONNX Runtime.
        assert not any(mod.training for mod in model.modules()), "the reference must run in eval mode"
        g = torch.Generator().manual_seed(a.seed + 1)
        cases = []
        for i, (B, T) in enumerate(CHECK_SHAPES):
            ids = torch.randint(5, c.vocab_size, (B, T), generator=g)
            with torch.no_grad():
                logits = model(ids)[1]
            ids_file, logits_file = os.path.join(tmp, f"ids{i}.bin"), os.path.join(tmp, f"logits{i}.bin")
            ids.to(torch.int64).numpy().tofile(ids_file)
            logits.to(torch.float32).contiguous().numpy().tofile(logits_file)
            cases.append({"batch": B, "seq": T, "vocab": c.vocab_size, "ids": ids_file, "logits": logits_file})
        manifest = os.path.join(tmp, "check.json")
        with open(manifest, "w") as f:
            json.dump({"model": tmp_onnx, "threads": a.threads, "cases": cases}, f)
        p = subprocess.run([a.node, os.path.join(HERE, "bench.js"), "--check", manifest], capture_output=True, text=True)
        if p.returncode != 0 or not p.stdout.strip():
            print(f"export: the ONNX Runtime check failed to run (exit {p.returncode}):\n{p.stderr.strip()}", file=sys.stderr)
            return 1
        got = json.loads(p.stdout.strip().splitlines()[-1])
        diffs = [float("nan") if r["max_abs_diff"] is None else r["max_abs_diff"] for r in got["cases"]]  # JSON null: NaN
        worst = float("nan") if any(d != d for d in diffs) else max(diffs)
        shapes = ", ".join(f"[{r['batch']}, {r['seq']}]: {d:.3g}" for r, d in zip(got["cases"], diffs))
        print(f"export: ONNX Runtime {got['ort_version']} against PyTorch {torch.__version__}, max abs diff of the logits "
              f"{worst:.3g} (tolerance {TOLERANCE:g}; {shapes})", file=sys.stderr)
        if not worst < TOLERANCE:  # also catches NaN
            print("export: FAILED: the ONNX model does not give the PyTorch model's logits; nothing cached", file=sys.stderr)
            return 1

        meta = dict(
            size=a.size, seed=a.seed, max_seq=a.max_seq, opset=OPSET, torch=torch.__version__, key=key,
            params=sum(p.numel() for p in model.parameters()),
            config=dict(layers=c.num_hidden_layers, hidden=c.hidden_size, heads=c.num_attention_heads,
                        intermediate=c.intermediate_size, vocab=c.vocab_size, embedding=c.embedding_size,
                        max_position_embeddings=c.max_position_embeddings, hidden_act=c.hidden_act),
            probe=probe_path, export_s=export_s, ort_version=got["ort_version"],
            checks=got["cases"], max_abs_diff=worst, tolerance=TOLERANCE, check_passed=True,
        )
        for r in meta["checks"]:
            r.pop("ids", None)
            r.pop("logits", None)
        shutil.move(tmp_probe, probe_path)
        shutil.move(tmp_onnx, onnx_path)
        with open(meta_path, "w") as f:  # last: its presence marks a complete, checked export
            json.dump(meta, f, indent=1)
        # Exports of the same model from older sources (another key) are stale: remove them.
        # (Only the exports of older sources use an older probe.)
        stale = (f"roformer-{a.size}-seed{a.seed}-maxseq{a.max_seq}-opset{OPSET}-", f"probe-matmul-opset{OPSET}-")
        for name in os.listdir(folder):
            if name.startswith(stale) and not name.endswith((f"-{key}.onnx", f"-{key}.json")):
                os.remove(os.path.join(folder, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(onnx_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
