#!/usr/bin/env bash
# The memory and cold start of `roformer serve` against an ONNX Runtime session of the same model (issue #39):
# for each precision and folder form, the time from starting `roformer serve` to GET /health 200, the peak RSS
# of the load (VmHWM then), and the RSS at rest after five POST /embed of a 16-token text (VmRSS one second
# after); for ONNX Runtime, bench/onnxruntime/bench.js's RSS after five 1×16 steps of the base export.
#
#   bench/memory.sh [--model DIR] [--threads N] [--out FILE.jsonl]
#
# --model is a base model folder (default: one made here by `roformer pretrain --size base --steps 1`, the
# random-initialised preset ONNX Runtime's export has, vocabulary 12,000). Its int8 and bf16 forms are written
# by `roformer quantize` into a temp folder. Rows: the folder in fp32 (the default), in int8 and bf16 quantized
# at load (--precision), and the int8 and bf16 folders. Sizes in MiB.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
model="" threads=2 out=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	--model) model="$2"; shift 2 ;;
	--threads) threads="$2"; shift 2 ;;
	--out) out="$2"; shift 2 ;;
	*) echo "memory.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/roformer" ./cmd/roformer)
rf="$tmp/roformer"
if [[ -z "$model" ]]; then
	"$rf" pretrain --size base --steps 1 --out "$tmp/run" >/dev/null 2>&1
	model="$(dirname "$(find "$tmp/run" -name config.json | head -1)")"
fi
"$rf" quantize --model "$model" --out "$tmp/int8" --precision int8 >/dev/null
"$rf" quantize --model "$model" --out "$tmp/bf16" --precision bf16 >/dev/null
[[ -n "$out" ]] && : >"$out"
emit() { echo "$1"; [[ -n "$out" ]] && echo "$1" >>"$out"; return 0; }

# serve_row NAME DIR [serve flags]: one JSON line.
serve_row() {
	local name="$1" dir="$2"
	shift 2
	local port=$((20000 + RANDOM % 20000)) start pid code=000 t
	start=$(date +%s.%N)
	"$rf" serve --model "$dir" --addr "127.0.0.1:$port" --threads "$threads" "$@" >"$tmp/serve.log" 2>&1 &
	pid=$!
	until [[ "$code" == 200 ]]; do
		kill -0 "$pid" 2>/dev/null || { echo "memory.sh: serve exited:" >&2; cat "$tmp/serve.log" >&2; exit 1; }
		sleep 0.02
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true)
	done
	t=$(echo "$(date +%s.%N) - $start" | bc)
	local hwm_load
	hwm_load=$(awk '/^VmHWM:/{print $2}' "/proc/$pid/status")
	for _ in 1 2 3 4 5; do
		curl -sf -X POST "http://127.0.0.1:$port/embed" -H 'Content-Type: application/json' \
			-d '{"inputs": "the whale swam past the old ship in the deep grey sea at night"}' >/dev/null
	done
	sleep 1
	local rss hwm
	rss=$(awk '/^VmRSS:/{print $2}' "/proc/$pid/status")
	hwm=$(awk '/^VmHWM:/{print $2}' "/proc/$pid/status")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	emit "$(printf '{"impl":"roformer-go","row":"%s","cold_start_s":%.2f,"load_peak_mib":%.1f,"rest_rss_mib":%.1f,"peak_mib":%.1f}' \
		"$name" "$t" "$(echo "$hwm_load/1024" | bc -l)" "$(echo "$rss/1024" | bc -l)" "$(echo "$hwm/1024" | bc -l)")"
}

du -b "$model"/model.safetensors "$tmp"/int8/model.safetensors "$tmp"/bf16/model.safetensors | while read -r n f; do
	emit "$(printf '{"file":"%s","mib":%.1f}' "${f#"$tmp"/}" "$(echo "$n/1048576" | bc -l)")"
done
serve_row "fp32 folder" "$model"
serve_row "fp32 folder, --precision int8" "$model" --precision int8
serve_row "int8 folder" "$tmp/int8"
serve_row "fp32 folder, --precision bf16" "$model" --precision bf16
serve_row "bf16 folder, --precision bf16" "$tmp/bf16" --precision bf16

ort="$here/onnxruntime"
if command -v node >/dev/null && [[ -d "$ort/node_modules/onnxruntime-node" ]]; then
	j=$(node "$ort/bench.js" --size base --batch 1 --seq 16 --steps 5 --warmup 0 --threads "$threads" --peak-gflops 1 --json --quiet 2>/dev/null | tail -1)
	emit "$(jq -c '{impl: "onnxruntime", row: "fp32 session, after five 1×16 runs", rest_rss_mib: (.end_rss_bytes/1048576), peak_mib: (.peak_rss_bytes/1048576), session_create_ms}' <<<"$j")"
else
	echo "memory.sh: no ONNX Runtime (bench/onnxruntime: npm ci, as bench/side_by_side.sh does)" >&2
fi
