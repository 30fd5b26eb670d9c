"""pydantic-ai (Python): the weather job (see bench/peers/README.md for the protocol). Not named pydantic_ai.py:
that would shadow the package, since the script's directory comes first on sys.path."""
import asyncio
import json
import os
import sys

from bench_harness import measure

from pydantic_ai import Agent, Tool
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

env = os.environ
wire, stream = env.get("BENCH_WIRE", "chat"), env.get("BENCH_STREAM", "0") == "1"
if wire not in ("chat", "responses"):
    print(f"unsupported: wire {wire}", file=sys.stderr)
    sys.exit(3)
calls = 0


def get_weather(city: str) -> str:
    """Current weather for a city."""
    global calls
    calls += 1
    return f"sunny in {city}"


def ok(**_: object) -> str:
    return "ok"


tools = [Tool(get_weather)]
if env.get("BENCH_TOOLS"):
    with open(env["BENCH_TOOLS"]) as f:
        tools += [Tool.from_schema(ok, name=t["name"], description=t["description"], json_schema=t["parameters"])
                  for t in json.load(f)]

provider = OpenAIProvider(base_url=env["BENCH_BASE_URL"], api_key="bench-key")
model_class = OpenAIChatModel if wire == "chat" else OpenAIResponsesModel
agent = Agent(model_class("gpt-4.1", provider=provider), tools=tools)
print("READY", flush=True)


async def run_once() -> str:
    if stream:
        async with agent.run_stream("weather in Paris?") as response:
            async for _ in response.stream_text(delta=True):
                pass
            return await response.get_output()
    return (await agent.run("weather in Paris?")).output


asyncio.run(measure("peer_pydantic_ai.py", run_once, lambda: calls))
