-- Sessions (SPEC §8): an append-only log of turns per session. Compaction appends a boundary and a
-- summary; nothing is ever deleted or rewritten but the session's state row. Times are milliseconds since
-- the Unix epoch.
CREATE TABLE ambit_sessions (
    session_id  TEXT    PRIMARY KEY,
    parent_id   TEXT,
    state       TEXT    NOT NULL DEFAULT 'idle',  -- idle, running, awaiting_approval
    parked      TEXT,                             -- JSON: what a parked run waits on
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);

CREATE TABLE ambit_session_entries (
    session_id  TEXT    NOT NULL REFERENCES ambit_sessions (session_id),
    idx         BIGINT  NOT NULL,                 -- 1-based, the #N of conversation_read
    kind        TEXT    NOT NULL,                 -- message, boundary, summary, usage
    body        TEXT    NOT NULL,                 -- JSON
    created_at  BIGINT  NOT NULL,
    PRIMARY KEY (session_id, idx)
);
