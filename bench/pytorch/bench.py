"""The PyTorch twin of `roformer bench`: the same job, the same sizes, the same JSON keys.

    /usr/bin/python3 bench/pytorch/bench.py --size base --batch 8 --seq 128 --mode infer --threads 2 --json
    /usr/bin/python3 bench/pytorch/bench.py --size base --batch 8 --seq 128 --precision int8 --threads 2 --json

inference: model.eval() under torch.no_grad(), full [B, T, V] MLM logits (as `roformer bench`).
int8:      inference only: torch.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
           on the quantized engine 'onednn' where this torch has it (Debian's 1.13: onednn and qnnpack,
           no fbgemm), else 'fbgemm', else 'qnnpack'; the JSON's quant_engine says which. Every nn.Linear
           (q, k, v, attention output, both feed-forward products, the head's transform) gets int8
           weights (per tensor, symmetric) and quantizes its input per call; the tied decoder
           (F.linear on the word embeddings, the [H -> V] product) and the attention products q k^T
           and probs v stay float32. FLOPs and MFU are counted as for fp32 (against the fp32 probe).
training:  model.train() (dropout 0.1), zero_grad, encoder forward, MLM head and cross-entropy on
           the round(0.15 * B * T) labelled tokens only (as the Go side does; --head-rows all runs
           the head on every token as HF's RoFormerForMaskedLM does), backward, torch.optim.AdamW
           step (lr 1e-4, weight decay 0.01 except biases and LayerNorm weights).

Threads. PyTorch's own kernels use OpenMP and its matrix products go to the BLAS it was built
with (Debian's python3-torch: BLAS_INFO=generic, i.e. libblas.so.3, which is OpenBLAS
(pthreads) here), which has its own thread pool. So three settings matter, all applied before
torch is imported unless already set in the environment:
    OMP_NUM_THREADS=N, torch.set_num_threads(N)   PyTorch's element-wise / softmax / LayerNorm work
    OPENBLAS_NUM_THREADS=N                         the matrix products
    OMP_WAIT_POLICY=PASSIVE                        idle OpenMP threads sleep instead of spinning,
                                                   so they do not steal the cores from OpenBLAS's
                                                   threads (on 2 cores spinning costs a lot)
    OPENBLAS_THREAD_TIMEOUT=4                      likewise for OpenBLAS's idle threads, which
                                                   otherwise spin in sched_yield after each product
                                                   while OpenMP does the element-wise work
                                                   (measured: 5-10% faster on 2 cores)
    OPENBLAS_CORETYPE=Zen, on AMD Zen 4 only          the kernel set the Go side asked for there until it
                                                   chose its backend by measurement: OpenBLAS 0.3.21 takes Zen 4
                                                   for an Intel Cooperlake; PyTorch measured the same
                                                   either way (774-793 against 761-796 tokens/s,
                                                   base 8x128), so both sides use the same kernels
The JSON line records the values in effect.
"""

import argparse
import os
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--size", choices=["tiny", "small", "base"], help="random-initialised preset (as roformer bench)")
    g.add_argument("--model", help="HF model folder (config.json + model.safetensors or pytorch_model.bin)")
    p.add_argument("--head", default="masked-lm", choices=["masked-lm", "base"])
    p.add_argument("--mode", default="infer", choices=["infer", "train"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "int8"],
                   help="int8: dynamic int8 quantization of every nn.Linear (inference only)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=5, help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--peak-gflops", type=float, default=0.0, help="peak for MFU; 0 measures torch.mm on all threads")
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--head-rows", default="labelled", choices=["labelled", "all"],
                   help="training: run the MLM head on the labelled rows only (as the Go side) or on all rows (as HF)")
    p.add_argument("--json", action="store_true", help="end the output with one JSON line")
    a = p.parse_args(argv)
    if a.mode == "train" and a.head != "masked-lm":
        p.error("--mode train needs --head masked-lm")
    if a.mode == "train" and a.precision != "fp32":
        p.error("--precision int8 is for --mode infer only (dynamic quantization has no backward)")
    if min(a.batch, a.seq, a.steps, a.threads) < 1 or a.warmup < 0 or not (0 < a.mask_prob <= 1) or a.peak_gflops < 0:
        p.error("--batch, --seq, --steps, --threads must be >= 1, --warmup >= 0, --mask-prob in (0, 1], --peak-gflops >= 0")
    return a


ARGS = parse_args(sys.argv[1:])
import torch_env  # noqa: E402  (bench/pytorch, the script's folder)

torch_env.prepare(ARGS.threads)

import statistics  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roformer_torch as rt  # noqa: E402


def quantize_int8(model, ids):
    """Dynamic int8 quantization of every nn.Linear, in place (no second copy of the weights in the
    peak RSS). Returns (model, the quantized engine used, how far the int8 logits are from the fp32
    ones on the first row's first 64 tokens of ids: max abs diff, and the share of equal arg-maxes)."""
    engines = torch.backends.quantized.supported_engines
    engine = next((e for e in ("onednn", "fbgemm", "qnnpack") if e in engines), None)
    if engine is None:
        raise SystemExit(f"bench.py: --precision int8: this torch has no quantized engine (supported: {engines})")
    torch.backends.quantized.engine = engine  # before quantize_dynamic, which packs the weights for it
    probe = ids[:1, :64]
    model.eval()
    with torch.no_grad():
        want = model(probe)[1]
        model = torch.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        got = model(probe)[1]
    check = {"tokens": probe.numel(), "max_abs_diff": (got - want).abs().max().item(),
             "max_abs_fp32": want.abs().max().item(),
             "argmax_agreement": (got.argmax(-1) == want.argmax(-1)).float().mean().item()}
    return model, engine, check


def main(a):
    torch.set_num_threads(a.threads)
    start_rss = torch_env.peak_rss()
    torch.manual_seed(a.seed)
    if a.model:
        model, _ = rt.load_mlm(a.model)
        size = "model:" + a.model
    else:
        model = rt.RoFormerForMaskedLM(rt.Config.preset(a.size))
        model.init_weights(a.seed)
        size = a.size
    c = model.config
    B, T = a.batch, a.seq
    BT = B * T
    g = torch.Generator().manual_seed(a.seed)
    lo = min(5, c.vocab_size - 1)
    ids = torch.randint(lo, c.vocab_size, (B, T), generator=g)
    head_rows = BT if a.head == "masked-lm" else 0
    if a.mode == "train":
        # round(mask_prob * BT) half away from zero, at least 1: the Go side's count.
        head_rows = max(1, min(BT, int(a.mask_prob * BT + 0.5)))
        pos = torch.randperm(BT, generator=g)[:head_rows].sort().values
        targets = torch.randint(lo, c.vocab_size, (head_rows,), generator=g)
        labels = torch.full((BT,), -100, dtype=torch.long)
        labels[pos] = targets
        labels = labels.view(B, T)
    flops = rt.model_flops(c, a.head, B, T, head_rows) * (3 if a.mode == "train" else 1)
    n_params = sum(p.numel() for p in model.parameters())  # before quantization, which hides Linear weights
    quant_engine = int8_check = None
    if a.precision == "int8":
        model, quant_engine, int8_check = quantize_int8(model, ids)

    if a.peak_gflops:
        peak, peak_src = a.peak_gflops, "given (--peak-gflops)"
    else:
        peak, peak_src = torch_env.probe_peak(a.threads)
    print(f"pytorch bench: {size} {a.head} {a.mode} {a.precision}, batch {B} x seq {T}, {torch.get_num_threads()} threads; "
          f"{n_params / 1e6:.1f}M parameters" + (f"; int8 engine {quant_engine}" if quant_engine else ""), file=sys.stderr)

    last_loss = [None]
    if a.mode == "infer":
        model.eval()

        def step(i):
            with torch.no_grad():
                if a.head == "masked-lm":
                    model(ids)
                else:
                    model.roformer(ids)
    else:
        model.train()
        decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
        no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=a.lr)
        flat_pos = pos

        def step(i):
            opt.zero_grad(set_to_none=True)
            if a.head_rows == "all":
                _, _, loss = model(ids, labels=labels)
            else:
                x = model.roformer(ids)
                logits = model.head(x.reshape(BT, -1)[flat_pos])
                loss = F.cross_entropy(logits, targets)
            loss.backward()
            opt.step()
            last_loss[0] = loss.item()

    for i in range(a.warmup):
        step(i)
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        step(a.warmup + i)
        times.append((time.perf_counter() - t0) * 1e3)
        print(f"  step {i + 1}/{a.steps}: {times[-1]:.1f} ms", file=sys.stderr)
    med = statistics.median(times)
    res = dict(
        impl="pytorch", mode=a.mode, size=size, head=a.head, precision=a.precision, batch=B, seq=T,
        threads=torch.get_num_threads(), blas=torch_env.blas_name(), quant_engine=quant_engine, int8_vs_fp32=int8_check,
        params=n_params, steps=a.steps, warmup=a.warmup,
        tokens_per_sec=BT / (med / 1e3), ms_per_step=med, ms_min=min(times), ms_max=max(times), ms_steps=times,
        flops_per_step=flops, gflops=flops / (med / 1e3) / 1e9, peak_gflops=peak, peak_source=peak_src,
        peak_rss_bytes=torch_env.peak_rss(), start_rss_bytes=start_rss,
        head_rows=BT if (a.mode == "train" and a.head_rows == "all") else head_rows,
        env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT",
                                              "OPENBLAS_CORETYPE")},
    )
    res["mfu"] = res["gflops"] / peak
    if last_loss[0] is not None:
        res["loss"] = last_loss[0]
    if a.mode == "infer":
        res["note"] = "inference: eval() + torch.no_grad(), " + ("full [B,T,V] logits" if a.head == "masked-lm" else "last hidden state only")
        if quant_engine:
            res["note"] += (f"; int8: quantize_dynamic of every nn.Linear on the {quant_engine} engine, the tied decoder "
                            f"[H->V] and attention products in float32; MFU against the fp32 probe")
    else:
        res["note"] = (f"training: zero_grad + forward (dropout on) + backward + torch.optim.AdamW step; MLM loss on "
                       f"{head_rows} of {BT} tokens ({100 * a.mask_prob:.0f}%), LM head run on "
                       + ("those rows only" if a.head_rows == "labelled" else "every row (HF's way; FLOPs still count the labelled rows)")
                       + "; FLOPs = 3 x forward")
    res["note"] += "; FLOPs count only matrix products (2*M*N*K, attention QK^T and PV included)"
    if T > c.max_position_embeddings:
        res["note"] += f"; seq {T} > max_position_embeddings {c.max_position_embeddings}: rotary table extended (HF would refuse)"

    print(f"job:        {size} {a.head} {a.mode} {a.precision}, batch {B} x seq {T}, {res['threads']} threads, {res['blas']}"
          + (f", int8 engine {quant_engine}" if quant_engine else ""))
    print(f"steps:      {a.steps} timed after {a.warmup} warm-up: median {med:.1f} ms (min {res['ms_min']:.1f}, "
          f"max {res['ms_max']:.1f}, spread {100 * (res['ms_max'] - res['ms_min']) / med:.1f}%)")
    print(f"throughput: {res['tokens_per_sec']:.1f} tokens/s, {res['gflops']:.2f} GFLOP/s ({flops / 1e9:.3g} GFLOP per step)")
    print(f"MFU:        {100 * res['mfu']:.1f}% of {peak:.1f} GFLOP/s, {peak_src}")
    if int8_check:
        print(f"int8:       logits of {int8_check['tokens']} tokens against fp32: max abs diff {int8_check['max_abs_diff']:.3g} "
              f"(largest |logit| {int8_check['max_abs_fp32']:.3g}), arg-max agrees on {100 * int8_check['argmax_agreement']:.0f}%")
    print(f"peak RSS:   {res['peak_rss_bytes'] / 2**20:.1f} MiB ({start_rss / 2**20:.1f} MiB at start, after importing torch)")
    if "loss" in res:
        print(f"loss:       {res['loss']:.4f} after the last step")
    print(f"threads:    torch {res['threads']}, env {res['env']}")
    print(f"note:       {res['note']}")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main(ARGS)
