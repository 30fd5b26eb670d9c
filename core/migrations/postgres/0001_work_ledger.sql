-- The work ledger (SPEC §9). Times are milliseconds since the Unix epoch, passed in from the ledger's
-- clock; fingerprints compare byte for byte (TEXT with the "C" collation: bytewise).
CREATE TABLE ambit_ledger_items (
    scope             TEXT    NOT NULL,
    subject_key       TEXT    NOT NULL,
    routine_id        TEXT,
    attempts          BIGINT  NOT NULL DEFAULT 0,  -- counted attempts (released ones are not counted)
    misses            BIGINT  NOT NULL DEFAULT 0,  -- consecutive unproductive attempts
    claim_token       BIGINT  NOT NULL DEFAULT 0,  -- number of the latest grant
    lease_until       BIGINT,                     -- set while a grant is open (not yet recorded)
    lease_run_id      TEXT,
    eligible_at       BIGINT,                     -- end of the cooldown
    fingerprint       TEXT COLLATE "C",
    last_outcome      TEXT,
    last_grant_reason TEXT,
    last_attempt_at   BIGINT,
    PRIMARY KEY (scope, subject_key)
);
CREATE INDEX ambit_ledger_items_routine ON ambit_ledger_items (routine_id) WHERE routine_id IS NOT NULL;

-- One row per grant, written in the claim's own transaction.
CREATE TABLE ambit_ledger_attempts (
    scope        TEXT    NOT NULL,
    subject_key  TEXT    NOT NULL,
    token        BIGINT  NOT NULL,
    run_id       TEXT,
    routine_id   TEXT,
    grant_reason TEXT    NOT NULL,
    granted_at   BIGINT  NOT NULL,
    lease_until  BIGINT  NOT NULL,
    outcome      TEXT,                             -- productive, empty, failed, released, abandoned
    finished_at  BIGINT,
    PRIMARY KEY (scope, subject_key, token)
);
CREATE INDEX ambit_ledger_attempts_run ON ambit_ledger_attempts (run_id) WHERE run_id IS NOT NULL;

-- A routine's scope, pinned by its first claim.
CREATE TABLE ambit_ledger_routines (
    routine_id TEXT    NOT NULL PRIMARY KEY,
    scope      TEXT    NOT NULL,
    pinned_at  BIGINT  NOT NULL
);

CREATE TABLE ambit_ledger_backlog_reports (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    routine_id  TEXT    NOT NULL,
    run_id      TEXT,
    scope       TEXT,
    reported_at BIGINT  NOT NULL,
    subjects    BIGINT  NOT NULL,
    workable    BIGINT  NOT NULL,
    batch_size  BIGINT  NOT NULL,
    extra_runs  BIGINT  NOT NULL
);
CREATE INDEX ambit_ledger_backlog_routine ON ambit_ledger_backlog_reports (routine_id, reported_at);
