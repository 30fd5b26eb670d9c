"""Images and files in and out (issue 17, part 3), through the typed API: a run's input as parts
(`Text`, `Image`, `File`), the wire validation against the official packages failing on a malformed
block, and each bad part refused by name before anything is sent."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

import ambit
from conftest import REPO

SCENARIOS = REPO / "tests" / "scenarios"
from test_scenarios import build_agent, check_provider
from wire_types import validate_exchanges, validate_request

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
PDF = b"%PDF-1.4\n%%EOF\n"


def typed_parts() -> list[Any]:
    # The same parts as the `parts_input_*` files' message, built with the typed API.
    return [ambit.Text("What do these show?"), ambit.Image.from_bytes(PNG),
            ambit.File.from_bytes(PDF, "application/pdf", "report.pdf"),
            ambit.File.from_bytes(b"meeting at noon", "text/plain", "notes.txt"),
            ambit.Image.from_url("https://example.com/cat.png")]


@pytest.mark.parametrize("wire", ["chat", "anthropic", "responses"])
def test_typed_parts_reach_each_wire_in_its_blocks(wire: str, start_provider: Any, tmp_path: Path) -> None:
    path = SCENARIOS / f"parts_input_{wire}.json"
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url)
    result = asyncio.run(agent.run(typed_parts()))
    assert result.output == scenario["expect"]["output"]
    state = check_provider(scenario, provider)
    assert validate_exchanges(state) == 1
    # The run's messages keep the parts; sent back as a history, they go as they came.
    first = result.messages[0]
    assert isinstance(first, ambit.UserMessage)
    assert [p["type"] for p in first.parts] == ["text", "image", "file", "file", "image_url"]
    assert first.parts[1]["media_type"] == "image/png"


def test_a_png_labelled_jpeg_is_refused_naming_the_part(start_provider: Any) -> None:
    path = SCENARIOS / "parts_input_anthropic.json"
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url)
    with pytest.raises(ambit.InvalidMessage) as e:
        parts: list[ambit.content.Part | str] = [ambit.Text("hi"), ambit.Image.from_bytes(PNG, "image/jpeg")]
        asyncio.run(agent.run(parts))
    assert "messages[0].parts[1]: labelled image/jpeg, but the bytes are image/png" in str(e.value)
    assert e.value.index == 0 and e.value.field == "parts[1]"
    assert provider.state()["served"] == 0


def test_an_oversized_image_is_refused_naming_the_part(start_provider: Any) -> None:
    path = SCENARIOS / "parts_input_chat.json"
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url)
    big = PNG + b"\0" * (5 * 1024 * 1024)
    with pytest.raises(ambit.InvalidMessage) as e:
        parts: list[ambit.content.Part | str] = ["look", ambit.Image.from_bytes(big)]
        asyncio.run(agent.run(parts))
    assert f"parts[1]: image is {len(big)} bytes, over the 5242880-byte cap" in str(e.value)
    assert provider.state()["served"] == 0


def test_bytes_that_are_no_image_are_refused(start_provider: Any) -> None:
    path = SCENARIOS / "parts_input_chat.json"
    provider = start_provider(path)
    agent = build_agent(json.loads(path.read_text()), provider.base_url)
    with pytest.raises(ambit.InvalidMessage) as e:
        asyncio.run(agent.run([ambit.Image.from_bytes(b"hello")]))
    assert "parts[0]: the bytes are not a PNG, JPEG, GIF or WebP image" in str(e.value)


def recorded_body(wire: str, start_provider: Any) -> dict[str, Any]:
    path = SCENARIOS / f"parts_input_{wire}.json"
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    asyncio.run(build_agent(scenario, provider.base_url).run(typed_parts()))
    body: dict[str, Any] = provider.state()["requests"][0]["body"]
    return body


@pytest.mark.parametrize(("wire", "name", "break_it"), [
    ("anthropic", "anthropic", lambda b: b["messages"][0]["content"][1]["source"].pop("media_type")),
    ("anthropic", "anthropic", lambda b: b["messages"][0]["content"][2]["source"].update(type="pdf")),
    ("chat", "openai_chat", lambda b: b["messages"][0]["content"][1].update(image_url="data:image/png;base64,AA")),
    ("chat", "openai_chat", lambda b: b["messages"][0]["content"][2].update(type="document")),
    ("responses", "openai_responses", lambda b: b["input"][0]["content"][1].update(image_url={"url": "x"})),
    ("responses", "openai_responses", lambda b: b["input"][0]["content"][2].update(type="file")),
])
def test_the_wire_validation_fails_on_a_malformed_block(wire: str, name: str, break_it: Any,
                                                         start_provider: Any) -> None:
    # Negative control of the validation the scenario files get: the body ambit sent passes; the same
    # body with one block broken does not.
    body = recorded_body(wire, start_provider)
    validate_request(name, body)
    broken = copy.deepcopy(body)
    break_it(broken)
    with pytest.raises(Exception):
        validate_request(name, broken)


def test_image_render_is_offered_only_with_vision_and_shows_the_image(start_provider: Any, tmp_path: Path) -> None:
    png = base64.b64encode(PNG).decode()
    scenario = {"name": "image_render", "wire": "anthropic", "exchanges": [
        {"expect": {"tool_names": ["image_render"]},
         "respond": {"tool_calls": [{"id": "toolu_r", "name": "image_render", "arguments": {"base64": png}}]}},
        {"expect": {"messages_tail": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r",
            "content": [{"type": "text", "text": "Rendered the image from the base64 (image/png, 69 bytes)."},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]}]},
         "respond": {"content": "One green pixel."}}]}
    path = tmp_path / "image_render.json"
    path.write_text(json.dumps(scenario))
    provider = start_provider(path)
    model = ambit.Anthropic("claude-sonnet-4-5", base_url=provider.base_url, api_key="k")
    assert "image_render" not in [t.name for t in ambit.Agent(model=model).list_tools()]
    agent = ambit.Agent(model=model, vision=True)
    result = asyncio.run(agent.run("Show me the frame."))
    assert result.output == "One green pixel."
    state = provider.state()
    assert state["mismatches"] == [], state["mismatches"]
    validate_exchanges({**state, "scenario": "image_render", "wire": "anthropic"})


def test_a_session_turn_of_parts_is_stored_and_sent_again_from_a_new_store_handle(
        start_provider: Any, tmp_path: Path) -> None:
    # Turn 1 gives an image through one store handle; turn 2, through a fresh handle on the same SQLite
    # file (as another process would), sends the same bytes again. A refused part stores nothing.
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    image_message = {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                 {"type": "image_url", "image_url": {"url": url}}]}
    scenario = {
        "name": "session_parts_two_handles", "wire": "openai_chat",
        "agent": {"model": "gpt-4.1", "api_key": "sk-test-ambit"}, "tools": [], "input": "",
        "exchanges": [
            {"expect": {"messages_count": 1, "messages_tail": [image_message]}, "respond": {"content": "A dot."}},
            {"expect": {"messages_count": 3, "messages_tail": [image_message, {"role": "assistant"},
                                                               {"role": "user", "content": "Which colour?"}]},
             "respond": {"content": "Green."}},
        ],
        "expect": {"output": "Green."},
    }
    path = tmp_path / "session_parts.json"
    path.write_text(json.dumps(scenario))
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url)
    store = f"sqlite://{tmp_path}/sessions.db"
    first = ambit.Sessions.open_sync(store)
    sid = first.create_sync()
    with pytest.raises(ambit.InvalidMessage) as e:
        first.run_sync(agent, sid, ["hi", ambit.Image.from_bytes(PNG, "image/jpeg")])
    assert e.value.field == "parts[1]" and "labelled image/jpeg, but the bytes are image/png" in str(e.value)
    assert first.entries_sync(sid) == [] and provider.state()["served"] == 0
    with pytest.raises(ambit.ConfigError, match="a session keeps its own history"):
        first.run_sync(agent, sid, [ambit.UserMessage("hi")])  # type: ignore[list-item]
    assert first.run_sync(agent, sid, [ambit.Text("What is this?"), ambit.Image.from_bytes(PNG)]).output == "A dot."
    second = ambit.Sessions.open_sync(store)
    assert second.run_sync(agent, sid, "Which colour?").output == "Green."
    state = check_provider(scenario, provider)
    assert validate_exchanges(state) == 2
    sent = [r["body"]["messages"][0]["content"][1]["image_url"]["url"] for r in state["requests"]]
    assert sent == [url, url]
    stored = second.entries_sync(sid)[0]
    assert stored["kind"] == "message" and stored["message"]["parts"][1]["data"] == base64.b64encode(PNG).decode()
