//! The built-in tools: files, the web and the shell. None is registered unless the host asks for it
//! ([`by_name`], [`files`], or one constructor each). Each declares its SPEC level, reads its arguments by
//! the one rule, and reaches only what the session's scope, level and network allow.

mod files;
#[cfg(all(target_os = "linux", not(ambit_force_portable)))]
pub mod sandbox;
#[cfg(not(all(target_os = "linux", not(ambit_force_portable))))]
#[path = "sandbox_none.rs"]
pub mod sandbox;
mod shell;
mod web;

use std::sync::Arc;

pub(crate) use files::search_regex;
pub use files::{
    EDIT_MAX_BYTES, FIND_CAP, FileEdit, FileFind, FileRead, FileSearch, FileWrite, PATTERN_MAX_BYTES, READ_CAP,
    READ_SCAN_MAX_BYTES, SEARCH_CAP, SEARCH_FILE_MAX_BYTES, SEARCH_LINE_MAX_BYTES, SEARCH_TOTAL_MAX_BYTES,
    WALK_MAX_ENTRIES,
};
pub use shell::{OUTPUT_CAP, ShellExecute, sandbox_available};
pub use web::{DEFAULT_FETCH_LIMIT, FETCH_INLINE_MAX_BYTES, FETCH_LOOKAHEAD_BYTES, WebFetch};

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
        // The session tools (conversation_search, conversation_read, session_list, session_search,
        // context_check, context_compact) and
        // escalate_to_human.
        _ => return crate::session::builtin(name),
    })
}

/// The five file tools.
pub fn files() -> Vec<Arc<dyn Tool>> {
    NAMES[..5].iter().filter_map(|n| by_name(n)).collect()
}

/// The hard ceiling on the bytes one built-in call returns or reads from a peer (a web_fetch body, the
/// matches of file_search, the paths of file_find), even when its output is saved to the scratchpad,
/// which lifts the ordinary caps (SPEC §5) but not this one.
pub const MAX_OUTPUT_BYTES: usize = 8 << 20;

/// A byte count in words: `8 MiB`, `1 GiB`, `512 bytes`.
pub(crate) fn bytes_in_words(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// `bytes` as text when they are UTF-8 but for one character cut off at their end (where a bounded
/// read stopped), which is dropped; `None` when they are not UTF-8.
pub(crate) fn utf8_cut(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t),
        Err(e) if e.error_len().is_none() => bytes.get(..e.valid_up_to()).and_then(|b| std::str::from_utf8(b).ok()),
        Err(_) => None,
    }
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

#[cfg(test)]
mod walk_tests;
