//! A client the OAuth refresh-guard tests run as separate processes sharing one token file
//! (core/tests/mcp_oauth_refresh.rs): `ambit-oauth-refresh-child <mcp url> <token file> guarded|unguarded`.
//! It connects to the OAuth-protected MCP server with the tokens in the file, calls `whoami`, and
//! reports on stdout, a line each: `GUARD` when it asks for the refresh guard (guarded: the file's
//! `flock`; unguarded: a store that has none, as a host store that implements no guard), `CONSENT` if the
//! user is asked to consent (this client then declines), and finally `OK <answer>` or `ERR <reason>`.

use std::sync::Arc;

use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{AuthorizeFn, FileTokenStore, McpHub, McpOAuth, McpServer, RefreshGuard, TokenStore};
use async_trait::async_trait;

struct Reporting {
    file: FileTokenStore,
    guarded: bool,
}

#[async_trait]
impl TokenStore for Reporting {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        self.file.load(key).await
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.file.save(key, value).await
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.file.clear(key).await
    }
    async fn refresh_guard(&self, key: &str) -> Result<Option<RefreshGuard>, String> {
        println!("GUARD");
        if self.guarded { self.file.refresh_guard(key).await } else { Ok(None) }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, file, mode] = &args[..] else {
        eprintln!("usage: ambit-oauth-refresh-child <mcp url> <token file> guarded|unguarded");
        std::process::exit(2);
    };
    let store = Reporting { file: FileTokenStore::new(file), guarded: mode == "guarded" };
    let refuse = AuthorizeFn(|_url: String| async {
        println!("CONSENT");
        Err::<String, String>("this client does not consent".into())
    });
    let oauth = McpOAuth::authorization_code("http://127.0.0.1:1/callback", refuse).token_store_arc(Arc::new(store));
    let hub = McpHub::new(vec![McpServer::http("notes", url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    if let Some(why) = listing.unavailable.first() {
        println!("ERR {why:?}");
        std::process::exit(1);
    }
    let Some(whoami) = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__whoami") else {
        println!("ERR no whoami tool");
        std::process::exit(1);
    };
    match whoami.tool.call(serde_json::json!({})).await {
        Ok(out) => println!("OK {out}"),
        Err(e) => {
            println!("ERR {e}");
            std::process::exit(1);
        }
    }
}
