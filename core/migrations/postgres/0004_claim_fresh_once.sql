-- The claim writes a new subject's row once (issue 18). Migration 0003's claim inserted a placeholder
-- row for every new subject, then locked it (FOR UPDATE: a WAL lock record) and updated it with the
-- grant (a second row version and WAL record): 928 WAL bytes and ~10 records per fresh claim against the
-- raw upsert's 765 and 8 (pg_waldump --stats over 2,000 claims). When the claim can grant every
-- eligible candidate (`p_limit` >= the number of candidates), a new subject's grant no longer depends
-- on the candidates before it, so its row is inserted already granted and its grant logged, in one
-- statement (keys sorted, ON CONFLICT DO NOTHING, as the placeholders were: the same lock order, so
-- concurrent claims still never deadlock); the candidates whose rows already existed (or that another
-- claim inserted first) then take migration 0003's path, in candidate order, FOR UPDATE SKIP LOCKED.
-- A claim with a smaller limit is unchanged. Everything else is migration 0003's function, unchanged.
--
-- Migration 0003's note:
-- The claim as one function (issue 18): one round trip per claim instead of BEGIN, the routine pin, the
-- placeholder insert, the claim statement and COMMIT sent one by one, and plans kept for the session
-- instead of planned per claim. Same transaction (READ COMMITTED), same steps in the same order, so the
-- same guarantees (core/src/ledger/postgres.rs): the routine's scope pinned first; placeholder rows for
-- new subjects (keys sorted, ON CONFLICT DO NOTHING, so concurrent claims never deadlock); then, in
-- candidate order until `p_limit` are granted, each eligible row locked FOR UPDATE SKIP LOCKED (a row
-- another claim holds is passed over), updated, its grant logged (and an expired lease's open attempt
-- marked abandoned); every candidate is returned with the row as the claim found it.
--
-- Every statement here touches one key by the whole primary key, and sequential scans are off inside
-- the function: a session's cached (generic) plan is then a primary-key lookup whatever the table's size
-- when it was planned. (A generic plan of the earlier one-statement claim, made while the table was
-- small, joined the candidates to the whole scope and read every row of it; that is why the store used
-- to plan every claim, which cost most of a claim's server time.)
--
-- A scope pinned to another routine returns one row: pinned_scope set, every other column NULL.
CREATE OR REPLACE FUNCTION ambit_ledger_claim(
    p_scope text, p_keys text[], p_fingerprints text[], p_now bigint, p_limit bigint, p_lease_until bigint,
    p_run_id text, p_routine_id text, p_secrets bigint[])
RETURNS TABLE (subject_key text, token bigint, grant_reason text, attempts bigint, claim_token bigint,
               lease_until bigint, eligible_at bigint, fingerprint text, pinned_scope text)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
#variable_conflict use_column
DECLARE
    pinned text;
    granted_count bigint := 0;
    n int := coalesce(array_length(p_keys, 1), 0);
    k text;
    fp text;
    r_attempts bigint;
    r_claim_token bigint;
    r_lease_until bigint;
    r_eligible_at bigint;
    r_fingerprint text;
    reason text;
    new_number bigint;
    fresh_at boolean[] := '{}';  -- by candidate position: granted fresh by the insert above
BEGIN
    IF p_routine_id IS NOT NULL THEN
        INSERT INTO ambit_ledger_routines (routine_id, scope, pinned_at) VALUES (p_routine_id, p_scope, p_now)
            ON CONFLICT DO NOTHING;
        SELECT r.scope INTO pinned FROM ambit_ledger_routines r WHERE r.routine_id = p_routine_id;
        IF pinned <> p_scope THEN
            subject_key := NULL; token := NULL; grant_reason := NULL; attempts := NULL; claim_token := NULL;
            lease_until := NULL; eligible_at := NULL; fingerprint := NULL; pinned_scope := pinned;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    IF n > 0 AND p_limit >= n THEN
        -- Every eligible candidate is granted: a new subject's row is written once, already granted.
        WITH ins AS (
            INSERT INTO ambit_ledger_items AS it (scope, subject_key, routine_id, attempts, claim_token, lease_until,
                                                lease_run_id, fingerprint, last_grant_reason, last_attempt_at)
            SELECT p_scope, u.k, p_routine_id, 1, 1, p_lease_until, p_run_id, u.fp, 'fresh', p_now
              FROM unnest(p_keys, p_fingerprints) AS u(k, fp) ORDER BY u.k
            ON CONFLICT DO NOTHING
            RETURNING it.subject_key
        ), logged AS (
            INSERT INTO ambit_ledger_attempts (scope, subject_key, token, run_id, routine_id, grant_reason,
                                               granted_at, lease_until, claim_secret)
            SELECT p_scope, ins.subject_key, 1, p_run_id, p_routine_id, 'fresh', p_now, p_lease_until, u.s
              FROM ins JOIN unnest(p_keys, p_secrets) AS u(k, s) ON u.k = ins.subject_key
            RETURNING subject_key
        )
        -- One pass over the candidates (a lookup per candidate in a list of the fresh keys was quadratic:
        -- 4.8 s for 20,000 candidates).
        SELECT coalesce(array_agg(l.subject_key IS NOT NULL ORDER BY u.i), '{}') INTO fresh_at
          FROM unnest(p_keys) WITH ORDINALITY AS u(k, i) LEFT JOIN logged l ON l.subject_key = u.k;
    ELSE
        INSERT INTO ambit_ledger_items (scope, subject_key)
            SELECT p_scope, u.k FROM unnest(p_keys) AS u(k) ORDER BY u.k ON CONFLICT DO NOTHING;
    END IF;
    pinned_scope := NULL;
    FOR i IN 1 .. n LOOP
        k := p_keys[i];
        fp := p_fingerprints[i];
        subject_key := k;
        token := NULL;
        grant_reason := NULL;
        r_attempts := NULL;
        IF coalesce(fresh_at[i], false) THEN
            granted_count := granted_count + 1;
            token := p_secrets[i];
            grant_reason := 'fresh';
            r_attempts := 0; r_claim_token := 0; r_lease_until := NULL; r_eligible_at := NULL; r_fingerprint := NULL;
        ELSIF granted_count < p_limit THEN
            SELECT it.attempts, it.claim_token, it.lease_until, it.eligible_at, it.fingerprint
              INTO r_attempts, r_claim_token, r_lease_until, r_eligible_at, r_fingerprint
              FROM ambit_ledger_items it
             WHERE it.scope = p_scope AND it.subject_key = k
               AND (it.lease_until IS NULL OR it.lease_until <= p_now)
               AND (it.lease_until IS NOT NULL OR it.attempts = 0 OR it.eligible_at IS NULL OR it.eligible_at <= p_now
                    OR (fp IS NOT NULL AND it.fingerprint IS NOT NULL AND it.fingerprint <> fp))
               FOR UPDATE OF it SKIP LOCKED;
            IF FOUND THEN
                reason := CASE WHEN r_lease_until IS NOT NULL THEN 'cooldown_expired'
                               WHEN r_attempts = 0 THEN 'fresh'
                               WHEN r_eligible_at IS NULL OR r_eligible_at <= p_now THEN 'cooldown_expired'
                               ELSE 'fingerprint_changed' END;
                UPDATE ambit_ledger_items it SET
                    routine_id = COALESCE(p_routine_id, it.routine_id),
                    attempts = it.attempts + 1,
                    claim_token = it.claim_token + 1,
                    lease_until = p_lease_until,
                    lease_run_id = p_run_id,
                    fingerprint = COALESCE(fp, it.fingerprint),
                    last_grant_reason = reason,
                    last_attempt_at = p_now,
                    last_outcome = CASE WHEN r_lease_until IS NOT NULL THEN 'abandoned' ELSE it.last_outcome END
                WHERE it.scope = p_scope AND it.subject_key = k
                RETURNING it.claim_token INTO new_number;
                IF r_lease_until IS NOT NULL THEN
                    UPDATE ambit_ledger_attempts a SET outcome = 'abandoned', finished_at = p_now
                     WHERE a.scope = p_scope AND a.subject_key = k AND a.token = r_claim_token AND a.outcome IS NULL;
                END IF;
                INSERT INTO ambit_ledger_attempts (scope, subject_key, token, run_id, routine_id, grant_reason,
                                                   granted_at, lease_until, claim_secret)
                VALUES (p_scope, k, new_number, p_run_id, p_routine_id, reason, p_now, p_lease_until, p_secrets[i]);
                granted_count := granted_count + 1;
                token := p_secrets[i];
                grant_reason := reason;
            END IF;
        END IF;
        IF token IS NULL THEN
            -- Not granted: the row as it stands, for the label (not eligible, held, or past the limit).
            SELECT it.attempts, it.claim_token, it.lease_until, it.eligible_at, it.fingerprint
              INTO r_attempts, r_claim_token, r_lease_until, r_eligible_at, r_fingerprint
              FROM ambit_ledger_items it WHERE it.scope = p_scope AND it.subject_key = k;
        END IF;
        attempts := r_attempts;
        claim_token := r_claim_token;
        lease_until := r_lease_until;
        eligible_at := r_eligible_at;
        fingerprint := r_fingerprint;
        RETURN NEXT;
    END LOOP;
    RETURN;
END
$fn$;
