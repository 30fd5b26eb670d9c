"""The Python demo (examples/python/weather.py) runs as a user runs it, with scripted answers."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, provider_bin


def test_demo_runs_scripted_without_a_model_configured() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["AMBIT_PROVIDER_BIN"] = provider_bin()
    out = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "weather.py"), "Weather in Paris?"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "SCRIPTED" in out.stdout
    assert "tool get_weather({'city': 'Paris'}) -> {\"city\": \"Paris\", \"sky\": \"sunny\", \"temperature_c\": 22}" in out.stdout
    assert "(scripted) In Paris it is sunny and 22 °C." in out.stdout


def test_demo_uses_openai_base_url_when_set() -> None:
    # The loopback provider is an OpenAI-compatible server: point the demo at it as a user would.
    proc = subprocess.Popen([provider_bin(), "--exit-on-eof", str(REPO / "examples" / "scripted" / "weather.json")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        env["OPENAI_BASE_URL"] = url
        out = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "weather.py")], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert f"Using model gpt-4.1-mini at {url}" in out.stdout
        assert "SCRIPTED" not in out.stdout
        assert "In Paris it is sunny" in out.stdout
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=5)
