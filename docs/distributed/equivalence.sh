#!/usr/bin/env bash
# The issue's check, run by hand: two MPI ranks against one process with
# --accum 2 (same seed, data, masks, dropout), compared line by line and
# weight by weight; writes docs/distributed/equivalence.json.
# Usage: docs/distributed/equivalence.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=docs/distributed/equivalence.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/roformer" ./cmd/roformer
ARGS=(pretrain --size tiny --steps 12 --seq 64 --batch 4 --seed 3 --log-every 1 --quiet)
t0=$(date +%s)
mpirun --allow-run-as-root --oversubscribe -np 2 "$work/roformer" "${ARGS[@]}" --threads 1 --out "$work/mpi" >/dev/null
"$work/roformer" "${ARGS[@]}" --accum 2 --threads 2 --out "$work/one" >/dev/null
t1=$(date +%s)
python3 - "$work/one" "$work/mpi" "$OUT" "$(git rev-parse --short HEAD)" "$((t1 - t0))" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores)" <<'PY'
import array, json, struct, sys
one, mpi, out, commit, wall, cpu = sys.argv[1:]

def metrics(d):
    return [json.loads(l) for l in open(d + "/metrics.jsonl")]

def tensors(d):
    b = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    res = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        lo, hi = t["data_offsets"]
        a = array.array("f")
        a.frombytes(b[8 + n + lo:8 + n + hi])
        res[name] = a
    return res

ma, mb = metrics(one), metrics(mpi)
assert len(ma) == len(mb), (len(ma), len(mb))
rel = 0.0
steps = []
for a, b in zip(ma, mb):
    for k in ("loss", "eval_loss"):
        if k in a:
            d = abs(a[k] - b[k]) / abs(a[k])
            rel = max(rel, d)
            steps.append({"step": a["step"], "what": k, "one_process": a[k], "two_ranks": b[k], "relative_difference": d})
ta, tb = tensors(one), tensors(mpi)
assert ta.keys() == tb.keys()
worst, worst_name = 0.0, ""
for name in ta:
    d = max(abs(x - y) for x, y in zip(ta[name], tb[name]))
    if d > worst:
        worst, worst_name = d, name
json.dump({
    "commands": ["mpirun -np 2 roformer pretrain --size tiny --steps 12 --seq 64 --batch 4 --seed 3 --log-every 1 --threads 1",
                 "roformer pretrain --size tiny --steps 12 --seq 64 --batch 4 --seed 3 --log-every 1 --accum 2 --threads 2"],
    "commit": commit, "cpu": cpu, "wall_seconds": int(wall),
    "world_size": [ma[0].get("world_size"), mb[0].get("world_size")],
    "largest_relative_loss_difference": rel,
    "largest_weight_difference": worst, "at_tensor": worst_name,
    "parameters": sum(len(a) for a in ta.values()),
    "limits": {"relative_loss": 1e-4, "weight": 1e-4},
    "pass": rel <= 1e-4 and worst <= 1e-4,
    "losses": steps,
}, open(out, "w"), indent=1)
print(f"wrote {out}: losses within {rel:.2g} relative, weights within {worst:.2g}")
PY
