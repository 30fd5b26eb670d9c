//! Knowledge for Swift: `knowledge_publish` (the host's publish) with `KnowledgeCoreError` (one case per
//! core code), and the agent's knowledge directory as a record. The facade (`Knowledge.swift`) wraps it.
//! Every rule lives in the core.

use ambit::knowledge::{self as core, KnowledgeError};

use crate::{CaughtPanic, guard};

/// A knowledge failure, one case per code of the core's `KnowledgeError`; `message` is the core's text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum KnowledgeCoreError {
    /// Code `knowledge_invalid_argument`: `field` names the argument.
    #[error("{message}")]
    InvalidArgument { field: String, message: String },
    /// Code `knowledge_exists`: a document of that name exists and overwrite was off.
    #[error("{message}")]
    Exists { message: String },
    /// Code `knowledge_io`.
    #[error("{message}")]
    Io { message: String },
    /// Code `internal`: a bug in ambit, a panic caught at the boundary.
    #[error("{message}")]
    Internal { message: String },
}

impl CaughtPanic for KnowledgeCoreError {
    fn internal(error: ambit::Error) -> Self {
        KnowledgeCoreError::Internal { message: error.to_string() }
    }
}

impl From<KnowledgeError> for KnowledgeCoreError {
    fn from(e: KnowledgeError) -> Self {
        let message = e.to_string();
        match e {
            KnowledgeError::InvalidArgument { field, .. } => KnowledgeCoreError::InvalidArgument { field, message },
            KnowledgeError::Exists(_) => KnowledgeCoreError::Exists { message },
            KnowledgeError::Io(_) => KnowledgeCoreError::Io { message },
        }
    }
}

/// What a publish wrote.
#[derive(Debug, Clone, uniffi::Record)]
pub struct PublishedDocument {
    /// The document's name (`.md` added when it had no extension).
    pub name: String,
    pub path: String,
    pub bytes: u64,
    /// Whether an existing document was replaced.
    pub replaced: bool,
}

/// An agent's knowledge directory: the core's `KnowledgeConfig` as a record.
#[derive(uniffi::Record)]
pub struct KnowledgeSettings {
    /// Absolute, or relative to the working directory.
    pub dir: String,
    /// The most bytes of text returned inline (default 64 KiB, at most 1 MiB).
    #[uniffi(default = None)]
    pub inline_max_bytes: Option<u32>,
}

impl KnowledgeSettings {
    pub(crate) fn into_core(self) -> core::KnowledgeConfig {
        core::KnowledgeConfig { dir: self.dir, inline_max_bytes: self.inline_max_bytes.map(|n| n as usize) }
    }
}

/// Publishes a text document (at most 200 KB) into the knowledge directory `dir`, made if missing; an
/// existing document is replaced only with `overwrite`.
#[uniffi::export]
pub fn knowledge_publish(
    dir: String,
    name: String,
    content: String,
    overwrite: bool,
) -> Result<PublishedDocument, KnowledgeCoreError> {
    guard(|| {
        let p = core::publish(&dir, &name, &content, overwrite)?;
        Ok(PublishedDocument { name: p.name, path: p.path, bytes: p.bytes as u64, replaced: p.replaced })
    })
}
