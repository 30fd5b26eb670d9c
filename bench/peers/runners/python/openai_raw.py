"""The Python floor: the raw `openai` client doing the weather job's two requests by hand (see
bench/peers/README.md for the protocol)."""
import asyncio
import json
import os
import sys

from bench_harness import measure

from openai import AsyncOpenAI

env = os.environ
wire, stream = env.get("BENCH_WIRE", "chat"), env.get("BENCH_STREAM", "0") == "1"
if wire not in ("chat", "responses"):
    print(f"unsupported: wire {wire}", file=sys.stderr)
    sys.exit(3)
calls = 0
PROMPT = "weather in Paris?"


def get_weather(city: str) -> str:
    global calls
    calls += 1
    return f"sunny in {city}"


functions = {"get_weather": get_weather}
specs = [{"name": "get_weather", "description": "Current weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
if env.get("BENCH_TOOLS"):
    with open(env["BENCH_TOOLS"]) as f:
        for t in json.load(f):
            specs.append({"name": t["name"], "description": t["description"], "parameters": t["parameters"]})
            functions[t["name"]] = lambda **_: "ok"
chat_tools = [{"type": "function", "function": s} for s in specs]
responses_tools = [{"type": "function", "strict": False, **s} for s in specs]
client = AsyncOpenAI(base_url=env["BENCH_BASE_URL"], api_key="bench-key")
print("READY", flush=True)


def call(name: str, arguments: str) -> str:
    return functions[name](**json.loads(arguments))


async def chat_turn(messages: list) -> dict:
    """One Chat Completions request; returns the assistant message as a dict."""
    if not stream:
        r = await client.chat.completions.create(model="gpt-4.1", messages=messages, tools=chat_tools)
        return r.choices[0].message.model_dump(exclude_none=True)
    content, tool_calls = "", {}
    async for chunk in await client.chat.completions.create(model="gpt-4.1", messages=messages, tools=chat_tools,
                                                            stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            acc = tool_calls.setdefault(tc.index, {"id": "", "type": "function",
                                                   "function": {"name": "", "arguments": ""}})
            acc["id"] += tc.id or ""
            if tc.function:
                acc["function"]["name"] += tc.function.name or ""
                acc["function"]["arguments"] += tc.function.arguments or ""
    message = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = [tool_calls[i] for i in sorted(tool_calls)]
    return message


async def run_chat() -> str:
    messages = [{"role": "user", "content": PROMPT}]
    for _ in range(2):
        message = await chat_turn(messages)
        if not message.get("tool_calls"):
            return message.get("content") or ""
        messages.append(message)
        for tc in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": tc["id"],
                             "content": call(tc["function"]["name"], tc["function"]["arguments"])})
    return ""


async def responses_turn(items: list):
    if not stream:
        return await client.responses.create(model="gpt-4.1", input=items, tools=responses_tools)
    response = None
    async for event in await client.responses.create(model="gpt-4.1", input=items, tools=responses_tools,
                                                     stream=True):
        if event.type == "response.completed":
            response = event.response
    if response is None:
        raise RuntimeError("stream ended without response.completed")
    return response


async def run_responses() -> str:
    items = [{"role": "user", "content": PROMPT}]
    for _ in range(2):
        response = await responses_turn(items)
        function_calls = [o for o in response.output if o.type == "function_call"]
        if not function_calls:
            return response.output_text
        for fc in function_calls:
            items.append({"type": "function_call", "call_id": fc.call_id, "name": fc.name,
                          "arguments": fc.arguments})
            items.append({"type": "function_call_output", "call_id": fc.call_id,
                          "output": call(fc.name, fc.arguments)})
    return ""


run_once = run_chat if wire == "chat" else run_responses


asyncio.run(measure("openai_raw.py", run_once, lambda: calls))
