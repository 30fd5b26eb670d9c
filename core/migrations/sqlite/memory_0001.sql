-- Memory (SPEC §14): what an agent keeps between sessions, one namespace per agent. A stable key
-- updates a memory in place; a subject names the caller a preference is about. Tags are stored as
-- `|tag|tag|` (lower case, no `|`), searched as words through `tags_text`. Times are milliseconds since
-- the Unix epoch. Full-text search: FTS5 (porter stemming) over title, body and tags, kept in step by
-- triggers.
CREATE TABLE ambit_memories (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT    NOT NULL,
    mkey        TEXT,
    subject     TEXT,
    kind        TEXT    NOT NULL,                 -- fact, preference, lesson, instruction
    title       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    tags        TEXT    NOT NULL,                 -- |tag|tag|
    tags_text   TEXT    NOT NULL,                 -- tag tag
    salience    INTEGER NOT NULL,
    pinned      INTEGER NOT NULL,
    source      TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX ambit_memories_key ON ambit_memories (agent, mkey) WHERE mkey IS NOT NULL;
CREATE INDEX ambit_memories_baseline ON ambit_memories (agent, pinned DESC, salience DESC, updated_at DESC, id DESC);

CREATE VIRTUAL TABLE ambit_memories_fts USING fts5 (
    title, body, tags_text, content = 'ambit_memories', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER ambit_memories_ai AFTER INSERT ON ambit_memories BEGIN
    INSERT INTO ambit_memories_fts (rowid, title, body, tags_text) VALUES (new.id, new.title, new.body, new.tags_text);
END;
CREATE TRIGGER ambit_memories_ad AFTER DELETE ON ambit_memories BEGIN
    INSERT INTO ambit_memories_fts (ambit_memories_fts, rowid, title, body, tags_text)
        VALUES ('delete', old.id, old.title, old.body, old.tags_text);
END;
CREATE TRIGGER ambit_memories_au AFTER UPDATE ON ambit_memories BEGIN
    INSERT INTO ambit_memories_fts (ambit_memories_fts, rowid, title, body, tags_text)
        VALUES ('delete', old.id, old.title, old.body, old.tags_text);
    INSERT INTO ambit_memories_fts (rowid, title, body, tags_text) VALUES (new.id, new.title, new.body, new.tags_text);
END;
