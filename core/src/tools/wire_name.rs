//! Names as a provider's wire accepts them (SPEC §3). A name too long for the wire, or holding a
//! character the wire refuses, reaches the model as its head, `_`, and the first 12 hex digits of the
//! SHA-256 of the whole name, at most the limit long. Calls under the wire name run the tool by its whole
//! name; everything recorded or shown uses the whole name.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// The byte limit on the Anthropic Messages and OpenAI Responses wires.
pub const LONG_WIRE_LIMIT: usize = 128;
/// The byte limit on the Chat Completions wire.
pub const CHAT_COMPLETIONS_LIMIT: usize = 64;
/// `_` and 12 hex digits.
const SUFFIX_LEN: usize = 13;
/// The smallest per-endpoint `max_tool_name_bytes`: one byte of a name's head, `_` and 12 hex digits.
pub const MIN_TOOL_NAME_BYTES: usize = SUFFIX_LEN + 1;

/// Checks a per-endpoint `max_tool_name_bytes` (SPEC §3): smaller than the wire's own limit, or equal,
/// and long enough for a cut name. The error names the setting, the wire and its limit.
pub fn endpoint_limit(wire: &str, wire_limit: usize, asked: usize) -> Result<usize, crate::Error> {
    if asked > wire_limit {
        return Err(crate::Error::Config(format!(
            "max_tool_name_bytes {asked} is larger than the {wire} wire's own limit of {wire_limit} bytes; a \
             per-endpoint limit may only be smaller"
        )));
    }
    if asked < MIN_TOOL_NAME_BYTES {
        return Err(crate::Error::Config(format!(
            "max_tool_name_bytes {asked} is below {MIN_TOOL_NAME_BYTES} bytes, the shortest a cut name can be \
             (a byte of its head, `_` and 12 hex digits)"
        )));
    }
    Ok(asked)
}

/// Whether both OpenAI wires and Anthropic accept the character in a tool name.
pub fn wire_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The name the model sees for `name` on a wire that accepts `limit` bytes.
pub fn wire_name(name: &str, limit: usize) -> String {
    let clean = name.chars().all(wire_char);
    if clean && name.len() <= limit {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let replaced: String = name.chars().map(|c| if wire_char(c) { c } else { '_' }).collect();
    // Replacement makes every character one byte, so the head is cut on a character boundary.
    let head_len = limit.saturating_sub(SUFFIX_LEN).min(replaced.len());
    format!("{}_{hex}", &replaced[..head_len])
}

/// Both directions of the mapping for one registry on one wire.
#[derive(Debug, Clone, Default)]
pub struct WireNames {
    to_wire: HashMap<String, String>,
    to_whole: HashMap<String, String>,
}

impl WireNames {
    /// The mapping for `names` under `limit`. Two names that would meet on the wire are an error.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>, limit: usize) -> Result<WireNames, String> {
        let mut m = WireNames::default();
        for name in names {
            let wire = wire_name(name, limit);
            if let Some(other) = m.to_whole.insert(wire.clone(), name.to_string()) {
                return Err(format!("tools '{other}' and '{name}' reach the wire under the same name '{wire}'"));
            }
            m.to_wire.insert(name.to_string(), wire);
        }
        Ok(m)
    }

    /// The name the wire carries for the tool named `whole` (itself when it is wire-safe).
    pub fn wire<'a>(&'a self, whole: &'a str) -> &'a str {
        self.to_wire.get(whole).map(String::as_str).unwrap_or(whole)
    }

    /// The tool's whole name for the `wire` name a model sent (itself when none maps to it).
    pub fn whole<'a>(&'a self, wire: &'a str) -> &'a str {
        self.to_whole.get(wire).map(String::as_str).unwrap_or(wire)
    }
}

/// A model whose tools reach the wire under wire names: requests go out with every tool name (offered
/// tools and earlier calls alike) mapped to its wire name, and calls come back under the whole name.
/// The agent wraps its model in one only when some name changes on that wire.
pub(crate) struct WireNamedModel {
    inner: std::sync::Arc<dyn crate::model::Model>,
    names: WireNames,
}

impl WireNamedModel {
    /// `model` itself when every name fits its wire, else a wrapper; two names meeting on the wire are
    /// an error.
    pub(crate) fn wrap<'a>(
        model: std::sync::Arc<dyn crate::model::Model>,
        names: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<std::sync::Arc<dyn crate::model::Model>, String> {
        let limit = model.max_tool_name_bytes();
        let mapping = WireNames::new(names.clone(), limit)?;
        if names.into_iter().all(|n| mapping.wire(n) == n) {
            return Ok(model);
        }
        Ok(std::sync::Arc::new(WireNamedModel { inner: model, names: mapping }))
    }

    fn outgoing(&self, request: &crate::model::ModelRequest) -> crate::model::ModelRequest {
        use crate::model::Message;
        let mut out = request.clone();
        for t in &mut out.tools {
            t.name = self.names.wire(&t.name).to_string();
        }
        for m in &mut out.messages {
            match m {
                Message::Assistant { tool_calls, .. } => {
                    for c in tool_calls {
                        c.name = self.names.wire(&c.name).to_string();
                    }
                }
                Message::Tool { name, .. } => *name = self.names.wire(name).to_string(),
                _ => {}
            }
        }
        out
    }

    fn incoming(&self, mut response: crate::model::ModelResponse) -> crate::model::ModelResponse {
        for c in &mut response.tool_calls {
            c.name = self.names.whole(&c.name).to_string();
        }
        response
    }
}

#[async_trait::async_trait]
impl crate::model::Model for WireNamedModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn max_tool_name_bytes(&self) -> usize {
        self.inner.max_tool_name_bytes()
    }

    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }

    async fn respond(
        &self,
        request: &crate::model::ModelRequest,
    ) -> Result<crate::model::ModelResponse, crate::error::ModelError> {
        self.inner.respond(&self.outgoing(request)).await.map(|r| self.incoming(r))
    }

    async fn respond_streaming(
        &self,
        request: &crate::model::ModelRequest,
        sink: &crate::model::TextSink<'_>,
    ) -> Result<crate::model::ModelResponse, crate::error::ModelError> {
        self.inner.respond_streaming(&self.outgoing(request), sink).await.map(|r| self.incoming(r))
    }

    fn native_tool_search(&self) -> bool {
        self.inner.native_tool_search()
    }

    fn native_structured_output(&self) -> bool {
        self.inner.native_structured_output()
    }

    async fn respond_with_items(
        &self,
        request: &crate::model::ModelRequest,
        sink: Option<&crate::model::TextSink<'_>>,
    ) -> Result<crate::model::ModelReply, crate::error::ModelError> {
        let mut reply = self.inner.respond_with_items(&self.outgoing(request), sink).await?;
        reply.response = self.incoming(reply.response);
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_example_on_chat_completions() {
        let name = "mcp__github_enterprise_server__list_repository_collaborators_with_permissions";
        let wire = wire_name(name, CHAT_COMPLETIONS_LIMIT);
        assert_eq!(wire, "mcp__github_enterprise_server__list_repository_coll_0b0338c78635");
        assert_eq!(wire.len(), 64);
        assert_eq!(wire_name(name, LONG_WIRE_LIMIT), name, "fits in 128 bytes unchanged");
    }

    #[test]
    fn long_ascii_names_are_exactly_the_limit() {
        for limit in [20, 32, 64, 128] {
            let name = "a".repeat(limit + 1);
            assert_eq!(wire_name(&name, limit).len(), limit);
            assert_eq!(wire_name(&"b".repeat(limit), limit), "b".repeat(limit));
        }
    }

    #[test]
    fn refused_characters_are_replaced_and_hashed() {
        let w = wire_name("mcp__fs__read.file", 64);
        assert!(w.starts_with("mcp__fs__read_file_") && w.len() == "mcp__fs__read_file_".len() + 12, "{w}");
        // Two names that differ only in a refused character never collide.
        assert_ne!(wire_name("a.b", 64), wire_name("a_b", 64));
        assert_eq!(wire_name("a_b", 64), "a_b");
        let u = wire_name("météo_paris", 64);
        assert!(u.chars().all(wire_char) && u.len() <= 64, "{u}");
    }

    #[test]
    fn mapping_runs_calls_by_whole_name() {
        let long = "x".repeat(70);
        let m = WireNames::new(["short", long.as_str()], 64).unwrap();
        let w = m.wire(&long).to_string();
        assert_eq!(w.len(), 64);
        assert_eq!(m.whole(&w), long);
        assert_eq!(m.wire("short"), "short");
        assert_eq!(m.whole("unknown"), "unknown");
    }
}
