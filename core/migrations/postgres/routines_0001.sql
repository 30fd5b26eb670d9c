-- Routines (SPEC §13). Times are milliseconds since the Unix epoch, passed in from the runner's clock.
-- A routine's definition is its latest revision, as JSON; next_slot is the earliest slot not yet
-- started or skipped (NULL while the routine is paused or has no slot left).
CREATE TABLE ambit_routines (
    id         TEXT    NOT NULL PRIMARY KEY,
    agent      TEXT    NOT NULL,
    revision   BIGINT NOT NULL,
    definition TEXT    NOT NULL,
    enabled    BIGINT NOT NULL,
    next_slot  BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX ambit_routines_due ON ambit_routines (next_slot) WHERE next_slot IS NOT NULL;
CREATE INDEX ambit_routines_agent ON ambit_routines (agent);

-- Every definition change, credited to an actor; kept when the routine is deleted.
CREATE TABLE ambit_routine_revisions (
    routine_id TEXT    NOT NULL,
    revision   BIGINT NOT NULL,
    actor      TEXT    NOT NULL,
    at         BIGINT NOT NULL,
    change     TEXT    NOT NULL,  -- create | update | delete
    definition TEXT    NOT NULL,
    PRIMARY KEY (routine_id, revision)
);

-- One row per run. slot_key is the exactly-once guard: routine id and slot time, unique, written in
-- the claim's own transaction (NULL for a drain's extra runs, which have no slot).
CREATE TABLE ambit_routine_runs (
    id            TEXT    NOT NULL PRIMARY KEY,
    routine_id    TEXT    NOT NULL,
    revision      BIGINT NOT NULL,
    kind          TEXT    NOT NULL,  -- scheduled | drain
    slot_at       BIGINT,
    slot_key      TEXT UNIQUE,
    state         TEXT    NOT NULL,  -- running | parked | finished | lost
    runner        TEXT    NOT NULL,
    lease_until   BIGINT NOT NULL,
    session_id    TEXT    NOT NULL,
    started_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    outcome       TEXT,              -- success | nothing_to_do | failure | error | unknown
    summary       TEXT,
    tool_calls    BIGINT,
    tool_errors   BIGINT,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost          DOUBLE PRECISION
);
CREATE INDEX ambit_routine_runs_routine ON ambit_routine_runs (routine_id, state);
CREATE INDEX ambit_routine_runs_live ON ambit_routine_runs (lease_until) WHERE state = 'running';
CREATE INDEX ambit_routine_runs_runner ON ambit_routine_runs (runner) WHERE state = 'running';

-- Slots that came due and were not run, as ranges of the slot chain.
CREATE TABLE ambit_routine_skips (
    routine_id TEXT    NOT NULL,
    first_slot BIGINT NOT NULL,
    last_slot  BIGINT NOT NULL,
    slots      BIGINT NOT NULL,
    reason     TEXT    NOT NULL,  -- missed | daily_cap
    at         BIGINT NOT NULL
);
CREATE INDEX ambit_routine_skips_routine ON ambit_routine_skips (routine_id);
