#!/usr/bin/env bash
# Runs the benchmark jobs side by side in Go (roformer bench), PyTorch (bench/pytorch/bench.py)
# and ONNX Runtime (bench/onnxruntime/bench.js) and prints a table of medians and ratios.
#
#   bench/side_by_side.sh [--threads N] [--runs R] [--jobs a,b] [--impls go,pytorch,onnxruntime]
#                         [--out FILE.jsonl] [--markdown FILE.md]
#
# The Go source measured is the working tree (git describe --dirty is recorded).
# Needs Go and Debian's python3-torch (apt-get install -y python3-torch; it runs under
# /usr/bin/python3), and for ONNX Runtime node >= 18 with the onnxruntime-node module in
# bench/onnxruntime/node_modules: installed here with npm ci if it is missing (the npm registry must
# be reachable then); --impls go,pytorch leaves ONNX Runtime out. Run from anywhere; the binary is
# built into a temp folder, the ONNX models are exported into a cache folder outside the repository
# (bench/onnxruntime/README.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"

# The peers asked for (side_by_side.py's --impls; all three by default).
impls="go,pytorch,onnxruntime"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	--impls=*) impls="${args[i]#--impls=}" ;;
	--impls) impls="${args[i + 1]:-}" ;;
	esac
done

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	echo "side_by_side: /usr/bin/python3 cannot import torch; install it with: apt-get install -y python3-torch" >&2
	exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [[ ",$impls," == *,onnxruntime,* ]]; then
	ort="$here/onnxruntime"
	leave_out="or leave ONNX Runtime out with --impls go,pytorch"
	if ! command -v node >/dev/null; then
		echo "side_by_side: node is not installed; ONNX Runtime needs node >= 18 (apt-get install -y nodejs npm), $leave_out" >&2
		exit 1
	fi
	node_major="$(node -p 'process.versions.node.split(".")[0]')"
	if ((node_major < 18)); then
		echo "side_by_side: node $(node --version) is too old for onnxruntime-node; it needs node >= 18, $leave_out" >&2
		exit 1
	fi
	if [[ ! -d "$ort/node_modules/onnxruntime-node" ]]; then
		if ! command -v npm >/dev/null; then
			echo "side_by_side: $ort/node_modules is missing and npm is not installed to install it (apt-get install -y npm), $leave_out" >&2
			exit 1
		fi
		echo "side_by_side: installing onnxruntime-node into $ort/node_modules (npm ci)" >&2
		# ONNXRUNTIME_NODE_INSTALL=skip: the CPU build is in the npm package; without it the
		# package's install script also downloads CUDA binaries from nuget.org.
		if ! (cd "$ort" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund >&2); then
			echo "side_by_side: npm ci in $ort failed, so onnxruntime-node cannot be installed (is the npm registry reachable?); $leave_out" >&2
			exit 1
		fi
	fi
	if ! ver="$(cd "$ort" && node -p 'require("onnxruntime-node").env.versions.node' 2>"$tmp/ort.txt")"; then
		echo "side_by_side: node cannot load onnxruntime-node from $ort/node_modules: $(head -5 "$tmp/ort.txt"); $leave_out" >&2
		exit 1
	fi
	echo "side_by_side: onnxruntime-node $ver under node $(node --version)" >&2
fi

(cd "$root" && go build -o "$tmp/roformer" ./cmd/roformer)
# The PyTorch model must be HF's before its speed means anything.
/usr/bin/python3 "$here/pytorch/check_fixtures.py" >"$tmp/check.txt" || { cat "$tmp/check.txt" >&2; exit 1; }
tail -1 "$tmp/check.txt" >&2
rev="$(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)"
/usr/bin/python3 "$here/side_by_side.py" --roformer "$tmp/roformer" --revision "$rev" "$@"
