-- Claim tokens are unguessable (issue 12): each grant carries a random secret, and a record names its
-- grant by it. `token` stays the grant's number for the subject.
ALTER TABLE ambit_ledger_attempts ADD COLUMN claim_secret BIGINT;
CREATE INDEX ambit_ledger_attempts_secret ON ambit_ledger_attempts (scope, subject_key, claim_secret);
