"""What bench.py and decode.py share: PyTorch's thread settings (to apply before torch is imported)
and the measurements every result carries (peak RSS, the BLAS in use, an SGEMM probe).

torch itself is imported inside the functions that need it, so that `prepare` can run first.
"""

import os
import resource
import time


def zen4():
    """True on AMD family 19h with AVX-512F (Zen 4), where OpenBLAS's Zen kernels measured fastest for PyTorch."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().split("\n\n")[0]
    except OSError:
        return False
    fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in info.splitlines()))
    return (fields.get("vendor_id") == "AuthenticAMD" and fields.get("cpu family") == "25"
            and "avx512f" in fields.get("flags", "").split())


def prepare(threads):
    """Sets PyTorch's thread environment unless already set (bench.py's docstring says why each matters on
    2 cores). Call it before torch is imported."""
    for k, v in (("OMP_NUM_THREADS", str(threads)), ("OPENBLAS_NUM_THREADS", str(threads)),
                 ("OMP_WAIT_POLICY", "PASSIVE"), ("OPENBLAS_THREAD_TIMEOUT", "4")):
        os.environ.setdefault(k, v)
    if zen4():
        os.environ.setdefault("OPENBLAS_CORETYPE", "Zen")


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def blas_name():
    import torch
    cfg = torch.__config__.show()
    info = next((s.split("=", 1)[1] for s in cfg.replace(",", " ").split() if s.startswith("BLAS_INFO=")), "?")
    lib = ""
    for cand in ("/usr/lib/x86_64-linux-gnu/libblas.so.3", "/usr/lib/aarch64-linux-gnu/libblas.so.3"):
        if os.path.exists(cand):
            lib = " -> " + os.path.realpath(cand)
            break
    return f"torch {torch.__version__} BLAS_INFO={info}{lib}"


def probe_peak(threads):
    """torch.mm of [threads*512, 1024] x [1024, 1024] (the same work as the Go probe), best round of ~0.4 s."""
    import torch
    g = torch.Generator().manual_seed(7)
    a = torch.rand(threads * 512, 1024, generator=g) - 0.5
    b = torch.rand(1024, 1024, generator=g) - 0.5
    c = torch.empty(threads * 512, 1024)
    torch.mm(a, b, out=c)
    best, reps, t_end = float("inf"), 0, time.perf_counter() + 0.4
    while reps < 3 or (time.perf_counter() < t_end and reps < 50):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
        reps += 1
    flops = 2.0 * threads * 512 * 1024 * 1024
    return flops / best / 1e9, f"measured: best of {reps} rounds of torch.mm [{threads * 512}x1024]x[1024x1024] on {threads} threads"
