"""The ambit demo in Python: a weather agent with one host tool.

It talks to a real model when one is configured (OPENAI_API_KEY, or OPENAI_BASE_URL of any
OpenAI-compatible server such as llama.cpp, vLLM or Ollama; AMBIT_MODEL picks the model). With none
configured it starts ambit's loopback provider and says so: the model's answers are then scripted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ambit

HERE = Path(__file__).resolve().parent

WEATHER = {"paris": ("sunny", 22), "london": ("rainy", 14), "tokyo": ("cloudy", 18)}


@ambit.tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    sky, temp = WEATHER.get(city.strip().lower(), ("clear", 20))
    return {"city": city, "sky": sky, "temperature_c": temp}


def model() -> tuple[ambit.OpenAIChat, subprocess.Popen[str] | None]:
    name = os.environ.get("AMBIT_MODEL", "gpt-4.1-mini")
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        where = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        print(f"Using model {name} at {where}.")
        return ambit.OpenAIChat(name), None
    binary = os.environ.get("AMBIT_PROVIDER_BIN")
    if not binary:
        sys.exit("No model configured: set OPENAI_API_KEY or OPENAI_BASE_URL, or run `bash scripts/demo.sh`.")
    proc = subprocess.Popen([binary, "--exit-on-eof", str(HERE.parent / "scripted" / "weather.json")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    print("No OPENAI_API_KEY or OPENAI_BASE_URL set: using ambit's loopback provider.")
    print("The model's answers below are SCRIPTED; the tool call and the agent loop are real.")
    return ambit.OpenAIChat(name, base_url=base_url, api_key="sk-scripted"), proc


def main() -> None:
    chat, provider = model()
    try:
        agent = ambit.Agent(model=chat, instructions="You answer weather questions briefly.", tools=[get_weather])
        question = " ".join(sys.argv[1:]) or "What's the weather in Paris?"
        print(f"> {question}")
        result = agent.run_sync(question)
        for call in result.tool_calls:
            print(f"  tool {call.name}({call.arguments}) -> {call.result}")
        print(result.output)
        u = result.usage
        print(f"[{u.requests} model requests, {u.input_tokens} input + {u.output_tokens} output tokens]")
    finally:
        if provider is not None:
            provider.stdin.close()  # type: ignore[union-attr]
            provider.wait(timeout=5)


if __name__ == "__main__":
    main()
