-- Memory (SPEC §14): what an agent keeps between sessions, one namespace per agent. A stable key
-- updates a memory in place; a subject names the caller a preference is about. Tags are stored as
-- `|tag|tag|` (lower case, no `|`), searched as words through `tags_text`. Times are milliseconds since
-- the Unix epoch. Full-text search: an English tsvector (title weight A, tags B, body C) under a GIN
-- index.
CREATE TABLE ambit_memories (
    id          BIGSERIAL PRIMARY KEY,
    agent       TEXT    NOT NULL,
    mkey        TEXT,
    subject     TEXT,
    kind        TEXT    NOT NULL,
    title       TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    tags        TEXT    NOT NULL,
    tags_text   TEXT    NOT NULL,
    salience    BIGINT  NOT NULL,
    pinned      BIGINT  NOT NULL,
    source      TEXT,
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL,
    fts         tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title), 'A') ||
        setweight(to_tsvector('english', tags_text), 'B') ||
        setweight(to_tsvector('english', body), 'C')) STORED
);
CREATE UNIQUE INDEX ambit_memories_key ON ambit_memories (agent, mkey) WHERE mkey IS NOT NULL;
CREATE INDEX ambit_memories_baseline ON ambit_memories (agent, pinned DESC, salience DESC, updated_at DESC, id DESC);
CREATE INDEX ambit_memories_fts ON ambit_memories USING GIN (fts);
