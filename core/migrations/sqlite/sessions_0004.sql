-- Sub-agents as child sessions (SPEC §8b): a sub-agent's conversation is a session whose parent is the
-- session (or sub-agent) that spawned it, with its id among its siblings (agent_id), its title (the
-- spawn's prompt, first line) and what a follow-up replays (spawn: JSON of its terms and holdings). A
-- root session's title is its first input's first line. agent_delete marks a child `deleted`.
ALTER TABLE ambit_sessions ADD COLUMN title TEXT;
ALTER TABLE ambit_sessions ADD COLUMN agent_id TEXT;
ALTER TABLE ambit_sessions ADD COLUMN spawn TEXT;
CREATE INDEX ambit_sessions_parent ON ambit_sessions (parent_id);
