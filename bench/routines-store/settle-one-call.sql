-- A routine run's own writes on PostgreSQL as one pgbench transaction script: what the store allows
-- with this statement mix, beside `bash scripts/bench-routines.sh` (docs/benchmarks.md "Routines").
-- The statements are those of core/src/session/store.rs (create_taken, settle) and
-- core/src/routine/store.rs (finish); each runs as its own transaction, as a run's do.
-- Setup, in an empty database DB: the migrations core/migrations/postgres/sessions_000{1..6}.sql and
-- routines_000{1,2}.sql, then the run records to finish:
--   INSERT INTO ambit_routine_runs (id, routine_id, revision, kind, slot_at, slot_key, state, runner,
--     lease_until, session_id, started_at) SELECT 'run' || g, 'r' || g, 1, 'scheduled', 0, 'k' || g,
--     'running', 'bench', 9999999999999, 'ses' || g, 0 FROM generate_series(1, 300000) g;
-- Run: pgbench -n -M prepared -j 2 -c 16 -T 10 -f bench/routines-store/FILE.sql DB   (tps = runs/s)
-- settle-one-call.sql: the settle as one call of ambit_session_settle (migration sessions_0006).
\set id random(1, 300000)
\set u random(1, 2000000000)
INSERT INTO ambit_sessions (session_id, created_at, updated_at, title, state, lease_owner, lease_expires) VALUES ('s' || :u || '-' || :id, 1, 1, 'go', 'running', 'o' || :id, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) + 600000) ON CONFLICT (session_id) DO NOTHING;
SELECT outcome, first_idx FROM ambit_session_settle('s' || :u || '-' || :id, 'o' || :id, ARRAY['message', 'message'], ARRAY['{"role":"user","content":"go"}', '{"role":"assistant","content":"ok"}'], 'idle', NULL, 1, false);
UPDATE ambit_routine_runs SET state = 'finished', ended_at = 2, outcome = COALESCE(outcome, 'unknown') WHERE id = 'run' || :id AND runner = 'bench' AND state = 'running' RETURNING id, CAST(CASE WHEN EXISTS (SELECT 1 FROM ambit_routines r WHERE r.id = ambit_routine_runs.routine_id) THEN 1 ELSE 0 END AS BIGINT);
