-- ambit's own full-text index (core/src/memory/index.rs) replaces the tsvector, so a recall reads only
-- the heads of its terms' lists instead of ranking every match. Per agent and term: how many memories
-- hold it (df); per posting: the term's impact in the memory (an integer, millionths), the list ordered
-- by impact; per agent: how many memories are indexed (n). Rows written before this migration (and any
-- written by plain SQL) have `indexed = 0` and are indexed by the store when it opens.
ALTER TABLE ambit_memories ADD COLUMN indexed BIGINT NOT NULL DEFAULT 0;
CREATE INDEX ambit_memories_unindexed ON ambit_memories (id) WHERE indexed = 0;
CREATE TABLE ambit_memory_agents (
    agent TEXT   NOT NULL PRIMARY KEY,
    n     BIGINT NOT NULL
);
CREATE TABLE ambit_memory_terms (
    id    BIGSERIAL PRIMARY KEY,
    agent TEXT   NOT NULL,
    term  TEXT   NOT NULL,
    df    BIGINT NOT NULL
);
CREATE UNIQUE INDEX ambit_memory_terms_key ON ambit_memory_terms (agent, term);
CREATE TABLE ambit_memory_postings (
    term_id   BIGINT NOT NULL,
    impact    BIGINT NOT NULL,
    memory_id BIGINT NOT NULL,
    PRIMARY KEY (term_id, impact, memory_id)
);
CREATE INDEX ambit_memory_postings_memory ON ambit_memory_postings (memory_id, term_id, impact);
DROP INDEX ambit_memories_fts;
ALTER TABLE ambit_memories DROP COLUMN fts;
