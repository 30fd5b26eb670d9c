//! Memory for Swift: `CoreMemory` (async, on the core's runtime) with records for memories, and
//! `MemoryCoreError` (one case per core code). The facade (`Memory.swift`) wraps it. Every rule lives in
//! the core.

use std::sync::Arc;

use ambit::memory::{self as core, Memory, MemoryKind, Recall, Remember, Target};

use crate::{CaughtPanic, guard_async};

/// A memory failure, one case per code of the core's `MemoryError`; `message` is the core's text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum MemoryCoreError {
    /// Code `memory_invalid_argument`: `field` names the argument, the message gives the limit.
    #[error("{message}")]
    InvalidArgument { field: String, message: String },
    /// Code `memory_not_found`.
    #[error("{message}")]
    NotFound { message: String },
    /// Code `memory_read_only`.
    #[error("{message}")]
    ReadOnly { message: String },
    /// Code `memory_store`.
    #[error("{message}")]
    Store { message: String },
    /// Code `internal`: a bug in ambit, a panic caught at the boundary instead of taking the process down.
    #[error("{message}")]
    Internal { message: String },
}

impl CaughtPanic for MemoryCoreError {
    fn internal(error: ambit::Error) -> Self {
        MemoryCoreError::Internal { message: error.to_string() }
    }
}

impl From<core::MemoryError> for MemoryCoreError {
    fn from(e: core::MemoryError) -> Self {
        let message = e.to_string();
        match e {
            core::MemoryError::InvalidArgument { field, .. } => MemoryCoreError::InvalidArgument { field, message },
            core::MemoryError::NotFound(_) => MemoryCoreError::NotFound { message },
            core::MemoryError::ReadOnly => MemoryCoreError::ReadOnly { message },
            core::MemoryError::Store(_) => MemoryCoreError::Store { message },
        }
    }
}

/// One stored memory. `kind` is fact, preference, lesson or instruction; `salience` 1 to 10.
#[derive(Debug, Clone, uniffi::Record)]
pub struct MemoryItem {
    pub id: i64,
    pub agent: String,
    pub key: Option<String>,
    pub subject: Option<String>,
    pub kind: String,
    pub title: String,
    pub body: String,
    pub tags: Vec<String>,
    pub salience: u8,
    pub pinned: bool,
    pub source: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<core::MemoryRecord> for MemoryItem {
    fn from(m: core::MemoryRecord) -> Self {
        MemoryItem {
            id: m.id,
            agent: m.agent,
            key: m.key,
            subject: m.subject,
            kind: m.kind.as_str().to_string(),
            title: m.title,
            body: m.body,
            tags: m.tags,
            salience: m.salience,
            pinned: m.pinned,
            source: m.source,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// What a remember did: the memory, and whether it was created (false: a key updated it in place).
#[derive(Debug, Clone, uniffi::Record)]
pub struct SavedMemory {
    pub memory: MemoryItem,
    pub created: bool,
}

/// A memory to save; with a `key` already saved, the fields given update that memory in place.
#[derive(Debug, Clone, uniffi::Record)]
pub struct MemoryInput {
    #[uniffi(default = None)]
    pub body: Option<String>,
    #[uniffi(default = None)]
    pub title: Option<String>,
    #[uniffi(default = None)]
    pub kind: Option<String>,
    #[uniffi(default = None)]
    pub tags: Option<Vec<String>>,
    #[uniffi(default = None)]
    pub salience: Option<i64>,
    #[uniffi(default = None)]
    pub pinned: Option<bool>,
    #[uniffi(default = None)]
    pub key: Option<String>,
    #[uniffi(default = None)]
    pub subject: Option<String>,
}

fn kind(k: Option<String>) -> Result<Option<MemoryKind>, core::MemoryError> {
    k.map(|k| MemoryKind::parse("kind", &k)).transpose()
}

/// The memory store under the Swift facade's `Memory`.
#[derive(uniffi::Object)]
pub struct CoreMemory {
    pub(crate) memory: Memory,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreMemory {
    /// Opens `sqlite:///path` or `postgres://…`, applying the migrations.
    #[uniffi::constructor]
    pub async fn open(url: String) -> Result<Arc<Self>, MemoryCoreError> {
        guard_async(async move { Ok(Arc::new(CoreMemory { memory: Memory::open(&url).await? })) }).await
    }

    /// Saves a memory in `agent`'s namespace, or updates the one under its key in place.
    pub async fn remember(&self, agent: String, memory: MemoryInput) -> Result<SavedMemory, MemoryCoreError> {
        guard_async(async move {
            let m = Remember {
                key: memory.key,
                subject: memory.subject,
                kind: kind(memory.kind)?,
                title: memory.title,
                body: memory.body,
                tags: memory.tags,
                salience: memory.salience,
                pinned: memory.pinned,
                source: None,
            };
            let saved = self.memory.remember(&agent, m).await?;
            Ok(SavedMemory { memory: saved.memory.into(), created: saved.created })
        })
        .await
    }

    /// With a query, by relevance over title, body and tags; without, pinned then highest salience.
    pub async fn recall(
        &self,
        agent: String,
        query: Option<String>,
        tags: Vec<String>,
        kind_name: Option<String>,
        subjects: Vec<String>,
        limit: u32,
    ) -> Result<Vec<MemoryItem>, MemoryCoreError> {
        guard_async(async move {
            let recall = Recall { query, tags, kind: kind(kind_name)?, subjects, limit: limit as usize };
            Ok(self.memory.recall(&agent, &recall).await?.into_iter().map(Into::into).collect())
        })
        .await
    }

    /// Forgets one memory by id or key; whether it existed.
    pub async fn forget(&self, agent: String, id: Option<i64>, key: Option<String>) -> Result<bool, MemoryCoreError> {
        guard_async(async move {
            let target = match (id, key) {
                (Some(id), None) => Target::Id(id),
                (None, Some(key)) => Target::Key(key),
                _ => {
                    return Err(MemoryCoreError::InvalidArgument {
                        field: "id".into(),
                        message: "invalid memory argument 'id': give the memory's id or its key, one of them".into(),
                    });
                }
            };
            Ok(self.memory.forget(&agent, &target).await?)
        })
        .await
    }

    /// Every memory of `agent`, oldest first.
    pub async fn list(&self, agent: String) -> Result<Vec<MemoryItem>, MemoryCoreError> {
        guard_async(async move { Ok(self.memory.list(&agent).await?.into_iter().map(Into::into).collect()) }).await
    }

    /// `{"version": 1, "memories": [...]}` for `agent`, or for every agent.
    pub async fn export(&self, agent: Option<String>) -> Result<String, MemoryCoreError> {
        guard_async(async move { Ok(self.memory.export_json(agent.as_deref()).await?) }).await
    }
}
