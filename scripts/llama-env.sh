# Sourced: the cached virtualenv ($AMBIT_CACHE/venv) with the packages the tests need besides the
# binding: pytest, mypy (the package's types) and the official openai/anthropic packages (wire types), xllamacpp (llama.cpp's server,
# prebuilt) and gguf and numpy (the tiny model of tests/llama/), opentelemetry-proto (the OTLP receiver of tests/otel/). Every language's real-server tests start
# tests/llama/serve.py with this venv's python; it sets AMBIT_PY.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
venv="$AMBIT_CACHE/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=8" \
  "openai>=3,<4" "anthropic>=2,<3" "xllamacpp==2026.10.11549" "gguf==0.19.0" "numpy>=2,<3" \
  "mypy>=1.13,<2" "opentelemetry-proto==1.45.2"
export AMBIT_PY="$venv/bin/python"
