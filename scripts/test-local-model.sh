#!/usr/bin/env bash
# Opt-in, never in the default suite, and it downloads nothing: runs a real small model you already have
# (a GGUF file: Qwen2.5-Coder 0.5B/1.5B instruct, Llama 3.2 1B, …) through llama.cpp's server
# (tests/llama/serve.py) and
#   1. records what the model writes for a few tool-use prompts, with the tools offered (the server's own
#      parsing) and with the tools only described in the system message (the model's raw call text), as
#      fixtures for the text tool-call reader: tests/llama/fixtures/<model>.json (core/tests/text_call_fixtures.rs
#      reads every fixture whose entries carry `expect_calls`, filled in by whoever reviews the recording);
#   2. runs an ambit agent (Python) on the model with text_tool_calls="auto", then "constrained", and
#      prints what it did.
#
#   scripts/test-local-model.sh MODEL.gguf     (or AMBIT_LOCAL_MODEL=MODEL.gguf)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
model="${1:-${AMBIT_LOCAL_MODEL:-}}"
if [ -z "$model" ] || [ ! -f "$model" ]; then
  echo "test-local-model: give a GGUF model file you have (argument or AMBIT_LOCAL_MODEL); nothing is downloaded" >&2
  exit 2
fi
source "$here/scripts/python-env.sh"
"$AMBIT_PY" - "$here" "$model" <<'PY'
import asyncio, json, pathlib, subprocess, sys, urllib.request

here, model = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
import ambit

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "description": "Local time in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
PROMPTS = ["What's the weather in Paris?", "What time is it in Tokyo, and the weather there?", "Say hello."]

server = subprocess.Popen([sys.executable, str(here / "tests/llama/serve.py"), str(model), "--max-tokens", "256"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
base = server.stdout.readline().strip()
if not base.startswith("http://127.0.0.1:"):
    sys.exit(f"test-local-model: the server did not start ({base!r})")


def ask(body):
    req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)["choices"][0]["message"]


entries = []
names = [t["function"]["name"] for t in TOOLS]
described = "You can call these tools; to call one, write the call.\n" + "\n".join(json.dumps(t["function"]) for t in TOOLS)
for prompt in PROMPTS:
    entries.append({"mode": "tools_offered", "prompt": prompt, "offered": names,
                    "message": ask({"model": "m", "messages": [{"role": "user", "content": prompt}], "tools": TOOLS})})
    entries.append({"mode": "tools_described", "prompt": prompt, "offered": names,
                    "message": ask({"model": "m", "messages": [{"role": "system", "content": described},
                                                               {"role": "user", "content": prompt}]})})
out = here / "tests/llama/fixtures" / f"{model.stem}.json"
out.write_text(json.dumps({"model": model.name, "recorded_by": "scripts/test-local-model.sh", "entries": entries},
                          indent=2, ensure_ascii=False) + "\n")
print(f"recorded {len(entries)} answers in {out}")


@ambit.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


async def main() -> None:
    for mode in ("auto", "constrained"):
        agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base, api_key="none", text_tool_calls=mode),
                            tools=[get_weather], max_turns=4)
        try:
            events = [e async for e in agent.stream("What's the weather in Paris?")]
            r = events[-1].result
            read = [e.name for e in events if e.type == "tool_call_requested" and e.from_text]
            print(f"text_tool_calls={mode}: calls {[(c.name, c.arguments) for c in r.tool_calls]}, read from text {read}, "
                  f"output {r.output!r}, stop {r.stop_reason}")
        except ambit.AmbitError as e:
            print(f"text_tool_calls={mode}: {e.code}: {e}")

try:
    asyncio.run(main())
finally:
    server.stdin.close()
    server.wait(timeout=60)
PY
