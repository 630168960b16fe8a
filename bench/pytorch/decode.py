"""The PyTorch twin of `roformer bench --mode decode`: Hugging Face's own RoFormerForCausalLM.generate.

    /usr/bin/python3 bench/pytorch/decode.py --hf-src /tmp/hf/transformers-src:/tmp/hf/hub-src:/tmp/hf/stubs \\
        --size small --batch 1 --seq 512 --new-tokens 32 --threads 2 --json

It needs Hugging Face transformers (4.30.2) importable: from --hf-src (folders separated by ':',
put in front of sys.path) or from PYTHONPATH. transformers cannot be pip-installed here, so it runs
from a scratch folder outside the repository (bench/pytorch/README.md, "Decoding": how to make it).
None of HF's code is in this repository.

The job: RoFormerForCausalLM of a --size preset (the sizes of bench.py / `roformer bench`;
random initialisation by HF's _init_weights under torch.manual_seed(--seed), is_decoder=True),
max_position_embeddings raised to cover the prompt and the new tokens (HF's sinusoid table is
a lookup that refuses positions past it; the Go side's rotary has no such limit), a prompt of
--seq random ids, then per timed run

    model.generate(input_ids, attention_mask=ones, max_new_tokens=N, do_sample=False, use_cache=True)

(greedy search with the key/value cache) under --threads threads. A LogitsProcessor that changes
nothing notes the time of every step (it is called right after each forward pass): the prefill is
the time from the call to the first step's logits (the prompt pass, whose LM head HF runs on every
prompt position), and each later new token's latency is the time between two consecutive steps'
logits (a whole step: arg-max, input preparation, the one-token forward with the cache, the LM
head). The JSON line has the keys of the Go decode job.

The weights are not the Go side's: both are random with the same shapes and initialiser (normal,
std 0.02) but different generators, which does not change the speed of a dense fp32 model.
"""

import argparse
import os
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hf-src", default="", help="folders holding transformers (and huggingface_hub, stubs), ':'-separated")
    p.add_argument("--size", required=True, choices=["tiny", "small", "base"])
    p.add_argument("--mode", default="decode", choices=["decode"], help="accepted for roformer bench's command line")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=64, help="the prompt's length (the context)")
    p.add_argument("--new-tokens", type=int, default=32, help="new tokens per row (at least 2)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=5, help="timed generate runs")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--peak-gflops", type=float, default=0.0, help="peak for MFU; 0 measures torch.mm on all threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="end the output with one JSON line")
    a = p.parse_args(argv)
    if min(a.batch, a.seq, a.steps, a.threads) < 1 or a.warmup < 0 or a.new_tokens < 2 or a.peak_gflops < 0:
        p.error("--batch, --seq, --steps, --threads must be >= 1, --new-tokens >= 2, --warmup >= 0, --peak-gflops >= 0")
    return a


ARGS = parse_args(sys.argv[1:])
import torch_env  # noqa: E402  (bench/pytorch, the script's folder)

torch_env.prepare(ARGS.threads)
for _d in reversed([d for d in ARGS.hf_src.split(os.pathsep) if d]):
    sys.path.insert(0, os.path.abspath(_d))


import json  # noqa: E402
import statistics  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roformer_torch import SIZES  # noqa: E402  (the presets, shared with bench.py)

try:
    import transformers  # noqa: E402
    from transformers import LogitsProcessor, LogitsProcessorList, RoFormerConfig, RoFormerForCausalLM  # noqa: E402
except ImportError as e:
    sys.exit(f"decode.py: cannot import Hugging Face transformers ({e}); give its src folder with --hf-src "
             f"(bench/pytorch/README.md, 'Decoding')")


def decode_flops(layers, H, I, E, V, B, T, n):
    """cmd/roformer's decodeFLOPs: one new token per row, attention over the mean cached length T + n/2."""
    keys = T + n / 2
    f = 2 * B * E * H if E != H else 0.0
    f += layers * (4 * 2 * B * H * H + 2 * 2 * B * H * I + 2 * 2 * B * keys * H)
    return f + 2 * B * H * E + 2 * B * E * V


class StepClock(LogitsProcessor):
    """Notes the time of every generation step; leaves the scores alone."""

    def __init__(self):
        self.times = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def main(a):
    torch.set_num_threads(a.threads)
    start_rss = torch_env.peak_rss()
    layers, hidden, heads, inter, vocab = SIZES[a.size]
    B, T, N = a.batch, a.seq, a.new_tokens
    cfg = RoFormerConfig(vocab_size=vocab, embedding_size=hidden, hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu",
                         max_position_embeddings=max(512, T + N), is_decoder=True, pad_token_id=0)
    torch.manual_seed(a.seed)
    model = RoFormerForCausalLM(cfg).eval()
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    # The sinusoid table is a frozen nn.Embedding in HF: not a parameter on the Go side.
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed_positions" not in n)
    g = torch.Generator().manual_seed(a.seed)
    lo = min(5, vocab - 1)
    ids = torch.randint(lo, vocab, (B, T), generator=g)
    mask = torch.ones_like(ids)
    flops = decode_flops(layers, hidden, inter, hidden, vocab, B, T, N)
    if a.peak_gflops:
        peak, peak_src = a.peak_gflops, "given (--peak-gflops)"
    else:
        peak, peak_src = torch_env.probe_peak(a.threads)
    print(f"pytorch decode: {a.size}, batch {B}, context {T}, {N} new tokens, {torch.get_num_threads()} threads; "
          f"{n_params / 1e6:.1f}M parameters; transformers {transformers.__version__}", file=sys.stderr)

    def run():
        clock = StepClock()
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=N, do_sample=False, num_beams=1, use_cache=True,
                             logits_processor=LogitsProcessorList([clock]))
        if out.shape != (B, T + N) or len(clock.times) != N:
            raise SystemExit(f"decode.py: generate gave {tuple(out.shape)} after {len(clock.times)} steps, want {(B, T + N)} after {N}")
        ts = clock.times
        return (ts[0] - t0) * 1e3, [(ts[k] - ts[k - 1]) * 1e3 for k in range(1, N)]

    for _ in range(a.warmup):
        run()
    tokens, prefills = [], []
    for i in range(a.steps):
        prefill, lat = run()
        tokens += lat
        prefills.append(prefill)
        print(f"  run {i + 1}/{a.steps}: prefill {prefill:.1f} ms, median {statistics.median(lat):.2f} ms per new token",
              file=sys.stderr)
    med = statistics.median(tokens)
    res = dict(
        impl="pytorch", mode="decode", size=a.size, head="causal-lm", precision="fp32", batch=B, seq=T,
        threads=torch.get_num_threads(), blas=torch_env.blas_name(), params=n_params, steps=a.steps, warmup=a.warmup,
        tokens_per_sec=B / (med / 1e3), ms_per_step=med, ms_min=min(tokens), ms_max=max(tokens), ms_steps=tokens,
        flops_per_step=flops, gflops=flops / (med / 1e3) / 1e9, peak_gflops=peak, peak_source=peak_src,
        peak_rss_bytes=torch_env.peak_rss(), start_rss_bytes=start_rss, head_rows=B,
        new_tokens=N, context=T, prefill_ms=statistics.median(prefills), prefill_ms_runs=prefills, ms_per_token=med,
        decode_timing="per step (a LogitsProcessor's timestamps)",
        transformers=transformers.__version__,
        env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT",
                                              "OPENBLAS_CORETYPE")},
        note=(f"decode: HF transformers {transformers.__version__} RoFormerForCausalLM.generate(max_new_tokens={N}, do_sample=False, "
              f"use_cache=True), prompt of {T} random ids (random weights, not the Go side's), max_position_embeddings "
              f"{cfg.max_position_embeddings}; a step is one new token per row after the first (the first comes from the "
              f"prompt pass: prefill_ms); FLOPs count only matrix products (2*M*N*K, attention QK^T and PV included)"),
    )
    res["mfu"] = res["gflops"] / peak
    print(f"job:        {a.size} decode, batch {B}, context {T}, {N} new tokens, {res['threads']} threads, {res['blas']}")
    print(f"prefill:    median {res['prefill_ms']:.1f} ms over {a.steps} runs (prompt pass, LM head on every prompt position)")
    print(f"per token:  median {med:.2f} ms over {len(tokens)} new tokens (min {res['ms_min']:.2f}, max {res['ms_max']:.2f})")
    print(f"throughput: {res['tokens_per_sec']:.1f} tokens/s, {res['gflops']:.2f} GFLOP/s ({flops / 1e9:.3g} GFLOP per step)")
    print(f"MFU:        {100 * res['mfu']:.1f}% of {peak:.1f} GFLOP/s, {peak_src}")
    print(f"peak RSS:   {res['peak_rss_bytes'] / 2**20:.1f} MiB ({start_rss / 2**20:.1f} MiB at start, after importing torch)")
    print(f"note:       {res['note']}")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main(ARGS)
