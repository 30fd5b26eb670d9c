# Sourced: builds the Python binding into the cached virtualenv ($AMBIT_CACHE/venv) and the loopback
# provider. Sets AMBIT_PY (the venv's python) and AMBIT_PROVIDER_BIN.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
venv="$AMBIT_CACHE/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# xllamacpp is llama.cpp's server, prebuilt; gguf and numpy write the tiny model the real-server tests
# generate (tests/llama/).
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=8" \
  "openai>=3,<4" "anthropic>=2,<3" "xllamacpp==2026.10.11549" "gguf==0.19.0" "numpy>=2,<3"
cargo build -q -p ambit-test-provider
(cd "$here/bindings-python" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q --skip-install 2>&1 \
  | grep -vE '^(🍹|📦|🔗|🐍|💻|✏️|🛠|📖|Installed)' || true)
# --skip-install builds the module in place (python/ambit/_native*.so); the venv reads the source tree.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$here/bindings-python/python" > "$site/ambit-dev.pth"
export AMBIT_PY="$venv/bin/python"
export AMBIT_PROVIDER_BIN="$CARGO_TARGET_DIR/debug/ambit-provider"
