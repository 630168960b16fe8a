#!/bin/sh
# Regenerates the files of docs/experiments/retrieval-poetry (docs/results.md, "Retrieval"):
# a small Chinese RoFormer made here (a chinese-word vocabulary and a tiny MLM pretraining on
# the task's training poems only), untuned and fine-tuned with MNRL (3 seeds), BM25 and hybrid,
# on poetry-zh dev and test.
#
#   sh docs/experiments/retrieval-poetry/run.sh WORK
#
# WORK is a scratch folder for the binary, the corpus, the vocabulary, the pairs and the
# models. Run from the repository root. The JSON files and logs are written next to this script.
set -eu
work=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
go build -o "$work/roformer" ./cmd/roformer
rf=$work/roformer
t="/usr/bin/time -f %e_s_wall,_%M_KiB_max_RSS"

# The pretraining text: the 48,243 training poems (training authors only), one a line.
(cd "$here" && go run pairs.go -text) > "$work/corpus.txt"
[ -e "$work/vocab/vocab.txt" ] ||
  "$rf" vocab --kind chinese-word --corpus "$work/corpus.txt" --size 10000 --out "$work/vocab" > "$here/vocab.log" 2>&1
[ -e "$work/pretrain/config.json" ] ||
  $t "$rf" pretrain --corpus "$work/corpus.txt" --vocab "$work/vocab" --size tiny --steps 700 \
    --log-every 50 --out "$work/pretrain" > "$work/pretrain.log" 2>&1
cp "$work/pretrain.log" "$here/pretrain.log"
pre=$work/pretrain

(cd "$here" && go run pairs.go -n 6400 -seed 1) > "$work/train.jsonl"   # 6,400 of the 48,243 training pairs
# Two learning rates, each for seeds 1-3: 2e-4 (the bible-en setting; files mnrl-seed*) and
# 1e-3 (files mnrl-lr1e-3-seed*).
for run in mnrl:2e-4 mnrl-lr1e-3:1e-3; do
  name=${run%%:*} lr=${run#*:}
  for seed in 1 2 3; do
    [ -e "$work/$name-seed$seed/modules.json" ] ||
      $t "$rf" finetune --model "$pre" --objective mnrl \
        --train "$work/train.jsonl" --epochs 1 --batch 64 --lr $lr --max-length 128 --seed $seed \
        --log-every 25 --out "$work/$name-seed$seed" > "$work/$name-seed$seed.log" 2>&1
    cp "$work/$name-seed$seed.log" "$here/$name-seed$seed-finetune.log"
    cp "$work/$name-seed$seed/finetune_embed.json" "$here/$name-seed$seed-finetune_embed.json"
  done
done

for split in dev test; do
  "$rf" eval --task retrieval --name poetry-zh --split $split --json --quiet > "$here/bm25-$split.json"
  $t "$rf" eval --task retrieval --name poetry-zh --split $split --model "$pre" --json --quiet \
    > "$here/untuned-$split.json" 2>> "$here/eval-times.log"
  for name in mnrl mnrl-lr1e-3; do
    for seed in 1 2 3; do
      $t "$rf" eval --task retrieval --name poetry-zh --split $split --model "$work/$name-seed$seed" --json --quiet \
        > "$here/$name-seed$seed-$split.json" 2>> "$here/eval-times.log"
    done
  done
done
(cd "$here" && go run summarize.go) > "$here/summary.md"
