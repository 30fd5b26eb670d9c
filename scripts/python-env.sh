# Sourced: builds the Python binding into the cached virtualenv ($AMBIT_CACHE/venv) and the loopback
# provider. Sets AMBIT_PY (the venv's python) and AMBIT_PROVIDER_BIN.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
source "$here/scripts/llama-env.sh"
cargo build -q -p ambit-test-provider
# The module is abi3 (`_native.abi3.so`); a version-specific one left by an older build would be imported
# before it, so it goes.
rm -f "$here"/bindings-python/python/ambit/_native.cpython-*.so
(cd "$here/bindings-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q --skip-install 2>&1 \
  | grep -vE '^(🍹|📦|🔗|🐍|💻|✏️|🛠|📖|Installed)' || true)
# --skip-install builds the module in place (python/ambit/_native*.so); the venv reads the source tree.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$here/bindings-python/python" > "$site/ambit-dev.pth"
export AMBIT_PY="$venv/bin/python"
export AMBIT_PROVIDER_BIN="$CARGO_TARGET_DIR/debug/ambit-provider"
