#!/bin/sh
# Regenerates the files of docs/experiments/retrieval-poetry/full-48k (docs/results.md,
# "Retrieval", poetry-zh on all training pairs): the pretraining of run.sh made again, MNRL on
# all 48,243 training pairs for one epoch (754 steps of 64), seeds 1-3, and each model scored on
# dev and test; on test also the hybrid-tuned line (the fusion's dense weight chosen on dev).
#
#   sh docs/experiments/retrieval-poetry/run-full.sh WORK [SEEDS]
#
# WORK is a scratch folder as for run.sh (a pretraining already there is reused); SEEDS
# defaults to "1 2 3". The runs of docs/results.md ran seeds 1 and 2 side by side with
# THREADS=1, then seed 3 with THREADS=2 (ROFORMER_BLAS=onednn). With E2=1 it also gives each
# seed a second epoch, a warm restart from the first (the same pairs, a new order, the
# schedule again: files mnrl48k-e2-*; run the same way, seeds 1 and 2 side by side, then 3).
# With CONVEX=1 (after the runs above, models kept in WORK) it trains nothing new and scores
# every model again with --fusion convex (both hybrid lines a convex combination of min-max
# normalised scores), into full-48k/convex; FUSION=zscore does the same with --fusion zscore
# (scores standardised by each ranking's deviation), into full-48k/zscore.
# Run from the repository root.
set -eu
work=$1
seeds=${2:-1 2 3}
threads=${THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)
out=$here/full-48k
mkdir -p "$work" "$out"
[ -x "$work/roformer" ] || go build -o "$work/roformer" ./cmd/roformer
rf=$work/roformer
t="/usr/bin/time -f %e_s_wall,_%M_KiB_max_RSS"

(cd "$here" && go run pairs.go -text) > "$work/corpus.txt"
[ -e "$work/vocab/vocab.txt" ] ||
  "$rf" vocab --kind chinese-word --corpus "$work/corpus.txt" --size 10000 --out "$work/vocab" > "$out/vocab.log" 2>&1
[ -e "$work/pretrain/config.json" ] ||
  $t "$rf" pretrain --corpus "$work/corpus.txt" --vocab "$work/vocab" --size tiny --steps 700 \
    --log-every 50 --out "$work/pretrain" > "$work/pretrain.log" 2>&1
cp "$work/pretrain.log" "$out/pretrain.log"
pre=$work/pretrain

(cd "$here" && go run pairs.go) > "$work/train-all.jsonl"   # all 48,243 training pairs
for seed in $seeds; do
  [ -e "$work/mnrl48k-seed$seed/modules.json" ] ||
    $t "$rf" finetune --model "$pre" --objective mnrl --train "$work/train-all.jsonl" --epochs 1 --batch 64 \
      --lr 2e-4 --max-length 128 --seed $seed --threads $threads --log-every 25 --out "$work/mnrl48k-seed$seed" \
      > "$work/mnrl48k-seed$seed.log" 2>&1
  cp "$work/mnrl48k-seed$seed.log" "$out/mnrl48k-seed$seed-finetune.log"
done

if [ "${E2:-0}" = 1 ]; then
  for seed in $seeds; do
    [ -e "$work/mnrl48k-e2-seed$seed/modules.json" ] ||
      $t "$rf" finetune --model "$work/mnrl48k-seed$seed" --objective mnrl --train "$work/train-all.jsonl" --epochs 1 \
        --batch 64 --lr 2e-4 --max-length 128 --seed $seed --threads $threads --log-every 25 \
        --out "$work/mnrl48k-e2-seed$seed" > "$work/mnrl48k-e2-seed$seed.log" 2>&1
    cp "$work/mnrl48k-e2-seed$seed.log" "$out/mnrl48k-e2-seed$seed-finetune.log"
  done
fi

fusion=${FUSION:-rrf}
[ "${CONVEX:-0}" = 1 ] && fusion=convex
if [ "$fusion" != rrf ]; then
  out=$out/$fusion
  mkdir -p "$out"
fi
ev() { # split model-folder file [flags]
  sp=$1 m=$2 f=$3; shift 3
  $t "$rf" eval --task retrieval --name poetry-zh --split $sp --model "$m" --threads $threads --json --quiet --fusion $fusion "$@" \
    > "$out/$f-$sp.json" 2>> "$out/eval-times.log"
}
for sp in dev test; do
  "$rf" eval --task retrieval --name poetry-zh --split $sp --json --quiet > "$out/bm25-$sp.json"
done
ev dev "$pre" untuned
ev test "$pre" untuned --tune-fusion dev
for run in mnrl48k-seed1 mnrl48k-seed2 mnrl48k-seed3 mnrl48k-e2-seed1 mnrl48k-e2-seed2 mnrl48k-e2-seed3; do
  [ -e "$work/$run/modules.json" ] || continue
  ev dev "$work/$run" $run
  ev test "$work/$run" $run --tune-fusion dev
done
if [ "$fusion" != rrf ]; then
  label="FUSION=$fusion"
  [ "$fusion" = convex ] && label="CONVEX=1"
  (cd "$out" && go run ../../summarize.go -script "run-full.sh, $label: --fusion $fusion" -runs "mnrl48k:MNRL 1 epoch,mnrl48k-e2:MNRL 2 epochs (restart)") \
    > "$out/summary.md"
  exit
fi
(cd "$out" && go run ../summarize.go -script run-full.sh -runs "mnrl48k:MNRL all pairs") > "$out/summary.md"
if [ "${E2:-0}" = 1 ]; then
  (cd "$out" && go run ../summarize.go -script "run-full.sh, E2=1" -json summary-e2.json -runs "mnrl48k:MNRL all pairs,mnrl48k-e2:MNRL 2 epochs (restart)") \
    > "$out/summary-e2.md"
fi
