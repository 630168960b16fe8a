#!/usr/bin/env bash
# bench/embed_scaling.sh: throughput of `roformer embed` in one process with
# 2 threads against 2 MPI ranks with 1 thread each (and one process with 1
# thread, the unit), on the same model and input, alternating, RUNS times.
#
#   bench/embed_scaling.sh MODEL_DIR [LINES] [RUNS] [OUT.json]
#
# The input is the first LINES paragraphs of the built-in corpus
# (data/corpus/builtin.txt.gz), one {"id": i, "text": …} per line, cut to 128
# tokens (--truncate). Each row of OUT.json (default docs/batch-embedding.json)
# holds the wall time and the CPU time (user + system, every process) of the
# whole command (start-up, model load, input check, embedding, merge) and the
# embedding time and rates that the command prints (rank 0: the slowest rank);
# "identical" says whether the output equals the 1-process 1-thread output
# byte for byte. Needs mpirun (Open MPI) for the 2-rank rows.
set -euo pipefail
model=${1:?usage: bench/embed_scaling.sh MODEL_DIR [LINES] [RUNS] [OUT.json]}
lines=${2:-1000}
runs=${3:-3}
out=${4:-docs/batch-embedding.json}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/roformer" ./cmd/roformer
{ zcat data/corpus/builtin.txt.gz || true; } | awk -v n="$lines" '
  index($0, " ") == 0 { next }   # section names such as moby-dick/etymology
  { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, " "); printf "{\"id\": %d, \"text\": \"%s\"}\n", k, $0; if (++k == n) exit }' >"$work/in.jsonl" # zcat dies of SIGPIPE
cpu="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //') (family $(grep -m1 'cpu family' /proc/cpuinfo | sed 's/.*: //') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load average $(cut -d' ' -f1 /proc/loadavg) at the start)"
commit=$(git rev-parse --short HEAD)
common=(embed --model "$model" --input "$work/in.jsonl" --max-length 128 --truncate)
run() { # name, then the command; prints one JSON row
  local name=$1; shift
  rm -rf "$work/out.jsonl" "$work/out.jsonl.parts"
  /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" --output "$work/out.jsonl" 2>"$work/err"
  local wall user sys
  read -r wall user sys <"$work/time"
  local line
  line=$(grep -E -m1 '^embed: [0-9]+ lines, [0-9]+ tokens' "$work/err")
  # embed: L lines, T tokens (P padded) in S s: X lines/s, Y tokens/s; ...
  read -r l tk pd s < <(echo "$line" | sed -E 's/^embed: ([0-9]+) lines, ([0-9]+) tokens \(([0-9]+) padded\) in ([0-9.]+) s.*/\1 \2 \3 \4/')
  local same=false
  if [ -f "$work/ref.jsonl" ] && cmp -s "$work/out.jsonl" "$work/ref.jsonl"; then same=true; fi
  [ -f "$work/ref.jsonl" ] || { cp "$work/out.jsonl" "$work/ref.jsonl"; same=true; }
  printf '{"config": "%s", "run": %d, "lines": %d, "tokens": %d, "padded_tokens": %d, "wall_s": %s, "cpu_s": %.2f, "embed_s": %s, "lines_per_s": %.1f, "tokens_per_s": %.0f, "identical": %s}' \
    "$name" "$r" "$l" "$tk" "$pd" "$wall" "$(echo "$user + $sys" | bc)" "$s" "$(echo "$l / $s" | bc -l)" "$(echo "$tk / $s" | bc -l)" "$same"
}
rows=()
for r in $(seq 1 "$runs"); do
  rows+=("$(run "1 process x 1 thread" "$work/roformer" "${common[@]}" --threads 1)")
  rows+=("$(run "1 process x 2 threads" "$work/roformer" "${common[@]}" --threads 2)")
  rows+=("$(run "2 ranks x 1 thread" mpirun --allow-run-as-root --oversubscribe -np 2 "$work/roformer" "${common[@]}" --threads 1)")
done
{
  printf '{"command": "bench/embed_scaling.sh %s %s %s", "commit": "%s", "cpu": "%s", "date": "%s",\n "model": "%s", "rows": [\n' \
    "$model" "$lines" "$runs" "$commit" "$cpu" "$(date -u +%Y-%m-%dT%H:%MZ)" "$model"
  for i in "${!rows[@]}"; do
    sep=,; [ "$i" = $((${#rows[@]} - 1)) ] && sep=
    printf '  %s%s\n' "${rows[$i]}" "$sep"
  done
  printf ']}\n'
} >"$out"
cat "$out"
