"""Runs the same benchmark jobs in Go (`roformer bench`), PyTorch (bench/pytorch/bench.py) and ONNX
Runtime (bench/onnxruntime/bench.js), taking turns, on the same machine with the same threads, and
reports medians and ratios.

Usually started through bench/side_by_side.sh, which builds the Go binary and checks the peers first:

    /usr/bin/python3 bench/side_by_side.py --roformer /tmp/roformer [--threads 2] [--runs 3]
        [--jobs infer-base-8x128,infer-base-8x128-int8,infer-base-1x512,train-small-16x128,infer-base-1x4096]
        [--impls go,pytorch,onnxruntime] [--out results.jsonl] [--markdown table.md]

Peers (--impls): go is ours; pytorch is the PyTorch twin (bench/pytorch/README.md); onnxruntime is
the same PyTorch model exported to ONNX and run by onnxruntime-node (bench/onnxruntime/README.md).
ONNX Runtime only runs the fp32 inference jobs: training jobs and int8 jobs skip it. The int8 jobs
run `roformer bench --precision int8` and `bench.py --precision int8` (PyTorch's dynamic int8
quantization of every nn.Linear). The smoke-* jobs (tiny model, two steps) only check the harness.
The decode-* jobs (not in the default --jobs; `--jobs decode` runs decode-small-{64,512,2048}) time
greedy decoding with the key/value cache: `roformer bench --mode decode` against Hugging Face's own
RoFormerForCausalLM.generate (bench/pytorch/decode.py; HF transformers runs from a scratch folder
given with --hf-src, see bench/pytorch/README.md); ONNX Runtime skips them, and the table gains the
per-token latencies and the prefill times.

Each job runs --runs times per peer, the peers taking turns and the order rotating by one on every
run (go, pytorch, onnxruntime; pytorch, onnxruntime, go; ...; with two peers: go, pytorch; pytorch,
go), so that slow drifts in the machine's load hit all alike. Every run is a fresh process; its last
stdout line is the JSON result. A peer that fails (exit status, timeout, out of memory) is not run
again for the rest of that job. Before a job's first ONNX Runtime run, the model is exported and
checked against PyTorch once (bench/onnxruntime/export.py, cached outside the repository).

Reported per job: the median over runs of each peer's tokens/s (each run already reports the median
of its timed steps), the range over runs, the ratios ours/ONNX Runtime and ours/PyTorch, the ratios
of the fastest single steps (less sensitive to other load on a shared machine), MFU of each (each
run's GFLOP/s over its own SGEMM probe, or over --peak), and the peak RSS of each process.

Every result records the CPU it ran on (`cpu`: model name, vendor, family and model from
/proc/cpuinfo, and the vector width, AVX-512 or AVX2, from the flags); the table has one heading
per CPU. Older results files without it name the CPU from their summary line's lscpu fields.

    /usr/bin/python3 bench/side_by_side.py --from results.jsonl     rebuilds the table
"""

import argparse
import collections
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here, not in the default pyenv python

Job = collections.namedtuple("Job", "size mode batch seq steps warmup precision new_tokens", defaults=("fp32", 0))

JOBS = {
    "infer-base-8x128": Job("base", "infer", 8, 128, 5, 1),
    "infer-base-8x128-int8": Job("base", "infer", 8, 128, 5, 1, "int8"),
    # Go only: PyTorch 1.13 has no bfloat16 path for nn.Linear on CPU worth timing, ONNX Runtime's
    # CPU provider none.
    "infer-base-8x128-bf16": Job("base", "infer", 8, 128, 5, 1, "bf16"),
    "infer-base-1x512": Job("base", "infer", 1, 512, 5, 1),
    # One short query at a time (issue #39): the products have 8-32 rows, so they are bound by
    # reading the weights; milliseconds each, so more steps for a stable median.
    "infer-base-1x8": Job("base", "infer", 1, 8, 41, 5),
    "infer-base-1x16": Job("base", "infer", 1, 16, 41, 5),
    "infer-base-1x32": Job("base", "infer", 1, 32, 41, 5),
    "infer-base-1x128": Job("base", "infer", 1, 128, 21, 3),
    "infer-base-1x16-int8": Job("base", "infer", 1, 16, 41, 5, "int8"),
    "train-small-16x128": Job("small", "train", 16, 128, 5, 1),
    # Go only (issue #26): bf16 products with fp32 master weights, against the fp32 job above.
    "train-small-16x128-bf16": Job("small", "train", 16, 128, 5, 1, "bf16"),
    # ~100 s per step at the baseline: two timed steps, no warm-up (the first-touch cost of
    # ~2 GB is well under 1% of a step).
    "infer-base-1x4096": Job("base", "infer", 1, 4096, 2, 0),
    # Seconds each, to check the harness (not in the default --jobs).
    "smoke-infer-tiny-2x64": Job("tiny", "infer", 2, 64, 2, 0),
    "smoke-infer-tiny-2x64-int8": Job("tiny", "infer", 2, 64, 2, 0, "int8"),
    "smoke-train-tiny-2x64": Job("tiny", "train", 2, 64, 2, 0),
    # Greedy decoding with the key/value cache (issue #14): one row, a prompt of 64/512/2048 random ids,
    # 32 new tokens; a step is one new token (seq is the context). Go (`roformer bench --mode decode`)
    # against HF's own RoFormerForCausalLM.generate (bench/pytorch/decode.py, which needs HF
    # transformers from a scratch folder: --hf-src). Not in the default --jobs.
    "decode-small-64": Job("small", "decode", 1, 64, 3, 1, "fp32", 32),
    "decode-small-512": Job("small", "decode", 1, 512, 3, 1, "fp32", 32),
    "decode-small-2048": Job("small", "decode", 1, 2048, 3, 1, "fp32", 32),
    "decode-tiny-64": Job("tiny", "decode", 1, 64, 3, 1, "fp32", 32),
    "decode-tiny-512": Job("tiny", "decode", 1, 512, 3, 1, "fp32", 32),
    "decode-tiny-2048": Job("tiny", "decode", 1, 2048, 3, 1, "fp32", 32),
    "smoke-decode-tiny-16": Job("tiny", "decode", 1, 16, 1, 0, "fp32", 4),
}
DEFAULT_JOBS = [j for j in JOBS if not j.startswith("smoke-") and JOBS[j].mode != "decode"]
DECODE_JOBS = [j for j in JOBS if j.startswith("decode-small-")]

IMPLS = ("go", "pytorch", "onnxruntime")  # the default order of the first run
PEERS = ("onnxruntime", "pytorch")  # the table's peer columns, in this order
NAMES = {"go": "ours", "pytorch": "PyTorch", "onnxruntime": "ONNX Runtime"}


def job_args(job):
    j = JOBS[job]
    if j.mode == "decode":
        return ["--size", j.size, "--mode", "decode", "--batch", str(j.batch), "--seq", str(j.seq),
                "--new-tokens", str(j.new_tokens), "--steps", str(j.steps), "--warmup", str(j.warmup), "--json"]
    args = ["--size", j.size, "--mode", j.mode, "--head", "masked-lm", "--batch", str(j.batch), "--seq", str(j.seq),
            "--steps", str(j.steps), "--warmup", str(j.warmup), "--json"]
    if j.precision != "fp32":  # fp32 jobs keep the command lines of older results (and binaries)
        args += ["--precision", j.precision]
    return args


def not_applicable(impl, mode, precision):
    """Why impl does not run a job of this mode and precision, or None if it does."""
    if impl == "onnxruntime" and mode == "decode":
        return "decoding: Go and PyTorch only"
    if impl == "onnxruntime" and mode != "infer":
        return "inference only"
    if impl == "onnxruntime" and precision != "fp32":
        return "fp32 only"
    if impl == "pytorch" and precision == "bf16":
        return "no bf16 run"
    return None


def export_onnx(job, a):
    """The checked ONNX model for job (bench/onnxruntime/export.py, cached): (path, None) or (None, error)."""
    j = JOBS[job]
    key = (j.size, max(4096, j.seq))
    if key not in a.onnx_models:
        cmd = [PYTHON, os.path.join(HERE, "onnxruntime", "export.py"), "--size", j.size, "--max-seq", str(key[1]),
               "--threads", str(a.threads), "--node", a.node]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            a.onnx_models[key] = (None, f"export timed out after {a.timeout} s")
            return a.onnx_models[key]
        for line in p.stderr.strip().splitlines():
            if line.startswith("export:"):
                print(f"{job}: {line}", file=sys.stderr)
        lines = p.stdout.strip().splitlines()
        if p.returncode != 0 or not lines:
            a.onnx_models[key] = (None, f"export failed, exit {p.returncode}: {why(p.stderr)}")
        else:
            a.onnx_models[key] = (lines[-1], None)
    return a.onnx_models[key]


def why(text):
    """The gist of a failed run's output: its first line (a usage error: `flag provided but not
    defined: -precision`) and its last two (a traceback's exception, an error message)."""
    ls = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(ls) <= 3:
        return " / ".join(ls)
    return f"{ls[0]} / … / {ls[-2]} / {ls[-1]}"


def run_one(impl, job, a):
    threads = str(a.threads)
    if impl == "go":
        cmd = [a.roformer, "bench", "--threads", threads, "--quiet"] + job_args(job)
        env = dict(os.environ)
    elif impl == "pytorch":
        cmd = [PYTHON, os.path.join(HERE, "pytorch", "bench.py"), "--threads", threads] + job_args(job)
        if JOBS[job].mode == "decode":  # HF's own generate (bench/pytorch/README.md, "Decoding")
            cmd = [PYTHON, os.path.join(HERE, "pytorch", "decode.py"), "--threads", threads] + job_args(job)
            if a.hf_src:
                cmd += ["--hf-src", a.hf_src]
        # PyTorch at its best on these machines: idle OpenMP and OpenBLAS threads sleep
        # instead of spinning (see bench/pytorch/README.md).
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, OMP_WAIT_POLICY="PASSIVE",
                   OPENBLAS_THREAD_TIMEOUT=os.environ.get("OPENBLAS_THREAD_TIMEOUT", "4"))
    else:
        model, err = export_onnx(job, a)
        if err:
            return {"impl": impl, "job": job, "error": err, "cpu": a.cpu}
        cmd = [a.node, os.path.join(HERE, "onnxruntime", "bench.js"), "--threads", threads, "--quiet",
               "--onnx", model] + job_args(job)
        env = dict(os.environ)  # ONNX Runtime's threads are its session options (bench/onnxruntime/README.md)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return {"impl": impl, "job": job, "error": f"timed out after {a.timeout} s", "cmd": cmd, "cpu": a.cpu}
    except OSError as e:
        return {"impl": impl, "job": job, "error": f"cannot run {cmd[0]}: {e}", "cmd": cmd, "cpu": a.cpu}
    wall = time.time() - t0
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return {"impl": impl, "job": job, "error": f"exit {p.returncode}: {why(p.stderr or p.stdout)}", "cmd": cmd, "cpu": a.cpu}
    try:
        r = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        return {"impl": impl, "job": job, "error": f"last line is not JSON: {e}", "cmd": cmd, "cpu": a.cpu}
    r.setdefault("precision", JOBS[job].precision)
    r.update(impl=impl, impl_name=r.get("impl"), job=job, wall_s=wall, cmd=cmd, cpu=a.cpu)
    return r


def vector_width(flags):
    """The widest x86 vector instructions among the CPU flags: AVX-512, AVX2, or what else."""
    if "avx512f" in flags:
        return "AVX-512"
    if "avx2" in flags:
        return "AVX2"
    if "avx" in flags:
        return "AVX"
    if "sse2" in flags:
        return "SSE2"
    return "no x86 vector flags"


# Flags worth keeping in the results: vector width, FMA, and the int8 / bf16 dot-product extensions.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_info():
    """The CPU of this machine from /proc/cpuinfo (its first processor): model name, vendor, family,
    model, stepping, vector width and the flags of CPU_FLAGS."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            block = f.read().split("\n\n")[0]
        fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines()))
    except OSError:
        pass
    flags = fields.get("flags", "").split()
    return {
        "model_name": fields.get("model name") or platform.processor() or platform.machine() or "?",
        "vendor": fields.get("vendor_id"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "stepping": fields.get("stepping"),
        "vector": vector_width(flags) if flags else platform.machine(),
        "flags": [f for f in CPU_FLAGS if f in flags],
    }


def recorded_cpu(m, results):
    """The CPU of older results (before each result recorded its own `cpu`): the summary line's lscpu
    model name and flags (m), family and model unknown; without a summary line, the vector width the
    Go runs reported using."""
    flags = m.get("Flags", "").split()
    if flags:
        vector = vector_width(flags)
    else:
        used = {r.get("vector") for r in results if r.get("vector")}
        vector = f"{'/'.join(sorted(used))} (the Go side's kernels; CPU flags not recorded)" if used else "?"
    return {"model_name": m.get("Model name", "CPU not recorded"), "family": None, "model": None, "vector": vector,
            "flags": flags}


def cpu_label(c):
    fm = f"family {c['family']}, model {c['model']}" if c.get("family") is not None else "family/model not recorded"
    return f"{c['model_name']} ({fm}), {c['vector']}"


def machine():
    info = {"python": platform.python_version(), "kernel": platform.release()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "Flags"):
                info[k.strip()] = v.strip() if k.strip() != "Flags" else " ".join(
                    f for f in v.split() if f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"))
    except OSError:
        pass
    try:
        info["MemTotal"] = open("/proc/meminfo").readline().split(":")[1].strip()
    except OSError:
        pass
    info["cpu"] = cpu_info()
    return info


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--roformer", help="the Go binary (cmd/roformer); required unless --from or go is not in --impls")
    p.add_argument("--from", dest="from_file", help="only rebuild the table from a results file written by --out")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", default=",".join(DEFAULT_JOBS), help=f"of {', '.join(JOBS)}")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"the peers to run, in the first run's order (of {', '.join(IMPLS)})")
    p.add_argument("--node", default="node", help="node binary for ONNX Runtime")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per benchmark process")
    p.add_argument("--out", help="append every run's JSON result here (one per line)")
    p.add_argument("--markdown", help="also write the table here")
    p.add_argument("--peak", type=float, default=0, help="GFLOP/s for MFU instead of the best probe of the session")
    p.add_argument("--revision", default="", help="the source revision measured (side_by_side.sh passes git describe)")
    p.add_argument("--hf-src", default=os.environ.get("ROFORMER_HF_SRC", ""),
                   help="decode jobs: the folders holding HF transformers, huggingface_hub and the stubs, ':'-separated "
                        "(bench/pytorch/README.md, 'Decoding'); default $ROFORMER_HF_SRC, else PYTHONPATH")
    a = p.parse_args(argv)
    if a.from_file:
        return resummarise(a.from_file, a.markdown, a.peak)
    impls = [i for i in a.impls.split(",") if i]
    for i in impls:
        if i not in IMPLS:
            p.error(f"unknown implementation {i!r} in --impls (valid: {', '.join(IMPLS)})")
    if not impls or len(set(impls)) != len(impls):
        p.error("--impls needs at least one implementation, each once")
    if "go" in impls and not a.roformer:
        p.error("--roformer is required (or leave go out of --impls)")
    jobs = [j for x in a.jobs.split(",") for j in (DECODE_JOBS if x == "decode" else [x])]
    for j in jobs:
        if j not in JOBS:
            p.error(f"unknown job {j!r} (valid: {', '.join(JOBS)})")

    m = machine()
    a.cpu = m["cpu"]
    a.onnx_models = {}
    print(f"CPU: {cpu_label(a.cpu)}", file=sys.stderr)
    load0 = os.getloadavg()
    results = []
    out = open(a.out, "a") if a.out else None
    for job in jobs:
        j = JOBS[job]
        active = [i for i in impls if not_applicable(i, j.mode, j.precision) is None]
        failed = set()
        for run in range(a.runs):
            k = run % len(active) if active else 0
            order = active[k:] + active[:k]  # rotate by one each run: with two peers, swap
            for impl in order:
                if impl in failed:
                    continue
                r = run_one(impl, job, a)
                r["run"] = run
                results.append(r)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                if "error" in r:
                    print(f"{job} run {run + 1} {impl}: FAILED: {r['error']}", file=sys.stderr)
                    failed.add(impl)  # out of memory, too slow, or no such flag: not again for this job
                else:
                    print(f"{job} run {run + 1} {impl}: {r['tokens_per_sec']:.1f} tokens/s, {r['ms_per_step']:.1f} ms/step, "
                          f"peak RSS {mib(r['peak_rss_bytes'])}, probe {r['peak_gflops']:.0f} GFLOP/s", file=sys.stderr)
    load1 = os.getloadavg()

    m["revision"] = a.revision
    summarise(results, jobs, a.runs, a.threads, m, (load0, load1), a.markdown, out, a.peak, impls)
    if out:
        out.close()
    return 0 if any("error" not in r for r in results) else 1


def side_of(rs, errs, reason):
    """One peer's figures for one job: medians over its runs, or why there are none."""
    if not rs:
        return dict(error=reason or (errs[0] if errs else "not run"), na=bool(reason))
    tps = [r["tokens_per_sec"] for r in rs]
    bt = rs[0]["batch"] * (1 if rs[0].get("mode") == "decode" else rs[0]["seq"])  # decode: a step is one token per row
    return dict(
        tps=statistics.median(tps), lo=min(tps), hi=max(tps), n=len(rs),
        best=bt / (min(r["ms_min"] for r in rs) / 1e3),
        ms=statistics.median(r["ms_per_step"] for r in rs),
        gflops=statistics.median(r["gflops"] for r in rs),
        mfu=statistics.median(r["mfu"] for r in rs),
        rss=statistics.median(r["peak_rss_bytes"] for r in rs),
        flops=rs[0]["flops_per_step"], params=rs[0]["params"],
        ms_token=statistics.median(r["ms_per_token"] for r in rs) if "ms_per_token" in rs[0] else None,
        prefill=statistics.median(r["prefill_ms"] for r in rs) if "prefill_ms" in rs[0] else None,
        ms_token_lo=min(r.get("ms_per_token", 0) for r in rs), ms_token_hi=max(r.get("ms_per_token", 0) for r in rs))


def summarise(results, jobs, runs, threads, m, loads, markdown=None, out=None, fixed_peak=0, impls=None):
    """Prints the tables of medians and ratios, one per CPU (and writes them to markdown, and a
    summary line to out)."""
    load0, load1 = loads
    ok = [r for r in results if "error" not in r]
    if not ok:
        print("no run succeeded", file=sys.stderr)
        for r in results:
            print(f"  {r['job']} {r['impl']}: {r['error']}", file=sys.stderr)
        return
    impls = list(impls or [])
    impls += [i for i in IMPLS if i not in impls and any(r["impl"] == i for r in results)]
    peers = [p for p in PEERS if p in impls]
    names = {p: NAMES[p] for p in peers}

    # One table per CPU (a results file normally holds one; concatenated files may hold more).
    by_cpu = {}
    older = recorded_cpu(m, results)
    for r in results:
        c = r.get("cpu") or older
        by_cpu.setdefault(cpu_label(c), (c, []))[1].append(r)

    lines = []
    summary = []
    for label, (cpu, rs_cpu) in by_cpu.items():
        decode_rows = []
        ok_cpu = [r for r in rs_cpu if "error" not in r]
        if lines:
            lines.append("")
        lines.append(f"## {label}")
        lines.append("")
        if not ok_cpu:
            lines.append("No run succeeded on this CPU.")
            continue
        probes = [r["peak_gflops"] for r in ok_cpu]
        peak = fixed_peak
        if len(by_cpu) == 1 and m.get("Model name"):  # the summary line describes one machine
            lines.append(f"Machine: {m.get('Model name', '?')}, {m.get('CPU(s)', '?')} CPUs ({m.get('Core(s) per socket', '?')} cores/socket, "
                         f"{m.get('Thread(s) per core', '?')} thread/core), {m.get('MemTotal', '?')} RAM, flags {m.get('Flags', '?')}; "
                         f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end.")
        if cpu.get("flags") and cpu.get("family") is not None:
            lines.append(f"CPU: {cpu['model_name']}, vendor {cpu.get('vendor') or '?'}, family {cpu['family']}, model {cpu['model']}, "
                         f"stepping {cpu.get('stepping') or '?'}; {cpu['vector']}; flags {' '.join(cpu['flags'])}.")
        if m.get("revision"):
            lines.append(f"Go source: {m['revision']}.")
        probe_txt = (f"SGEMM probes, one per run: best {max(probes):.0f}, median {statistics.median(probes):.0f}, "
                     f"lowest {min(probes):.0f} GFLOP/s")
        if fixed_peak:
            mfu_txt = f"MFU against a given peak of {peak:.0f} GFLOP/s ({probe_txt})."
        else:
            mfu_txt = (f"MFU: median over runs of each run's GFLOP/s divided by its own SGEMM probe, taken seconds "
                       f"before under the same load ({probe_txt}).")
        if peers == ["pytorch"]:
            turns = "alternating"
        else:
            turns = "taking turns, the order rotating every run"
        lines.append(f"Threads: {threads} on {'both sides' if len(peers) == 1 else 'every side'}. "
                     f"Runs: {runs} per side per job, {turns}. {mfu_txt}")
        lines.append("")
        lines.append("tokens/s: median over runs of each run's median step (range over runs); best: from the fastest single step of all runs.")
        lines.append("")
        head = ["job", "ours tokens/s"] + [f"{names[p]} tokens/s" for p in peers]
        head += [f"ratio ours/{names[p]}" for p in peers]
        head += [f"best ours / best {names[p]} (ratio)" for p in peers]
        head += ["ours MFU"] + [f"{names[p]} MFU" for p in peers]
        head += ["ours peak RSS"] + [f"{names[p]} peak RSS" for p in peers]
        head += [f"RSS ratio ours/{names[p]}" for p in peers]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))

        for job in jobs:
            rs_job = [r for r in rs_cpu if r["job"] == job]
            if not rs_job:
                continue
            mode = next((r["mode"] for r in rs_job if "mode" in r), JOBS[job].mode if job in JOBS else "infer")
            precision = next((r.get("precision") for r in rs_job if "error" not in r and r.get("precision")),
                              JOBS[job].precision if job in JOBS else "fp32")
            side = {}
            for impl in ["go"] + peers:
                rs = [r for r in rs_job if r["impl"] == impl and "error" not in r]
                errs = [r["error"] for r in rs_job if r["impl"] == impl and "error" in r]
                side[impl] = side_of(rs, errs, not_applicable(impl, mode, precision))
            g = side["go"]
            for p in peers:
                t = side[p]
                if "tps" in g and "tps" in t and (g["flops"] != t["flops"] or g["params"] != t["params"]):
                    print(f"warning: {job}: ours and {names[p]} ran different models: FLOPs {g['flops']:.0f} vs {t['flops']:.0f}, "
                          f"parameters {g['params']} vs {t['params']}", file=sys.stderr)

            def tps_cell(s):
                if "tps" in s:
                    return f"{s['tps']:.0f} ({s['lo']:.0f}–{s['hi']:.0f})"
                e = s["error"] if len(s["error"]) <= 160 else s["error"][:157] + "..."
                return "— (" + e.replace("|", "\\|") + ")"  # the whole message is in the results file

            def both(t):
                return "tps" in g and "tps" in t

            if fixed_peak:
                mfu = lambda s: f"{100 * s['gflops'] / peak:.1f}%" if "gflops" in s else "—"  # noqa: E731
            else:
                mfu = lambda s: f"{100 * s['mfu']:.1f}%" if "mfu" in s else "—"  # noqa: E731
            rss = lambda s: mib(s["rss"]) if "rss" in s else "—"  # noqa: E731
            row = [job, tps_cell(g)] + [tps_cell(side[p]) for p in peers]
            row += [f"**{g['tps'] / side[p]['tps']:.2f}**" if both(side[p]) else "—" for p in peers]
            row += [f"{g['best']:.0f} / {side[p]['best']:.0f} ({g['best'] / side[p]['best']:.2f})" if both(side[p]) else "—"
                    for p in peers]
            row += [mfu(g)] + [mfu(side[p]) for p in peers]
            row += [rss(g)] + [rss(side[p]) for p in peers]
            row += [f"{g['rss'] / side[p]['rss']:.2f}" if both(side[p]) else "—" for p in peers]
            lines.append("| " + " | ".join(row) + " |")
            summary.append(dict({"job": job, "cpu": cpu, "precision": precision, "fixed_peak_gflops": peak or None},
                                **{impl: side[impl] for impl in ["go"] + peers}))
            if mode == "decode" and "pytorch" in peers:
                decode_rows.append((job, rs_job[0].get("context", rs_job[0].get("seq")), side["go"], side["pytorch"]))
        if decode_rows:
            lines += decode_table(decode_rows)
    table = "\n".join(lines)
    print(table)
    if markdown:
        with open(markdown, "w") as f:
            f.write(table + "\n")
    if out:
        out.write(json.dumps({"summary": summary, "machine": m, "load": [load0, load1], "threads": threads,
                              "impls": impls}) + "\n")


def decode_table(rows):
    """The decode jobs' latencies: per new token after the first (median over runs of each run's median)
    and the prefill (the prompt pass and the first new token), ours and PyTorch's."""
    out = ["", "Decoding (one row, greedy, key/value cache): ms per new token after the first, median over runs of each "
           "run's median (range over runs); prefill: the prompt pass and the first new token.", "",
           "| job | context | ours ms/token | PyTorch ms/token | speed-up (PyTorch ms / ours ms) | ours tokens/s | "
           "PyTorch tokens/s | ours prefill ms | PyTorch prefill ms |", "|" + "---|" * 9]
    for job, ctx, g, t in rows:
        def ms(s):
            return f"{s['ms_token']:.2f} ({s['ms_token_lo']:.2f}–{s['ms_token_hi']:.2f})" if s.get("ms_token") else "— (" + s.get("error", "?") + ")"
        both = g.get("ms_token") and t.get("ms_token")
        out.append("| " + " | ".join([
            job, str(ctx), ms(g), ms(t), f"**{t['ms_token'] / g['ms_token']:.2f}**" if both else "—",
            f"{g['tps']:.1f}" if "tps" in g else "—", f"{t['tps']:.1f}" if "tps" in t else "—",
            f"{g['prefill']:.0f}" if g.get("prefill") else "—", f"{t['prefill']:.0f}" if t.get("prefill") else "—"]) + " |")
    return out


def resummarise(path, markdown, fixed_peak=0):
    """Rebuilds the table from a results file written by --out (older files too: no cpu, no
    precision, no onnxruntime)."""
    results, meta = [], {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "summary" in r:
                meta = r
            else:
                results.append(r)
    if not results:
        print(f"{path}: no results", file=sys.stderr)
        return 1
    jobs = list(dict.fromkeys(r["job"] for r in results))
    runs = max(r.get("run", 0) for r in results) + 1
    loads = meta.get("load", [[float("nan")] * 3, [float("nan")] * 3])
    threads = meta.get("threads", results[0].get("threads"))
    summarise(results, jobs, runs, threads, meta.get("machine", {}), loads, markdown, fixed_peak=fixed_peak,
              impls=meta.get("impls"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
