-- Durable runs (SPEC §8b): a run holds its session by a lease (owner, expiry renewed by a heartbeat);
-- a resume claims the parked state by compare-and-set; a tool call is recorded as started before it
-- runs and finished after, so a call interrupted by a crash is never re-run silently.
ALTER TABLE ambit_sessions ADD COLUMN lease_owner TEXT;
ALTER TABLE ambit_sessions ADD COLUMN lease_expires BIGINT;

CREATE TABLE ambit_session_calls (
    session_id  TEXT    NOT NULL REFERENCES ambit_sessions (session_id),
    call_key    TEXT    NOT NULL,                 -- run/turn/call id
    name        TEXT    NOT NULL,
    arguments   TEXT    NOT NULL,                 -- JSON, as the tool got them
    state       TEXT    NOT NULL,                 -- started, finished, interrupted
    outcome     TEXT,                             -- JSON: the result, once finished
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (session_id, call_key)
);
