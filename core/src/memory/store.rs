//! The two memory stores, SQLite (one file, WAL, FTS5) and PostgreSQL (tsvector under a GIN index).
//! Their code is written once: the SQL is the same but for a [`Dialect`] (how a transaction starts,
//! how a row is locked, how full-text search matches and ranks, how a substring is found), and
//! [`memory_store!`] expands the one implementation for each driver.
//!
//! Ranking with a query: the store's relevance (FTS5 `bm25` with title weighted 10, tags 5, body 1;
//! on PostgreSQL the sum over the terms of `ts_rank` (weights A 1.0, B 0.7, C 0.5, normalised by
//! length) times the term's inverse document frequency), then the same
//! tiebreak on both stores: pinned first, higher salience, later update, higher id. Without a query,
//! only the tiebreak: the baseline.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Row};

use super::rules::{self, DEFAULT_SALIENCE};
use super::{MemoryError, MemoryKind, MemoryOptions, MemoryRecord, MemoryStore, Remember, Saved, Search, Target};

/// What differs between the two stores' SQL. Placeholders are `$N` in both.
struct Dialect {
    /// The statement that opens a write transaction.
    begin: &'static str,
    /// Appended to the read of a row about to be updated.
    lock: &'static str,
    /// What a full-text search needs before its SELECT (`WITH …`), if anything.
    search_with: &'static str,
    /// The FROM and WHERE head of a full-text search; `$1` is the query text from [`Dialect::fts_query`],
    /// `$2` the agent.
    search_from: &'static str,
    /// The relevance of a row to `$1`, higher first.
    score: &'static str,
    /// Whether the text of `haystack` contains the text of parameter `$n`.
    contains: fn(haystack: &str, n: usize) -> String,
    /// The query text the terms become.
    fts_query: fn(terms: &[String]) -> String,
}

const SQLITE: Dialect = Dialect {
    begin: "BEGIN IMMEDIATE",
    lock: "",
    search_with: "",
    // CROSS JOIN keeps the full-text match the outer loop: SQLite would otherwise walk the agent's rows
    // and run the match once per row.
    search_from: "FROM ambit_memories_fts CROSS JOIN ambit_memories m ON m.id = ambit_memories_fts.rowid \
                  WHERE ambit_memories_fts MATCH $1",
    score: "(0.0 - bm25(ambit_memories_fts, 10.0, 1.0, 5.0))",
    contains: |h, n| format!("instr({h}, ${n}) > 0"),
    // Each term a quoted string (terms are letters and digits only), any of them.
    fts_query: |terms| terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "),
};

const POSTGRES: Dialect = Dialect {
    begin: "BEGIN",
    lock: " FOR UPDATE",
    // ts_rank knows nothing of how rare a word is, so each term's rank is weighted by its inverse
    // document frequency in the agent's namespace (as BM25 does on SQLite): a word most memories hold
    // counts for little. MATERIALIZED: the counts are taken once per query, never once per row.
    search_with: "WITH ambit_terms AS (SELECT to_tsquery('english', t) AS tq FROM unnest(string_to_array($1, ' | ')) AS t), \
                  ambit_total AS MATERIALIZED (SELECT count(*)::float8 AS n FROM ambit_memories WHERE agent = $2), \
                  ambit_idf AS MATERIALIZED (SELECT a.tq, ln(1 + (t.n - c.c + 0.5) / (c.c + 0.5)) AS idf \
                      FROM ambit_terms a CROSS JOIN ambit_total t CROSS JOIN LATERAL \
                      (SELECT count(*)::float8 AS c FROM ambit_memories x WHERE x.agent = $2 AND x.fts @@ a.tq) c) ",
    search_from: "FROM ambit_memories m WHERE m.fts @@ to_tsquery('english', $1)",
    score: "(SELECT COALESCE(sum(w.idf * ts_rank('{0.1, 0.5, 0.7, 1.0}', m.fts, w.tq, 1)), 0) FROM ambit_idf w)::float8",
    contains: |h, n| format!("strpos({h}, ${n}) > 0"),
    fts_query: |terms| terms.join(" | "),
};

const COLUMNS: &str = "m.id, m.agent, m.mkey, m.subject, m.kind, m.title, m.body, m.tags, m.salience, m.pinned, \
                       m.source, m.created_at, m.updated_at";
/// The tiebreak, and the whole order without a query.
const BASELINE_ORDER: &str = "m.pinned DESC, m.salience DESC, m.updated_at DESC, m.id DESC";

/// The memory store's schema migrations, applied on open by the crate's one migration runner.
const MIGRATIONS: crate::migrate::Plan = crate::migrate::Plan {
    table: "ambit_memory_migrations",
    pg_lock: 7411016,
    sqlite: &[(1, "memory", include_str!("../../migrations/sqlite/memory_0001.sql"))],
    postgres: &[(1, "memory", include_str!("../../migrations/postgres/memory_0001.sql"))],
};

/// A parameter of a statement built at run time.
enum Param {
    Text(String),
    Int(i64),
}

/// The SELECT of a search: its SQL and parameters in order.
fn search_sql(d: &Dialect, agent: &str, s: &Search) -> (String, Vec<Param>) {
    let mut params: Vec<Param> = Vec::new();
    let mut sql = if s.terms.is_empty() {
        format!("SELECT {COLUMNS} FROM ambit_memories m WHERE 1 = 1")
    } else {
        params.push(Param::Text((d.fts_query)(&s.terms)));
        format!("{}SELECT {COLUMNS} {}", d.search_with, d.search_from)
    };
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
    if s.terms.is_empty() {
        sql.push_str(&format!(" ORDER BY {BASELINE_ORDER}"));
    } else {
        sql.push_str(&format!(" ORDER BY {} DESC, {BASELINE_ORDER}", d.score));
    }
    params.push(Param::Int(s.limit as i64));
    sql.push_str(&format!(" LIMIT ${}", params.len()));
    (sql, params)
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

/// Expands the store's implementation for one driver: `$store` wraps a `$pool`; `$dialect` is its SQL.
macro_rules! memory_store {
    ($store:ident, $pool:ty, $dialect:expr) => {
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

            /// One attempt at a save, in one transaction: the store's failure outside, a refusal inside.
            async fn try_save(&self, agent: &str, m: &Remember, now: i64) -> Result<Result<Saved, MemoryError>, sqlx::Error> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let existing = match &m.key {
                    Some(key) => {
                        let sql = format!(
                            "SELECT {COLUMNS} FROM ambit_memories m WHERE m.agent = $1 AND m.mkey = $2{}",
                            $dialect.lock
                        );
                        let row = sqlx::query(AssertSqlSafe(sql)).bind(agent).bind(key).fetch_optional(&mut *tx).await?;
                        match row.map(|r| Self::record(&r)).transpose() {
                            Ok(found) => found,
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                    None => None,
                };
                let saved = match existing {
                    Some(old) => {
                        let mut new = merged(old, m);
                        new.updated_at = now;
                        let (tags, tags_text) = rules::stored_tags(&new.tags);
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
                        Saved { memory: new, created: false }
                    }
                    None if m.body.is_none() => {
                        return Ok(Err(MemoryError::invalid("body", "is required for a new memory (no memory has this key)")));
                    }
                    None => {
                        let mut new = created(agent, m, now);
                        let (tags, tags_text) = rules::stored_tags(&new.tags);
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
                        Saved { memory: new, created: true }
                    }
                };
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
                let done = match target {
                    Target::Id(id) => {
                        sqlx::query("DELETE FROM ambit_memories WHERE agent = $1 AND id = $2")
                            .bind(agent)
                            .bind(id)
                            .execute(&self.pool)
                            .await?
                    }
                    Target::Key(key) => {
                        sqlx::query("DELETE FROM ambit_memories WHERE agent = $1 AND mkey = $2")
                            .bind(agent)
                            .bind(key)
                            .execute(&self.pool)
                            .await?
                    }
                };
                Ok(done.rows_affected() > 0)
            }

            async fn search(&self, agent: &str, search: &Search) -> Result<Vec<MemoryRecord>, MemoryError> {
                let (sql, params) = search_sql(&$dialect, agent, search);
                // Built from constants; every value is a bound parameter.
                let mut query = sqlx::query(AssertSqlSafe(sql));
                for p in params {
                    query = match p {
                        Param::Text(t) => query.bind(t),
                        Param::Int(i) => query.bind(i),
                    };
                }
                let rows = query.fetch_all(&self.pool).await?;
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
        Ok(SqliteMemories { pool })
    }
}

memory_store!(SqliteMemories, sqlx::SqlitePool, SQLITE);

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
        Ok(PgMemories { pool })
    }
}

memory_store!(PgMemories, sqlx::PgPool, POSTGRES);
