//! Wire names for a tool set that changes at run time: the mapping is made per request from the
//! current names (SPEC §3), so a tool an MCP server adds later still reaches the wire cut to fit.

use std::sync::Arc;

use async_trait::async_trait;

use super::Tooling;
use crate::error::ModelError;
use crate::model::{Message, Model, ModelReply, ModelRequest, ModelResponse, TextSink};
use crate::tools::wire_name::WireNames;

/// Wraps `model` so every request maps the tooling's current names.
pub fn wrap(model: Arc<dyn Model>, tooling: Arc<Tooling>) -> Arc<dyn Model> {
    Arc::new(DynamicWireNames { inner: model, tooling })
}

struct DynamicWireNames {
    inner: Arc<dyn Model>,
    tooling: Arc<Tooling>,
}

impl DynamicWireNames {
    /// The mapping for the current names; a name that would meet an earlier one on the wire is left
    /// out of it (and logged), so the earlier tool keeps its wire name.
    fn mapping(&self) -> Result<WireNames, ModelError> {
        let limit = self.inner.max_tool_name_bytes();
        let mut seen = std::collections::HashSet::new();
        let names: Vec<String> = self
            .tooling
            .names()
            .into_iter()
            .filter(|n| {
                let fresh = seen.insert(crate::tools::wire_name::wire_name(n, limit));
                if !fresh {
                    tracing::warn!(tool = %n, "another tool reaches the wire under the same name; left out");
                }
                fresh
            })
            .collect();
        Ok(WireNames::new(names.iter().map(String::as_str), limit).unwrap_or_default())
    }

    fn outgoing(names: &WireNames, request: &ModelRequest) -> ModelRequest {
        let mut out = request.clone();
        for t in &mut out.tools {
            t.name = names.wire(&t.name).to_string();
        }
        for m in &mut out.messages {
            match m {
                Message::Assistant { tool_calls, .. } => {
                    for c in tool_calls {
                        c.name = names.wire(&c.name).to_string();
                    }
                }
                Message::Tool { name, .. } => *name = names.wire(name).to_string(),
                _ => {}
            }
        }
        out
    }

    fn incoming(names: &WireNames, mut response: ModelResponse) -> ModelResponse {
        for c in &mut response.tool_calls {
            c.name = names.whole(&c.name).to_string();
        }
        response
    }
}

#[async_trait]
impl Model for DynamicWireNames {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn max_tool_name_bytes(&self) -> usize {
        self.inner.max_tool_name_bytes()
    }

    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }

    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let names = self.mapping()?;
        self.inner.respond(&Self::outgoing(&names, request)).await.map(|r| Self::incoming(&names, r))
    }

    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let names = self.mapping()?;
        self.inner.respond_streaming(&Self::outgoing(&names, request), sink).await.map(|r| Self::incoming(&names, r))
    }

    fn native_tool_search(&self) -> bool {
        self.inner.native_tool_search()
    }

    fn native_structured_output(&self) -> bool {
        self.inner.native_structured_output()
    }

    async fn respond_with_items(
        &self,
        request: &ModelRequest,
        sink: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ModelError> {
        let names = self.mapping()?;
        let mut reply = self.inner.respond_with_items(&Self::outgoing(&names, request), sink).await?;
        reply.response = Self::incoming(&names, reply.response);
        Ok(reply)
    }
}
