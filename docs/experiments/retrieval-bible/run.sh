#!/bin/sh
# Regenerates the files of docs/experiments/retrieval-bible (docs/results.md, "Retrieval"):
# the main job's model untuned and fine-tuned with MNRL (3 seeds), BM25 and hybrid, on
# bible-en dev and test, and poetry-zh's BM25 line.
#
#   sh docs/experiments/retrieval-bible/run.sh PRETRAIN WORK
#
# PRETRAIN is the main job's model (README: roformer pretrain --out PRETRAIN, the defaults);
# WORK a scratch folder for the binary, the pairs and the fine-tuned models. Run from the
# repository root. The JSON files are written next to this script.
set -eu
pre=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
go build -o "$work/roformer" ./cmd/roformer
rf=$work/roformer
(cd "$here" && go run pairs.go -n 12000 -seed 1) > "$work/train.jsonl"   # 12,000 of the 29,438 training pairs

for seed in 1 2 3; do
  [ -e "$work/ft-seed$seed/modules.json" ] ||
    /usr/bin/time -f "%e s wall, %M KiB max RSS" "$rf" finetune --model "$pre" --objective mnrl \
      --train "$work/train.jsonl" --epochs 1 --batch 64 --lr 2e-4 --max-length 96 --seed $seed \
      --log-every 50 --out "$work/ft-seed$seed" > "$work/ft-seed$seed.log" 2>&1
  cp "$work/ft-seed$seed.log" "$here/mnrl-seed$seed-finetune.log"
  cp "$work/ft-seed$seed/finetune_embed.json" "$here/mnrl-seed$seed-finetune_embed.json"
done

for split in dev test; do
  "$rf" eval --task retrieval --name bible-en --split $split --json --quiet > "$here/bm25-$split.json"
  "$rf" eval --task retrieval --name bible-en --split $split --model "$pre" --json > "$here/untuned-$split.json"
  for seed in 1 2 3; do
    "$rf" eval --task retrieval --name bible-en --split $split --model "$work/ft-seed$seed" --json > "$here/mnrl-seed$seed-$split.json"
  done
  "$rf" eval --task retrieval --name poetry-zh --split $split --json --quiet > "$here/poetry-zh-bm25-$split.json"
done
(cd "$here" && go run summarize.go) > "$here/summary.md"
