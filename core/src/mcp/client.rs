//! One server's connection: connect (on the first refresh, and again after a failure), list every
//! page, follow list_changed however it arrives.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, SubscriptionFilter};
use rmcp::service::{
    ClientCacheConfig, ClientLifecycleMode, ClientServiceExt, NotificationContext, RoleClient, RunningService,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use super::{McpServer, McpTool, McpTransport};
use crate::deferral::{Deferral, Entry, Unavailable, resolve};
use crate::tools::Tool;

/// Marks the server dirty on a list_changed that is not routed to a subscription; hands elicitation
/// requests to the host's handler (declined without one).
#[derive(Clone)]
struct Handler {
    dirty: Arc<AtomicBool>,
    server: String,
    elicit: Option<Arc<dyn super::Elicit>>,
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Elicitation is declared only when the host set a handler: a server then offers the tools that
        // ask the user, and a client that could only decline does not see them at all.
        if self.elicit.is_some() {
            capabilities.elicitation = Some(
                rmcp::model::ElicitationCapability::new()
                    .with_form(rmcp::model::FormElicitationCapability::new())
                    .with_url(rmcp::model::UrlElicitationCapability::new()),
            );
        }
        ClientConfig::new(capabilities, Implementation::new("ambit", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let Some(handler) = &self.elicit else {
            return Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Decline));
        };
        let mut request = super::elicit::request(&self.server, request);
        if let Some(why) = super::elicit::refusal(&mut request) {
            tracing::warn!(server = %self.server, "elicitation declined: {why}");
            return Ok(super::elicit::declined(why));
        }
        match handler.elicit(request).await {
            Ok(response) => Ok(super::elicit::result(response)),
            Err(e) => Err(rmcp::ErrorData::internal_error(format!("the host's elicitation handler failed: {e}"), None)),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.dirty.store(true, Ordering::SeqCst);
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        super::tool::forward_progress(&params);
    }
}

struct Live {
    service: RunningService<RoleClient, Handler>,
    /// The `subscriptions/listen` reader on a 2026-07-28 connection; aborted with the connection.
    listener: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.abort();
        }
    }
}

#[derive(Default)]
struct State {
    live: Option<Live>,
    /// Set once the first listing (or failure) is in.
    settled: bool,
    entries: Vec<Entry>,
    /// Tools the deferral setting hides (for the listing API only).
    hidden: Vec<Entry>,
    unavailable: Option<Unavailable>,
    /// The exposed names of the last good listing (calls to them while unavailable get the reason).
    last_names: Vec<String>,
}

/// What a server contributes now: the tools that ship, those hidden, and why it is unavailable.
pub(super) type Snapshot = (Vec<Entry>, Vec<Entry>, Option<Unavailable>);

pub(super) struct ServerConn {
    pub config: McpServer,
    /// The broker the server's credential environment and headers come from; its redactor (and the
    /// static header values) keep them out of every reason the server is unavailable.
    credentials: Option<crate::credentials::Credentials>,
    setting: Deferral,
    dirty: Arc<AtomicBool>,
    /// The OAuth flow (and the token store) of an HTTP server with `oauth`, made on the first connect.
    flow: tokio::sync::OnceCell<Arc<super::oauth::Flow>>,
    /// Where OAuth token values go for redaction: the agent's broker, or one of this server's own.
    oauth_redaction: crate::credentials::Credentials,
    /// The agent's network setting, for the OAuth flow's discovery, registration and token requests.
    net: super::oauth::NetPolicy,
    state: tokio::sync::Mutex<State>,
    snapshot: std::sync::Mutex<Snapshot>,
}

impl ServerConn {
    pub fn new(
        config: McpServer,
        install: Deferral,
        credentials: Option<crate::credentials::Credentials>,
        net: super::oauth::NetPolicy,
    ) -> ServerConn {
        let setting = config.deferral.unwrap_or(install);
        ServerConn {
            net,
            config,
            oauth_redaction: credentials.clone().unwrap_or_default(),
            flow: Default::default(),
            credentials,
            setting,
            dirty: Arc::new(AtomicBool::new(false)),
            state: Default::default(),
            snapshot: Default::default(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        self.snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The live connection's peer, for the resource and prompt meta-tools; the reason when there is none.
    pub async fn peer(&self) -> Result<rmcp::service::Peer<RoleClient>, String> {
        let st = self.state.lock().await;
        match &st.live {
            Some(live) if !live.service.is_closed() => Ok(live.service.peer().clone()),
            _ => Err(st.unavailable.as_ref().map_or_else(|| "not connected".to_string(), |u| u.reason.clone())),
        }
    }

    /// Connects if needed and re-lists when dirty (or failed, or never listed). `true` when the
    /// snapshot changed.
    pub async fn refresh(&self) -> bool {
        let mut st = self.state.lock().await;
        let needs = !st.settled || st.live.is_none() || self.dirty.swap(false, Ordering::SeqCst);
        if !needs {
            // A closed connection is a failure, found out before the next request rather than at a call.
            if st.live.as_ref().is_some_and(|l| l.service.is_closed()) {
                st.live = None;
            } else {
                return false;
            }
        }
        let result = self.list(&mut st).await.map_err(|reason| self.redact(&reason));
        match result {
            Ok((entries, hidden)) => {
                st.last_names = entries.iter().map(|e| e.tool.spec().name.clone()).collect();
                st.entries = entries;
                st.hidden = hidden;
                st.unavailable = None;
            }
            Err(reason) => {
                tracing::warn!(server = %self.config.name, %reason, "MCP server unavailable");
                st.live = None;
                st.entries.clear();
                st.hidden.clear();
                // The reason is shown to the model on every turn: a server's words in it are bounded.
                let reason = crate::tools::builtin::clip(&reason, MAX_REASON_CHARS, "the reason");
                st.unavailable =
                    Some(Unavailable { group: self.config.name.clone(), reason, names: st.last_names.clone() });
            }
        }
        st.settled = true;
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) =
            (st.entries.clone(), st.hidden.clone(), st.unavailable.clone());
        true
    }

    async fn list(&self, st: &mut State) -> Result<(Vec<Entry>, Vec<Entry>), String> {
        if st.live.is_none() {
            // A fresh connection lists from scratch; a list_changed that raced the old one is moot.
            self.dirty.store(false, Ordering::SeqCst);
            st.live = Some(self.connect().await?);
        }
        let live = st.live.as_ref().ok_or("not connected")?;
        let peer = live.service.peer().clone();
        // Every page, by its opaque cursor.
        let tools = peer.list_all_tools().await.map_err(|e| format!("tools/list failed: {e}"))?;
        let mut entries = Vec::new();
        let mut hidden = Vec::new();
        for t in &tools {
            let eager_listed = self.config.eager_load_tools.contains(t.name.as_ref());
            let tool: Arc<dyn Tool> = Arc::new(McpTool::new(&self.config, t, peer.clone(), self.dirty.clone()));
            match resolve(self.setting, eager_listed) {
                Some(deferred) => entries.push(Entry { tool, group: self.config.name.clone(), deferred }),
                None => hidden.push(Entry { tool, group: self.config.name.clone(), deferred: false }),
            }
        }
        Ok((entries, hidden))
    }

    /// A reason with the server's header values and every credential value replaced.
    fn redact(&self, reason: &str) -> String {
        let statics = self.config.headers.iter().map(|(name, value)| (value.as_str(), name.as_str()));
        let mut text = crate::credentials::Redactor::new(statics).redact(reason);
        if let Some(c) = &self.credentials {
            text = c.redact(&text);
        }
        if self.credentials.is_none() {
            text = self.oauth_redaction.redact(&text);
        }
        text
    }

    async fn credential(&self, alias: &str) -> Result<String, String> {
        match &self.credentials {
            Some(c) => c.resolve(alias).await,
            None => Err(format!("credential '{alias}': the agent has no credentials")),
        }
    }

    /// The HTTP headers: the static ones, the credential ones, and the bearer token.
    async fn http_headers(
        &self,
    ) -> Result<std::collections::HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, String> {
        use reqwest::header::{HeaderName, HeaderValue};
        let mut pairs: Vec<(String, String)> =
            self.config.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, alias) in &self.config.credential_headers {
            pairs.push((name.clone(), self.credential(alias).await?));
        }
        let mut out = std::collections::HashMap::new();
        for (name, value) in pairs {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("'{name}' is not a header name"))?;
            // The value is never quoted: it may be a secret.
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| format!("the value of header '{name}' is not a header value"))?;
            value.set_sensitive(true);
            out.insert(header, value);
        }
        Ok(out)
    }

    async fn connect(&self) -> Result<Live, String> {
        self.config.validate()?;
        let handler = Handler {
            dirty: self.dirty.clone(),
            server: self.config.name.clone(),
            elicit: self.config.on_elicit.as_ref().map(|h| h.0.clone()),
        };
        let lifecycle = match self.config.protocol {
            super::McpProtocol::Initialize => ClientLifecycleMode::Initialize,
            super::McpProtocol::Stateless => {
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
            }
            super::McpProtocol::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        };
        let service = match &self.config.transport {
            McpTransport::Stdio { command, args, env, cwd } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env);
                for var in self.credentials.iter().flat_map(|c| c.source_variables()) {
                    if !env.contains_key(&var) {
                        cmd.env_remove(var);
                    }
                }
                for (var, alias) in &self.config.credential_env {
                    cmd.env(var, self.credential(alias).await?);
                }
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                crate::runtime::ignore_sigpipe();
                let (transport, _stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| format!("could not start '{command}': {e}"))?;
                handler.serve_with_lifecycle(transport, lifecycle).await
            }
            McpTransport::Http { url } => {
                // The same TLS stack as the model wires: rustls with ring.
                let _ = rustls::crypto::ring::default_provider().install_default();
                // Redirects are not followed: a server's 3xx would take its headers, bearer or OAuth
                // token to wherever it points (the answer is an error naming the status instead).
                let client = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("HTTP client: {e}"))?;
                let mut config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                );
                config.custom_headers = self.http_headers().await?;
                if let Some(alias) = &self.config.bearer {
                    // rmcp sends it as `Authorization: Bearer <token>`.
                    config.auth_header = Some(self.credential(alias).await?);
                }
                if let Some(oauth) = &self.config.oauth {
                    let flow = self
                        .flow
                        .get_or_try_init(|| async {
                            let secret = match &oauth.client_secret {
                                Some(alias) => Some(self.credential(alias).await?),
                                None => None,
                            };
                            let secrets = super::oauth::Secrets::new(&self.config.name, self.oauth_redaction.clone());
                            Ok::<_, String>(Arc::new(super::oauth::Flow::new(
                                &self.config.name,
                                url,
                                oauth,
                                secret,
                                secrets,
                                self.net.clone(),
                            )))
                        })
                        .await?;
                    let client = flow.client(client).await?;
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve_with_lifecycle(transport, lifecycle).await
                } else {
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve_with_lifecycle(transport, lifecycle).await
                }
            }
        }
        .map_err(|e| {
            // An OAuth failure says what went wrong itself; rmcp's wrapping around it (transport type
            // names) tells the model and the host nothing more.
            let text = e.to_string();
            match text.find("OAuth for MCP server '") {
                Some(at) => format!("could not connect: {}", &text[at..]),
                None => format!("could not connect: {text}"),
            }
        })?;
        // No response cache: a failed server must never hide behind a stale list.
        service.peer().set_response_cache_config(ClientCacheConfig::disabled()).await;
        let listener = self.listen(&service).await;
        Ok(Live { service, listener })
    }

    /// On a 2026-07-28 connection, list_changed arrives only through `subscriptions/listen`, opened
    /// only when the server advertises `listChanged`.
    async fn listen(&self, service: &RunningService<RoleClient, Handler>) -> Option<tokio::task::JoinHandle<()>> {
        let info = service.peer().peer_info()?;
        if info.protocol_version != ProtocolVersion::V_2026_07_28 {
            return None;
        }
        let advertised = info.capabilities.tools.as_ref().and_then(|t| t.list_changed) == Some(true);
        if !advertised {
            return None;
        }
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut sub = match service.peer().listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(server = %self.config.name, error = %e, "subscriptions/listen failed");
                return None;
            }
        };
        let dirty = self.dirty.clone();
        Some(tokio::spawn(async move {
            while let Ok(Some(n)) = sub.next().await {
                if matches!(n, rmcp::model::ServerNotification::ToolListChangedNotification(_)) {
                    dirty.store(true, Ordering::SeqCst);
                }
            }
            // The stream ended: list again before the next request, which reconnects if it must.
            dirty.store(true, Ordering::SeqCst);
        }))
    }
}

/// The most characters of an unavailable server's reason the model is shown.
const MAX_REASON_CHARS: usize = 3072;
