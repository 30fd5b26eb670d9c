//! The built-in tools: files, the web and the shell. None is registered unless the host asks for it
//! ([`by_name`], [`files`], or one constructor each). Each declares its SPEC level, reads its arguments by
//! the one rule, and reaches only what the session's scope, level and network allow.

mod files;
pub mod sandbox;
mod shell;
mod web;

use std::sync::Arc;

pub use files::{FIND_CAP, FileEdit, FileFind, FileRead, FileSearch, FileWrite, SEARCH_CAP};
pub use shell::{OUTPUT_CAP, ShellExecute, sandbox_available};
pub use web::{DEFAULT_FETCH_LIMIT, WebFetch};

use super::Tool;

/// Every built-in's name, in a stable order.
pub const NAMES: [&str; 7] =
    ["file_read", "file_find", "file_search", "file_edit", "file_write", "web_fetch", "shell_execute"];

/// A built-in by its name, or `None` for a name that is not one.
pub fn by_name(name: &str) -> Option<Arc<dyn Tool>> {
    Some(match name {
        "file_read" => Arc::new(FileRead::new()),
        "file_find" => Arc::new(FileFind::new()),
        "file_search" => Arc::new(FileSearch::new()),
        "file_edit" => Arc::new(FileEdit::new()),
        "file_write" => Arc::new(FileWrite::new()),
        "web_fetch" => Arc::new(WebFetch::new()),
        "shell_execute" => Arc::new(ShellExecute::new()),
        // The session tools (conversation_search, conversation_read, context_check, context_compact) and
        // escalate_to_human.
        _ => return crate::session::builtin(name),
    })
}

/// The five file tools.
pub fn files() -> Vec<Arc<dyn Tool>> {
    NAMES[..5].iter().filter_map(|n| by_name(n)).collect()
}

/// Cuts `text` to at most `limit` characters, saying how much was left out.
pub(crate) fn clip(text: &str, limit: usize, what: &str) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_string(),
        Some((i, _)) => {
            let rest = text[i..].chars().count();
            format!("{}\n[… {rest} more characters of {what} not shown]", &text[..i])
        }
    }
}
