//! The two memory stores, SQLite (one file, WAL) and PostgreSQL. Their code is written once: the SQL is
//! the same but for a [`Dialect`] (how a transaction starts, how a row is locked, how a list of values
//! is passed, how a substring is found), and [`memory_store!`] expands the one implementation for each
//! driver.
//!
//! Ranking with a query: ambit's own index and score ([`super::index`]), kept by the store in the
//! same transaction as the memory: each term's postings packed in blocks (one row per term and bucket
//! of memory ids), read whole and scored in Rust, the best then checked against the filters. Ties, and
//! the whole order without a query (the baseline): pinned first, higher salience, later update, higher
//! id.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::index::{self, Candidate, Query};
use super::rules::{self, DEFAULT_SALIENCE};
use super::{MemoryError, MemoryKind, MemoryOptions, MemoryRecord, MemoryStore, Remember, Saved, Search, Target};

/// What differs between the two stores' SQL. Placeholders are `$N` in both. A list of values
/// ([`Param::List`]) is one parameter; rows of values ([`Param::Rows`]) are one parameter on SQLite (a
/// JSON array of arrays) and one per column on PostgreSQL (arrays `unnest` zips).
struct Dialect {
    /// The statement that opens a write transaction.
    begin: &'static str,
    /// The statement that opens a read transaction: every read of a recall sees one snapshot.
    begin_read: &'static str,
    /// Appended to the read of a row about to be updated.
    lock: &'static str,
    /// Appended to the read of rows to index: rows another opener is indexing are left to it.
    lock_skip: &'static str,
    /// After `ambit_memories m` in a read of rows by id: SQLite's planner otherwise reads them through the
    /// baseline index on the agent filter, every memory of the agent (measured: most of a recall's time).
    by_id: &'static str,
    /// Whether the text of `haystack` contains the text of parameter `$n`.
    contains: fn(haystack: &str, n: usize) -> String,
    /// A subquery of the values of list parameter `$n`.
    list: fn(n: usize) -> String,
    /// Adds `(term, delta)` rows (from `$2`) to the document frequencies of agent `$1`'s terms,
    /// returning each term's id.
    upsert_terms: &'static str,
    /// Inserts `(term_id, impact, memory_id)` rows (from `$1`).
    insert_postings: &'static str,
    /// Adds `(agent, delta)` rows (from `$1`) to the agents' counts of indexed memories.
    upsert_agents: &'static str,
    /// Writes `(term_id, bucket, data)` rows (from `$1`) of the blocks, replacing those there.
    upsert_blocks: &'static str,
    /// Deletes the blocks of `(term_id, bucket)` rows (from `$1`).
    delete_blocks: &'static str,
}

const SQLITE: Dialect = Dialect {
    begin: "BEGIN IMMEDIATE",
    begin_read: "BEGIN",
    lock: "",
    lock_skip: "",
    by_id: " NOT INDEXED",
    contains: |h, n| format!("instr({h}, ${n}) > 0"),
    list: |n| format!("SELECT value FROM json_each(${n})"),
    upsert_terms: "INSERT INTO ambit_memory_terms (agent, term, df) \
                   SELECT $1, json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($2) WHERE true \
                   ON CONFLICT (agent, term) DO UPDATE SET df = df + excluded.df RETURNING id, term",
    insert_postings: "INSERT INTO ambit_memory_postings (term_id, impact, memory_id) \
                      SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') \
                      FROM json_each($1)",
    upsert_agents: "INSERT INTO ambit_memory_agents (agent, n) \
                    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1) WHERE true \
                    ON CONFLICT (agent) DO UPDATE SET n = n + excluded.n",
    upsert_blocks: "INSERT INTO ambit_memory_blocks (term_id, bucket, data) \
                    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), unhex(json_extract(value, '$[2]')) \
                    FROM json_each($1) WHERE true \
                    ON CONFLICT (term_id, bucket) DO UPDATE SET data = excluded.data",
    delete_blocks: "DELETE FROM ambit_memory_blocks WHERE (term_id, bucket) IN \
                    (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1))",
};

const POSTGRES: Dialect = Dialect {
    begin: "BEGIN",
    begin_read: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    lock: " FOR UPDATE",
    lock_skip: " FOR UPDATE SKIP LOCKED",
    by_id: "",
    contains: |h, n| format!("strpos({h}, ${n}) > 0"),
    list: |n| format!("SELECT unnest(${n})"),
    // The rows come sorted (by term, by agent), so two writers lock shared rows in one order.
    upsert_terms: "INSERT INTO ambit_memory_terms (agent, term, df) \
                   SELECT $1, t, d FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS x(t, d, o) ORDER BY o \
                   ON CONFLICT (agent, term) DO UPDATE SET df = ambit_memory_terms.df + excluded.df RETURNING id, term",
    insert_postings: "INSERT INTO ambit_memory_postings (term_id, impact, memory_id) \
                      SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])",
    upsert_agents: "INSERT INTO ambit_memory_agents (agent, n) \
                    SELECT a, d FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS x(a, d, o) ORDER BY o \
                    ON CONFLICT (agent) DO UPDATE SET n = ambit_memory_agents.n + excluded.n",
    upsert_blocks: "INSERT INTO ambit_memory_blocks (term_id, bucket, data) \
                    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bytea[]) \
                    ON CONFLICT (term_id, bucket) DO UPDATE SET data = excluded.data",
    delete_blocks: "DELETE FROM ambit_memory_blocks WHERE (term_id, bucket) IN \
                    (SELECT * FROM unnest($1::bigint[], $2::bigint[]))",
};

const COLUMNS: &str = "m.id, m.agent, m.mkey, m.subject, m.kind, m.title, m.body, m.tags, m.salience, m.pinned, \
                       m.source, m.created_at, m.updated_at";
/// The tiebreak's fields of a memory `m`, by id.
const TIEBREAK_COLUMNS: &str = "m.id, m.pinned, m.salience, m.updated_at";
/// The tiebreak, and the whole order without a query.
const BASELINE_ORDER: &str = "m.pinned DESC, m.salience DESC, m.updated_at DESC, m.id DESC";
/// How many memories one transaction indexes when a store opens with unindexed rows.
const INDEX_BATCH: i64 = 1_000;

/// The memory store's schema migrations, applied on open by the crate's one migration runner.
const MIGRATIONS: crate::migrate::Plan = crate::migrate::Plan {
    table: "ambit_memory_migrations",
    pg_lock: 7411016,
    sqlite: &[
        (1, "memory", include_str!("../../migrations/sqlite/memory_0001.sql")),
        (2, "memory_index", include_str!("../../migrations/sqlite/memory_0002.sql")),
        (3, "memory_blocks", include_str!("../../migrations/sqlite/memory_0003.sql")),
    ],
    postgres: &[
        (1, "memory", include_str!("../../migrations/postgres/memory_0001.sql")),
        (2, "memory_index", include_str!("../../migrations/postgres/memory_0002.sql")),
        (3, "memory_blocks", include_str!("../../migrations/postgres/memory_0003.sql")),
    ],
};

/// One column of [`Param::Rows`] or a [`Param::List`].
enum Column {
    Texts(Vec<String>),
    Ints(Vec<i64>),
    /// Bytes: hexadecimal text in SQLite's JSON (`unhex` reads it back), `bytea` on PostgreSQL.
    Blobs(Vec<Vec<u8>>),
}

/// Bytes as lower-case hexadecimal text.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

impl Column {
    fn json(&self, i: usize) -> serde_json::Value {
        match self {
            Column::Texts(v) => v.get(i).map_or(serde_json::Value::Null, |t| serde_json::Value::from(t.as_str())),
            Column::Ints(v) => v.get(i).map_or(serde_json::Value::Null, |n| serde_json::Value::from(*n)),
            Column::Blobs(v) => v.get(i).map_or(serde_json::Value::Null, |b| serde_json::Value::from(hex(b))),
        }
    }
    fn len(&self) -> usize {
        match self {
            Column::Texts(v) => v.len(),
            Column::Ints(v) => v.len(),
            Column::Blobs(v) => v.len(),
        }
    }
}

/// A parameter of a statement built at run time.
enum Param {
    Text(String),
    Int(i64),
    List(Column),
    Rows(Vec<Column>),
}

/// A list as SQLite takes it: a JSON array.
fn json_list(c: &Column) -> String {
    serde_json::Value::Array((0..c.len()).map(|i| c.json(i)).collect()).to_string()
}

/// Rows as SQLite takes them: a JSON array of arrays.
fn json_rows(cols: &[Column]) -> String {
    let n = cols.first().map_or(0, Column::len);
    serde_json::Value::Array(
        (0..n).map(|i| serde_json::Value::Array(cols.iter().map(|c| c.json(i)).collect())).collect(),
    )
    .to_string()
}

/// Binds `params` in order: `json` for SQLite, `native` (arrays) for PostgreSQL.
macro_rules! bind_params {
    (json, $query:expr, $params:expr) => {{
        let mut q = $query;
        for p in $params {
            q = match p {
                Param::Text(t) => q.bind(t),
                Param::Int(i) => q.bind(i),
                Param::List(c) => q.bind(json_list(&c)),
                Param::Rows(cols) => q.bind(json_rows(&cols)),
            };
        }
        q
    }};
    (native, $query:expr, $params:expr) => {{
        let mut q = $query;
        for p in $params {
            let columns = match p {
                Param::Text(t) => {
                    q = q.bind(t);
                    Vec::new()
                }
                Param::Int(i) => {
                    q = q.bind(i);
                    Vec::new()
                }
                Param::List(c) => vec![c],
                Param::Rows(cols) => cols,
            };
            for c in columns {
                q = match c {
                    Column::Texts(v) => q.bind(v),
                    Column::Ints(v) => q.bind(v),
                    Column::Blobs(v) => q.bind(v),
                };
            }
        }
        q
    }};
}

/// The filters of a search as SQL (` AND …` over `m`), their parameters pushed after those in `params`.
fn filters(d: &Dialect, agent: &str, s: &Search, params: &mut Vec<Param>) -> String {
    let mut sql = String::new();
    params.push(Param::Text(agent.to_string()));
    sql.push_str(&format!(" AND m.agent = ${}", params.len()));
    if let Some(k) = s.kind {
        params.push(Param::Text(k.as_str().to_string()));
        sql.push_str(&format!(" AND m.kind = ${}", params.len()));
    }
    for t in &s.tags {
        params.push(Param::Text(format!("|{t}|")));
        sql.push_str(&format!(" AND {}", (d.contains)("m.tags", params.len())));
    }
    if s.no_subject {
        sql.push_str(" AND m.subject IS NULL");
    } else if !s.subjects.is_empty() {
        let mut holes = Vec::new();
        for subject in &s.subjects {
            params.push(Param::Text(subject.clone()));
            holes.push(format!("${}", params.len()));
        }
        sql.push_str(&format!(" AND m.subject IN ({})", holes.join(", ")));
    }
    sql
}

/// The SELECT of a search without a query: its SQL and parameters in order.
fn baseline_sql(d: &Dialect, agent: &str, s: &Search) -> (String, Vec<Param>) {
    let mut params: Vec<Param> = Vec::new();
    let mut sql = format!("SELECT {COLUMNS} FROM ambit_memories m WHERE 1 = 1");
    sql.push_str(&filters(d, agent, s, &mut params));
    sql.push_str(&format!(" ORDER BY {BASELINE_ORDER}"));
    params.push(Param::Int(s.limit as i64));
    sql.push_str(&format!(" LIMIT ${}", params.len()));
    (sql, params)
}

/// One memory to (re)index in a write transaction.
struct Entry {
    id: i64,
    agent: String,
    /// Its postings now (empty when it is forgotten).
    postings: Vec<(String, i64)>,
    /// The terms of the postings it had, removed already.
    removed: Vec<String>,
    /// What it adds to its agent's count of indexed memories: 1 new, 0 reindexed, -1 forgotten.
    counted: i64,
}

/// A stored memory with the fields of `m` applied over it (an update in place).
fn merged(old: MemoryRecord, m: &Remember) -> MemoryRecord {
    MemoryRecord {
        subject: m.subject.clone().or(old.subject),
        kind: m.kind.unwrap_or(old.kind),
        title: m.title.clone().unwrap_or(old.title),
        body: m.body.clone().unwrap_or(old.body),
        tags: m.tags.clone().unwrap_or(old.tags),
        salience: m.salience.map_or(old.salience, |s| s as u8),
        pinned: m.pinned.unwrap_or(old.pinned),
        source: m.source.clone().or(old.source),
        ..old
    }
}

/// A new memory from `m` (validated: it has a body).
fn created(agent: &str, m: &Remember, now: i64) -> MemoryRecord {
    let body = m.body.clone().unwrap_or_default();
    MemoryRecord {
        id: 0,
        agent: agent.to_string(),
        key: m.key.clone(),
        subject: m.subject.clone(),
        kind: m.kind.unwrap_or_default(),
        title: m.title.clone().unwrap_or_else(|| rules::derived_title(&body)),
        body,
        tags: m.tags.clone().unwrap_or_default(),
        salience: m.salience.unwrap_or(DEFAULT_SALIENCE) as u8,
        pinned: m.pinned.unwrap_or(false),
        source: m.source.clone(),
        created_at: now,
        updated_at: now,
    }
}

/// Expands the store's implementation for one driver: `$store` wraps a `$pool`; `$dialect` is its SQL;
/// `$arrays` how it takes lists (`json` or `native`, see [`bind_params!`]).
macro_rules! memory_store {
    ($store:ident, $pool:ty, $dialect:expr, $arrays:ident) => {
        impl $store {
            fn record(row: &<<$pool as PoolDb>::Db as sqlx::Database>::Row) -> Result<MemoryRecord, MemoryError> {
                let kind: String = row.try_get(4)?;
                let tags: String = row.try_get(7)?;
                let salience: i64 = row.try_get(8)?;
                let pinned: i64 = row.try_get(9)?;
                Ok(MemoryRecord {
                    id: row.try_get(0)?,
                    agent: row.try_get(1)?,
                    key: row.try_get(2)?,
                    subject: row.try_get(3)?,
                    kind: MemoryKind::parse("kind", &kind).map_err(|e| MemoryError::Store(e.to_string()))?,
                    title: row.try_get(5)?,
                    body: row.try_get(6)?,
                    tags: rules::parse_tags(&tags),
                    salience: salience.clamp(rules::MIN_SALIENCE, rules::MAX_SALIENCE) as u8,
                    pinned: pinned != 0,
                    source: row.try_get(10)?,
                    created_at: row.try_get(11)?,
                    updated_at: row.try_get(12)?,
                })
            }

            /// Removes a memory's postings; returns their terms (empty when it had none).
            async fn unindex(tx: &mut <<$pool as PoolDb>::Db as sqlx::Database>::Connection, id: i64) -> Result<Vec<String>, sqlx::Error> {
                let terms: Vec<String> = sqlx::query_scalar(
                    "SELECT t.term FROM ambit_memory_postings p JOIN ambit_memory_terms t ON t.id = p.term_id \
                     WHERE p.memory_id = $1",
                )
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                if !terms.is_empty() {
                    sqlx::query("DELETE FROM ambit_memory_postings WHERE memory_id = $1").bind(id).execute(&mut *tx).await?;
                }
                Ok(terms)
            }

            /// Writes the entries' postings, their terms' document frequencies and their agents' counts,
            /// and marks them indexed. Shared rows are written in one order (agents, then each agent's
            /// terms, sorted), so concurrent writers never wait on each other in a cycle.
            async fn index(tx: &mut <<$pool as PoolDb>::Db as sqlx::Database>::Connection, entries: &[Entry]) -> Result<(), sqlx::Error> {
                let mut by_agent: BTreeMap<&str, BTreeMap<&str, i64>> = BTreeMap::new();
                let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
                for e in entries {
                    let terms = by_agent.entry(e.agent.as_str()).or_default();
                    for (t, _) in &e.postings {
                        *terms.entry(t.as_str()).or_insert(0) += 1;
                    }
                    for t in &e.removed {
                        *terms.entry(t.as_str()).or_insert(0) -= 1;
                    }
                    *counts.entry(e.agent.as_str()).or_insert(0) += e.counted;
                }
                counts.retain(|_, n| *n != 0);
                if !counts.is_empty() {
                    let agents = Column::Texts(counts.keys().map(|a| a.to_string()).collect());
                    let deltas = Column::Ints(counts.values().copied().collect());
                    bind_params!($arrays, sqlx::query($dialect.upsert_agents), [Param::Rows(vec![agents, deltas])])
                        .execute(&mut *tx)
                        .await?;
                }
                let (mut term_ids, mut impacts, mut memory_ids) = (Vec::new(), Vec::new(), Vec::new());
                let mut removed_ids: Vec<(i64, i64)> = Vec::new();
                for (agent, terms) in by_agent {
                    if terms.is_empty() {
                        continue;
                    }
                    let names = Column::Texts(terms.keys().map(|t| t.to_string()).collect());
                    let deltas = Column::Ints(terms.values().copied().collect());
                    let params = [Param::Text(agent.to_string()), Param::Rows(vec![names, deltas])];
                    let rows = bind_params!($arrays, sqlx::query($dialect.upsert_terms), params).fetch_all(&mut *tx).await?;
                    let mut ids: HashMap<String, i64> = HashMap::with_capacity(rows.len());
                    for r in &rows {
                        ids.insert(r.try_get(1)?, r.try_get(0)?);
                    }
                    for e in entries.iter().filter(|e| e.agent == agent) {
                        for t in &e.removed {
                            if let Some(id) = ids.get(t) {
                                removed_ids.push((*id, e.id));
                            }
                        }
                        for (t, impact) in &e.postings {
                            let id = ids.get(t).copied().ok_or_else(|| {
                                sqlx::Error::Protocol(format!("the index returned no id for term {t:?}"))
                            })?;
                            term_ids.push(id);
                            impacts.push(*impact);
                            memory_ids.push(e.id);
                        }
                    }
                }
                if !term_ids.is_empty() {
                    let rows = vec![
                        Column::Ints(term_ids.clone()),
                        Column::Ints(impacts.clone()),
                        Column::Ints(memory_ids.clone()),
                    ];
                    bind_params!($arrays, sqlx::query($dialect.insert_postings), [Param::Rows(rows)]).execute(&mut *tx).await?;
                }
                // The blocks: each (term, bucket) touched read once, the removed postings taken out, the new
                // ones put in, written back (or deleted when empty). The terms' rows were written above, so
                // a concurrent writer of the same term waits for this transaction.
                let mut changes: BTreeMap<(i64, i64), (Vec<i64>, Vec<(i64, i64)>)> = BTreeMap::new();
                for (term_id, id) in removed_ids {
                    changes.entry((term_id, index::bucket(id))).or_default().0.push(id);
                }
                for ((term_id, impact), id) in term_ids.iter().zip(&impacts).zip(&memory_ids) {
                    changes.entry((*term_id, index::bucket(*id))).or_default().1.push((*id, *impact));
                }
                if !changes.is_empty() {
                    let mut wanted_terms: Vec<i64> = changes.keys().map(|(t, _)| *t).collect();
                    wanted_terms.dedup();
                    let mut wanted_buckets: Vec<i64> = changes.keys().map(|(_, b)| *b).collect();
                    wanted_buckets.sort_unstable();
                    wanted_buckets.dedup();
                    let sql = format!(
                        "SELECT term_id, bucket, data FROM ambit_memory_blocks WHERE term_id IN ({}) AND bucket IN ({}){}",
                        ($dialect.list)(1),
                        ($dialect.list)(2),
                        $dialect.lock
                    );
                    let params = [Param::List(Column::Ints(wanted_terms)), Param::List(Column::Ints(wanted_buckets))];
                    let rows = bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&mut *tx).await?;
                    let mut old: HashMap<(i64, i64), Vec<u8>> = HashMap::with_capacity(rows.len());
                    for r in &rows {
                        old.insert((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?);
                    }
                    let (mut put_terms, mut put_buckets, mut put_data) = (Vec::new(), Vec::new(), Vec::new());
                    let (mut gone_terms, mut gone_buckets) = (Vec::new(), Vec::new());
                    for ((term_id, bucket), (removed, added)) in changes {
                        let mut postings = old.get(&(term_id, bucket)).map_or_else(Vec::new, |d| index::decode_block(bucket, d));
                        postings.retain(|(id, _)| !removed.contains(id) && !added.iter().any(|(a, _)| a == id));
                        postings.extend(added);
                        if postings.is_empty() {
                            gone_terms.push(term_id);
                            gone_buckets.push(bucket);
                        } else {
                            put_terms.push(term_id);
                            put_buckets.push(bucket);
                            put_data.push(index::encode_block(&mut postings));
                        }
                    }
                    if !put_terms.is_empty() {
                        let rows = vec![Column::Ints(put_terms), Column::Ints(put_buckets), Column::Blobs(put_data)];
                        bind_params!($arrays, sqlx::query($dialect.upsert_blocks), [Param::Rows(rows)]).execute(&mut *tx).await?;
                    }
                    if !gone_terms.is_empty() {
                        let rows = vec![Column::Ints(gone_terms), Column::Ints(gone_buckets)];
                        bind_params!($arrays, sqlx::query($dialect.delete_blocks), [Param::Rows(rows)]).execute(&mut *tx).await?;
                    }
                }
                let ids = Column::Ints(entries.iter().filter(|e| e.counted >= 0).map(|e| e.id).collect());
                if ids.len() > 0 {
                    let sql = format!("UPDATE ambit_memories SET indexed = 1 WHERE id IN ({})", ($dialect.list)(1));
                    bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), [Param::List(ids)]).execute(&mut *tx).await?;
                }
                Ok(())
            }

            /// Indexes the rows written without the index (before its migration, or by plain SQL), a
            /// batch per transaction.
            async fn index_pending(&self) -> Result<(), sqlx::Error> {
                loop {
                    let mut tx = self.pool.begin_with($dialect.begin).await?;
                    let sql = format!(
                        "SELECT id, agent, title, body, tags_text FROM ambit_memories WHERE indexed = 0 ORDER BY id LIMIT $1{}",
                        $dialect.lock_skip
                    );
                    let rows = sqlx::query(AssertSqlSafe(sql)).bind(INDEX_BATCH).fetch_all(&mut *tx).await?;
                    if rows.is_empty() {
                        return tx.commit().await;
                    }
                    let mut entries = Vec::with_capacity(rows.len());
                    for r in &rows {
                        let id: i64 = r.try_get(0)?;
                        let title: String = r.try_get(2)?;
                        let body: String = r.try_get(3)?;
                        let tags: String = r.try_get(4)?;
                        // A row indexed before, then marked again by plain SQL, leaves no postings behind.
                        let removed = Self::unindex(&mut tx, id).await?;
                        let counted = i64::from(removed.is_empty());
                        let postings = index::postings(&title, &body, &tags);
                        entries.push(Entry { id, agent: r.try_get(1)?, postings, removed, counted });
                    }
                    Self::index(&mut tx, &entries).await?;
                    tx.commit().await?;
                }
            }

            /// The first `search.limit` memories for a query: every block of the query's terms read whole and
            /// scored, then the best checked against the filters (and ordered by the tiebreak) in rounds.
            async fn ranked(&self, agent: &str, s: &Search) -> Result<Vec<MemoryRecord>, MemoryError> {
                let terms = index::query_terms(&s.terms);
                let mut tx = self.pool.begin_with($dialect.begin_read).await?;
                // One statement: the agent's count of memories, and each query term's document frequency
                // with its blocks (a term with no posting has no block, and adds nothing to any score).
                let sql = format!(
                    "SELECT t.id, t.term, t.df, (SELECT n FROM ambit_memory_agents WHERE agent = $1), b.bucket, b.data \
                     FROM ambit_memory_terms t JOIN ambit_memory_blocks b ON b.term_id = t.id \
                     WHERE t.agent = $1 AND t.df > 0 AND t.term IN ({})",
                    ($dialect.list)(2)
                );
                let params = [Param::Text(agent.to_string()), Param::List(Column::Texts(terms.clone()))];
                let rows = bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&mut *tx).await?;
                // Positions are the query's term order (a term not found keeps its place with weight 0 and
                // no blocks), so the scores are summed in the same order as ever.
                let mut query = Query { term_ids: vec![0; terms.len()], idf: vec![0.0; terms.len()] };
                let mut blocks = Vec::with_capacity(rows.len());
                for r in &rows {
                    let term: &str = r.try_get(1)?;
                    let Some(position) = terms.iter().position(|t| t == term) else { continue };
                    let n: Option<i64> = r.try_get(3)?;
                    query.term_ids[position] = r.try_get(0)?;
                    query.idf[position] = index::idf(n.unwrap_or(0), r.try_get(2)?);
                    blocks.push((position, r.try_get::<i64, _>(4)?, r.try_get::<Vec<u8>, _>(5)?));
                }
                drop(rows);
                if blocks.is_empty() {
                    tx.commit().await?;
                    return Ok(Vec::new());
                }
                let limit = s.limit.max(1);
                let mut scored = index::score_blocks(&query, blocks);
                // The best not yet checked, with every tie of the last, against the filters (and for the
                // tiebreak's fields); each unchecked memory then scores strictly less than every checked
                // one, so once `limit` pass, the order of those that passed is the answer. A few are read
                // whole at once (no second read for the answer); a long run of ties only for the tiebreak.
                let mut passed: Vec<Candidate> = Vec::new();
                let mut records: HashMap<i64, MemoryRecord> = HashMap::new();
                let (mut checked, mut want) = (0, limit);
                while passed.len() < limit && checked < scored.len() {
                    let taken = index::best_first(&mut scored[checked..], want);
                    let chunk = &scored[checked..checked + taken];
                    let whole = taken <= limit.saturating_mul(4);
                    let scores: HashMap<i64, f64> = chunk.iter().map(|(score, id)| (*id, *score)).collect();
                    let mut ids: Vec<i64> = chunk.iter().map(|(_, id)| *id).collect();
                    ids.sort_unstable();
                    let mut params = vec![Param::List(Column::Ints(ids))];
                    let columns = if whole { COLUMNS } else { TIEBREAK_COLUMNS };
                    let mut sql = format!(
                        "SELECT {columns} FROM ambit_memories m{} WHERE m.id IN ({})",
                        $dialect.by_id,
                        ($dialect.list)(1)
                    );
                    sql.push_str(&filters(&$dialect, agent, s, &mut params));
                    let rows = bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&mut *tx).await?;
                    for r in &rows {
                        let id: i64 = r.try_get(0)?;
                        // The tiebreak's fields as stored, at their places in `COLUMNS` or `TIEBREAK_COLUMNS`.
                        let (pinned, salience, updated_at) = if whole { (9, 8, 12) } else { (1, 2, 3) };
                        passed.push(Candidate {
                            id,
                            pinned: r.try_get(pinned)?,
                            salience: r.try_get(salience)?,
                            updated_at: r.try_get(updated_at)?,
                            score: scores.get(&id).copied().unwrap_or(0.0),
                        });
                        if whole {
                            records.insert(id, Self::record(r)?);
                        }
                    }
                    checked += taken;
                    want = want.saturating_mul(4);
                }
                let best: Vec<i64> = index::order_scored(passed).into_iter().take(limit).map(|c| c.id).collect();
                let missing: Vec<i64> = best.iter().filter(|id| !records.contains_key(id)).copied().collect();
                if !missing.is_empty() {
                    let sql = format!("SELECT {COLUMNS} FROM ambit_memories m WHERE m.id IN ({})", ($dialect.list)(1));
                    let rows = bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), [Param::List(Column::Ints(missing))])
                        .fetch_all(&mut *tx)
                        .await?;
                    for r in &rows {
                        let m = Self::record(r)?;
                        records.insert(m.id, m);
                    }
                }
                tx.commit().await?;
                Ok(best.iter().filter_map(|id| records.remove(id)).collect())
            }

            /// One attempt at a save, in one transaction: the store's failure outside, a refusal inside.
            async fn try_save(&self, agent: &str, m: &Remember, now: i64) -> Result<Result<Saved, MemoryError>, sqlx::Error> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let existing = match &m.key {
                    Some(key) => {
                        let sql = format!(
                            "SELECT {COLUMNS}, m.indexed FROM ambit_memories m WHERE m.agent = $1 AND m.mkey = $2{}",
                            $dialect.lock
                        );
                        let row = sqlx::query(AssertSqlSafe(sql)).bind(agent).bind(key).fetch_optional(&mut *tx).await?;
                        let indexed = match &row {
                            Some(r) => r.try_get::<i64, _>(13)? != 0,
                            None => false,
                        };
                        match row.map(|r| Self::record(&r)).transpose() {
                            Ok(found) => found.map(|f| (f, indexed)),
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                    None => None,
                };
                let (saved, entry) = match existing {
                    Some((old, indexed)) => {
                        let mut new = merged(old, m);
                        new.updated_at = now;
                        let (tags, tags_text) = rules::stored_tags(&new.tags);
                        let removed = Self::unindex(&mut tx, new.id).await?;
                        let postings = index::postings(&new.title, &new.body, &tags_text);
                        let entry = Entry { id: new.id, agent: agent.to_string(), postings, removed, counted: i64::from(!indexed) };
                        sqlx::query(
                            "UPDATE ambit_memories SET subject = $1, kind = $2, title = $3, body = $4, tags = $5, \
                             tags_text = $6, salience = $7, pinned = $8, source = $9, updated_at = $10 WHERE id = $11",
                        )
                        .bind(&new.subject)
                        .bind(new.kind.as_str())
                        .bind(&new.title)
                        .bind(&new.body)
                        .bind(tags)
                        .bind(tags_text)
                        .bind(i64::from(new.salience))
                        .bind(i64::from(new.pinned))
                        .bind(&new.source)
                        .bind(now)
                        .bind(new.id)
                        .execute(&mut *tx)
                        .await?;
                        (Saved { memory: new, created: false }, entry)
                    }
                    None if m.body.is_none() => {
                        return Ok(Err(MemoryError::invalid("body", "is required for a new memory (no memory has this key)")));
                    }
                    None => {
                        let mut new = created(agent, m, now);
                        let (tags, tags_text) = rules::stored_tags(&new.tags);
                        let postings = index::postings(&new.title, &new.body, &tags_text);
                        new.id = sqlx::query_scalar(
                            "INSERT INTO ambit_memories (agent, mkey, subject, kind, title, body, tags, tags_text, \
                             salience, pinned, source, created_at, updated_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING id",
                        )
                        .bind(agent)
                        .bind(&new.key)
                        .bind(&new.subject)
                        .bind(new.kind.as_str())
                        .bind(&new.title)
                        .bind(&new.body)
                        .bind(tags)
                        .bind(tags_text)
                        .bind(i64::from(new.salience))
                        .bind(i64::from(new.pinned))
                        .bind(&new.source)
                        .bind(now)
                        .fetch_one(&mut *tx)
                        .await?;
                        let entry = Entry { id: new.id, agent: agent.to_string(), postings, removed: Vec::new(), counted: 1 };
                        (Saved { memory: new, created: true }, entry)
                    }
                };
                Self::index(&mut tx, &[entry]).await?;
                tx.commit().await?;
                Ok(Ok(saved))
            }
        }

        #[async_trait]
        impl MemoryStore for $store {
            async fn save(&self, agent: &str, m: &Remember, now: i64) -> Result<Saved, MemoryError> {
                // Two first saves under one key race to insert; the loser finds the winner's row and
                // updates it.
                let mut attempt = 0;
                loop {
                    match self.try_save(agent, m, now).await {
                        Err(sqlx::Error::Database(e)) if e.is_unique_violation() && attempt < 3 => attempt += 1,
                        Err(e) => return Err(e.into()),
                        Ok(done) => return done,
                    }
                }
            }

            async fn forget(&self, agent: &str, target: &Target) -> Result<bool, MemoryError> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let gone: Option<(i64, i64)> = match target {
                    Target::Id(id) => {
                        sqlx::query_as("DELETE FROM ambit_memories WHERE agent = $1 AND id = $2 RETURNING id, indexed")
                            .bind(agent)
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await?
                    }
                    Target::Key(key) => {
                        sqlx::query_as("DELETE FROM ambit_memories WHERE agent = $1 AND mkey = $2 RETURNING id, indexed")
                            .bind(agent)
                            .bind(key)
                            .fetch_optional(&mut *tx)
                            .await?
                    }
                };
                if let Some((id, indexed)) = gone {
                    let removed = Self::unindex(&mut tx, id).await?;
                    let counted = if indexed != 0 { -1 } else { 0 };
                    Self::index(&mut tx, &[Entry { id, agent: agent.to_string(), postings: Vec::new(), removed, counted }]).await?;
                }
                tx.commit().await?;
                Ok(gone.is_some())
            }

            async fn search(&self, agent: &str, search: &Search) -> Result<Vec<MemoryRecord>, MemoryError> {
                if !search.terms.is_empty() {
                    return self.ranked(agent, search).await;
                }
                let (sql, params) = baseline_sql(&$dialect, agent, search);
                // Built from constants; every value is a bound parameter.
                let rows = bind_params!($arrays, sqlx::query(AssertSqlSafe(sql)), params).fetch_all(&self.pool).await?;
                rows.iter().map(Self::record).collect()
            }

            async fn list(&self, agent: Option<&str>) -> Result<Vec<MemoryRecord>, MemoryError> {
                let rows = match agent {
                    Some(a) => {
                        sqlx::query(AssertSqlSafe(format!("SELECT {COLUMNS} FROM ambit_memories m WHERE m.agent = $1 ORDER BY m.id")))
                            .bind(a)
                            .fetch_all(&self.pool)
                            .await?
                    }
                    None => {
                        sqlx::query(AssertSqlSafe(format!("SELECT {COLUMNS} FROM ambit_memories m ORDER BY m.agent, m.id")))
                            .fetch_all(&self.pool)
                            .await?
                    }
                };
                rows.iter().map(Self::record).collect()
            }
        }
    };
}

/// The database a pool type is for, so the macro can name its row type.
trait PoolDb {
    type Db: sqlx::Database;
}
impl PoolDb for sqlx::SqlitePool {
    type Db = sqlx::Sqlite;
}
impl PoolDb for sqlx::PgPool {
    type Db = sqlx::Postgres;
}

/// Memories in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteMemories {
    pool: sqlx::SqlitePool,
}

impl SqliteMemories {
    pub async fn open(path: &str, options: &MemoryOptions, now: i64) -> Result<SqliteMemories, MemoryError> {
        if path.is_empty() {
            return Err(MemoryError::invalid("url", "sqlite:// needs a file path"));
        }
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| MemoryError::invalid("url", e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30));
        let pool =
            SqlitePoolOptions::new().max_connections(options.max_connections.max(1)).connect_with(connect).await?;
        crate::migrate::sqlite(&pool, &MIGRATIONS, now).await.map_err(MemoryError::Store)?;
        let store = SqliteMemories { pool };
        store.index_pending().await?;
        Ok(store)
    }
}

memory_store!(SqliteMemories, sqlx::SqlitePool, SQLITE, json);

/// Memories in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgMemories {
    pool: sqlx::PgPool,
}

impl PgMemories {
    pub async fn open(url: &str, options: &MemoryOptions, now: i64) -> Result<PgMemories, MemoryError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| MemoryError::invalid("url", format!("bad PostgreSQL URL: {e}")))?;
        let pool = PgPoolOptions::new().max_connections(options.max_connections.max(1)).connect_with(connect).await?;
        crate::migrate::postgres(&pool, &MIGRATIONS, now).await.map_err(MemoryError::Store)?;
        let store = PgMemories { pool };
        store.index_pending().await?;
        Ok(store)
    }
}

memory_store!(PgMemories, sqlx::PgPool, POSTGRES, native);
