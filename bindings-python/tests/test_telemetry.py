"""Telemetry from Python: the scenario files with a `telemetry` section run with OTLP export on, to a
real OTLP/HTTP receiver (tests/otel/receiver.py: the official `opentelemetry-proto` decoding the
exporter's protobuf); tests/otel/check.py, the checker every suite shares, asserts the span tree. And
the `logging` bridge: the core's records reach `logging` under per-module loggers, levels mapped."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import ambit
import ambit.telemetry
from conftest import REPO, SCENARIOS
from test_scenarios import ScriptedApprovals, build_agent, check, ledger_at, run_async

FILES = [p for p in SCENARIOS if "telemetry" in json.loads(p.read_text())]


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/otel/receiver.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), url
    yield url
    proc.kill()
    proc.wait()


def spans_check(receiver: str, path: Path, content: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "tests/otel/check.py"), receiver, str(path),
                           "--content", "on" if content else "off"], capture_output=True, text=True)


def run_file(path: Path, start_provider: Any) -> None:
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    approvals = ScriptedApprovals(scenario)
    agent = build_agent(scenario, provider.base_url, use_async=True, approvals=approvals, ledger=ledger_at("sqlite"))
    check(scenario, lambda: run_async(agent, scenario["input"]), agent, approvals, agent)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_telemetry_span_tree(path: Path, receiver: str, start_provider: Any) -> None:
    for content in (False, True):
        ambit.telemetry.enable(receiver, headers={"x-ambit-suite": "python"}, record_content=content,
                               service_name="ambit-python")
        run_file(path, start_provider)
        ambit.telemetry.flush()
        done = spans_check(receiver, path, content)
        assert done.returncode == 0, done.stderr
    # Negative control: the run with contents recorded them, so the checker's `off` fails on it.
    done = spans_check(receiver, path, False)
    assert done.returncode == 1 and "record_content is off and span" in done.stderr, done.stderr
    # Off: a run makes no span (the last trace is still the one with contents).
    ambit.telemetry.disable()
    run_file(path, start_provider)
    done = spans_check(receiver, path, True)
    assert done.returncode == 0, done.stderr


def test_enable_refuses_what_is_not_an_endpoint() -> None:
    with pytest.raises(ambit.ConfigError, match="not a URL"):
        ambit.telemetry.enable("localhost 4318")
    with pytest.raises(ambit.ConfigError, match="not an http"):
        ambit.telemetry.enable("ftp://localhost:4318")
    with pytest.raises(TypeError, match="record_content"):
        ambit.telemetry.enable("http://localhost:4318", record_content="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FILES[:1], ids=[p.stem for p in FILES[:1]])
def test_core_records_reach_logging_with_levels(path: Path, start_provider: Any,
                                                caplog: pytest.LogCaptureFixture) -> None:
    # DEBUG on the `ambit` loggers: the run's INFO record and the tool call's DEBUG one arrive, from the
    # core's threads (the run is synchronous here: the bridge takes the GIL from a tokio thread while
    # the caller waits, and does not deadlock).
    caplog.set_level(logging.DEBUG, logger="ambit")
    ambit.telemetry.reset_logging()
    run_file(path, start_provider)
    mine = [r for r in caplog.records if r.name.startswith("ambit.")]
    finished = [r for r in mine if r.name == "ambit.agent" and r.getMessage().startswith("run finished")]
    assert len(finished) == 1 and finished[0].levelno == logging.INFO, [(r.name, r.getMessage()) for r in mine]
    assert "turns=2" in finished[0].getMessage() and "input_tokens=61" in finished[0].getMessage()
    tool = [r for r in mine if r.name == "ambit.tools" and "tool call finished" in r.getMessage()]
    assert len(tool) == 1 and tool[0].levelno == logging.DEBUG and "release_traced" in tool[0].getMessage()
    # Negative control: at WARNING, neither reaches `logging`.
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="ambit")
    ambit.telemetry.reset_logging()
    run_file(path, start_provider)
    assert not [r for r in caplog.records if r.name in ("ambit.agent", "ambit.tools")]


def _raising_agent(seen: list[str]) -> ambit.Agent:
    """An agent whose tool raises quoting its credential; the model records what it is sent."""

    @ambit.tool(credentials=["vault"])
    def unlock(ctx: ambit.ToolContext) -> str:
        """Unlocks the vault."""
        token = ctx.credential("vault")
        return _fail_deep(token)

    def answer(request: ambit.TestRequest) -> ambit.Reply | str:
        seen.append(json.dumps(request.messages))
        return ambit.Reply.tool_call("unlock", {}) if len(seen) == 1 else "Done."

    return ambit.Agent(model=ambit.FunctionModel(answer), tools=[unlock],
                       credentials=ambit.Credentials().value("vault", "s3cr3t-vault-token"))


def _fail_deep(token: str) -> str:
    raise ValueError(f"vault refused token {token}")


@pytest.mark.parametrize("level", [logging.WARNING, logging.ERROR], ids=["warning", "error"])
def test_a_tool_that_raises_logs_its_traceback_redacted_and_the_model_reads_only_the_message(
        level: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(level, logger="ambit")
    ambit.telemetry.reset_logging()
    seen: list[str] = []
    result = _raising_agent(seen).run_sync("Unlock it.")
    assert result.output == "Done."
    raised = [r for r in caplog.records if r.name == "ambit.tools" and "raised" in r.getMessage()]
    if level == logging.ERROR:
        # Negative control: the record is a WARNING, so at ERROR nothing reaches `logging`.
        assert raised == []
        return
    assert len(raised) == 1 and raised[0].levelno == logging.WARNING, [r.getMessage() for r in caplog.records]
    text = raised[0].getMessage()
    # The traceback names the frames the exception went through, the credential redacted everywhere.
    assert "Traceback (most recent call last)" in text and "_fail_deep" in text and "unlock" in text, text
    assert "ValueError: vault refused token [credential:vault]" in text, text
    assert "s3cr3t-vault-token" not in text
    # The model reads the message, never the traceback.
    assert "vault refused token [credential:vault]" in seen[1] and "Traceback" not in seen[1], seen[1]
    assert all("s3cr3t-vault-token" not in s for s in seen)


def test_a_huge_traceback_is_logged_bounded(caplog: pytest.LogCaptureFixture) -> None:
    # A tool may raise with any text at all: the record keeps at most 32 Ki characters of the traceback and
    # of the message, saying what it left out. Control: a short one is logged whole (the test above).
    caplog.set_level(logging.WARNING, logger="ambit")
    ambit.telemetry.reset_logging()

    @ambit.tool
    def flood() -> str:
        """Raises with a huge message."""
        raise ValueError("x" * 1_000_000)

    def answer(request: ambit.TestRequest) -> ambit.Reply | str:
        return ambit.Reply.tool_call("flood", {}) if request.index == 1 else "Done."

    assert ambit.Agent(model=ambit.FunctionModel(answer), tools=[flood]).run_sync("Go.").output == "Done."
    raised = [r.getMessage() for r in caplog.records if r.name == "ambit.tools" and "raised" in r.getMessage()]
    assert len(raised) == 1
    assert len(raised[0]) < 100_000, len(raised[0])
    assert "more characters of the traceback not shown" in raised[0]
