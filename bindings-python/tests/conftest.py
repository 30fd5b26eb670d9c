"""Shared fixtures: the scenario files and the loopback provider."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((REPO / "tests" / "scenarios").glob("*.json"))


def provider_bin() -> str:
    path = os.environ.get("AMBIT_PROVIDER_BIN")
    if not path:
        target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
        path = str(Path(target) / "debug" / "ambit-provider")
    if not Path(path).exists():
        raise RuntimeError(f"the loopback provider is not built at {path}: run `cargo build -p ambit-test-provider`")
    return path


class Provider:
    """A running `ambit-provider` serving one scenario file."""

    def __init__(self, scenario: Path, vars: dict[str, str] | None = None) -> None:
        # `vars`: values for `{{name}}` in the scenario's expectations.
        args = [a for k, v in (vars or {}).items() for a in ("--var", f"{k}={v}")]
        self.proc = subprocess.Popen([provider_bin(), "--exit-on-eof", *args, str(scenario)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the provider did not start: {self.base_url!r}")

    def state(self) -> dict[str, Any]:
        import urllib.request
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/__ambit/state") as r:
            return json.load(r)

    def close(self) -> None:
        close_stdin_and_wait(self.proc, 5)


def close_stdin_and_wait(proc: subprocess.Popen[str], timeout: float) -> None:
    """Stops a server that serves until its stdin closes; killed if it is not gone within `timeout`."""
    if proc.stdin:
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def start_provider() -> Iterator[Any]:
    started: list[Provider] = []

    def start(scenario: Path, vars: dict[str, str] | None = None) -> Provider:
        p = Provider(scenario, vars)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()
