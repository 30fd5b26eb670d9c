-- A run's settle as one function (issue 15): one round trip instead of BEGIN, the lease check, the log's
-- last index, the append, the state's update and COMMIT sent one by one (six round trips, on a
-- connection held the whole time). Called outside any transaction, it is one transaction (READ
-- COMMITTED) of the same steps in the same order (core/src/session/store.rs, `settle`), so the same
-- guarantees: the session's row locked first (FOR UPDATE); nothing written unless the caller still holds
-- the lease ('lost'), nor when the session is gone ('not_found'); the entries numbered after the log's
-- last one, read with the row held; the state set, and the lease let go unless the state stays running.
-- Returns the first new entry's index ('ok'); the entries are numbered from it in the order given.
CREATE OR REPLACE FUNCTION ambit_session_settle(
    p_session_id text, p_owner text, p_kinds text[], p_bodies text[], p_state text, p_parked text,
    p_now bigint, p_keep boolean)
RETURNS TABLE (outcome text, first_idx bigint)
LANGUAGE plpgsql VOLATILE
AS $fn$
#variable_conflict use_column
DECLARE
    v_holder text;
    v_last bigint := 0;
BEGIN
    SELECT s.lease_owner INTO v_holder FROM ambit_sessions s WHERE s.session_id = p_session_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, 0::bigint;
        RETURN;
    END IF;
    IF v_holder IS DISTINCT FROM p_owner THEN
        RETURN QUERY SELECT 'lost'::text, 0::bigint;
        RETURN;
    END IF;
    IF coalesce(array_length(p_kinds, 1), 0) > 0 THEN
        SELECT COALESCE(MAX(e.idx), 0) INTO v_last FROM ambit_session_entries e WHERE e.session_id = p_session_id;
        INSERT INTO ambit_session_entries (session_id, idx, kind, body, created_at)
        SELECT p_session_id, v_last + t.ord, t.kind, t.body, p_now
        FROM unnest(p_kinds, p_bodies) WITH ORDINALITY AS t (kind, body, ord);
    END IF;
    UPDATE ambit_sessions s SET state = p_state, parked = p_parked, updated_at = p_now,
        lease_owner = CASE WHEN p_keep THEN s.lease_owner END,
        lease_expires = CASE WHEN p_keep THEN s.lease_expires END
    WHERE s.session_id = p_session_id;
    RETURN QUERY SELECT 'ok'::text, v_last + 1;
END
$fn$;
