#!/usr/bin/env bash
# Measures data-parallel pretraining on this machine and writes
# docs/distributed/results.json (docs/distributed.md reads its numbers from
# there):
#   - tokens/s of the tiny preset, 16 × 128 tokens a step, one process with
#     2 threads (--batch 8 --accum 2) against 2 ranks with 1 thread each
#     (mpirun -np 2, --batch 8), over shared memory and over TCP on loopback
#     (--mca btl tcp,self: the simulated two-host run), RUNS alternating rounds;
#   - the CPU time of a step (all processes, user + system): the CPU time of
#     the STEPS-step run less that of a 1-step run, over STEPS − 1, which
#     the other jobs of a shared machine do not inflate as they do wall time;
#   - the gradient allreduce alone (distributed's BenchmarkAllreduceMPI) over both;
#   - a ring-allreduce model of the efficiency at 8 and 64 nodes on 10 and
#     100 Gb/s, from the measured step time and bytes per step.
# Usage: docs/distributed/measure.sh [STEPS] [RUNS]   (defaults 30 and 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-30}
RUNS=${2:-2}
OUT=docs/distributed/results.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/roformer" ./cmd/roformer
go test -c -o "$work/dist.test" ./distributed
MPI=(mpirun --allow-run-as-root --oversubscribe)
COMMON=(pretrain --size tiny --seq 128 --seed 1 --eval-every 0 --save-every 0 --log-every 10 --quiet)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)

# cpu CMD...: runs CMD and prints the CPU seconds (user + system) of it and
# every process it waited for (mpirun waits for its ranks).
cpu() {
  /usr/bin/time -f '%U %S' -o "$work/time" "$@" >/dev/null
  awk '{print $1 + $2}' "$work/time"
}

# run NAME CMD...: one training run of STEPS steps and one of 1 step;
# appends {name, round, tokens/s of the records after the first (warm-up),
# s/step in the gradient allreduce and waiting for the other rank before
# it, CPU s/step, wall s} to runs.jsonl.
run() {
  local name=$1 round=$2; shift 2
  local dir="$work/$name-$round" t0 t1 c1 cn
  c1=$(cpu "$@" --steps 1 --out "$dir-1" 2>"$work/$name-$round-1.log") || { cat "$work/$name-$round-1.log"; exit 1; }
  t0=$(date +%s.%N)
  cn=$(cpu "$@" --out "$dir" 2>"$work/$name-$round.log") || { cat "$work/$name-$round.log"; exit 1; }
  t1=$(date +%s.%N)
  jq -s --arg name "$name" --argjson round "$round" --argjson wall "$(awk "BEGIN {printf \"%.3f\", $t1 - $t0}")" \
    --argjson cpu_step "$(awk "BEGIN {printf \"%.4f\", ($cn - $c1) / ($STEPS - 1)}")" --argjson cpu_run "$cn" '
    [.[] | select(.loss != null)] as $r | ($r[1:]) as $w |
    {name: $name, round: $round, wall_s: $wall, cpu_s: $cpu_run, cpu_s_per_step: $cpu_step, world_size: $r[0].world_size,
     tokens_per_sec: (($w | map(.tokens_per_sec) | add) / ($w | length)),
     allreduce_sec_per_step: (if $w[0].allreduce_sec then (($w | map(.allreduce_sec) | add) / ($w | length)) else null end),
     allreduce_wait_sec_per_step: (if $w[0].allreduce_wait_sec then (($w | map(.allreduce_wait_sec) | add) / ($w | length)) else null end),
     final_loss: $r[-1].loss}' "$dir/metrics.jsonl" >>"$work/runs.jsonl"
}
for round in $(seq 1 "$RUNS"); do
  run one-process-2-threads "$round" "$work/roformer" "${COMMON[@]}" --batch 8 --accum 2 --threads 2 --steps "$STEPS"
  run two-ranks-shm "$round" "${MPI[@]}" -np 2 "$work/roformer" "${COMMON[@]}" --batch 8 --threads 1 --steps "$STEPS"
  run two-ranks-tcp-loopback "$round" "${MPI[@]}" --mca btl tcp,self -np 2 "$work/roformer" "${COMMON[@]}" --batch 8 --threads 1 --steps "$STEPS"
done

# The allreduce alone: ns per call for 2^16, 2^20 and 5,282,368 values.
# Each rank writes its own file (--output-filename): through mpirun's one
# stream the two ranks' benchmark lines interleave (Go prints a benchmark's
# name before running it), which once paired names with the wrong numbers.
bench() {
  local dir
  dir=$(mktemp -d -p "$work")
  "${MPI[@]}" "$@" --output-filename "$dir" -np 2 "$work/dist.test" -test.run '^$' -test.bench AllreduceMPI -test.benchtime 20x >/dev/null 2>&1
  cat "$dir"/*/rank.*/stdout |
    awk '/^BenchmarkAllreduceMPI/ {split($1, a, "/n"); sub(/-[0-9]+$/, "", a[2]); print a[2], $3}' |
    jq -R -s 'split("\n") | map(select(length > 0) | split(" ") | {values: (.[0] | tonumber), ns_per_op: (.[1] | tonumber)}) |
      group_by(.values) | map({values: .[0].values, bytes: (.[0].values * 4), ms_per_allreduce: ((map(.ns_per_op) | max) / 1e6)})'
}
bench >"$work/bench-shm.json"
bench --mca btl tcp,self >"$work/bench-tcp.json"

end=$(date +%s)
jq -n --slurpfile runs "$work/runs.jsonl" --slurpfile shm "$work/bench-shm.json" --slurpfile tcp "$work/bench-tcp.json" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores)" \
  --arg commit "$(git rev-parse --short HEAD)" --arg date "$(date -u +%Y-%m-%dT%H:%MZ)" \
  --arg mpi "$(mpirun --version | head -1)" --arg load0 "$load0" --arg load1 "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --argjson steps "$STEPS" --argjson wall "$((end - start))" '
  # Parameters of the tiny and base presets with the 8,000-token vocabulary
  # (BERT layout: per layer 4H²+4H + 2HI+I+H + 4H; embeddings VH+2H+2H; MLM head H²+H+2H+V).
  def params(H; I; L; V): L * (4*H*H + 4*H + 2*H*I + I + H + 4*H) + V*H + 4*H + H*H + 3*H + V;
  def mean(f): (map(f) | add) / length;
  ($runs | group_by(.name) | map({key: .[0].name, value: {tokens_per_sec: mean(.tokens_per_sec), runs: map(.tokens_per_sec),
     step_sec: ((16 * 128) / mean(.tokens_per_sec)),
     cpu_s_per_step: mean(.cpu_s_per_step), tokens_per_cpu_sec: ((16 * 128) / mean(.cpu_s_per_step)),
     allreduce_sec_per_step: (if .[0].allreduce_sec_per_step then mean(.allreduce_sec_per_step) else null end),
     allreduce_wait_sec_per_step: (if .[0].allreduce_wait_sec_per_step then mean(.allreduce_wait_sec_per_step) else null end)}}) | from_entries) as $s |
  (16 * 128) as $tokens_per_step |
  # One 8 x 128 micro-batch on an idle 2-core node: the CPU time of a
  # 16 x 128 step in one process, over 2 micro-batches and 2 cores.
  ($s["one-process-2-threads"].cpu_s_per_step / 4) as $micro_s |
  {
    cpu: $cpu, commit: $commit, date: $date, mpi: $mpi, wall_seconds: $wall,
    load_average_before: $load0, load_average_after: $load1,
    note: "shared 2-core machine with other jobs running (see the load averages): expect noise of tens of percent",
    job: {preset: "tiny", vocab: 8000, params: params(256; 1024; 4; 8000), steps: $steps,
          step: "16 x 128 tokens: --batch 8 --accum 2 in one process, --batch 8 on each of 2 ranks",
          tokens_per_sec: "mean over the metrics records after the first (steps 11 and on)"},
    runs: $runs, summary: $s,
    speedup_two_ranks_shm: ($s["two-ranks-shm"].tokens_per_sec / $s["one-process-2-threads"].tokens_per_sec),
    speedup_two_ranks_tcp: ($s["two-ranks-tcp-loopback"].tokens_per_sec / $s["one-process-2-threads"].tokens_per_sec),
    cpu_ratio_two_ranks_shm: ($s["two-ranks-shm"].cpu_s_per_step / $s["one-process-2-threads"].cpu_s_per_step),
    cpu_ratio_two_ranks_tcp: ($s["two-ranks-tcp-loopback"].cpu_s_per_step / $s["one-process-2-threads"].cpu_s_per_step),
    gradient_bytes_per_step: (4 * params(256; 1024; 4; 8000)),
    allreduce_bench: {shared_memory: $shm[0], tcp_loopback: $tcp[0]},
    model: (
      [{preset: "tiny", p: params(256; 1024; 4; 8000), micro_s: $micro_s, measured: true},
       {preset: "base", p: params(768; 3072; 12; 8000), measured: false,
        # compute scaled by the parameters outside the embeddings (6·P FLOPs a token)
        micro_s: ($micro_s * ((params(768; 3072; 12; 8000) - 8000*768) / (params(256; 1024; 4; 8000) - 8000*256)))}]
      | map(. as $m | {preset: .preset, params: .p, gradient_bytes: (4 * .p),
          compute_s_per_step: .micro_s, compute_measured: .measured,
          nodes: [ (8, 64) as $n | (10, 100) as $gbps |
            (2 * ($n - 1) / $n * 4 * $m.p / ($gbps * 1e9 / 8) + 2 * ($n - 1) * 50e-6) as $t |
            {nodes: $n, gbps: $gbps, allreduce_s: $t,
             efficiency_no_overlap: ($m.micro_s / ($m.micro_s + $t)),
             efficiency_full_overlap: ($m.micro_s / ([$m.micro_s, $t] | max))}]})),
    model_assumptions: "each node is this 2-core machine, idle, computing one 8 x 128 micro-batch a step (the measured CPU time of a 16 x 128 step in one process, over 2 micro-batches and 2 cores); ring allreduce of float32 gradients: 2(N-1)/N x bytes / link rate + 2(N-1) x 50 us latency; full link rate, no compression; base compute scaled from tiny by parameters outside the embeddings"
  }' >"$OUT"
echo "wrote $OUT"
