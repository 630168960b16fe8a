"""Runs the same benchmark jobs in Go (`roformer bench`) and in PyTorch (bench/pytorch/bench.py),
alternating, on the same machine with the same threads, and reports medians and ratios.

Usually started through bench/side_by_side.sh, which builds the Go binary first:

    /usr/bin/python3 bench/side_by_side.py --roformer /tmp/roformer [--threads 2] [--runs 3]
        [--jobs infer-base-8x128,infer-base-1x512,train-small-16x128,infer-base-1x4096]
        [--out results.jsonl] [--markdown table.md]

Each job runs --runs times per implementation, the two implementations taking turns and
swapping who goes first on every run (Go, PyTorch; PyTorch, Go; ...), so that slow drifts in
the machine's load hit both alike. Every run is a fresh process; its last stdout line is the
JSON result. Reported per job: the median over runs of each side's tokens/s (each run already
reports the median of its timed steps), the range over runs, the ratio ours/PyTorch, the ratio
of the fastest single steps (less sensitive to other load on a shared machine), MFU of both
(each run's GFLOP/s over its own SGEMM probe, or over --peak), and the peak RSS of both processes.

    /usr/bin/python3 bench/side_by_side.py --from results.jsonl     rebuilds the table
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here, not in the default pyenv python

# name: (size, mode, batch, seq, steps, warmup)
JOBS = {
    "infer-base-8x128": ("base", "infer", 8, 128, 5, 1),
    "infer-base-1x512": ("base", "infer", 1, 512, 5, 1),
    "train-small-16x128": ("small", "train", 16, 128, 5, 1),
    # ~100 s per step at the baseline: two timed steps, no warm-up (the first-touch cost of
    # ~2 GB is well under 1% of a step).
    "infer-base-1x4096": ("base", "infer", 1, 4096, 2, 0),
}


def job_args(job):
    size, mode, batch, seq, steps, warmup = JOBS[job]
    return ["--size", size, "--mode", mode, "--head", "masked-lm", "--batch", str(batch), "--seq", str(seq),
            "--steps", str(steps), "--warmup", str(warmup), "--json"]


def run_one(impl, job, a):
    threads = str(a.threads)
    if impl == "go":
        cmd = [a.roformer, "bench", "--threads", threads, "--quiet"] + job_args(job)
        env = dict(os.environ)
    else:
        cmd = [PYTHON, os.path.join(HERE, "pytorch", "bench.py"), "--threads", threads] + job_args(job)
        # PyTorch at its best on these machines: idle OpenMP and OpenBLAS threads sleep
        # instead of spinning (see bench/pytorch/README.md).
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, OMP_WAIT_POLICY="PASSIVE",
                   OPENBLAS_THREAD_TIMEOUT=os.environ.get("OPENBLAS_THREAD_TIMEOUT", "4"))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return {"impl": impl, "job": job, "error": f"timed out after {a.timeout} s", "cmd": cmd}
    wall = time.time() - t0
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"impl": impl, "job": job, "error": f"exit {p.returncode}: {' | '.join(tail)}", "cmd": cmd}
    try:
        r = json.loads(lines[-1])
    except json.JSONDecodeError as e:
        return {"impl": impl, "job": job, "error": f"last line is not JSON: {e}", "cmd": cmd}
    r.update(impl=impl, impl_name=r.get("impl"), job=job, wall_s=wall, cmd=cmd)
    return r


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
    return info


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--roformer", help="the Go binary (cmd/roformer); required unless --from")
    p.add_argument("--from", dest="from_file", help="only rebuild the table from a results file written by --out")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", default=",".join(JOBS))
    p.add_argument("--timeout", type=int, default=1200, help="seconds per benchmark process")
    p.add_argument("--out", help="append every run's JSON result here (one per line)")
    p.add_argument("--markdown", help="also write the table here")
    p.add_argument("--peak", type=float, default=0, help="GFLOP/s for MFU instead of the best probe of the session")
    p.add_argument("--revision", default="", help="the source revision measured (side_by_side.sh passes git describe)")
    a = p.parse_args(argv)
    if a.from_file:
        return resummarise(a.from_file, a.markdown, a.peak)
    if not a.roformer:
        p.error("--roformer is required")
    jobs = a.jobs.split(",")
    for j in jobs:
        if j not in JOBS:
            p.error(f"unknown job {j!r} (valid: {', '.join(JOBS)})")

    m = machine()
    load0 = os.getloadavg()
    results = []
    out = open(a.out, "a") if a.out else None
    for job in jobs:
        skip_torch = False
        for run in range(a.runs):
            order = ("go", "pytorch") if run % 2 == 0 else ("pytorch", "go")
            for impl in order:
                if impl == "pytorch" and skip_torch:
                    continue
                r = run_one(impl, job, a)
                r["run"] = run
                results.append(r)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                if "error" in r:
                    print(f"{job} run {run + 1} {impl}: FAILED: {r['error']}", file=sys.stderr)
                    if impl == "pytorch":
                        skip_torch = True  # out of memory or too slow: Go only for this job
                else:
                    print(f"{job} run {run + 1} {impl}: {r['tokens_per_sec']:.1f} tokens/s, {r['ms_per_step']:.1f} ms/step, "
                          f"peak RSS {mib(r['peak_rss_bytes'])}, probe {r['peak_gflops']:.0f} GFLOP/s", file=sys.stderr)
    load1 = os.getloadavg()

    m["revision"] = a.revision
    summarise(results, jobs, a.runs, a.threads, m, (load0, load1), a.markdown, out, a.peak)
    if out:
        out.close()
    return 0 if any("error" not in r for r in results) else 1


def summarise(results, jobs, runs, threads, m, loads, markdown=None, out=None, fixed_peak=0):
    """Prints the table of medians and ratios (and writes it to markdown, and a summary line to out)."""
    load0, load1 = loads
    ok = [r for r in results if "error" not in r]
    if not ok:
        print("no run succeeded", file=sys.stderr)
        return
    probes = [r["peak_gflops"] for r in ok]
    peak = fixed_peak
    lines = []
    lines.append(f"Machine: {m.get('Model name', '?')}, {m.get('CPU(s)', '?')} CPUs ({m.get('Core(s) per socket', '?')} cores/socket, "
                 f"{m.get('Thread(s) per core', '?')} thread/core), {m.get('MemTotal', '?')} RAM, flags {m.get('Flags', '?')}; "
                 f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end.")
    if m.get("revision"):
        lines.append(f"Go source: {m['revision']}.")
    probe_txt = (f"SGEMM probes, one per run: best {max(probes):.0f}, median {statistics.median(probes):.0f}, "
                 f"lowest {min(probes):.0f} GFLOP/s")
    if fixed_peak:
        mfu_txt = f"MFU against a given peak of {peak:.0f} GFLOP/s ({probe_txt})."
    else:
        mfu_txt = (f"MFU: median over runs of each run's GFLOP/s divided by its own SGEMM probe, taken seconds "
                   f"before under the same load ({probe_txt}).")
    lines.append(f"Threads: {threads} on both sides. Runs: {runs} per side per job, alternating. {mfu_txt}")
    lines.append("")
    lines.append("tokens/s: median over runs of each run's median step (range over runs); best: from the fastest single step of all runs.")
    lines.append("")
    lines.append("| job | ours tokens/s | PyTorch tokens/s | ratio ours/PyTorch | best ours / best PyTorch (ratio) | ours MFU | PyTorch MFU | ours peak RSS | PyTorch peak RSS | RSS ratio ours/PyTorch |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    summary = []
    for job in jobs:
        side = {}
        for impl in ("go", "pytorch"):
            rs = [r for r in ok if r["job"] == job and r["impl"] == impl]
            errs = [r["error"] for r in results if r["job"] == job and r["impl"] == impl and "error" in r]
            if rs:
                tps = [r["tokens_per_sec"] for r in rs]
                bt = rs[0]["batch"] * rs[0]["seq"]
                side[impl] = dict(
                    tps=statistics.median(tps), lo=min(tps), hi=max(tps), n=len(rs),
                    best=bt / (min(r["ms_min"] for r in rs) / 1e3),
                    ms=statistics.median(r["ms_per_step"] for r in rs),
                    gflops=statistics.median(r["gflops"] for r in rs),
                    mfu=statistics.median(r["mfu"] for r in rs),
                    rss=statistics.median(r["peak_rss_bytes"] for r in rs),
                    flops=rs[0]["flops_per_step"], params=rs[0]["params"])
            else:
                side[impl] = dict(error=errs[0] if errs else "not run")
        g, t = side["go"], side["pytorch"]
        if "tps" in g and "tps" in t and (g["flops"] != t["flops"] or g["params"] != t["params"]):
            print(f"warning: {job}: the two sides ran different models: FLOPs {g['flops']:.0f} vs {t['flops']:.0f}, "
                  f"parameters {g['params']} vs {t['params']}", file=sys.stderr)

        def tps_cell(s):
            return f"{s['tps']:.0f} ({s['lo']:.0f}–{s['hi']:.0f})" if "tps" in s else f"— ({s['error']})"

        both = "tps" in g and "tps" in t
        ratio = f"**{g['tps'] / t['tps']:.2f}**" if both else "—"
        rss_ratio = f"{g['rss'] / t['rss']:.2f}" if both else "—"
        best = f"{g['best']:.0f} / {t['best']:.0f} ({g['best'] / t['best']:.2f})" if both else "—"
        if fixed_peak:
            mfu = lambda s: f"{100 * s['gflops'] / peak:.1f}%" if "gflops" in s else "—"  # noqa: E731
        else:
            mfu = lambda s: f"{100 * s['mfu']:.1f}%" if "mfu" in s else "—"  # noqa: E731
        rss = lambda s: mib(s["rss"]) if "rss" in s else "—"  # noqa: E731
        lines.append(f"| {job} | {tps_cell(g)} | {tps_cell(t)} | {ratio} | {best} | {mfu(g)} | {mfu(t)} | {rss(g)} | {rss(t)} | {rss_ratio} |")
        summary.append({"job": job, "go": g, "pytorch": t, "fixed_peak_gflops": peak or None})
    table = "\n".join(lines)
    print(table)
    if markdown:
        with open(markdown, "w") as f:
            f.write(table + "\n")
    if out:
        out.write(json.dumps({"summary": summary, "machine": m, "load": [load0, load1], "threads": threads}) + "\n")


def resummarise(path, markdown, fixed_peak=0):
    """Rebuilds the table from a results file written by --out."""
    results, meta = [], {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "summary" in r:
                meta = r
            else:
                results.append(r)
    jobs = list(dict.fromkeys(r["job"] for r in results))
    runs = max(r["run"] for r in results) + 1
    loads = meta.get("load", [[float("nan")] * 3, [float("nan")] * 3])
    threads = meta.get("threads", results[0].get("threads"))
    summarise(results, jobs, runs, threads, meta.get("machine", machine()), loads, markdown, fixed_peak=fixed_peak)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
