"""openai-agents (Python): the weather job (see bench/peers/README.md for the protocol)."""
import asyncio
import json
import os
import sys

from bench_harness import measure

from agents import (Agent, FunctionTool, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)
from openai import AsyncOpenAI

env = os.environ
wire, stream = env.get("BENCH_WIRE", "chat"), env.get("BENCH_STREAM", "0") == "1"
if wire not in ("chat", "responses"):
    print(f"unsupported: wire {wire}", file=sys.stderr)
    sys.exit(3)
set_tracing_disabled(True)
calls = 0


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    global calls
    calls += 1
    return f"sunny in {city}"


async def ok(_ctx, _args: str) -> str:
    return "ok"


tools = [get_weather]
if env.get("BENCH_TOOLS"):
    with open(env["BENCH_TOOLS"]) as f:
        tools += [FunctionTool(name=t["name"], description=t["description"], params_json_schema=t["parameters"],
                               on_invoke_tool=ok, strict_json_schema=False) for t in json.load(f)]

client = AsyncOpenAI(base_url=env["BENCH_BASE_URL"], api_key="bench-key")
model_class = OpenAIChatCompletionsModel if wire == "chat" else OpenAIResponsesModel
agent = Agent(name="Assistant", model=model_class(model="gpt-4.1", openai_client=client), tools=tools)
print("READY", flush=True)


async def run_once() -> str:
    if stream:
        result = Runner.run_streamed(agent, "weather in Paris?")
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, "weather in Paris?")
    return result.final_output


asyncio.run(measure("openai_agents.py", run_once, lambda: calls))
