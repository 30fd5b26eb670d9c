"""ambit from Python: the weather job (see bench/peers/README.md for the protocol)."""
import asyncio
import json
import os

from bench_harness import measure

import ambit

env = os.environ
base_url, wire = env["BENCH_BASE_URL"], env.get("BENCH_WIRE", "chat")
stream = env.get("BENCH_STREAM", "0") == "1"
calls = 0


@ambit.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    global calls
    calls += 1
    return f"sunny in {city}"


def ok(**_: object) -> str:
    return "ok"


tools = [get_weather]
extra = []
if env.get("BENCH_TOOLS"):
    with open(env["BENCH_TOOLS"]) as f:
        extra = json.load(f)
    tools += [ambit.Tool(ok, name=t["name"], description=t["description"], parameters=t["parameters"]) for t in extra]
deferral = None
if env.get("BENCH_DEFER") == "1":
    deferral = ambit.Deferral(deferrable_tools=[t["name"] for t in extra])

if env.get("BENCH_OTEL"):
    # Telemetry on (bench/peers/telemetry.sh): spans exported to this OTLP/HTTP endpoint, contents too
    # with BENCH_OTEL_CONTENT=1.
    ambit.telemetry.enable(env["BENCH_OTEL"], record_content=env.get("BENCH_OTEL_CONTENT") == "1")

model_class = {"chat": ambit.OpenAIChat, "responses": ambit.OpenAIResponses, "anthropic": ambit.Anthropic}[wire]
model_name = "claude-sonnet-4-5" if wire == "anthropic" else "gpt-4.1"
agent = ambit.Agent(model=model_class(model_name, base_url=base_url, api_key="bench-key", stream=stream),
                    tools=tools, deferral=deferral)
print("READY", flush=True)


async def run_once() -> str:
    return (await agent.run("weather in Paris?")).output


asyncio.run(measure("ambit_py.py", run_once, lambda: calls, ambit.telemetry.flush if env.get("BENCH_OTEL") else None))
