#!/usr/bin/env bash
# Builds the Python binding into a cached virtualenv and runs its pytest suite.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/env.sh"
venv="$AMBIT_CACHE/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=8"
cargo build -q -p ambit-test-provider
(cd "$here/bindings-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q --skip-install 2>&1 \
  | grep -vE '^(📦|🔗|🐍|💻|✏️|🛠|📖|Installed)' || true)
# `maturin develop --skip-install` leaves the built module in python/ambit; point the venv at the source.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$here/bindings-python/python" > "$site/ambit-dev.pth"
cd "$here/bindings-python"
"$venv/bin/python" -m pytest -q "$@"
