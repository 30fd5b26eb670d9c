#!/usr/bin/env bash
# The packages as users install them: builds the wheel, the sdist and the npm tarballs
# (scripts/build-packages.sh, release builds cached under $AMBIT_CACHE), installs the wheel into a fresh
# virtualenv (the oldest CPython the abi3 wheel supports when the machine has it) and the tarballs into a
# fresh npm project, both outside the tree, and runs the examples, the README's install snippets
# (CommonJS and ESM) and `tsc --strict` against the installed copies, the loopback provider standing in
# for the model (tests/packages/check.py). Idempotent; runs from anywhere.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
# The cached virtualenv with maturin (sets AMBIT_PY).
source "$here/scripts/llama-env.sh"
cd "$here"
cargo build -q -p ambit-test-provider
provider="$CARGO_TARGET_DIR/debug/ambit-provider"
dist="$AMBIT_CACHE/dist"
t0=$SECONDS
bash "$here/scripts/build-packages.sh" "$dist" >/dev/null
echo "packages built in $((SECONDS - t0))s" >&2
# TypeScript for the type check, cached (pinned: a new compiler can change what --strict reports).
tools="$AMBIT_CACHE/npm-tools"
if ! grep -qs '"version": "20.19.43"' "$tools/node_modules/@types/node/package.json" \
  || [ ! -x "$tools/node_modules/.bin/tsc" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error typescript@5.9.3 @types/node@20.19.43 >/dev/null
fi
work="$(mktemp -d /tmp/ambit-packages.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The oldest CPython the abi3 wheel supports, when the machine has it (pyenv's shims may hide it).
py310=""
for candidate in "$(command -v python3.10 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
  if [ -n "$candidate" ] && "$candidate" -c 'import venv' 2>/dev/null; then py310="$candidate"; break; fi
done
"$AMBIT_PY" tests/packages/check.py python --dist "$dist" --provider "$provider" --work "$work/python" \
  ${py310:+--python "$py310"}
"$AMBIT_PY" tests/packages/check.py node --dist "$dist" --provider "$provider" --work "$work/node" --tools "$tools"
