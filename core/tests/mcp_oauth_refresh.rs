//! The OAuth refresh guard (issue #17, hole #12): clients sharing one token store refresh an expired
//! token once. The authorization server (tests/mcp/oauth_server.py) rotates refresh tokens: each is used
//! once, a reused one is refused (`invalid_grant`) and counted (`refresh_rejected`), and every refresh is
//! counted (`refreshes`). Every test starts from one consent whose stored token is then aged past its
//! expiry, so the next request of every client must refresh.
//!
//! Across processes: two real child processes (core/tests/support/oauth_refresh_child.rs) share one
//! token file. The test holds `<file>.refresh.lock` itself, starts both, waits until each has reported
//! asking for the guard and the kernel shows both blocked on the lock (/proc/locks), then releases it:
//! one refresh reaches the server, both calls succeed, nobody is asked to consent, and the file holds the
//! newest token. In one process: two clients share one store (in memory, then a file).
//!
//! Negative controls: the same without a guard (a store that implements none, as a host store may); the
//! server holds the refreshes until both arrived (`--refresh-barrier 2`), so both clients spend the same
//! refresh token: two refresh requests, one refused, and that client's user is asked to consent again.

mod mcp_support;

use std::sync::Arc;

use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{
    AuthorizeFn, FileTokenStore, McpHub, McpOAuth, McpServer, MemoryTokenStore, RefreshGuard, TokenStore,
};
use async_trait::async_trait;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const REDIRECT: &str = "http://127.0.0.1:1/callback";

struct Server {
    url: String,
    _child: tokio::process::Child,
}

impl Server {
    async fn start(args: &[&str]) -> Server {
        let (url, child) = mcp_support::oauth_server(args).await;
        Server { url, _child: child }
    }

    async fn stats(&self) -> Value {
        let base = self.url.trim_end_matches("/mcp");
        reqwest::get(format!("{base}/stats")).await.unwrap().json().await.unwrap()
    }

    /// (refreshes, refresh_rejected, authorizations)
    async fn counts(&self) -> (u64, u64, u64) {
        let s = self.stats().await;
        let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}"));
        (n("refreshes"), n("refresh_rejected"), n("authorizations"))
    }
}

/// The browser of a user who consents: follows the authorization URL and hands back its redirect.
async fn consent(url: String) -> Result<String, String> {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
    resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string).ok_or("no redirect".into())
}

/// How the stored access token goes stale: aged past its expiry (the client sees it), or invalid at the
/// server although not expired (revoked: the server's 401 says so).
#[derive(Clone, Copy, Debug)]
enum Stale {
    Aged,
    Revoked,
}

/// Consents once and puts the tokens in `store`, the token aged an hour past its expiry. (The consenting
/// client keeps its own store: once dropped, it may still close its session with its fresh token.)
async fn authorized_then_expired(server: &Server, store: Arc<dyn TokenStore>) {
    authorized_then_stale(server, store, Stale::Aged).await
}

/// [`authorized_then_expired`], the token made stale as `stale` says.
async fn authorized_then_stale(server: &Server, store: Arc<dyn TokenStore>, stale: Stale) {
    let own = MemoryTokenStore::new();
    let oauth = McpOAuth::authorization_code(REDIRECT, AuthorizeFn(consent)).token_store(own.clone());
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub.refresh().await;
    assert!(hub.listing().unavailable.is_empty(), "{:?}", hub.listing().unavailable);
    let mut entry: Value = serde_json::from_str(&own.load(&server.url).await.unwrap().unwrap()).unwrap();
    let received = entry["token_received_at"].as_u64().unwrap();
    assert_eq!(entry["token_response"]["expires_in"], 3600, "{entry}");
    match stale {
        Stale::Aged => entry["token_received_at"] = json!(received - 7200),
        Stale::Revoked => {
            let base = server.url.trim_end_matches("/mcp");
            reqwest::Client::new().post(format!("{base}/expire")).send().await.unwrap();
        }
    }
    store.save(&server.url, &entry.to_string()).await.unwrap();
    assert_eq!(server.counts().await, (0, 0, 1));
}

fn stored_access_token(text: &str) -> String {
    let entry: Value = serde_json::from_str(text).unwrap();
    entry["token_response"]["access_token"].as_str().unwrap().to_string()
}

/// Processes blocked waiting for a lock on the file with inode `inode` (Linux: `->` lines of /proc/locks).
#[cfg(target_os = "linux")]
fn blocked_on(inode: u64) -> usize {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks
        .lines()
        .filter(|l| l.contains("->") && l.split_whitespace().any(|f| f.ends_with(&format!(":{inode}"))))
        .count()
}

struct Child {
    process: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    said: Vec<String>,
}

impl Child {
    fn start(url: &str, file: &std::path::Path, mode: &str) -> Child {
        let mut process = tokio::process::Command::new(env!("CARGO_BIN_EXE_ambit-oauth-refresh-child"))
            .args([url, &file.display().to_string(), mode])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = tokio::io::BufReader::new(process.stdout.take().unwrap()).lines();
        Child { process, lines, said: Vec::new() }
    }

    /// Reads lines until one equals `line` (panics if the child ends first).
    async fn until(&mut self, line: &str) {
        while let Some(l) = self.lines.next_line().await.unwrap() {
            self.said.push(l.clone());
            if l == line {
                return;
            }
        }
        panic!("the child ended without saying {line}: {:?}", self.said);
    }

    /// Everything it said, once it has exited.
    async fn finish(mut self) -> Vec<String> {
        while let Some(l) = self.lines.next_line().await.unwrap() {
            self.said.push(l);
        }
        self.process.wait().await.unwrap();
        self.said
    }
}

/// Two processes sharing a token file with an expired token, started while the test holds the refresh
/// lock; returns what each said once both ended.
async fn two_processes(server: &Server, file: &std::path::Path, mode: &str, hold_lock: bool) -> Vec<Vec<String>> {
    let lock_path = file.with_extension("json.refresh.lock");
    let held = hold_lock.then(|| {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).unwrap();
        // SAFETY: flock on a descriptor this test owns; released when `f` is dropped.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        f
    });
    let mut children = [Child::start(&server.url, file, mode), Child::start(&server.url, file, mode)];
    for c in &mut children {
        c.until("GUARD").await;
    }
    if let Some(f) = held {
        // Both read the expired token and asked for the guard; on Linux, wait until the kernel shows both
        // blocked on the lock (elsewhere their word is taken for it: the outcome does not depend on it).
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            let inode = f.metadata().unwrap().ino();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while blocked_on(inode) < 2 {
                assert!(std::time::Instant::now() < deadline, "the children never blocked on {}", lock_path.display());
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
        assert_eq!(server.counts().await, (0, 0, 1), "nothing refreshed while the lock was held");
        drop(f);
    }
    let [a, b] = children;
    vec![a.finish().await, b.finish().await]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_two_processes_sharing_a_token_file_refresh_once() {
    let server = Server::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    authorized_then_expired(&server, Arc::new(FileTokenStore::new(&file))).await;
    let said = two_processes(&server, &file, "guarded", true).await;
    for s in &said {
        assert!(s.last().is_some_and(|l| l.starts_with("OK ") && l.contains("notes:read")), "{said:?}");
        assert!(!s.iter().any(|l| l == "CONSENT"), "{said:?}");
    }
    // One refresh reached the server, none was refused, no new consent; the file holds the newest token.
    assert_eq!(server.counts().await, (1, 0, 1), "{said:?}");
    let newest = server.stats().await["last_access_token"].as_str().unwrap().to_string();
    let entries: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(stored_access_token(entries[&server.url].as_str().unwrap()), newest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_two_processes_without_a_guard_spend_one_refresh_token_twice() {
    let server = Server::start(&["--refresh-barrier", "2"]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    authorized_then_expired(&server, Arc::new(FileTokenStore::new(&file))).await;
    let said = two_processes(&server, &file, "unguarded", false).await;
    // Two refresh requests with one refresh token: one refused, and that client's user asked again.
    assert_eq!(server.counts().await, (1, 1, 1), "{said:?}");
    let asked: Vec<_> = said.iter().filter(|s| s.iter().any(|l| l == "CONSENT")).collect();
    assert_eq!(asked.len(), 1, "{said:?}");
    assert!(said.iter().any(|s| s.last().is_some_and(|l| l.starts_with("OK "))), "{said:?}");
}

/// A store around another: the first two clients asking for the refresh guard wait for each other (so
/// both have read the expired token), then get the inner store's guard, or none (`guarded: false`).
struct Meeting {
    inner: Arc<dyn TokenStore>,
    meet: tokio::sync::Barrier,
    arrived: std::sync::atomic::AtomicUsize,
    guarded: bool,
}

#[async_trait]
impl TokenStore for Meeting {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        self.inner.load(key).await
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.inner.save(key, value).await
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.inner.clear(key).await
    }
    async fn refresh_guard(&self, key: &str) -> Result<Option<RefreshGuard>, String> {
        if self.arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
            self.meet.wait().await;
        }
        if self.guarded { self.inner.refresh_guard(key).await } else { Ok(None) }
    }
}

/// Two clients in this process sharing `inner`; returns each one's whoami answer (or error) and how
/// many consents were asked for.
async fn two_clients(
    server: &Server,
    inner: Arc<dyn TokenStore>,
    guarded: bool,
    stale: Stale,
) -> (Vec<Result<String, String>>, usize) {
    authorized_then_stale(server, inner.clone(), stale).await;
    let shared: Arc<dyn TokenStore> =
        Arc::new(Meeting { inner, meet: tokio::sync::Barrier::new(2), arrived: Default::default(), guarded });
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let client = |asked: Arc<std::sync::atomic::AtomicUsize>| {
        let refuse = AuthorizeFn(move |_url: String| {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Err::<String, String>("no consent in this test".into()) }
        });
        let oauth = McpOAuth::authorization_code(REDIRECT, refuse).token_store_arc(shared.clone());
        McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None)
    };
    let (a, b) = (client(asked.clone()), client(asked.clone()));
    let call = |hub: McpHub| async move {
        hub.refresh().await;
        let listing = hub.listing();
        if let Some(why) = listing.unavailable.first() {
            return Err(format!("{why:?}"));
        }
        let whoami = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__whoami").unwrap().tool.clone();
        whoami.call(json!({})).await.map(|v| v.to_string()).map_err(|e| format!("{e:?}"))
    };
    let (a, b) = tokio::join!(call(a), call(b));
    (vec![a, b], asked.load(std::sync::atomic::Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_two_clients_in_one_process_sharing_a_store_refresh_once() {
    let dir = tempfile::tempdir().unwrap();
    let stores: [Arc<dyn TokenStore>; 2] =
        [Arc::new(MemoryTokenStore::new()), Arc::new(FileTokenStore::new(dir.path().join("tokens.json")))];
    for (i, store) in stores.into_iter().enumerate() {
        let server = Server::start(&[]).await;
        let (answers, asked) = two_clients(&server, store.clone(), true, Stale::Aged).await;
        for a in &answers {
            assert!(a.as_ref().is_ok_and(|a| a.contains("notes:read")), "store {i}: {answers:?}");
        }
        assert_eq!((server.counts().await, asked), ((1, 0, 1), 0), "store {i}: {answers:?}");
        let newest = server.stats().await["last_access_token"].as_str().unwrap().to_string();
        assert_eq!(stored_access_token(&store.load(&server.url).await.unwrap().unwrap()), newest, "store {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_two_clients_in_one_process_without_a_guard_spend_one_refresh_token_twice() {
    for stale in [Stale::Aged, Stale::Revoked] {
        let server = Server::start(&["--refresh-barrier", "2"]).await;
        let (answers, asked) = two_clients(&server, Arc::new(MemoryTokenStore::new()), false, stale).await;
        assert_eq!((server.counts().await, asked), ((1, 1, 1), 1), "{stale:?}: {answers:?}");
        assert_eq!(answers.iter().filter(|a| a.is_ok()).count(), 1, "{stale:?}: {answers:?}");
    }
}

/// A token the server rejects before it expires (revoked, or the server restarted): both clients get a
/// 401 with the same token; the first refreshes, the second finds the new token in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_two_clients_whose_token_was_rejected_refresh_once() {
    let server = Server::start(&[]).await;
    let store: Arc<dyn TokenStore> = Arc::new(MemoryTokenStore::new());
    let (answers, asked) = two_clients(&server, store.clone(), true, Stale::Revoked).await;
    for a in &answers {
        assert!(a.as_ref().is_ok_and(|a| a.contains("notes:read")), "{answers:?}");
    }
    assert_eq!((server.counts().await, asked), ((1, 0, 1), 0), "{answers:?}");
    let newest = server.stats().await["last_access_token"].as_str().unwrap().to_string();
    assert_eq!(stored_access_token(&store.load(&server.url).await.unwrap().unwrap()), newest);
}

/// The outside reader's finding (a): two calls of one client, whose token the server now refuses (it
/// forgot every access token: `POST /expire`), run at once: one refresh, none refused, no consent; the
/// second call finds the first one's new token. (That the flag telling the manager's own refresh the
/// guard is held belongs to the holding task alone, not to the client: the unit test
/// `attack_another_task_of_the_same_client_waits_for_the_guard` in core/src/mcp/oauth.rs, with its control.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_two_calls_of_one_client_with_an_expired_token_refresh_once() {
    let server = Server::start(&[]).await;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = asked.clone();
    let browser = AuthorizeFn(move |url: String| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        consent(url)
    });
    let oauth = McpOAuth::authorization_code(REDIRECT, browser).token_store(MemoryTokenStore::new());
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let whoami = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__whoami").unwrap().tool.clone();
    let base = server.url.trim_end_matches("/mcp");
    reqwest::Client::new().post(format!("{base}/expire")).send().await.unwrap();
    let (a, b) = tokio::join!(whoami.call(json!({})), whoami.call(json!({})));
    for answer in [&a, &b] {
        assert!(answer.as_ref().is_ok_and(|v| v.to_string().contains("notes:read")), "{a:?} {b:?}");
    }
    assert_eq!((server.counts().await, asked.load(std::sync::atomic::Ordering::SeqCst)), ((1, 0, 1), 1));
}

/// The outside reader's finding (b): a holder of the refresh lock that never lets go does not hang the
/// client. The test holds `<file>.refresh.lock` for good and sets a tiny bound
/// (`McpOAuth::refresh_lock_timeout`): the client's connection fails with `refresh_lock_timeout` naming
/// the lock file, having refreshed nothing and asked nobody. The same with the memory store, whose guard
/// the test takes and keeps (the error names the key). Control: once the lock is let go, the same client
/// refreshes (once) and connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_refresh_lock_never_released_fails_within_the_bound_naming_the_lock() {
    use std::os::fd::AsRawFd;
    let bound = std::time::Duration::from_millis(100);
    let server = Server::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let store = Arc::new(FileTokenStore::new(&file));
    authorized_then_expired(&server, store.clone()).await;
    let lock_path = dir.path().join("tokens.json.refresh.lock");
    let held = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).unwrap();
    // SAFETY: flock on a descriptor this test owns; released when `held` is dropped.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    let refuse = AuthorizeFn(|_url: String| async { Err::<String, String>("no consent in this test".into()) });
    let oauth =
        McpOAuth::authorization_code(REDIRECT, refuse).token_store_arc(store.clone()).refresh_lock_timeout(bound);
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub.refresh().await;
    let reason = hub.listing().unavailable.first().map(|u| u.reason.clone()).unwrap_or_default();
    assert!(reason.contains("refresh_lock_timeout"), "{reason}");
    assert!(reason.contains(&lock_path.display().to_string()) && reason.contains("100ms"), "{reason}");
    assert_eq!(server.counts().await, (0, 0, 1), "nothing refreshed, nobody asked: {reason}");

    // The memory store (on a server of its own): the test holds its guard for the server's key.
    let server2 = Server::start(&[]).await;
    let memory = Arc::new(MemoryTokenStore::new());
    authorized_then_expired(&server2, memory.clone()).await;
    let kept = memory.refresh_guard(&server2.url).await.unwrap();
    let refuse = AuthorizeFn(|_url: String| async { Err::<String, String>("no consent in this test".into()) });
    let oauth =
        McpOAuth::authorization_code(REDIRECT, refuse).token_store_arc(memory.clone()).refresh_lock_timeout(bound);
    let hub2 = McpHub::new(vec![McpServer::http("notes", server2.url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub2.refresh().await;
    let reason = hub2.listing().unavailable.first().map(|u| u.reason.clone()).unwrap_or_default();
    assert!(reason.contains("refresh_lock_timeout") && reason.contains(&server2.url), "{reason}");
    assert_eq!(server2.counts().await, (0, 0, 1), "{reason}");

    // Control: the locks let go, the same clients refresh (once each) and connect.
    drop(held);
    drop(kept);
    for hub in [&hub, &hub2] {
        hub.refresh().await;
        assert!(hub.listing().unavailable.is_empty(), "{:?}", hub.listing().unavailable);
    }
    assert_eq!((server.counts().await, server2.counts().await), ((1, 0, 1), (1, 0, 1)));
}
