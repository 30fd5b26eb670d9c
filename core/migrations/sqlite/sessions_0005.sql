-- The live window read without the whole log (issue 18): a session's compaction boundaries, found and
-- counted from their own index, so a run reads the entries from the last boundary's `keep_from` on
-- instead of every entry the session ever had.
CREATE INDEX ambit_session_boundaries ON ambit_session_entries (session_id, idx) WHERE kind = 'boundary';
