-- The index's postings are also packed into blocks, one row per term and bucket of 4,096 memory ids
-- (core/src/memory/index.rs: `BUCKET`; per posting the id's offset in the bucket and the impact), so a
-- recall reads a term's whole list in a few rows and scores it in Rust instead of reading postings row
-- by row. The postings table stays as each memory's own list (what a memory's update or forget removes).
-- The index is rebuilt: every memory is marked unindexed and the store indexes it again when it opens.
CREATE TABLE ambit_memory_blocks (
    term_id INTEGER NOT NULL,
    bucket  INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (term_id, bucket)
);
DELETE FROM ambit_memory_postings;
DELETE FROM ambit_memory_terms;
DELETE FROM ambit_memory_agents;
UPDATE ambit_memories SET indexed = 0;
