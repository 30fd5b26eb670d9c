"""Skills and knowledge from Python (SPEC §14): the skills option reaches the core (the writing tools only
when agent-managed), bad settings are refused by name; Knowledge.publish writes text up to 200 KB, refuses
to overwrite unless asked, and every refusal is typed and names its argument. The runs themselves are the
shared scenarios (skills_read_search_edit, knowledge_list_read)."""

import pytest

import ambit
from ambit.knowledge import InvalidKnowledgeArgument, Knowledge, KnowledgeError, KnowledgeExists


def model() -> ambit.OpenAIChat:
    return ambit.OpenAIChat("gpt-4.1", base_url="http://127.0.0.1:9/v1", api_key="k")


def names(agent: ambit.Agent) -> list[str]:
    return [t.name for t in agent.list_tools()]


def test_skills_reading_tools_always_writing_ones_only_when_agent_managed(tmp_path):
    assert names(ambit.Agent(model=model(), skills=ambit.Skills(tmp_path))) == ["skill_read", "skill_search"]
    managed = ambit.Agent(model=model(), skills=ambit.Skills([tmp_path], agent_managed=True))
    assert names(managed) == ["skill_read", "skill_search", "skill_write", "skill_edit", "skill_delete"]
    assert [t.level for t in managed.list_tools()] == ["read", "read", "workspace", "workspace", "workspace"]
    for kwargs, words in [
        (dict(agent_managed="yes"), "agent_managed"),
        (dict(index_entries=-1), "index_entries"),
        (dict(index_entries=True), "index_entries"),
    ]:
        with pytest.raises(ambit.ConfigError, match=words):
            ambit.Skills([tmp_path], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="index_entries"):
        ambit.Agent(model=model(), skills=ambit.Skills([tmp_path], index_entries=5000))
    with pytest.raises(ambit.ConfigError, match="dirs"):
        ambit.Agent(model=model(), skills=ambit.Skills([]))


def test_knowledge_publish_text_up_to_200_kb_never_overwrite_unless_asked(tmp_path):
    kb = Knowledge(tmp_path / "kb")
    p = kb.publish("refund-policy", "# Refunds\nWithin 30 days.\n")
    assert (p.name, p.replaced) == ("refund-policy.md", False)
    assert (tmp_path / "kb" / "refund-policy.md").read_text() == "# Refunds\nWithin 30 days.\n"
    with pytest.raises(KnowledgeExists) as info:
        kb.publish("refund-policy.md", "clobbered")
    assert info.value.code == "knowledge_exists"
    assert (tmp_path / "kb" / "refund-policy.md").read_text() == "# Refunds\nWithin 30 days.\n"
    assert kb.publish("refund-policy.md", "v2", overwrite=True).replaced is True
    kb.publish("big.txt", "x" * 200_000)
    for call, field in [
        (lambda: kb.publish("bigger.txt", "x" * 200_001), "content"),
        (lambda: kb.publish("report.pdf", "%PDF"), "name"),
        (lambda: kb.publish("../escape", "x"), "name"),
        (lambda: kb.publish("lone\ud800", "x"), "name"),
        (lambda: kb.publish("ok", "x\udfff"), "content"),
        (lambda: kb.publish("ok", "x", overwrite="yes"), "overwrite"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidKnowledgeArgument) as err:
            call()
        assert err.value.field == field and err.value.code == "knowledge_invalid_argument", err.value
        assert isinstance(err.value, KnowledgeError) and isinstance(err.value, ambit.AmbitError)
    assert not (tmp_path / "kb" / "bigger.txt").exists() and not (tmp_path / "escape.md").exists()
    assert names(ambit.Agent(model=model(), knowledge=kb)) == ["knowledge_list", "knowledge_read"]
    with pytest.raises(TypeError):
        ambit.Agent(model=model(), knowledge={"dir": "kb"})  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="inline_max_bytes"):
        ambit.Agent(model=model(), knowledge=Knowledge("kb", inline_max_bytes=0))
