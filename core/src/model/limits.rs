//! How much a model provider may send in one answer. Nothing a provider sends can make the host
//! allocate or work without bound: every answer is read against these limits, and going past one ends
//! the request with [`ModelError::InvalidResponse`] (code `model_response`) naming the limit and its
//! value. The defaults are far above what the real APIs send (a whole 128k-token answer is well under
//! 1 MB of JSON); a model takes other values with its `limits` setting.

use crate::error::ModelError;

/// The most bytes of one SSE line, and of one event's data lines together (4 MiB). A line is parsed as
/// JSON, which can take about 18 times its bytes (a line of `0,0,0,…`): a process peak of about 90 MB
/// at this limit (core/tests/wire_limits.rs measures it).
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// The most bytes of an answer that is not streamed (8 MiB; parsed, a process peak of about 155 MB).
pub const MAX_BODY_BYTES: usize = 8 << 20;
/// The most bytes of a streamed answer, every event counted (64 MiB).
pub const MAX_STREAM_BYTES: usize = 64 << 20;
/// The most events of a streamed answer (one million).
pub const MAX_EVENTS: usize = 1_000_000;
/// The most tool calls in one answer; on Chat Completions also one more than the highest streamed
/// tool-call `index` (1,024).
pub const MAX_TOOL_CALLS: usize = 1024;
/// One more than the highest content-block `index` of a streamed Anthropic answer (4,096).
pub const MAX_CONTENT_BLOCKS: usize = 4096;
/// The most bytes of an error answer read for its message; the rest is not read (64 KiB).
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The limits one model reads its answers with. [`WireLimits::default`] is the constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    /// See [`MAX_LINE_BYTES`].
    pub max_line_bytes: usize,
    /// See [`MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// See [`MAX_STREAM_BYTES`].
    pub max_stream_bytes: usize,
    /// See [`MAX_EVENTS`].
    pub max_events: usize,
    /// See [`MAX_TOOL_CALLS`].
    pub max_tool_calls: usize,
    /// See [`MAX_CONTENT_BLOCKS`].
    pub max_content_blocks: usize,
}

impl Default for WireLimits {
    fn default() -> Self {
        WireLimits {
            max_line_bytes: MAX_LINE_BYTES,
            max_body_bytes: MAX_BODY_BYTES,
            max_stream_bytes: MAX_STREAM_BYTES,
            max_events: MAX_EVENTS,
            max_tool_calls: MAX_TOOL_CALLS,
            max_content_blocks: MAX_CONTENT_BLOCKS,
        }
    }
}

/// The error for going past a limit: `what` went past `name` (`value` `unit`).
pub(crate) fn over(what: &str, name: &str, value: usize, unit: &str) -> ModelError {
    ModelError::InvalidResponse(format!("{what} went past the limit {name} ({value} {unit})"))
}

/// A peer's count or index as a `usize` below `limit`, or the error naming the limit. `what` says
/// what the number is (`a tool-call index`).
pub(crate) fn index_below(v: &serde_json::Value, limit: usize, name: &str, what: &str) -> Result<usize, ModelError> {
    let n = v.as_u64().ok_or_else(|| {
        ModelError::InvalidResponse(format!("{what} is not a count: {}", super::http::truncate(&v.to_string(), 100)))
    })?;
    match usize::try_from(n) {
        Ok(i) if i < limit => Ok(i),
        _ => Err(ModelError::InvalidResponse(format!("{what} of {n} went past the limit {name} ({limit})"))),
    }
}
