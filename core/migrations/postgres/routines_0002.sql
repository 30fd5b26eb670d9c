-- A parked run's record follows its session: when a resume (through Sessions.resume, from any process)
-- ended the session's run, a runner's tick marks the record finished. checked_at is when a runner last
-- looked, so the check goes round every parked run, the longest unchecked first.
ALTER TABLE ambit_routine_runs ADD COLUMN checked_at BIGINT;
CREATE INDEX ambit_routine_runs_parked ON ambit_routine_runs (checked_at) WHERE state = 'parked';
