"""The test model users get (`ambit.TestModel`, `ambit.FunctionModel`): the example test the README shows,
its refusals, and that its replies go through the real wire decoding."""

from __future__ import annotations

import asyncio

import pytest

import ambit


@ambit.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_the_readme_example() -> None:
    # The README's example, as a user writes it.
    model = ambit.TestModel([
        ambit.Reply.tool_call("get_weather", {"city": "Paris"}),
        "Sunny in Paris.",
    ])
    agent = ambit.Agent(model=model, tools=[get_weather])
    result = agent.run_sync("Weather in Paris?")
    assert result.output == "Sunny in Paris."
    assert [(c.name, c.result) for c in result.tool_calls] == [("get_weather", "sunny in Paris")]


@pytest.mark.parametrize("wire", ["openai_chat", "anthropic", "openai_responses"])
def test_a_function_model_sees_the_conversation_and_the_wire_body(wire: str) -> None:
    seen: list[ambit.TestRequest] = []

    def answer(request: ambit.TestRequest) -> ambit.Reply | str:
        seen.append(request)
        if request.index == 1:
            return ambit.Reply.tool_call("get_weather", {"city": "Oslo"})
        return f"done after {len(request.messages)} messages"

    agent = ambit.Agent(model=ambit.FunctionModel(answer, wire=wire), tools=[get_weather], instructions="Be brief.")
    result = agent.run_sync("Weather in Oslo?")
    assert result.output == "done after 3 messages"
    assert seen[0].last_user_message == "Weather in Oslo?"
    assert seen[1].messages[-1]["role"] == "tool" and seen[1].messages[-1]["content"] == "sunny in Oslo"
    # The body is the wire's own request: the list it carries the conversation in, and where its
    # system prompt goes.
    body = seen[1].body
    conversation = {"openai_chat": "messages", "anthropic": "messages", "openai_responses": "input"}[wire]
    assert conversation in body, body
    if wire == "anthropic":
        assert "Be brief." in str(body["system"])
    elif wire == "openai_responses":
        assert body["instructions"] == "Be brief."
    else:
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_an_async_function_model() -> None:
    async def answer(request: ambit.TestRequest) -> str:
        await asyncio.sleep(0)
        return f"you said {request.last_user_message}"

    agent = ambit.Agent(model=ambit.FunctionModel(answer))
    assert asyncio.run(agent.run("hello")).output == "you said hello"


@pytest.mark.parametrize("wire", ["openai_chat", "anthropic", "openai_responses"])
def test_a_streamed_reply_arrives_as_the_wire_streams_it(wire: str) -> None:
    async def deltas(stream: bool) -> list[str]:
        agent = ambit.Agent(model=ambit.TestModel(["It is sunny in Paris today."], wire=wire, stream=stream))
        return [e.text async for e in agent.stream("Weather?") if isinstance(e, ambit.events.TextDelta)]

    streamed = asyncio.run(deltas(True))
    assert "".join(streamed) == "It is sunny in Paris today."
    # Through the wire's server-sent events, the text comes in pieces; the negative control: unstreamed,
    # the same reply is one piece.
    assert len(streamed) > 1, streamed
    assert asyncio.run(deltas(False)) == ["It is sunny in Paris today."]


def test_a_request_past_the_script_fails_the_run_naming_it() -> None:
    agent = ambit.Agent(model=ambit.TestModel([ambit.Reply.tool_call("get_weather", {"city": "Rome"})]),
                        tools=[get_weather])
    with pytest.raises(ambit.ModelError) as info:
        agent.run_sync("Weather in Rome?")
    assert info.value.code == "model_response"
    assert "no reply left for request 2: it was scripted with 1" in str(info.value)


def test_a_function_that_raises_fails_the_run_naming_it() -> None:
    def answer(request: ambit.TestRequest) -> str:
        raise RuntimeError("no answer for you")

    with pytest.raises(ambit.ModelError) as info:
        ambit.Agent(model=ambit.FunctionModel(answer)).run_sync("hi")
    assert info.value.code == "model_response"
    assert "the test model's function failed: no answer for you" in str(info.value)


def test_a_function_answering_something_else_fails_the_run_naming_it() -> None:
    with pytest.raises(ambit.ModelError) as info:
        ambit.Agent(model=ambit.FunctionModel(lambda r: 42)).run_sync("hi")  # type: ignore[arg-type, return-value]
    assert "must be an ambit.Reply or a string, got int" in str(info.value)


def test_bad_replies_and_settings_are_refused_when_built() -> None:
    with pytest.raises(ambit.ConfigError, match="replies\\[1\\].*empty name"):
        ambit.Agent(model=ambit.TestModel(["ok", ambit.Reply.tool_call("")]))
    with pytest.raises(ambit.ConfigError, match="not a JSON object"):
        ambit.Agent(model=ambit.TestModel([ambit.Reply(tool_calls=[ambit.ReplyCall("t", [1])])]))  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="wire must be one of"):
        ambit.TestModel(["ok"], wire="grpc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="replies must be a list"):
        ambit.TestModel("ok")
    with pytest.raises(TypeError, match="must be an ambit.Reply or a string, got int"):
        ambit.TestModel([1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="function must be callable"):
        ambit.FunctionModel("not a function")  # type: ignore[arg-type]
