-- Work that outlives the run (SPEC §8b): a session run's background tasks, numbered per session. The
-- process running a task renews its heartbeat; a task still `running` whose heartbeat is older than the
-- store's lease length was running in a process that died: it is read (and marked) `lost`.
CREATE TABLE ambit_session_tasks (
    session_id   TEXT    NOT NULL REFERENCES ambit_sessions (session_id),
    task_id      TEXT    NOT NULL,                -- task_N, N counting from 1 in the session
    seq          BIGINT  NOT NULL,
    name         TEXT    NOT NULL,                -- the tool
    status       TEXT    NOT NULL,                -- running, finished, failed, cancelled, lost
    note         TEXT,                            -- the latest progress note
    result       TEXT,                            -- the result text, once it landed
    heartbeat_at BIGINT  NOT NULL,                -- by the store's clock
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    PRIMARY KEY (session_id, task_id)
);
