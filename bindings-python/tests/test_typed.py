"""Typed final output and typed tool parameters from Python: the schema derived from a Pydantic model, a
dataclass, a TypedDict, an Enum, datetime and tuples; the core checks the JSON (the argument rule);
Python only builds the values back."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest

import ambit


def script(tmp_path: Path, exchanges: list[dict[str, Any]]) -> Path:
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({"name": "py_typed", "exchanges": exchanges}))
    return path


class Sky(str, enum.Enum):
    SUNNY = "sunny"
    CLOUDY = "cloudy"


class Place(pydantic.BaseModel):
    city: str
    country: str = "FR"


class WeatherModel(pydantic.BaseModel):
    place: Place
    temperature_c: int
    sky: Sky


@dataclass
class WeatherData:
    city: str
    temperature_c: int
    sky: Sky
    observed: datetime.datetime


class WeatherDict(TypedDict):
    city: str
    temperature_c: int


ANSWER = {"place": {"city": "Paris", "country": "FR"}, "temperature_c": 22, "sky": "sunny"}


@pytest.mark.parametrize(("output_type", "answer", "check"), [
    (WeatherModel, ANSWER, lambda v: isinstance(v, WeatherModel) and v.place.city == "Paris" and v.sky is Sky.SUNNY),
    (WeatherData, {"city": "Paris", "temperature_c": 22, "sky": "cloudy", "observed": "2026-12-03T10:00:00Z"},
     lambda v: isinstance(v, WeatherData) and v.sky is Sky.CLOUDY
     and v.observed == datetime.datetime(2026, 12, 3, 10, tzinfo=datetime.timezone.utc)),
    (WeatherDict, {"city": "Paris", "temperature_c": 22}, lambda v: v == {"city": "Paris", "temperature_c": 22}),
], ids=["pydantic", "dataclass", "typeddict"])
def test_output_type_is_derived_sent_natively_and_decoded(output_type: Any, answer: dict[str, Any], check: Any,
                                                         tmp_path: Path, start_provider: Any) -> None:
    config, _ = ambit._output_config(output_type, None)
    schema = config["schema"]
    assert schema["type"] == "object" and "$defs" not in json.dumps(schema), schema
    p = start_provider(script(tmp_path, [
        {"expect": {"body": {"response_format": {"type": "json_schema",
                                                 "json_schema": {"name": output_type.__name__, "schema": schema}}}},
         "respond": {"content": json.dumps(answer)}},
    ]))
    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=p.base_url, max_retries=0), output_type=output_type)
    result = agent.run_sync("Weather in Paris?")
    assert check(result.structured_output), result.structured_output
    assert json.loads(result.output) == answer


def test_a_pydantic_answer_missing_a_nested_field_goes_back_then_fails_typed(tmp_path: Path,
                                                                            start_provider: Any) -> None:
    """The nested model's schema is inlined, so the core checks the nested field (negative control: the
    answer without place.city never reaches Pydantic)."""
    bad = {"place": {"country": "FR"}, "temperature_c": 22, "sky": "sunny"}
    p = start_provider(script(tmp_path, [
        {"respond": {"content": json.dumps(bad)}},
        {"expect": {"messages_tail": [{"role": "assistant"}, {"role": "user", "content": {"$contains": "place.city"}}]},
         "respond": {"content": json.dumps(bad)}},
    ]))
    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=p.base_url, max_retries=0),
                        output_type=WeatherModel, output_retries=1)
    with pytest.raises(ambit.OutputInvalid) as info:
        agent.run_sync("Weather in Paris?")
    assert info.value.code == "output_invalid" and json.loads(info.value.attempt) == bad
    assert "field 'place.city' is required" in str(info.value)


def test_bad_output_types_are_refused_by_name() -> None:
    model = ambit.OpenAIChat("m")
    with pytest.raises(TypeError, match="output_type must be a Pydantic model"):
        ambit.Agent(model=model, output_type=int)
    with pytest.raises(TypeError, match="output_type must be"):
        ambit.Agent(model=model, output_type="Weather")
    with pytest.raises(ambit.ConfigError, match="'my answer'"):
        ambit.Agent(model=model, output_type=ambit.OutputSchema("my answer", {"type": "object"}))
    with pytest.raises(ambit.ConfigError, match="output_retries needs an output_type"):
        ambit.Agent(model=model, output_retries=1)


class Mode(enum.Enum):
    TRAIN = "train"
    PLANE = "plane"


@dataclass
class Leg:
    origin: str
    destination: str


class Traveller(pydantic.BaseModel):
    name: str
    age: int


SEEN: list[Any] = []


@ambit.tool
def book(leg: Leg, traveller: Traveller, mode: Mode, when: datetime.date, seat: tuple[int, str],
         stops: tuple[str, ...] = ()) -> str:
    """Book a trip."""
    SEEN.append((leg, traveller, mode, when, seat, stops))
    return "booked"


def test_typed_tool_parameters_map_to_schemas() -> None:
    props = book.parameters["properties"]
    assert props["leg"] == {"type": "object", "properties": {"origin": {"type": "string"},
                                                            "destination": {"type": "string"}},
                            "additionalProperties": False, "required": ["origin", "destination"]}
    assert props["traveller"]["properties"]["age"]["type"] == "integer"
    assert props["traveller"]["required"] == ["name", "age"]
    assert props["mode"] == {"enum": ["train", "plane"], "type": "string"}
    assert props["when"] == {"type": "string", "format": "date"}
    assert props["seat"] == {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                             "minItems": 2, "maxItems": 2}
    assert props["stops"] == {"type": "array", "items": {"type": "string"}, "default": ()}
    assert book.parameters["required"] == ["leg", "traveller", "mode", "when", "seat"]


def test_typed_tool_parameters_reach_the_function_as_their_types(tmp_path: Path, start_provider: Any) -> None:
    good = {"leg": {"origin": "Paris", "destination": "Lyon"}, "traveller": {"name": "Ada", "age": 36},
            "mode": "train", "when": "2026-12-24", "seat": [12, "A"], "stops": ["Dijon"]}
    short_seat = {**good, "seat": [12]}
    p = start_provider(script(tmp_path, [
        {"respond": {"tool_calls": [{"id": "a", "name": "book", "arguments": good},
                                    {"id": "b", "name": "book", "arguments": short_seat}]}},
        {"expect": {"messages_tail": [
            {"role": "tool", "tool_call_id": "a", "content": "booked"},
            {"role": "tool", "tool_call_id": "b", "content": {"$contains": "argument 'seat' must have exactly 2 entries, got 1"}}]},
         "respond": {"content": "Booked."}},
    ]))
    SEEN.clear()
    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=p.base_url, max_retries=0), tools=[book])
    result = asyncio.run(agent.run("Book Paris to Lyon."))
    assert result.output == "Booked."
    # The call with a one-entry seat was refused by the argument rule: only one call reached Python.
    assert len(SEEN) == 1, SEEN
    leg, traveller, mode, when, seat, stops = SEEN[0]
    assert leg == Leg("Paris", "Lyon") and isinstance(traveller, Traveller) and traveller.age == 36
    assert mode is Mode.TRAIN and when == datetime.date(2026, 12, 24)
    assert seat == (12, "A") and stops == ("Dijon",)
