//! MCP servers through rmcp (SPEC §3): stdio child processes and streamable HTTP, the 2025-11-25
//! revision (with `initialize`) and the stateless 2026-07-28 one (`server/discover`, notifications
//! through `subscriptions/listen`). Tools are named `mcp__<server>__<tool>`; each tool keeps its server
//! and its own name, so a name is never split. A server that changes its list is marked dirty and
//! re-listed before the next model request; so is a server whose tool was just called (a list_changed
//! the call caused rides another stream than its answer over HTTP, unordered with it, so the answer
//! itself marks the server dirty); one that fails is reported unavailable, with the reason,
//! until it answers again (rmcp's response cache is off, so no stale list hides it).

mod client;
mod config;
mod elicit;
pub mod meta;
mod oauth;
mod tool;

use std::sync::Arc;

pub use config::{McpProtocol, McpServer, McpTransport};
pub use elicit::{Elicit, ElicitFn, ElicitationRequest, ElicitationResponse};
pub use oauth::{
    Authorize, AuthorizeFn, DEFAULT_REFRESH_LOCK_TIMEOUT, FileTokenStore, Hook, McpOAuth, MemoryTokenStore, OAuthGrant,
    RefreshGuard, TokenStore,
};
pub use tool::{McpTool, exposed_name, result_text, tool_level};

use crate::deferral::{Deferral, Entry, SourceListing, ToolSource, resolve};

/// Every MCP server of one agent, and the resource and prompt meta-tools over them.
pub struct McpHub {
    servers: Arc<Vec<Arc<client::ServerConn>>>,
    /// The seven meta-tools; they follow the install-wide setting (`None`: hidden).
    meta: Vec<Entry>,
    meta_hidden: bool,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.servers.iter().map(|s| &s.config.name)).finish()
    }
}

impl McpHub {
    /// The servers, with the install-wide deferral setting for those without their own.
    /// `credentials` gives the servers' credential environment variables and headers.
    pub fn new(
        servers: Vec<McpServer>,
        install: Deferral,
        credentials: Option<crate::credentials::Credentials>,
    ) -> McpHub {
        McpHub::with_network(servers, install, credentials, crate::permission::Network::Unrestricted, &[])
    }

    /// [`McpHub::new`] under a network setting: an OAuth flow's discovery, registration and token
    /// requests reach only the addresses `network` (and `allow_local_addresses`) let web_fetch reach.
    pub fn with_network(
        servers: Vec<McpServer>,
        install: Deferral,
        credentials: Option<crate::credentials::Credentials>,
        network: crate::permission::Network,
        allow_local_addresses: &[crate::permission::network::AddrRange],
    ) -> McpHub {
        let net = oauth::NetPolicy { network, allowed: Arc::from(allow_local_addresses) };
        let servers: Arc<Vec<_>> = Arc::new(
            servers
                .into_iter()
                .map(|c| Arc::new(client::ServerConn::new(c, install, credentials.clone(), net.clone())))
                .collect(),
        );
        let shipping = resolve(install, false);
        let meta = meta::tools(servers.clone())
            .into_iter()
            .map(|tool| Entry { tool, group: meta::GROUP.to_string(), deferred: shipping.unwrap_or(false) })
            .collect();
        McpHub { servers, meta, meta_hidden: shipping.is_none() }
    }
}

#[async_trait::async_trait]
impl ToolSource for McpHub {
    async fn refresh(&self) -> bool {
        let runs = self.servers.iter().map(|s| s.refresh());
        futures::future::join_all(runs).await.into_iter().any(|changed| changed)
    }

    fn listing(&self) -> SourceListing {
        let mut out = SourceListing::default();
        if self.meta_hidden {
            out.hidden.extend(self.meta.iter().cloned());
        } else {
            out.entries.extend(self.meta.iter().cloned());
        }
        for s in self.servers.iter() {
            let (entries, hidden, unavailable) = s.snapshot();
            out.entries.extend(entries);
            out.hidden.extend(hidden);
            out.unavailable.extend(unavailable);
        }
        out
    }
}
