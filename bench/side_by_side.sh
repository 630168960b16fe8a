#!/usr/bin/env bash
# Runs the benchmark jobs side by side in Go (roformer bench) and PyTorch
# (bench/pytorch/bench.py) and prints a table of medians and ratios.
#
#   bench/side_by_side.sh [--threads N] [--runs R] [--jobs a,b] [--out FILE.jsonl] [--markdown FILE.md]
#
# The Go source measured is the working tree (git describe --dirty is recorded).
# Needs Go and Debian's python3-torch (apt-get install -y python3-torch; it runs
# under /usr/bin/python3). Run from anywhere; the binary is built into a temp folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
	echo "side_by_side: /usr/bin/python3 cannot import torch; install it with: apt-get install -y python3-torch" >&2
	exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/roformer" ./cmd/roformer)
# The PyTorch model must be HF's before its speed means anything.
/usr/bin/python3 "$here/pytorch/check_fixtures.py" >"$tmp/check.txt" || { cat "$tmp/check.txt" >&2; exit 1; }
tail -1 "$tmp/check.txt" >&2
rev="$(cd "$root" && git describe --always --dirty 2>/dev/null || echo unknown)"
/usr/bin/python3 "$here/side_by_side.py" --roformer "$tmp/roformer" --revision "$rev" "$@"
