"""Every scenario file in tests/scenarios/, run from Python: the same files the Rust, Node and Swift
suites run."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import time
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import ambit
from ambit import _native
from conftest import REPO, SCENARIOS
from wire_types import validate_exchanges


@dataclass(frozen=True)
class ScenarioContext:
    """A scenario's `context`, as the Python value this suite passes to each run (`context=`)."""

    data: dict[str, Any]


#: The run context of the scenario under test (set by `build_agent`); every run of it gets it.
CONTEXT: list[ScenarioContext] = []


def ctx_kw() -> dict[str, Any]:
    return {"context": CONTEXT[0]} if CONTEXT else {}


def fill(template: str, args: dict[str, Any]) -> str:
    for k, v in args.items():
        template = template.replace("{" + k + "}", v if isinstance(v, str) else json.dumps(v))
    return template


#: What `until_cancelled` tools saw: one entry per tool that saw its task's cancellation token.
SAW_CANCEL: list[str] = []


#: What `waits_for_release` tools wait on: set by a session step's `release` (one per session run).
RELEASE: dict[str, asyncio.Event] = {}


def scenario_tool(spec: dict[str, Any], use_async: bool) -> ambit.Tool:
    behavior = spec["behavior"]
    if "returns_image" in behavior:
        # The text, then the image: a result of parts, its image sent in the wire's tool-result blocks.
        image = behavior["returns_image"]

        def chart(**kwargs: Any) -> list[Any]:
            data = base64.b64decode(image["data"])
            images = [ambit.Image.from_bytes(data, image["media_type"])] * behavior.get("repeat", 1)
            return [ambit.Text(fill(image["text"], kwargs)), *images]

        async def chart_async(**kwargs: Any) -> list[Any]:
            return chart(**kwargs)

        return ambit.tool(chart_async if use_async else chart, name=spec["name"], description=spec["description"],
                          parameters=spec["parameters"])
    if behavior.get("waits_for_release"):
        # Progress through the task context, then hold until the suite releases it (after the run that
        # started it ended: work that outlives the run).
        async def held(task: ambit.TaskContext, **kwargs: Any) -> str:
            if "progress" in behavior:
                task.progress(fill(behavior["progress"], kwargs))
            await RELEASE["event"].wait()
            return fill(behavior["returns"], kwargs)

        return ambit.tool(held, name=spec["name"], description=spec["description"], parameters=spec["parameters"])
    if behavior.get("until_cancelled"):
        # Progress through the task context, then wait on the cancellation token and unwind: a thread
        # (plain function) in the sync runs, a coroutine in the async ones.
        def wait_sync(task: ambit.TaskContext, **kwargs: Any) -> str:
            task.progress(fill(behavior["progress"], kwargs))
            for _ in range(2000):
                if task.cancelled:
                    SAW_CANCEL.append(spec["name"])
                    return "stopped"
                time.sleep(0.01)
            return fill(behavior["returns"], kwargs)

        async def wait_async(task: ambit.TaskContext, **kwargs: Any) -> str:
            task.progress(fill(behavior["progress"], kwargs))
            try:
                for _ in range(2000):
                    if task.cancelled:
                        SAW_CANCEL.append(spec["name"])
                        return "stopped"
                    await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                # The run can end (and its event loop shut down, cancelling this coroutine) before the
                # next checkpoint: that is the cancellation reaching the coroutine too.
                SAW_CANCEL.append(spec["name"])
                raise
            return fill(behavior["returns"], kwargs)

        return ambit.tool(wait_async if use_async else wait_sync, name=spec["name"],
                          description=spec["description"], parameters=spec["parameters"])

    aliases = spec.get("credentials", [])

    def act(ctx: ambit.ToolContext[ScenarioContext], **kwargs: Any) -> str:
        # `{credential:alias}`: the declared credential, read from the tool's context; `{context:key}`:
        # the run context's field.
        text = behavior["returns"] if "returns" in behavior else behavior["raises"]
        for alias in aliases:
            text = text.replace("{credential:" + alias + "}", ctx.credential(alias))
        if "{context:" in text:
            for key, value in ctx.context.data.items():
                text = text.replace("{context:" + key + "}", str(value))
        if "returns" in behavior:
            return fill(text, kwargs)
        raise RuntimeError(fill(text, kwargs))

    async def act_async(ctx: ambit.ToolContext[ScenarioContext], **kwargs: Any) -> str:
        # `sleeps_ms`: a slow job (a background task the scenario cancels). Always a coroutine, so a
        # cancelled run leaves no thread sleeping behind it.
        await asyncio.sleep(behavior.get("sleeps_ms", 0) / 1000)
        return act(ctx, **kwargs)

    return ambit.tool(act_async if use_async or "sleeps_ms" in behavior else act, name=spec["name"], description=spec["description"],
                      parameters=spec["parameters"], level=spec.get("level"),
                      requires_approval=spec.get("requires_approval", False), allow_blank=spec.get("allow_blank", ()),
                      credentials=aliases)


def scenario_credentials(scenario: dict[str, Any], use_async: bool) -> ambit.Credentials | None:
    """`credentials` (the broker as data) with `credential_callbacks`: a plain function in the sync
    runs, a coroutine in the async ones."""
    if "credentials" not in scenario:
        return None
    creds = ambit.Credentials()
    answers = scenario.get("credential_callbacks", {})
    for alias, source in scenario["credentials"].get("credentials", {}).items():
        if "value" in source:
            creds.value(alias, source["value"])
        elif "env" in source:
            creds.env(alias, source["env"])
        elif use_async:
            async def fetch_async(alias: str) -> str:
                return str(answers[alias])
            creds.callback(alias, fetch_async)
        else:
            creds.callback(alias, lambda alias: str(answers[alias]))
    for var, alias in scenario["credentials"].get("shell_env", {}).items():
        creds.shell_env(var, alias)
    for rule in scenario["credentials"].get("web_fetch", []):
        creds.web_fetch(rule["host"], rule["alias"], header=rule.get("header", "authorization"),
                        prefix=rule.get("prefix"))
    return creds


class ScriptedApprovals:
    """The host's approval handler: answers from the scenario's `approvals`, in order, and records what
    it was asked. A plain function in the sync runs, a coroutine in the async ones."""

    def __init__(self, scenario: dict[str, Any]) -> None:
        self.answers = list(scenario.get("approvals", []))
        self.requests: list[ambit.ApprovalRequest] = []

    def answer(self, request: ambit.ApprovalRequest) -> ambit.policy.Decision:
        self.requests.append(request)
        return decision(self.answers.pop(0))

    async def answer_async(self, request: ambit.ApprovalRequest) -> ambit.policy.Decision:
        await asyncio.sleep(0)
        return self.answer(request)


def decision(a: dict[str, Any]) -> ambit.policy.Decision:
    """A scenario's answer (an ApprovalDecision object) as the Python class."""
    if a["decision"] == "approve":
        return ambit.Approve()
    if a["decision"] == "deny":
        return ambit.Deny(a["reason"])
    if a["decision"] == "revise":
        return ambit.Revise(a["arguments"])
    if a["decision"] == "later":
        return ambit.Later()
    raise ValueError(f"not an approval decision: {a}")


def write_fixture(scenario: dict[str, Any]) -> str | None:
    """Writes the scenario's fixture into a fresh temporary directory T: `fixture.files` into T/ws (the
    working directory), `fixture.outside` into T/outside (beyond the session's reach)."""
    fixture = scenario.get("fixture")
    if fixture is None:
        return None
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="ambit-fixture-"))
    for key, sub in (("files", "ws"), ("outside", "outside")):
        (root / sub).mkdir()
        for name, spec in fixture.get(key, {}).items():
            text = spec["text"] if "text" in spec else (spec["line"] + "\n") * spec["count"]
            (root / sub / name).parent.mkdir(parents=True, exist_ok=True)
            (root / sub / name).write_text(text)
    return str(root / "ws")


def scenario_policy(scenario: dict[str, Any], approvals: ScriptedApprovals, use_async: bool) -> ambit.Policy | None:
    fixture = write_fixture(scenario)
    if "policy" not in scenario and fixture is None:
        return None
    p = dict(scenario.get("policy", {}))
    if fixture is not None:
        p["working_directory"] = fixture
    on = p.pop("approvals", False)
    handler = (approvals.answer_async if use_async else approvals.answer) if on else None
    return ambit.Policy(approvals=handler, **p)


def step_policy(agent: ambit.Agent, step: dict[str, Any], approvals: ScriptedApprovals,
                use_async: bool) -> ambit.Agent:
    """A step's `with_policy`: the same agent (and sub-agents) under that policy; else the agent itself."""
    if "with_policy" not in step:
        return agent
    p = dict(step["with_policy"])
    on = p.pop("approvals", False)
    handler = (approvals.answer_async if use_async else approvals.answer) if on else None
    return agent.with_policy(ambit.Policy(approvals=handler, **p))


def step_input(step: dict[str, Any], previous: Any) -> Any:
    """A run's input: `messages` as given (the core's dict form), `history: true` (the previous run's
    typed `result.messages` and the step's `input` as a `UserMessage`), or the `input` text."""
    if "messages" in step:
        return step["messages"]
    if step.get("history"):
        assert previous is not None, "history without an earlier run"
        return [*previous.messages, ambit.UserMessage(step["input"])]
    return step["input"]


def run_steps(scenario: dict[str, Any], agent: ambit.Agent, approvals: ScriptedApprovals, use_async: bool,
              run_one: Any, at: LedgerAt) -> tuple[ambit.Agent, Any]:
    """`steps`: every step but the last runs to its result through `run_one(agent, input)` (its
    `expect.output` checked), each first putting the agent under its `with_policy`, or moves the
    ledger's manual clock (`advance_clock`); a step's `expect.drain_decision` is checked after it.
    Returns the agent and the input of the last step, which the test runs its own way. Without
    `steps`: the agent and `input` (or `messages`)."""
    steps = scenario.get("steps")
    if steps is None:
        return agent, step_input(scenario, None)
    *earlier, last = steps
    previous = None
    for n, step in enumerate(earlier, 1):
        if "advance_clock" in step:
            assert at.clock is not None, f"step {n}: advance_clock without ledger.clock_ms"
            at.clock.advance(step["advance_clock"])
        else:
            agent = new_agent(agent, step, at)
            agent = step_policy(agent, step, approvals, use_async)
            result = run_one(agent, step_input(step, previous))
            if "output" in step.get("expect", {}):
                assert result.output == step["expect"]["output"], (f"step {n}", result.output)
            previous = result
        check_drain(scenario, at, step)
    return step_policy(new_agent(agent, last, at), last, approvals, use_async), step_input(last, previous)


def new_agent(agent: ambit.Agent, step: dict[str, Any], at: LedgerAt) -> ambit.Agent:
    """A step's `new_agent`: a fresh agent built from the file (new MCP connections; the run's OAuth
    servers and token files); else the agent itself."""
    if not step.get("new_agent"):
        return agent
    assert at.rebuild is not None, "new_agent without a built agent"
    return at.rebuild()


def run_async(agent: ambit.Agent, text: Any) -> Any:
    return asyncio.run(agent.run(text, **ctx_kw()))


def subset(want: Any, got: Any, path: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict), (path, got)
        for k, v in want.items():
            subset(v, got.get(k), f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(want) == len(got), (path, want, got)
        for i, (w, g) in enumerate(zip(want, got)):
            subset(w, g, f"{path}[{i}]")
    else:
        assert want == got, (path, want, got)


@functools.cache
def mcp_dir() -> Path:
    """Where scripts/mcp-servers.sh installed the MCP servers (idempotent; run once per session)."""
    out = subprocess.run(["bash", str(REPO / "scripts" / "mcp-servers.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def headless_consent(deny: bool) -> Any:
    """The user's consent, headless: fetches the authorization URL with a plain HTTP client (the test
    server approves at once, or denies when the URL carries `consent=deny`) and hands back the URL of the
    redirect, as a browser sent back to the redirect URI would."""
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    def consent(url: str) -> str:
        try:
            urllib.request.build_opener(NoRedirect).open(url + ("&consent=deny" if deny else ""), timeout=30)
        except urllib.error.HTTPError as e:
            if e.code in (302, 303, 307) and e.headers.get("location"):
                return str(e.headers["location"])
            raise
        raise RuntimeError("the authorization endpoint did not redirect")
    return consent


def scenario_oauth(o: dict[str, Any], name: str, at: LedgerAt) -> ambit.OAuth:
    """A server's `oauth` field as ``ambit.OAuth``: `token_store` `file` is a token file in the run's
    directory (shared by every agent of the run), `memory` (default) none; the headless consent."""
    assert o.get("token_store", "memory") in ("memory", "file"), o
    assert o.get("consent", "approve") in ("approve", "deny"), o
    code = o.get("grant", "authorization_code") == "authorization_code"
    return ambit.OAuth(grant=o.get("grant", "authorization_code"), client_name=o.get("client_name"),
                       scopes=o.get("scopes", ()), client_id=o.get("client_id"),
                       client_secret=o.get("client_secret"),
                       redirect_uri="http://127.0.0.1:1/callback" if code else None,
                       on_authorize=headless_consent(o.get("consent") == "deny") if code else None,
                       token_store=str(at.dir / f"tokens-{name}.json") if o.get("token_store") == "file" else None)


#: The `oauth` servers (tests/mcp/oauth_server.py) the test started: stopped when it ends.
OAUTH_SERVERS: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def stop_oauth_servers() -> Any:
    yield
    while OAUTH_SERVERS:
        p = OAUTH_SERVERS.pop()
        p.kill()
        p.wait()


def oauth_server(at: LedgerAt, name: str, args: list[str]) -> str:
    """The MCP URL of the run's `oauth` server `name`, started with `args` the first time."""
    if name not in at.oauth:
        p = subprocess.Popen([str(mcp_dir() / "venv/bin/python"), str(REPO / "tests/mcp/oauth_server.py"), *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        OAUTH_SERVERS.append(p)
        assert p.stdout is not None
        at.oauth[name] = p.stdout.readline().strip()
    return at.oauth[name]


def check_oauth_stats(scenario: dict[str, Any], at: LedgerAt) -> None:
    """`expect.oauth_stats`: each `oauth` server's counters (`GET /stats`), the keys named, equal."""
    import urllib.request
    for name, want in scenario["expect"].get("oauth_stats", {}).items():
        base = at.oauth[name].removesuffix("/mcp")
        with urllib.request.urlopen(f"{base}/stats", timeout=30) as r:
            stats = json.loads(r.read())
        for k, v in want.items():
            assert stats.get(k) == v, (f"oauth_stats.{name}.{k}", v, stats)


def scenario_mcp(scenario: dict[str, Any], at: LedgerAt) -> list[ambit.McpServer]:
    """The scenario's MCP servers; `server` names a real one, run here over stdio (`oauth`: over HTTP,
    one per run of the file)."""
    servers = []
    for s in scenario.get("mcp_servers", []):
        s = dict(s)
        kind = s.pop("server")
        if kind == "oauth":
            name = s.pop("name")
            url = oauth_server(at, name, s.pop("server_args", []))
            oauth = scenario_oauth(s.pop("oauth"), name, at)
            servers.append(ambit.McpServer.http(name, url, oauth=oauth, **s))
            continue
        if kind == "everything":
            js = mcp_dir() / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
            command, args = "node", [str(js), "stdio"]
        elif kind == "dynamic":  # tests/mcp/dynamic_server.py: adds a tool at run time
            command, args = str(mcp_dir() / "venv/bin/python"), [str(REPO / "tests/mcp/dynamic_server.py")]
        else:  # "unavailable": a server whose command does not exist
            assert kind == "unavailable", kind
            command, args = "/nonexistent/ambit-mcp-server", []
        servers.append(ambit.McpServer.stdio(s.pop("name"), command, args, **s))
    return servers


def scenario_deferral(scenario: dict[str, Any]) -> ambit.Deferral | None:
    return ambit.Deferral(**scenario["deferral"]) if "deferral" in scenario else None


MODELS = {"openai_chat": ambit.OpenAIChat, "anthropic": ambit.Anthropic, "openai_responses": ambit.OpenAIResponses}


def scenario_model(scenario: dict[str, Any], base_url: str) -> ambit.Model:
    """The scenario's model on its wire, streamed or not."""
    cfg = scenario["agent"]
    return MODELS[scenario.get("wire", "openai_chat")](cfg["model"], base_url=base_url, api_key=cfg.get("api_key"),
                                                       stream=scenario.get("stream", False),
                                                       max_retries=cfg.get("max_retries", 0),
                                                       timeout=cfg.get("timeout_secs"),
                                                       headers=cfg.get("headers"), query=cfg.get("query"),
                                                       **cfg.get("settings", {}))


#: PostgreSQL when scripts/test.sh started one (each run makes its own session in the shared database,
#: and a ledger's scope, routine id and run id there get a suffix of their own).
STORES = ["sqlite"] + (["postgres"] if os.environ.get("AMBIT_TEST_POSTGRES_URL") else [])


@dataclass
class LedgerAt:
    """A ledger store: its URL (a fresh SQLite file, or the shared PostgreSQL database), the suffix the
    scenario's scope, routine id and run id get there (none on SQLite; unique on PostgreSQL), and the
    manual clock of a scenario with `ledger.clock_ms` (the test hook; None: the system clock)."""

    url: str
    suffix: str
    clock: Any = None
    #: The run's `oauth` MCP servers' URLs by name, and a directory of the run's own (token files).
    oauth: dict[str, str] = field(default_factory=dict)
    dir: Path = field(default_factory=lambda: Path(__import__("tempfile").mkdtemp(prefix="ambit-run-")))
    #: Builds the run's agent again (a step's `new_agent`).
    rebuild: Any = None

    async def open(self) -> ambit.Ledger:
        if self.clock is None:
            return await ambit.Ledger.open(self.url)
        return ambit.Ledger(await _native._testing_open_ledger(self.url, self.clock))


def ledger_at(store: str, scenario: dict[str, Any] | None = None) -> LedgerAt:
    """The ledger store `store` for one run of `scenario`, with a clock of its own when it asks for one."""
    import tempfile
    import uuid
    start = (scenario or {}).get("ledger", {}).get("clock_ms")
    clock = None if start is None else _native._TestingClock(start)
    if store == "sqlite":
        return LedgerAt(f"sqlite://{tempfile.mkdtemp(prefix='ambit-ledger-')}/ledger.db", "", clock)
    return LedgerAt(os.environ["AMBIT_TEST_POSTGRES_URL"], "-" + uuid.uuid4().hex[:16], clock)


def ledger_vars(scenario: dict[str, Any], at: LedgerAt) -> dict[str, str]:
    """`{{scope}}` and `{{routine_id}}` for the provider: the ledger's, as that store has them."""
    cfg = scenario.get("ledger", {})
    return {k: cfg[k] + at.suffix for k in ("scope", "routine_id") if cfg.get(k) is not None}


def check_drain(scenario: dict[str, Any], at: LedgerAt, step: dict[str, Any] | None = None) -> None:
    """`expect.drain_decision` of the scenario (or of one of its `steps`): what ``Ledger.drain_decision``
    answers for the routine's run (the default limits), on the ledger's clock."""
    want = (step or scenario).get("expect", {}).get("drain_decision")
    if want is None:
        return
    cfg, sfx = scenario["ledger"], at.suffix

    async def decide() -> Any:
        ledger = await at.open()
        return await ledger.drain_decision(cfg["routine_id"] + sfx, cfg["run_id"] + sfx)

    subset(want, vars(asyncio.run(decide())), "drain_decision")


def scenario_ledger(scenario: dict[str, Any], at: LedgerAt) -> ambit.ledger.RoutineLedger | None:
    """`ledger`: the work ledger's four tools at `at`, bound to one run of a routine."""
    cfg = scenario.get("ledger")
    if cfg is None:
        return None
    sfx = at.suffix
    ledger = asyncio.run(at.open())
    routine = cfg.get("routine_id")
    return ledger.for_routine(cfg["scope"] + sfx, run_id=cfg["run_id"] + sfx,
                              routine_id=None if routine is None else routine + sfx, limit=cfg.get("limit", 5))


def scenario_memory(scenario: dict[str, Any]) -> tuple[ambit.Memory | None, str | None]:
    """`memory`: a fresh SQLite memory store (one per agent built: one per run of the file) and the name."""
    cfg = scenario.get("memory")
    if cfg is None:
        return None, None
    import tempfile
    url = f"sqlite://{tempfile.mkdtemp(prefix='ambit-memory-')}/memory.db"
    return asyncio.run(ambit.Memory.open(url)), cfg["agent"]


def build_agent(scenario: dict[str, Any], base_url: str, use_async: bool = False,
                approvals: ScriptedApprovals | None = None, ledger: LedgerAt | None = None,
                model: ambit.Model | None = None) -> ambit.Agent:
    cfg = scenario["agent"]
    at = ledger or ledger_at("sqlite")
    at.rebuild = lambda: build_agent(scenario, base_url, use_async, approvals, at, model)
    named = scenario_named_agents(scenario, base_url, use_async)
    CONTEXT[:] = [ScenarioContext(scenario["context"])] if "context" in scenario else []
    approvals = approvals or ScriptedApprovals(scenario)
    memory, agent_name = scenario_memory(scenario)
    return ambit.Agent(
        profiles={name: scenario_model({**scenario, "agent": {**cfg, "model": p["model"],
                                                                 "settings": p.get("settings", {})}}, base_url)
                  for name, p in cfg.get("profiles", {}).items()},
        agents=named,
        policy=scenario_policy(scenario, approvals, use_async),
        model=model or scenario_model(scenario, base_url),
        instructions=cfg.get("instructions"),
        max_turns=cfg.get("max_turns"),
        max_concurrency=cfg.get("max_concurrency"),
        max_tokens=cfg.get("budget", {}).get("max_tokens"),
        max_cost=cfg.get("budget", {}).get("max_cost"),
        prices={m: ambit.Price(**p) for m, p in cfg.get("prices", {}).items()},
        checklist=cfg.get("checklist", False),
        checklist_nudge_cap=cfg.get("checklist_nudge_cap"),
        background=cfg.get("background", False),
        scratchpad=cfg.get("scratchpad", False),
        subagents=ambit.Subagents(**cfg["subagents"]) if "subagents" in cfg else None,
        tools=[scenario_tool(t, use_async) for t in scenario["tools"]],
        mcp=scenario_mcp(scenario, at),
        deferral=scenario_deferral(scenario),
        builtins=scenario.get("builtins", ()),
        ledger=scenario_ledger(scenario, at),
        memory=memory,
        agent_name=agent_name,
        **scenario_output(cfg),
        skills=ambit.Skills(**scenario["skills"]) if "skills" in scenario else None,
        knowledge=ambit.Knowledge(**scenario["knowledge"]) if "knowledge" in scenario else None,
        credentials=scenario_credentials(scenario, use_async),
        **scenario_hooks(scenario),
    )


def scenario_named_agents(scenario: dict[str, Any], base_url: str, use_async: bool) -> dict[str, ambit.NamedAgent]:
    """`named_agents`: each an agent of its own (model, instructions, tools, policy) on the same provider."""
    out: dict[str, ambit.NamedAgent] = {}
    for name, n in scenario.get("named_agents", {}).items():
        own = {"name": f"{scenario['name']}/{name}", "wire": scenario.get("wire", "openai_chat"),
               "stream": scenario.get("stream", False),
               "agent": {"model": n["model"], "api_key": scenario["agent"]["api_key"],
                         "instructions": n.get("instructions")},
               "tools": n.get("tools", []), "policy": n.get("policy", {})}
        out[name] = ambit.NamedAgent(build_agent(own, base_url, use_async), description=n["description"])
    return out


def hook_answer(behavior: dict[str, Any], ctx: ambit.HookContext[ScenarioContext],
                payload: dict[str, Any]) -> ambit.HookResult:
    """A scenario hook's `behavior` (tests/scenarios/README.md), the same in every suite."""
    if "raises" in behavior:
        raise RuntimeError(behavior["raises"])
    if behavior.get("uppercase_result"):
        return ambit.Replace(payload["result"].upper())
    if "append_context" in behavior:
        return ambit.Replace(f"{payload['result']} [{ctx.context.data[behavior['append_context']]}]")
    if "refuse" in behavior:
        return ambit.Refuse(behavior["refuse"])
    if "set_arguments" in behavior:
        return ambit.Replace(behavior["set_arguments"])
    if "append_instructions" in behavior:
        return ambit.Replace({"instructions": (payload["instructions"] or "") + behavior["append_instructions"]})
    if "set_preamble" in behavior and payload["tool_calls"]:
        return ambit.Replace({"text": behavior["set_preamble"]})
    return None


def guardrail_answer(behavior: dict[str, Any], payload: dict[str, Any]) -> ambit.GuardrailVerdict:
    """A scenario guardrail's `behavior`: trips on a word (case-insensitively) in `input` or `output`."""
    if "raises" in behavior:
        raise RuntimeError(behavior["raises"])
    word = behavior["trips_on"]
    text = payload["input"] if "input" in payload else payload["output"]
    if word.lower() in text.lower():
        return ambit.GuardrailVerdict(tripped=True, info={"matched": word})
    return ambit.GuardrailVerdict(tripped=False)


def scenario_hooks(scenario: dict[str, Any]) -> dict[str, Any]:
    """`hooks`, `input_guardrails`, `output_guardrails`: plain functions, or async ones (`async: true`)."""
    def hook(entry: dict[str, Any]) -> ambit.Hook:
        behavior = entry["behavior"]
        if entry.get("async"):
            async def run_async(ctx: ambit.HookContext[ScenarioContext], payload: dict[str, Any]) -> ambit.HookResult:
                await asyncio.sleep(0)
                return hook_answer(behavior, ctx, payload)
            return ambit.Hook(entry["point"], run_async, name=entry["name"])

        def run(ctx: ambit.HookContext[ScenarioContext], payload: dict[str, Any]) -> ambit.HookResult:
            return hook_answer(behavior, ctx, payload)
        return ambit.Hook(entry["point"], run, name=entry["name"])

    def guardrail(entry: dict[str, Any]) -> ambit.Guardrail:
        behavior = entry["behavior"]
        if entry.get("async"):
            async def check_async(ctx: ambit.HookContext[Any], payload: dict[str, Any]) -> ambit.GuardrailVerdict:
                await asyncio.sleep(0)
                return guardrail_answer(behavior, payload)
            return ambit.Guardrail(check_async, name=entry["name"])

        def check(ctx: ambit.HookContext[Any], payload: dict[str, Any]) -> ambit.GuardrailVerdict:
            return guardrail_answer(behavior, payload)
        return ambit.Guardrail(check, name=entry["name"])

    return {"hooks": [hook(h) for h in scenario.get("hooks", [])],
            "input_guardrails": [guardrail(g) for g in scenario.get("input_guardrails", [])],
            "output_guardrails": [guardrail(g) for g in scenario.get("output_guardrails", [])]}


def scenario_output(cfg: dict[str, Any]) -> dict[str, Any]:
    """`agent.output`: the final answer's type, given as a JSON Schema (`ambit.OutputSchema`)."""
    out = cfg.get("output")
    if out is None:
        return {}
    return {"output_type": ambit.OutputSchema(out["name"], out["schema"]), "output_retries": out.get("retries")}


def check(scenario: dict[str, Any], run: Any, agent: ambit.Agent | None = None,
          approvals: ScriptedApprovals | None = None, last: ambit.Agent | None = None) -> None:
    """`agent` is listed before the run (`tool_list`); `last`, the agent the last step ran (a step's
    `with_policy` makes a new one; default `agent`), after it (`tool_list_after`)."""
    expect = scenario["expect"]
    if agent is not None and "tool_list" in expect:
        subset(expect["tool_list"], [vars(t) for t in agent.list_tools()], "tool_list")
    if "error" in expect:
        with pytest.raises(ambit.AmbitError) as info:
            run()
        assert info.value.code == expect["error"]["code"], info.value
        if "message_contains" in expect["error"]:
            assert expect["error"]["message_contains"] in str(info.value)
        for key, value in expect["error"].get("usage", {}).items():
            assert info.value.usage[key] == value, (key, info.value.usage)  # type: ignore[attr-defined]
        if "attempt" in expect["error"]:
            assert isinstance(info.value, ambit.OutputInvalid), info.value
            assert info.value.attempt == expect["error"]["attempt"], info.value.attempt
        if "hook" in expect["error"]:
            assert isinstance(info.value, ambit.HookFailed), info.value
            assert info.value.hook == expect["error"]["hook"], info.value.hook
        if "guardrail" in expect["error"]:
            assert isinstance(info.value, ambit.GuardrailTripped), info.value
            assert info.value.guardrail == expect["error"]["guardrail"], info.value.guardrail
            assert info.value.verdict == expect["error"].get("verdict", info.value.verdict), info.value.verdict
        if "tools" in expect["error"]:
            assert isinstance(info.value, ambit.OutputTruncated), info.value
            assert info.value.tools == expect["error"]["tools"], info.value.tools
        return
    result = run()
    if "output" in expect:
        assert result.output == expect["output"]
    if "structured_output" in expect:
        assert result.structured_output == expect["structured_output"], result.structured_output
    if "tool_calls" in expect:
        assert len(result.tool_calls) == len(expect["tool_calls"]), result.tool_calls
        for want, got in zip(expect["tool_calls"], result.tool_calls):
            for key, value in want.items():
                assert getattr(got, key) == value, (key, got)
    for key, value in expect.get("usage", {}).items():
        assert getattr(result.usage, key) == value, (key, result.usage)
    if expect.get("host_saw_cancel"):
        for _ in range(500):  # the tool notices at its next checkpoint, within 10 ms
            if SAW_CANCEL:
                break
            time.sleep(0.01)
        assert SAW_CANCEL, "the host tool never saw its cancellation token"
    if "open_items" in expect:
        assert [i.text for i in result.open_items] == expect["open_items"], result.open_items
    if "stop_reason" in expect:
        assert result.stop_reason == expect["stop_reason"], result.stop_reason
    if "cost" in expect:
        assert result.cost is not None and abs(result.cost - expect["cost"]) <= 1e-12, result.cost
    last = last or agent
    if last is not None and "tool_list_after" in expect:
        subset(expect["tool_list_after"], [vars(t) for t in last.list_tools()], "tool_list_after")
    if approvals is not None and "approval_requests" in expect:
        subset(expect["approval_requests"], [vars(r) for r in approvals.requests], "approval_requests")


def check_provider(scenario: dict[str, Any], provider: Any) -> dict[str, Any]:
    """Every scripted exchange was used and none mismatched; `expect.abandoned`: the requests whose
    client hung up before the answer (polled for a while: the hang-up may reach the provider after the run
    ends). Returns the provider's state."""
    want = scenario["expect"].get("abandoned")
    state = provider.state()
    for _ in range(1000):
        if want is None or len(state["abandoned"]) >= len(want):
            break
        time.sleep(0.01)
        state = provider.state()
    if want is not None:
        assert state["abandoned"] == want, ("abandoned", state["abandoned"])
    assert state["mismatches"] == [] and state["remaining"] == 0, state
    # `absent_from_requests`: texts no request holds (a run context never reaches the model).
    for text in scenario["expect"].get("absent_from_requests", []):
        for n, request in enumerate(state["requests"], 1):
            assert text not in json.dumps(request["body"]), f"request {n} holds {text!r}"
    return state


async def cancel_when_reached(scenario: dict[str, Any], provider: Any, run: Any) -> None:
    """`cancel`: `run()` (a coroutine) runs as a task, cancelled once the provider has received request
    `at_request` (which it holds with its `delay_ms`); the task must end cancelled."""
    task = asyncio.ensure_future(run())
    at = scenario["cancel"]["at_request"]
    for _ in range(1000):  # bounded polling on a real condition: the provider has the request
        if task.done() or provider.state()["served"] >= at:
            break
        await asyncio.sleep(0.01)
    assert not task.done(), f"the run ended before it was cancelled: {task.result()!r}"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


#: A scenario with `session` runs through ``ambit.Sessions`` (which does not stream), once per store, in
#: test_scenario_session; the rest run three ways (a `cancel` one two: `run_sync` cannot be cancelled).
SESSIONS = [p for p in SCENARIOS if "session" in json.loads(p.read_text())]
RUNS = [p for p in SCENARIOS if p not in SESSIONS]
SYNC_RUNS = [p for p in RUNS if "cancel" not in json.loads(p.read_text())]


def on_stores(paths: list[Path]) -> Any:
    """Each file once, and a file with a `ledger` once per store."""
    cases = [(p, s) for p in paths for s in (STORES if "ledger" in json.loads(p.read_text()) else ["sqlite"])]
    return pytest.mark.parametrize(("path", "store"), cases,
                                   ids=[p.stem if s == "sqlite" else f"{p.stem}-{s}" for p, s in cases])


@on_stores(RUNS)
def test_scenario_async(path: Path, store: str, start_provider: Any) -> None:
    SAW_CANCEL.clear()
    scenario = json.loads(path.read_text())
    at = ledger_at(store, scenario)
    provider = start_provider(path, ledger_vars(scenario, at))
    approvals = ScriptedApprovals(scenario)
    agent = build_agent(scenario, provider.base_url, use_async=True, approvals=approvals, ledger=at)
    last, text = run_steps(scenario, agent, approvals, True, run_async, at)
    if "cancel" in scenario:
        asyncio.run(cancel_when_reached(scenario, provider, lambda: last.run(text, **ctx_kw())))
    else:
        check(scenario, lambda: run_async(last, text), agent, approvals, last)
        check_drain(scenario, at)
        check_oauth_stats(scenario, at)
    state = check_provider(scenario, provider)
    # Every request ambit sent and every answer scripted, against the official openai/anthropic packages.
    assert validate_exchanges(state) == len(scenario["exchanges"])


async def collect_events(agent: ambit.Agent, text: Any) -> tuple[list[Any], Any]:
    """Runs `agent.stream`; returns the events before the end, and the RunFinished event."""
    seen: list[Any] = []
    async for event in agent.stream(text, **ctx_kw()):
        seen.append(event)
    assert isinstance(seen[-1], ambit.events.RunFinished), seen[-1]
    return seen[:-1], seen[-1]


@on_stores(RUNS)
def test_scenario_stream(path: Path, store: str, start_provider: Any) -> None:
    """The same scenarios through `async for event in agent.stream(...)`: typed events in order, text
    deltas adding up to the output, the same result (or error) as `run`."""
    SAW_CANCEL.clear()
    scenario = json.loads(path.read_text())
    at = ledger_at(store, scenario)
    provider = start_provider(path, ledger_vars(scenario, at))
    approvals = ScriptedApprovals(scenario)
    agent = build_agent(scenario, provider.base_url, use_async=True, approvals=approvals, ledger=at)
    # Earlier `steps` run to their result; the last one streams.
    last, last_input = run_steps(scenario, agent, approvals, True, run_async, at)
    if "cancel" in scenario:
        # Cancelling the task that iterates the stream closes the stream (and so the run) at its await.
        asyncio.run(cancel_when_reached(scenario, provider, lambda: collect_events(last, last_input)))
        check_provider(scenario, provider)
        return
    seen: list[Any] = []

    def run() -> Any:
        events, finished = asyncio.run(collect_events(last, last_input))
        seen.extend(events)
        assert finished.usage == finished.result.usage
        text = "".join(e.text for e in events if isinstance(e, ambit.events.TextDelta))
        assert text.endswith(finished.result.output), (text, finished.result.output)
        return finished.result

    check(scenario, run, agent, approvals, last)
    check_oauth_stats(scenario, at)
    if "error" not in scenario["expect"]:
        # A history's run reports its last user message as its input.
        started = last_input if isinstance(last_input, str) else last_input[-1]
        started = started["content"] if isinstance(started, dict) else getattr(started, "content", started)
        assert isinstance(seen[0], ambit.events.RunStarted)
        if isinstance(started, list):
            # A message of parts: its text view, the first part's text first.
            assert seen[0].input.startswith(started[0]["text"] + "\n[image "), seen[0].input
        else:
            assert seen[0].input == started
        types = [e.type for e in seen]
        # Every event the core sends has its own class here: none arrives as the untyped fallback.
        untyped = [e.type for e in seen if isinstance(e, ambit.events.Event)]
        assert not untyped, f"events without a class in ambit.events: {untyped}"
        for e in seen:
            if isinstance(e, ambit.events.ApprovalRequested):
                assert isinstance(e.request, ambit.ApprovalRequest), e
        i = 0
        for want in scenario["expect"].get("events", []):
            assert want in types[i:], (want, types)
            i += types[i:].index(want) + 1
        for absent in scenario["expect"].get("absent_events", []):
            assert absent not in types, (absent, types)
        if "stop_reasons" in scenario["expect"]:
            got = [e.stop_reason for e in seen if isinstance(e, ambit.events.ModelResponse)]
            assert got == scenario["expect"]["stop_reasons"], got
        if "from_text" in scenario["expect"]:
            got = [e.name for e in seen if isinstance(e, ambit.events.ToolCallRequested) and e.from_text]
            assert got == scenario["expect"]["from_text"], got
        if "streamed_text" in scenario["expect"]:
            got_text = "".join(e.text for e in seen if isinstance(e, ambit.events.TextDelta))
            assert got_text == scenario["expect"]["streamed_text"], got_text
        check_drain(scenario, at)
    check_provider(scenario, provider)


def scenario_test_model(scenario: dict[str, Any], use_async: bool) -> ambit.Model:
    """`test_model`: the users' test model on the scenario's wire, answering with the exchanges'
    `respond` entries: scripted (`ambit.TestModel`), or by a function of the request
    (`ambit.FunctionModel`, plain or async) answering request n with the n-th."""
    def reply(respond: dict[str, Any]) -> ambit.Reply:
        usage = respond.get("usage", {})
        return ambit.Reply(content=respond.get("content"),
                           tool_calls=[ambit.ReplyCall(c["name"], c["arguments"], c.get("id"))
                                       for c in respond.get("tool_calls", [])],
                           input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0))
    replies = [reply(e["respond"]) for e in scenario["exchanges"]]
    common: dict[str, Any] = {"wire": scenario.get("wire", "openai_chat"), "model": scenario["agent"]["model"],
                              "stream": scenario.get("stream", False)}
    if scenario["test_model"] == "script":
        return ambit.TestModel(replies, **common)

    def answer(request: ambit.TestRequest) -> ambit.Reply:
        assert request.model == scenario["agent"]["model"] and request.body["model"] == request.model
        assert [t["name"] for t in request.tools] == [t["name"] for t in scenario["tools"]], request.tools
        return replies[request.index - 1]

    async def answer_async(request: ambit.TestRequest) -> ambit.Reply:
        return answer(request)
    return ambit.FunctionModel(answer_async if use_async else answer, **common)


TEST_MODEL_RUNS = [p for p in RUNS if "test_model" in json.loads(p.read_text())]


@pytest.mark.parametrize("mode", ["run_async", "run_sync", "stream"])
@pytest.mark.parametrize("path", TEST_MODEL_RUNS, ids=[p.stem for p in TEST_MODEL_RUNS])
def test_scenario_on_the_test_model(path: Path, mode: str) -> None:
    """A file with `test_model` runs again on the users' test model, without a provider: its replies
    are the exchanges' answers, so the run must come out as it does against the loopback provider."""
    scenario = json.loads(path.read_text())
    use_async = mode != "run_sync"
    approvals = ScriptedApprovals(scenario)
    agent = build_agent(scenario, "", use_async=use_async, approvals=approvals,
                        model=scenario_test_model(scenario, use_async))
    text = scenario["input"]
    if mode == "stream":
        def streamed() -> Any:
            events, finished = asyncio.run(collect_events(agent, text))
            types = [e.type for e in events]
            i = 0
            for want in scenario["expect"].get("events", []):
                assert want in types[i:], (want, types)
                i += types[i:].index(want) + 1
            if "stop_reasons" in scenario["expect"]:
                got = [e.stop_reason for e in events if isinstance(e, ambit.events.ModelResponse)]
                assert got == scenario["expect"]["stop_reasons"], got
            deltas = "".join(e.text for e in events if isinstance(e, ambit.events.TextDelta))
            if "streamed_text" in scenario["expect"]:
                assert deltas == scenario["expect"]["streamed_text"], deltas
            return finished.result
        check(scenario, streamed, agent, approvals)
    elif mode == "run_sync":
        check(scenario, lambda: agent.run_sync(text), agent, approvals)
    else:
        check(scenario, lambda: run_async(agent, text), agent, approvals)


@on_stores(SYNC_RUNS)
def test_scenario_sync(path: Path, store: str, start_provider: Any) -> None:
    SAW_CANCEL.clear()
    scenario = json.loads(path.read_text())
    at = ledger_at(store, scenario)
    provider = start_provider(path, ledger_vars(scenario, at))
    approvals = ScriptedApprovals(scenario)
    agent = build_agent(scenario, provider.base_url, use_async=False, approvals=approvals, ledger=at)
    last, text = run_steps(scenario, agent, approvals, False, lambda a, t: a.run_sync(t, **ctx_kw()), at)
    check(scenario, lambda: last.run_sync(text, **ctx_kw()), agent, approvals, last)
    check_drain(scenario, at)
    check_oauth_stats(scenario, at)
    check_provider(scenario, provider)


async def run_session(scenario: dict[str, Any], url: str, base_url: str,
                      approvals: ScriptedApprovals) -> tuple[ambit.Agent, Any]:
    """The scenario's `session.steps` through ``ambit.Sessions``; the last agent and the last result."""
    config = scenario["session"].get("config", {})
    sessions = await ambit.Sessions.open(url, **config)
    agent = build_agent(scenario, base_url, use_async=True, approvals=approvals)
    sid = await sessions.create()
    result = None
    RELEASE["event"] = asyncio.Event()
    deliveries = sessions.deliveries()
    for n, step in enumerate(scenario["session"]["steps"], 1):
        want = step.get("expect", {})
        if step.get("release"):
            # The held tools finish; their results land in the session after the run that started them.
            RELEASE["event"].set()
            await check_task_step(sessions, deliveries, sid, want, n)
            continue
        result = None
        try:
            if "resume" in step:
                # As another process would: a new store handle, a new agent.
                sessions = await ambit.Sessions.open(url, **config)
                agent = build_agent(scenario, base_url, use_async=True, approvals=approvals)
                result = await sessions.resume(agent, sid, decision(step["resume"]))
            else:
                result = await sessions.run(agent, sid, session_input(step["input"]))
        except ambit.AwaitingApproval as e:
            assert "parked" in want, (n, e)
            assert e.code == "awaiting_approval" and e.session_id == sid, (n, e)
            pending = await sessions.pending(sid)
            assert pending is not None and pending.tool == e.request["tool"], (n, pending, e.request)
            subset(want["parked"], vars(pending), f"step {n}: parked")
            continue
        except ambit.AmbitError as e:
            assert "error" in want, (n, e)
            assert e.code == want["error"]["code"], (n, e)
            assert want["error"].get("message_contains", "") in str(e), (n, e)
            continue
        assert "parked" not in want and "error" not in want, (n, want, result.output)
        if "output" in want:
            assert result.output == want["output"], (n, result.output)
        await check_task_step(sessions, deliveries, sid, want, n)
    assert result is not None, "the last step did not finish a run"
    if "session_log" in scenario["expect"]:
        assert [e["kind"] for e in await sessions.entries(sid)] == scenario["expect"]["session_log"]
    return agent, result


def session_input(raw: str | list[dict[str, Any]]) -> str | list[ambit.content.Part]:
    """A session step's input: its text, or its parts as the typed ``ambit.Text``/``Image``/``File``."""
    if isinstance(raw, str):
        return raw
    parts: list[ambit.content.Part] = []
    for p in raw:
        if p["type"] == "text":
            parts.append(ambit.Text(p["text"]))
        elif p["type"] == "image":
            parts.append(ambit.Image.from_bytes(base64.b64decode(p["data"]), p.get("media_type")))
        elif p["type"] == "image_url":
            parts.append(ambit.Image.from_url(p["url"]))
        else:
            parts.append(ambit.File.from_bytes(base64.b64decode(p["data"]), p["media_type"], p["filename"]))
    return parts


async def check_task_step(sessions: ambit.Sessions, deliveries: ambit.Deliveries, sid: str,
                          want: dict[str, Any], n: int) -> None:
    """A session step's `delivery` (the next one announced, within 60 s) and `task` (``task_result``
    of its `task_id`), each matched as a subset."""
    if "delivery" in want:
        got = await asyncio.wait_for(anext(deliveries), 60)
        assert got.session_id == sid, (n, got)
        subset(want["delivery"], vars(got), f"step {n}: delivery")
    if "task" in want:
        task = await sessions.task_result(sid, want["task"]["task_id"])
        subset(want["task"], vars(task), f"step {n}: task")


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("path", SESSIONS, ids=[p.stem for p in SESSIONS])
def test_scenario_session(path: Path, store: str, start_provider: Any, tmp_path: Path) -> None:
    """A session scenario on SQLite (a fresh file) and PostgreSQL: its runs and resumes in one session,
    the last result checked against `expect`."""
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    approvals = ScriptedApprovals(scenario)
    url = f"sqlite://{tmp_path}/sessions.db" if store == "sqlite" else os.environ["AMBIT_TEST_POSTGRES_URL"]
    agent, result = asyncio.run(run_session(scenario, url, provider.base_url, approvals))
    check(scenario, lambda: result, agent, approvals)
    state = provider.state()
    assert state["mismatches"] == [] and state["remaining"] == 0, state
    assert validate_exchanges(state) == len(scenario["exchanges"])


TIMELINES = [p for p in RUNS if "clock_ms" in json.loads(p.read_text()).get("ledger", {})]


@pytest.mark.parametrize("store", STORES)
def test_a_ledger_timeline_fails_when_the_clock_moves_a_millisecond_too_little(store: str, tmp_path: Path,
                                                                              start_provider: Any) -> None:
    """The negative control of the ledger timelines (`ledger.clock_ms`): each passes as written (above),
    and fails when any one of its `advance_clock` steps moves the clock a millisecond too little."""
    assert len(TIMELINES) >= 3, TIMELINES
    tried = 0
    for path in TIMELINES:
        scenario = json.loads(path.read_text())
        for n, step in enumerate(scenario["steps"]):
            if "advance_clock" not in step:
                continue
            short = json.loads(path.read_text())
            short["steps"][n]["advance_clock"] -= 1
            file = tmp_path / f"{n}-{path.name}"
            file.write_text(json.dumps(short))
            at = ledger_at(store, short)
            provider = start_provider(file, ledger_vars(short, at))
            approvals = ScriptedApprovals(short)
            agent = build_agent(short, provider.base_url, use_async=True, approvals=approvals, ledger=at)
            with pytest.raises((ambit.AmbitError, AssertionError)) as info:
                last, text = run_steps(short, agent, approvals, True, run_async, at)
                check(short, lambda: run_async(last, text), agent, approvals, last)
                check_drain(short, at)
            # What failed is the timeline: the provider saw another tool result, or the drain differs.
            assert "expected" in str(info.value) or "drain_decision" in str(info.value), info.value
            tried += 1
    assert tried >= 8, tried
