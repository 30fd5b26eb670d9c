//! OAuth 2.1 for HTTP MCP servers (the MCP authorization spec, 2025-06-18 and 2025-11-25), through
//! rmcp's auth support: on a 401 the server's `WWW-Authenticate` challenge starts discovery
//! (protected-resource metadata, RFC 9728; authorization-server metadata, RFC 8414 / OIDC), the client
//! is registered (a pre-registered client ID, a client ID metadata document, or dynamic registration,
//! RFC 7591), and the host's consent callback gets the PKCE authorization URL and hands back the
//! redirect it led to; or, with the client-credentials grant, a token is fetched without the user.
//! Tokens carry the resource indicator (RFC 8707), are refreshed when they expire, and a 403
//! `insufficient_scope` re-authorizes with the union of scopes (a bounded number of times). Tokens live
//! in a host-provided [`TokenStore`] (in memory by default, or a file), and are credentials: every
//! value is fed to the redactor, so none reaches the model, an event or the session store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the client obtains its tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// PKCE authorization code: the user consents through [`Authorize`] (the default).
    #[default]
    AuthorizationCode,
    /// Client credentials (machine to machine): `client_id` and the `client_secret` credential.
    ClientCredentials,
}

/// The host's consent step: it gets the authorization URL (to open in a browser), and returns the URL
/// the authorization server redirected to (`<redirect_uri>?code=..&state=..`), or its query string.
#[async_trait]
pub trait Authorize: Send + Sync {
    /// Shows the user `url` and returns the redirect (or its query string) once they consented.
    async fn authorize(&self, url: String) -> Result<String, String>;
}

/// A consent step from a Rust closure.
pub struct AuthorizeFn<F>(pub F);

#[async_trait]
impl<F, Fut> Authorize for AuthorizeFn<F>
where
    F: Fn(String) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, String>> + Send,
{
    async fn authorize(&self, url: String) -> Result<String, String> {
        (self.0)(url).await
    }
}

/// Held while one client refreshes the tokens under a key: the refresh guard (see
/// [`TokenStore::refresh_guard`]). Dropping it lets the next holder in.
#[must_use = "dropping the guard lets another refresh in"]
pub struct RefreshGuard {
    _held: Box<dyn Send>,
}

impl RefreshGuard {
    /// A guard whose lifetime is `held`'s: a lock guard, a locked file, a lease to give back on drop.
    pub fn new(held: impl Send + 'static) -> RefreshGuard {
        RefreshGuard { _held: Box::new(held) }
    }
}

impl std::fmt::Debug for RefreshGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefreshGuard")
    }
}

/// The process-wide lock for `name`: one async mutex per name, for the life of the process (a name is
/// a server URL or a token file, a handful per process).
async fn process_lock(name: &str) -> tokio::sync::OwnedMutexGuard<()> {
    static LOCKS: std::sync::OnceLock<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
        std::sync::OnceLock::new();
    let lock = {
        let mut locks = LOCKS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(name.to_string()).or_default().clone()
    };
    lock.lock_owned().await
}

/// Where tokens are kept, by key (the server's URL): an opaque text (JSON) per key. A store the host
/// implements decides how it is protected (a keychain, a database).
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// The text kept under `key`, if any.
    async fn load(&self, key: &str) -> Result<Option<String>, String>;
    /// Keeps `value` under `key`.
    async fn save(&self, key: &str, value: &str) -> Result<(), String>;
    /// Forgets what is kept under `key`.
    async fn clear(&self, key: &str) -> Result<(), String>;
    /// The refresh guard for `key`: held from reading an expired token (or one the server refused),
    /// through the refresh, to saving the new one, so that clients sharing the store refresh once. With refresh-token rotation (OAuth
    /// 2.1: a refresh token is used once) two clients refreshing the same token would have the second
    /// rejected (and the user asked to consent again), or one overwrite the other's newer token with a
    /// stale one. A client that waited re-reads the token and uses what the holder stored.
    ///
    /// The default is a process-wide async mutex per key: it coordinates the clients of one process
    /// only. A store shared by several processes (a database, a keychain) coordinates them only if it
    /// overrides this with a lock they all see ([`FileTokenStore`] takes a `flock`); `Ok(None)` is no
    /// guard at all. Implementations must not take the guard again in `load` or `save`.
    ///
    /// A store kept elsewhere can borrow a token file's guard, a `flock` every process sees:
    /// ```
    /// use ambit::mcp::{FileTokenStore, RefreshGuard, TokenStore};
    /// # mod keychain {
    /// #     pub fn get(_: &str) -> Result<Option<String>, String> { Ok(None) }
    /// #     pub fn set(_: &str, _: &str) -> Result<(), String> { Ok(()) }
    /// #     pub fn delete(_: &str) -> Result<(), String> { Ok(()) }
    /// # }
    ///
    /// /// Tokens in the system keychain; refreshes coordinated by a lock file every process sees.
    /// struct Keychain {
    ///     lock: FileTokenStore, // FileTokenStore::new("/var/lib/my-agent/tokens")
    /// }
    ///
    /// #[async_trait::async_trait]
    /// impl TokenStore for Keychain {
    ///     async fn load(&self, key: &str) -> Result<Option<String>, String> { keychain::get(key) }
    ///     async fn save(&self, key: &str, value: &str) -> Result<(), String> { keychain::set(key, value) }
    ///     async fn clear(&self, key: &str) -> Result<(), String> { keychain::delete(key) }
    ///     async fn refresh_guard(&self, key: &str) -> Result<Option<RefreshGuard>, String> {
    ///         self.lock.refresh_guard(key).await // a flock on /var/lib/my-agent/tokens.refresh.lock
    ///     }
    /// }
    /// # let dir = std::env::temp_dir().join(format!("ambit-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let store = Keychain { lock: FileTokenStore::new(dir.join("tokens")) };
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # rt.block_on(async {
    /// let held = store.refresh_guard("https://mcp.example.com/mcp").await.unwrap();
    /// assert!(held.is_some());
    /// # });
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    async fn refresh_guard(&self, key: &str) -> Result<Option<RefreshGuard>, String> {
        Ok(Some(RefreshGuard::new(process_lock(&format!("token-store-key:{key}")).await)))
    }

    /// [`TokenStore::refresh_guard`], waiting at most `timeout` for it (`McpOAuth::refresh_lock_timeout_ms`):
    /// a holder that never lets go (a hung process holding a lock file) must not hang every client
    /// sharing the store. Past the bound: an error starting `refresh_lock_timeout:` and naming what was
    /// waited for. [`FileTokenStore`] overrides it to name its lock file.
    async fn refresh_guard_within(
        &self,
        key: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<RefreshGuard>, String> {
        match tokio::time::timeout(timeout, self.refresh_guard(key)).await {
            Ok(guard) => guard,
            Err(_) => Err(format!(
                "refresh_lock_timeout: the token store's refresh guard for '{key}' was not released within {timeout:?} (another client holds it)"
            )),
        }
    }
}

/// The default bound on the wait for a token store's refresh guard.
pub const DEFAULT_REFRESH_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Tokens in memory, for the life of the process (the default).
#[derive(Debug, Default, Clone)]
pub struct MemoryTokenStore {
    entries: Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> MemoryTokenStore {
        MemoryTokenStore::default()
    }
}

#[async_trait]
impl TokenStore for MemoryTokenStore {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned())
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), value.to_string());
        Ok(())
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
        Ok(())
    }
}

/// Tokens in a JSON file (an object by key), mode 0600: they survive a restart. Every change is a
/// read-modify-write under an exclusive file lock (`flock`; `LockFileEx` on Windows) on the sibling
/// `<file>.lock`, so stores in several
/// servers, agents or processes sharing the file lose no entry; the new content goes to a fresh temp
/// file in the same directory (created exclusively, never through a link) that is then renamed over
/// the file. A token file that is a symbolic link is refused: a link planted where the tokens go (the
/// file inside a workspace the model's shell can write) must not redirect them.
///
/// Its refresh guard ([`TokenStore::refresh_guard`]) is an exclusive `flock` on the sibling
/// `<file>.refresh.lock`, held across a refresh: processes (and clients in one process) sharing the file
/// refresh an expired token once, and the others use the token the first one stored.
#[derive(Debug, Clone)]
pub struct FileTokenStore {
    path: std::path::PathBuf,
}

impl FileTokenStore {
    /// A store in the file at `path` (created on first save, mode 0600).
    pub fn new(path: impl Into<std::path::PathBuf>) -> FileTokenStore {
        FileTokenStore { path: path.into() }
    }

    fn fail(&self, e: impl std::fmt::Display) -> String {
        format!("token store {}: {e}", self.path.display())
    }

    fn refuse_link(&self, path: &std::path::Path) -> Result<(), String> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                Err(self.fail(format!("{} is a symbolic link; a token file must be a plain file", path.display())))
            }
            _ => Ok(()),
        }
    }

    fn options(write: bool) -> std::fs::OpenOptions {
        let mut options = std::fs::OpenOptions::new();
        if write {
            options.write(true);
        } else {
            options.read(true);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // O_NONBLOCK: a FIFO planted at the path must not hang the open (and every process waiting
            // on the lock); the opened file is then checked to be a regular file.
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).mode(0o600);
        }
        options
    }

    /// Refuses an opened token or lock file that is not a regular file (a FIFO, a device, a socket).
    fn regular(&self, f: &std::fs::File, path: &std::path::Path) -> Result<(), String> {
        match f.metadata() {
            Ok(m) if m.is_file() => Ok(()),
            Ok(_) => Err(self.fail(format!("'{}' is not a regular file", path.display()))),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, String>, String> {
        use std::io::Read;
        self.refuse_link(&self.path)?;
        let mut text = String::new();
        match Self::options(false).open(&self.path) {
            Ok(f) => {
                self.regular(&f, &self.path)?;
                // At most 1 MiB: a token file is a few KiB.
                let read = f.take(MAX_TOKEN_FILE + 1).read_to_string(&mut text).map_err(|e| self.fail(e))?;
                if read as u64 > MAX_TOKEN_FILE {
                    return Err(self.fail(format!("'{}' is over {MAX_TOKEN_FILE} bytes", self.path.display())));
                }
                read
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.fail(e)),
        };
        serde_json::from_str(&text).map_err(|e| self.fail(format!("not a token file: {e}")))
    }

    fn write(&self, entries: &BTreeMap<String, String>) -> Result<(), String> {
        use std::io::Write;
        self.refuse_link(&self.path)?;
        let text = serde_json::to_string_pretty(entries).map_err(|e| e.to_string())?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut created = None;
        for _ in 0..16 {
            let mut nonce = [0u8; 8];
            getrandom::fill(&mut nonce).map_err(|e| self.fail(e))?;
            let tmp = dir.join(format!(".{name}.{}.{:016x}.tmp", std::process::id(), u64::from_le_bytes(nonce)));
            let mut options = Self::options(true);
            options.create_new(true);
            match options.open(&tmp) {
                Ok(f) => {
                    created = Some((tmp, f));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(self.fail(e)),
            }
        }
        let (tmp, mut f) = created.ok_or_else(|| self.fail("no unused temporary file name"))?;
        let written = f.write_all(text.as_bytes()).and_then(|()| f.sync_all());
        drop(f);
        let renamed = written.and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.fail(e));
        }
        Ok(())
    }

    /// `<file><suffix>`: a lock file beside the token file.
    fn sibling(&self, suffix: &str) -> std::path::PathBuf {
        let mut path = self.path.clone().into_os_string();
        path.push(suffix);
        std::path::PathBuf::from(path)
    }

    /// Opens (creating it, mode 0600) the lock file at `lock_path` and takes an exclusive lock on it
    /// (`flock`; `LockFileEx` on Windows), blocking until it is free. Refuses a link or anything but a regular file there.
    fn lock_file(&self, lock_path: &std::path::Path) -> Result<std::fs::File, String> {
        self.refuse_link(lock_path)?;
        let mut options = Self::options(true);
        options.create(true);
        let lock = options.open(lock_path).map_err(|e| match e.raw_os_error() {
            // A FIFO with no reader, opened to write without blocking.
            Some(libc::ENXIO) => self.fail(format!("'{}' is not a regular file", lock_path.display())),
            _ => self.fail(e),
        })?;
        self.regular(&lock, lock_path)?;
        // The standard library's file lock: `flock` on Unix, `LockFileEx` on Windows; released when
        // `lock` closes.
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::debug!(lock = %lock_path.display(), "waiting for another holder of the token file's lock");
                // A signal interrupting the wait is not a failure: wait again.
                loop {
                    match lock.lock() {
                        Ok(()) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(self.fail(e)),
                    }
                }
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(self.fail(e)),
        }
        Ok(lock)
    }

    /// Runs `f` holding the exclusive lock on `<file>.lock` (on a blocking thread).
    async fn locked<T: Send + 'static>(
        &self,
        f: impl FnOnce(&FileTokenStore) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let lock = store.lock_file(&store.sibling(".lock"))?;
            let out = f(&store);
            drop(lock);
            out
        })
        .await
        .map_err(|e| self.fail(e))?
    }
}

#[async_trait]
impl TokenStore for FileTokenStore {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        let key = key.to_string();
        self.locked(move |s| Ok(s.read()?.remove(&key))).await
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        let (key, value) = (key.to_string(), value.to_string());
        self.locked(move |s| {
            let mut entries = s.read()?;
            entries.insert(key, value);
            s.write(&entries)
        })
        .await
    }
    /// An exclusive `flock` on `<file>.refresh.lock` (not `<file>.lock`, which every load and save takes),
    /// for every key in the file; clients of this process queue on an async mutex first, so a waiting
    /// one holds no thread.
    async fn refresh_guard(&self, key: &str) -> Result<Option<RefreshGuard>, String> {
        self.refresh_guard_within(key, DEFAULT_REFRESH_LOCK_TIMEOUT).await
    }
    /// Waits at most `timeout` in all (the queue in this process, then the `flock`); past it, an error
    /// naming the lock file. The `flock` is waited for on a blocking thread that also holds this process's
    /// place in the queue: one given up on goes on waiting, and lets both go the moment it gets the lock,
    /// so a holder that never lets go keeps at most one thread per lock file waiting in this process.
    async fn refresh_guard_within(
        &self,
        _key: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<RefreshGuard>, String> {
        let lock_path = self.sibling(".refresh.lock");
        let expired = || {
            self.fail(format!(
                "refresh_lock_timeout: the refresh lock '{}' was not released within {timeout:?} (another client or process holds it)",
                lock_path.display()
            ))
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let queued = tokio::time::timeout_at(deadline, process_lock(&format!("token-file:{}", lock_path.display())))
            .await
            .map_err(|_| expired())?;
        let (store, path) = (self.clone(), lock_path.clone());
        let waiting = tokio::task::spawn_blocking(move || store.lock_file(&path).map(|file| (file, queued)));
        let held = tokio::time::timeout_at(deadline, waiting).await.map_err(|_| expired())?;
        let (file, queued) = held.map_err(|e| self.fail(e))??;
        Ok(Some(RefreshGuard::new((file, queued))))
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        let key = key.to_string();
        self.locked(move |s| {
            let mut entries = s.read()?;
            if entries.remove(&key).is_some() {
                s.write(&entries)?;
            }
            Ok(())
        })
        .await
    }
}

/// A host object held in the configuration: compared by identity, never serialized.
pub struct Hook<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Clone for Hook<T> {
    fn clone(&self) -> Self {
        Hook(self.0.clone())
    }
}

impl<T: ?Sized> PartialEq for Hook<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl<T: ?Sized> Eq for Hook<T> {}
impl<T: ?Sized> std::fmt::Debug for Hook<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<host callback>")
    }
}

/// OAuth for one HTTP MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpOAuth {
    #[serde(default)]
    /// How the client gets tokens: authorization code with the user's consent, or client credentials.
    pub grant: OAuthGrant,
    /// The name registered through dynamic client registration.
    #[serde(default)]
    pub client_name: Option<String>,
    /// Where the authorization server sends the user back (authorization code).
    #[serde(default)]
    pub redirect_uri: Option<String>,
    /// Scopes to ask for; empty: the challenge's, else the protected resource's `scopes_supported`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// A pre-registered client ID (no registration); required for client credentials.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The credential alias (crate::credentials) of a pre-registered client's secret.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// An HTTPS URL of this client's metadata document (a client ID metadata document), used as the
    /// client ID when the authorization server supports it.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// Tokens kept in this JSON file ([`FileTokenStore`]) when no `token_store` is given.
    #[serde(default)]
    pub token_file: Option<String>,
    /// The authorization server (its issuer URL) this client trusts: one that the MCP server's metadata
    /// names differently is refused. Without it, a configured `client_secret` goes only to an
    /// authorization server on the MCP server's own host.
    #[serde(default, alias = "authorization_server")]
    pub issuer: Option<String>,
    /// The most milliseconds a client waits for the token store's refresh guard (another client is
    /// refreshing) before its request fails with `refresh_lock_timeout` naming the lock; default 30,000.
    #[serde(default)]
    pub refresh_lock_timeout_ms: Option<u64>,
    /// The consent step (authorization code): without it, a server that needs the user is unavailable.
    #[serde(skip)]
    pub on_authorize: Option<Hook<dyn Authorize>>,
    /// Where tokens are kept; `None`: in memory.
    #[serde(skip)]
    pub token_store: Option<Hook<dyn TokenStore>>,
}

impl Default for McpOAuth {
    fn default() -> Self {
        McpOAuth {
            grant: OAuthGrant::AuthorizationCode,
            client_name: None,
            redirect_uri: None,
            scopes: Vec::new(),
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            token_file: None,
            issuer: None,
            refresh_lock_timeout_ms: None,
            on_authorize: None,
            token_store: None,
        }
    }
}

impl McpOAuth {
    /// The authorization-code grant: `redirect_uri` and the host's consent step.
    pub fn authorization_code(redirect_uri: impl Into<String>, on_authorize: impl Authorize + 'static) -> McpOAuth {
        McpOAuth {
            redirect_uri: Some(redirect_uri.into()),
            on_authorize: Some(Hook(Arc::new(on_authorize))),
            ..McpOAuth::default()
        }
    }

    /// The client-credentials grant: a pre-registered client and the alias of its secret.
    pub fn client_credentials(client_id: impl Into<String>, secret_alias: impl Into<String>) -> McpOAuth {
        McpOAuth {
            grant: OAuthGrant::ClientCredentials,
            client_id: Some(client_id.into()),
            client_secret: Some(secret_alias.into()),
            ..McpOAuth::default()
        }
    }

    /// Sets the name registered through dynamic client registration.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Sets the scopes asked for.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// A pre-registered client; `secret_alias` names the credential holding its secret, if it has one.
    pub fn client_id(mut self, id: impl Into<String>, secret_alias: Option<String>) -> Self {
        self.client_id = Some(id.into());
        self.client_secret = secret_alias;
        self
    }

    /// Pins the authorization server: its issuer URL, as its metadata gives it.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Sets the URL of a client ID metadata document (the client's id, where the server takes them).
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// Sets the most a client waits for the token store's refresh guard (default
    /// [`DEFAULT_REFRESH_LOCK_TIMEOUT`], 30 s).
    pub fn refresh_lock_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.refresh_lock_timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// The bound on the wait for the refresh guard.
    pub(super) fn refresh_lock_bound(&self) -> std::time::Duration {
        self.refresh_lock_timeout_ms.map_or(DEFAULT_REFRESH_LOCK_TIMEOUT, std::time::Duration::from_millis)
    }

    /// Sets where tokens are kept (default: in memory).
    pub fn token_store(mut self, store: impl TokenStore + 'static) -> Self {
        self.token_store = Some(Hook(Arc::new(store)));
        self
    }

    /// [`McpOAuth::token_store`] with a shared store.
    pub fn token_store_arc(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.token_store = Some(Hook(store));
        self
    }

    /// Sets the consent callback (see [`McpOAuth::authorization_code`]), shared.
    pub fn on_authorize_arc(mut self, callback: Arc<dyn Authorize>) -> Self {
        self.on_authorize = Some(Hook(callback));
        self
    }

    /// Checks the settings, naming the field that is wrong.
    pub fn validate(&self, server: &str) -> Result<(), String> {
        match self.grant {
            OAuthGrant::AuthorizationCode => {
                let Some(uri) = &self.redirect_uri else {
                    return Err(format!(
                        "MCP server '{server}': oauth.redirect_uri is required for the authorization code grant"
                    ));
                };
                if url::Url::parse(uri).is_err() {
                    return Err(format!("MCP server '{server}': oauth.redirect_uri '{uri}' is not a URL"));
                }
                if self.client_secret.is_some() && self.client_id.is_none() {
                    return Err(format!("MCP server '{server}': oauth.client_secret needs oauth.client_id"));
                }
            }
            OAuthGrant::ClientCredentials => {
                if self.client_id.is_none() {
                    return Err(format!("MCP server '{server}': oauth.client_id is required for client credentials"));
                }
                if self.client_secret.is_none() {
                    return Err(format!(
                        "MCP server '{server}': oauth.client_secret (a credential alias) is required for client credentials"
                    ));
                }
            }
        }
        if let Some(u) = &self.client_metadata_url
            && !u.starts_with("https://")
        {
            return Err(format!("MCP server '{server}': oauth.client_metadata_url '{u}' must be an HTTPS URL"));
        }
        if let Some(issuer) = &self.issuer {
            let url = url::Url::parse(issuer)
                .map_err(|_| format!("MCP server '{server}': oauth.issuer '{issuer}' is not a URL"))?;
            check_scheme(&url).map_err(|why| format!("MCP server '{server}': oauth.issuer: {why}"))?;
        }
        Ok(())
    }
}

/// Every token value the flow has seen, fed to the broker's redactor under `oauth.<server>`.
#[derive(Clone)]
pub(super) struct Secrets {
    alias: String,
    credentials: crate::credentials::Credentials,
}

impl Secrets {
    pub(super) fn new(server: &str, credentials: crate::credentials::Credentials) -> Secrets {
        Secrets { alias: format!("oauth.{server}"), credentials }
    }

    fn remember_stored(&self, stored: &StoredCredentials) {
        use oauth2::TokenResponse;
        if let Some(t) = &stored.token_response {
            self.credentials.remember_value(&self.alias, t.access_token().secret());
            if let Some(r) = t.refresh_token() {
                self.credentials.remember_value(&self.alias, r.secret());
            }
        }
    }
}

/// The network setting the agent applies (crate::permission::network), for the flow's own requests.
#[derive(Debug, Clone)]
pub(crate) struct NetPolicy {
    pub network: crate::permission::Network,
    pub allowed: Arc<[crate::permission::network::AddrRange]>,
}

impl Default for NetPolicy {
    fn default() -> Self {
        NetPolicy { network: crate::permission::Network::Unrestricted, allowed: Arc::from([]) }
    }
}

/// Whether `url` names this machine by a loopback address or the name `localhost` itself (as the
/// elicitation check reads it). A subdomain (`evil.localhost`) is not taken by name: a resolver may
/// answer it with any address.
fn loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.trim_end_matches('.').eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

/// Whether two issuer URLs name the same authorization server: scheme and host compare without case (the
/// URL parser lowers them), a trailing `/` aside; the path compares as written (`/Tenant-A` and
/// `/tenant-a` are two issuers on a multi-tenant host).
fn same_issuer(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let parsed = url::Url::parse(s).map(|u| u.to_string()).unwrap_or_else(|_| s.to_string());
        parsed.trim_end_matches('/').to_string()
    };
    norm(a) == norm(b)
}

/// OAuth's metadata and endpoints are reached over https only; plain http only on loopback.
pub(super) fn check_scheme(url: &url::Url) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback_host(url) => Ok(()),
        "http" => Err(format!("refused {url}: plain http is allowed only to a loopback address (use https)")),
        other => Err(format!("refused {url}: '{other}' is not http or https")),
    }
}

/// At most this much of a response body is read; at most [`QUOTED_BODY`] of an error body is kept
/// (errors quote it).
const MAX_BODY: usize = 1 << 20;
/// The largest token file read.
const MAX_TOKEN_FILE: u64 = 1 << 20;
const QUOTED_BODY: usize = 2048;
const MAX_REDIRECTS: usize = 5;

#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Refused {}

fn refused(why: impl Into<String>) -> rmcp::transport::auth::OAuthHttpClientError {
    Box::new(Refused(why.into()))
}

fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> rmcp::transport::auth::OAuthHttpClientError {
    Box::new(e)
}

/// An error body cut to [`QUOTED_BODY`] bytes, saying so.
fn cut_body(body: Vec<u8>, total: usize, more: bool) -> Vec<u8> {
    if body.len() <= QUOTED_BODY && !more {
        return body;
    }
    let mut text = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BODY)]).into_owned();
    let total = if more { format!("more than {total}") } else { total.to_string() };
    text.push_str(&format!("… [cut: {total} bytes in all, the first {QUOTED_BODY} shown]"));
    text.into_bytes()
}

/// Every request the OAuth flow makes (discovery, registration, token, refresh): https (http only to
/// loopback), each address checked by the agent's network setting as web_fetch checks it, redirects
/// followed only within the origin and checked again, bodies bounded, error bodies cut to what an error
/// may quote, and any client secret or token in an answer fed to the redactor.
struct PolicedHttp {
    net: NetPolicy,
    secrets: Secrets,
    /// The last request refused and why (rmcp's errors name only the URL that failed).
    refusal: Arc<std::sync::Mutex<Option<String>>>,
    /// How many values the flow has fed the redactor.
    remembered: Arc<std::sync::atomic::AtomicUsize>,
}

/// The shortest value fed to the redactor as a credential.
const MIN_SECRET_CHARS: usize = 16;
/// The most values one server's flow feeds the redactor.
const MAX_REMEMBERED: usize = 64;

impl PolicedHttp {
    async fn addrs(&self, url: &url::Url) -> Result<Vec<std::net::SocketAddr>, String> {
        use crate::permission::Network;
        if self.net.network == Network::None {
            return Err(format!("refused {url}: the network is off for this session (network: none)"));
        }
        let host = url.host_str().ok_or_else(|| format!("refused {url}: no host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("could not resolve {host}: {e}"))?
            .collect();
        for a in &addrs {
            if let Some(why) = crate::permission::network::refusal(self.net.network, a.ip(), &self.net.allowed) {
                return Err(format!("refused {url}: {why}"));
            }
        }
        if addrs.is_empty() {
            return Err(format!("{host} resolved to no address"));
        }
        Ok(addrs)
    }

    /// Feeds the redactor the credentials a token or registration answer issues. Only values that look
    /// like credentials (at least [`MIN_SECRET_CHARS`] characters, no whitespace), and at most
    /// [`MAX_REMEMBERED`] per flow: a hostile server must not be able to have chosen words (`curl`, a
    /// command) blanked out of events and the session store, nor grow the redactor without bound.
    fn remember(&self, body: &[u8]) {
        use std::sync::atomic::Ordering;
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else { return };
        for key in ["client_secret", "access_token", "refresh_token", "id_token", "registration_access_token"] {
            let Some(v) = map.get(key).and_then(Value::as_str) else { continue };
            if v.chars().count() < MIN_SECRET_CHARS || v.chars().any(char::is_whitespace) {
                continue;
            }
            if self.remembered.fetch_add(1, Ordering::SeqCst) >= MAX_REMEMBERED {
                return;
            }
            self.secrets.credentials.remember_value(&self.secrets.alias, v);
        }
    }
}

impl rmcp::transport::auth::OAuthHttpClient for PolicedHttp {
    fn execute(
        &self,
        request: rmcp::transport::auth::OAuthHttpRequest,
    ) -> rmcp::transport::auth::OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let rmcp::transport::auth::OAuthHttpRequest { request, redirect_policy, timeout, .. } = request;
            let follow = matches!(redirect_policy, rmcp::transport::auth::OAuthHttpRedirectPolicy::Follow);
            let request = reqwest::Request::try_from(request).map_err(boxed)?;
            let out = self.send(request, follow, timeout).await;
            if let Err(e) = &out
                && e.is::<Refused>()
            {
                *self.refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
            }
            out
        })
    }
}

impl PolicedHttp {
    async fn send(
        &self,
        mut request: reqwest::Request,
        follow: bool,
        timeout: Option<std::time::Duration>,
    ) -> Result<oauth2::HttpResponse, rmcp::transport::auth::OAuthHttpClientError> {
        {
            let mut hops = 0;
            loop {
                let url = request.url().clone();
                check_scheme(&url).map_err(refused)?;
                let addrs = self.addrs(&url).await.map_err(refused)?;
                let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
                let mut builder = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .resolve_to_addrs(&host, &addrs);
                if let Some(t) = timeout {
                    builder = builder.timeout(t);
                }
                let client = builder.build().map_err(boxed)?;
                let again = request.try_clone();
                // Token and registration requests are POSTs; metadata discovery is a GET, whose answer
                // (written by whoever serves the metadata) issues no credential.
                let issues_credentials = request.method() == reqwest::Method::POST;
                let mut response = client.execute(request).await.map_err(boxed)?;
                let location = response.headers().get(http::header::LOCATION).and_then(|v| v.to_str().ok());
                if follow
                    && response.status().is_redirection()
                    && let Some(location) = location
                {
                    let next = url.join(location).map_err(boxed)?;
                    if next.origin() != url.origin() {
                        return Err(refused(format!("refused a redirect from {url} to another origin: {next}")));
                    }
                    hops += 1;
                    if hops > MAX_REDIRECTS {
                        return Err(refused(format!("more than {MAX_REDIRECTS} redirects from {url}")));
                    }
                    let mut next_request =
                        again.ok_or_else(|| refused("a redirected request could not be repeated"))?;
                    *next_request.url_mut() = next;
                    request = next_request;
                    continue;
                }
                let status = response.status();
                let mut builder = http::Response::builder().status(status).version(response.version());
                for (name, value) in response.headers() {
                    builder = builder.header(name, value);
                }
                let mut body = Vec::new();
                let mut more = false;
                while let Some(chunk) = response.chunk().await.map_err(boxed)? {
                    if body.len() + chunk.len() > MAX_BODY {
                        if status.is_success() {
                            return Err(refused(format!("the answer from {url} is over {MAX_BODY} bytes")));
                        }
                        more = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                let body = if status.is_success() {
                    if issues_credentials {
                        self.remember(&body);
                    }
                    body
                } else {
                    let total = body.len();
                    cut_body(body, total, more)
                };
                return builder.body(body).map_err(boxed);
            }
        }
    }
}

/// rmcp's credential store over the host's token store, one key per server.
struct StoreAdapter {
    store: Arc<dyn TokenStore>,
    key: String,
    secrets: Secrets,
}

tokio::task_local! {
    /// True inside the refresh [`Flow::token`] has the manager make while it holds the store's refresh
    /// guard: the manager's own request for the guard (in that task, that refresh) is then already
    /// answered. Task-local, not per flow: another task of the same client asking for the guard meanwhile
    /// waits for it as any other client would.
    static GUARD_HELD: bool;
}

/// Runs `refresh` as the holder of the refresh guard (see [`GUARD_HELD`]).
async fn as_guard_holder<T>(refresh: impl std::future::Future<Output = T>) -> T {
    GUARD_HELD.scope(true, refresh).await
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(e.to_string())
}

#[async_trait]
impl CredentialStore for StoreAdapter {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(text) = self.store.load(&self.key).await.map_err(store_error)? else { return Ok(None) };
        // A value the store cannot give back as tokens is as good as none: authorize again.
        let stored: Option<StoredCredentials> = serde_json::from_str(&text).ok();
        if let Some(s) = &stored {
            self.secrets.remember_stored(s);
        }
        Ok(stored)
    }
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.secrets.remember_stored(&credentials);
        let text = serde_json::to_string(&credentials).map_err(store_error)?;
        self.store.save(&self.key, &text).await.map_err(store_error)
    }
    async fn clear(&self) -> Result<(), AuthError> {
        self.store.clear(&self.key).await.map_err(store_error)
    }
    /// The store's refresh guard, for the refreshes rmcp starts itself (a token the server rejected).
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        if GUARD_HELD.try_with(|held| *held).unwrap_or(false) {
            return Ok(None);
        }
        let guard = self.store.refresh_guard(&self.key).await.map_err(store_error)?;
        Ok(guard.map(CredentialRefreshGuard::new))
    }
}

/// Whether the stored access token must be refreshed before use: rmcp's rule (`get_access_token`), so
/// that a token this says is fresh is used as it is. Expired, or less than `min(30 s, half its life)`
/// left; a token without expiry information is used as it is.
fn expiring(stored: &StoredCredentials, now: u64) -> bool {
    use oauth2::TokenResponse;
    let Some(tokens) = &stored.token_response else { return false };
    let (Some(life), Some(received)) = (tokens.expires_in(), stored.token_received_at) else { return false };
    let remaining = life.as_secs().saturating_sub(now.saturating_sub(received));
    remaining < 30u64.min(life.as_secs() / 2).max(1)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

fn access_token(stored: &StoredCredentials) -> Option<String> {
    use oauth2::TokenResponse;
    stored.token_response.as_ref().map(|t| t.access_token().secret().to_string())
}

/// One server's OAuth state: the settings, the manager (its metadata, client and tokens), and what the
/// flow needs to authorize again.
pub(super) struct Flow {
    server: String,
    url: String,
    oauth: McpOAuth,
    /// The client secret, resolved from the broker.
    client_secret: Option<String>,
    store: Arc<dyn TokenStore>,
    secrets: Secrets,
    /// Serializes authorizations: two requests that hit a 401 together consent once.
    authorizing: tokio::sync::Mutex<()>,
    /// Authorizations (and step-ups) that succeeded so far: a request that waited on `authorizing`
    /// while another consented sees it moved and tries the new token before asking again.
    authorized: std::sync::atomic::AtomicU64,
    /// The network setting for the flow's own requests.
    net: NetPolicy,
    /// Why the flow's last refused request was refused, to say so in the error.
    refusal: Arc<std::sync::Mutex<Option<String>>>,
    /// Authorizations in a row whose token the server refused again; at [`MAX_REFUSED`] no more.
    refused: std::sync::atomic::AtomicU32,
    /// Values this server's answers fed the redactor (bounded: [`MAX_REMEMBERED`]).
    remembered: Arc<std::sync::atomic::AtomicUsize>,
}

/// A server that refuses every token it is given gets this many authorizations (consents) in a row,
/// then a typed auth error on every request until one succeeds.
pub(super) const MAX_REFUSED: u32 = 3;

/// A fresh manager for the server, its credentials in the host's store, every request it makes through
/// [`PolicedHttp`] (the agent's network setting decides which addresses it reaches).
async fn manager(flow: &Flow) -> Result<AuthorizationManager, AuthError> {
    let http = PolicedHttp {
        net: flow.net.clone(),
        secrets: flow.secrets.clone(),
        refusal: flow.refusal.clone(),
        remembered: flow.remembered.clone(),
    };
    let mut m = AuthorizationManager::new_with_oauth_http_client(flow.url.as_str(), Arc::new(http)).await?;
    m.set_credential_store(flow.adapter());
    Ok(m)
}

impl Flow {
    pub(super) fn new(
        server: &str,
        url: &str,
        oauth: &McpOAuth,
        client_secret: Option<String>,
        secrets: Secrets,
        net: NetPolicy,
    ) -> Flow {
        let store: Arc<dyn TokenStore> = match (&oauth.token_store, &oauth.token_file) {
            (Some(h), _) => h.0.clone(),
            (None, Some(path)) => Arc::new(FileTokenStore::new(path)),
            (None, None) => Arc::new(MemoryTokenStore::new()),
        };
        Flow {
            server: server.to_string(),
            url: url.to_string(),
            oauth: oauth.clone(),
            client_secret,
            store,
            secrets,
            authorizing: Default::default(),
            authorized: Default::default(),
            net,
            refusal: Default::default(),
            refused: Default::default(),
            remembered: Default::default(),
        }
    }

    fn adapter(&self) -> StoreAdapter {
        StoreAdapter { store: self.store.clone(), key: self.url.clone(), secrets: self.secrets.clone() }
    }

    /// The access token for the next request, refreshed first when it is expiring, or when the server
    /// refused it (`rejected`: the token it refused); `None` when there is none (the request goes out
    /// without one and the server's 401 starts an authorization). The refresh runs under the store's
    /// refresh guard, and the token is read again once the guard is held: a client (in this process or
    /// another) that refreshed it meanwhile left a fresh token, which is used without a refresh of its
    /// own. rmcp's manager refreshes without that second read, which with rotating refresh tokens would
    /// spend the new refresh token (or, without the guard, be refused for reusing the old one).
    async fn token(
        &self,
        client: &AuthClient<reqwest::Client>,
        rejected: Option<&str>,
    ) -> Result<Option<String>, AuthError> {
        let manager = client.auth_manager.lock().await;
        let adapter = self.adapter();
        // What this client can send as it is: no token at all, or a fresh one it was not just refused.
        let usable = |stored: &Option<StoredCredentials>| match stored {
            None => Some(None),
            Some(s) => {
                let token = access_token(s);
                let fresh = token.is_some() && !expiring(s, now_secs()) && token.as_deref() != rejected;
                (token.is_none() || fresh).then_some(token)
            }
        };
        if rejected.is_none()
            && let Some(token) = usable(&adapter.load().await?)
        {
            return Ok(token);
        }
        let guard =
            self.store.refresh_guard_within(&self.url, self.oauth.refresh_lock_bound()).await.map_err(store_error)?;
        if let Some(token) = usable(&adapter.load().await?) {
            tracing::debug!(server = %self.server, "another client refreshed the token; using the one it stored");
            return Ok(token);
        }
        let refreshed = as_guard_holder(manager.refresh_token()).await;
        drop(guard);
        match refreshed {
            Ok(tokens) => {
                use oauth2::TokenResponse;
                Ok(Some(tokens.access_token().secret().to_string()))
            }
            // As rmcp's own refresh: no refresh token, or the server refused it: authorize again.
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The HTTP client for the transport: tokens from the store when it has them (none otherwise: the
    /// server's 401 starts the flow).
    pub(super) async fn client(self: &Arc<Flow>, http: reqwest::Client) -> Result<OAuthHttp, String> {
        let mut m = manager(self).await.map_err(|e| self.describe(e))?;
        // With stored tokens the metadata is discovered now (refreshes go to its token endpoint): it must
        // name the trusted authorization server too.
        if self
            .store
            .load(&self.url)
            .await
            .map_err(|e| format!("OAuth for MCP server '{}': {e}", self.server))?
            .is_some()
        {
            match m.resolve_metadata().await {
                Ok(resolution) => {
                    self.check_issuer(&resolution.metadata)?;
                    m.set_metadata(resolution.metadata);
                }
                // With a pinned issuer or a client secret, tokens are not used (nor refreshed) against an
                // authorization server whose metadata could not be checked.
                Err(e) if self.oauth.issuer.is_some() || self.client_secret.is_some() => {
                    return Err(self.say(format!(
                        "the authorization server's metadata could not be read, so the stored tokens are not used: {e}"
                    )));
                }
                Err(_) => {}
            }
        }
        // Stored tokens are used as they are; a failure to read them is reported, not papered over.
        if let Err(e) = m.initialize_from_store().await {
            match e {
                AuthError::CredentialStoreError(_) => return Err(self.describe(e)),
                other => tracing::debug!(server = %self.server, error = %other, "stored OAuth tokens not usable"),
            }
        }
        Ok(OAuthHttp { inner: AuthClient::new(http, m), flow: self.clone() })
    }

    fn describe(&self, e: AuthError) -> String {
        self.say(e.to_string())
    }

    /// The error for this server, with why the request that failed was refused, if it was.
    fn say(&self, e: String) -> String {
        match self.refusal.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(why) => format!("OAuth for MCP server '{}': {e} ({why})", self.server),
            None => format!("OAuth for MCP server '{}': {e}", self.server),
        }
    }

    /// The authorization server the metadata names must be the pinned one (`oauth.issuer`); without a
    /// pin, a client secret goes only to one on the MCP server's own host.
    fn check_issuer(&self, metadata: &rmcp::transport::auth::AuthorizationMetadata) -> Result<(), String> {
        let named = metadata.issuer.clone().unwrap_or_else(|| {
            url::Url::parse(&metadata.authorization_endpoint)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_else(|_| metadata.authorization_endpoint.clone())
        });
        let server = &self.server;
        if let Some(pin) = &self.oauth.issuer {
            if !same_issuer(pin, &named) {
                return Err(format!(
                    "OAuth for MCP server '{server}': oauth.issuer: the server's metadata names the authorization server '{named}', not '{pin}'; refused"
                ));
            }
            return Ok(());
        }
        if self.client_secret.is_some() {
            let host = |s: &str| url::Url::parse(s).ok().and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            if host(&named).is_none() || host(&named) != host(&self.url) {
                return Err(format!(
                    "OAuth for MCP server '{server}': oauth.issuer: the server's metadata names the authorization server '{named}', on another host than the MCP server; the client secret goes only to the server's own host or to the authorization server oauth.issuer names"
                ));
            }
        }
        Ok(())
    }

    /// Authorizes from scratch after a 401 (`challenge` is its `WWW-Authenticate`), replacing the
    /// client's manager with the authorized one.
    async fn authorize(&self, client: &AuthClient<reqwest::Client>, challenge: &str) -> Result<(), String> {
        let mut guard = client.auth_manager.lock().await;
        let placeholder = manager(self).await.map_err(|e| self.describe(e))?;
        let mut m = std::mem::replace(&mut *guard, placeholder);
        let result = self.authorize_manager(&mut m, challenge).await;
        *guard = m;
        result.map_err(|e| self.say(e))
    }

    async fn authorize_manager(&self, m: &mut AuthorizationManager, challenge: &str) -> Result<(), String> {
        let resolution = m.resolve_metadata_from_challenge(Some(challenge)).await.map_err(|e| e.to_string())?;
        self.check_issuer(&resolution.metadata)
            .map_err(|e| e.trim_start_matches(&format!("OAuth for MCP server '{}': ", self.server)).to_string())?;
        m.set_metadata(resolution.metadata);
        match self.oauth.grant {
            OAuthGrant::ClientCredentials => {
                let config = ClientCredentialsConfig::ClientSecret {
                    client_id: self.oauth.client_id.clone().unwrap_or_default(),
                    client_secret: self.client_secret.clone().unwrap_or_default(),
                    scopes: self.oauth.scopes.clone(),
                    resource: Some(self.url.clone()),
                };
                m.validate_client_credentials_metadata(&config).map_err(|e| e.to_string())?;
                m.configure_client_credentials(&config).map_err(|e| e.to_string())?;
                m.exchange_client_credentials(&config).await.map_err(|e| e.to_string())?;
                Ok(())
            }
            OAuthGrant::AuthorizationCode => {
                let redirect = self.oauth.redirect_uri.clone().unwrap_or_default();
                let mut request = AuthorizationRequest::new(redirect).with_challenge(challenge);
                if self.oauth.scopes.is_empty() {
                    request = request.with_initial_scope_selection();
                } else {
                    request = request.with_scopes(self.oauth.scopes.iter().cloned());
                }
                if let Some(name) = &self.oauth.client_name {
                    request = request.with_client_name(name.clone());
                }
                if let Some(id) = &self.oauth.client_id {
                    request = request.with_preregistered_client(id.clone());
                    if let Some(secret) = &self.client_secret {
                        request = request.with_client_secret(secret.clone());
                    }
                }
                if let Some(url) = &self.oauth.client_metadata_url {
                    request = request.with_client_metadata_url(url.clone());
                }
                let placeholder = manager(self).await.map_err(|e| e.to_string())?;
                let taken = std::mem::replace(m, placeholder);
                let session = match AuthorizationSession::new(taken, request).await {
                    Ok(s) => s,
                    Err((back, e)) => {
                        *m = back;
                        return Err(e.to_string());
                    }
                };
                let url = session.get_authorization_url().to_string();
                let result = self.consent(url).await;
                let result = match result {
                    Ok(callback) => session
                        .handle_callback_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                *m = session.auth_manager;
                result
            }
        }
    }

    /// The host's consent step: the URL out, the redirect back.
    async fn consent(&self, url: String) -> Result<AuthorizationCallback, String> {
        let Some(hook) = &self.oauth.on_authorize else {
            return Err("the server needs the user's consent and no on_authorize callback is set".to_string());
        };
        // The authorization endpoint comes from metadata a hostile server may write: only an https (or
        // loopback http) URL without userinfo reaches the host's browser.
        let parsed = url::Url::parse(&url).map_err(|e| format!("the authorization URL is not a URL: {e}"))?;
        check_scheme(&parsed)?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "refused the authorization URL of host '{}': it carries userinfo",
                parsed.host_str().unwrap_or("")
            ));
        }
        let back = hook
            .0
            .authorize(parsed.to_string())
            .await
            .map_err(|e| format!("the host's on_authorize callback failed: {e}"))?;
        let back = back.trim();
        let full = if back.contains("://") {
            back.to_string()
        } else {
            format!("http://localhost/?{}", back.trim_start_matches('?'))
        };
        // An authorization server that was refused (RFC 6749 §4.1.2.1) redirects with `error` and no code:
        // say what it answered (`access_denied`: the user said no), not that the code is missing.
        if let Ok(redirect) = url::Url::parse(&full)
            && let Some(error) = redirect.query_pairs().find(|(k, _)| k == "error").map(|(_, v)| v.into_owned())
        {
            let error: String = error.chars().filter(|c| c.is_ascii_graphic()).take(64).collect();
            let why = if error == "access_denied" { "consent was denied" } else { "authorization failed" };
            return Err(format!("{why}: the authorization server answered '{error}'"));
        }
        AuthorizationCallback::from_redirect_url(&full).map_err(|e| format!("the redirect from on_authorize: {e}"))
    }

    /// Re-authorizes with more scopes after a 403 `insufficient_scope` (bounded by rmcp's attempt limit).
    async fn step_up(
        &self,
        client: &AuthClient<reqwest::Client>,
        challenge: &str,
        required: &str,
    ) -> Result<(), String> {
        let m = client.auth_manager.lock().await;
        if self.oauth.grant == OAuthGrant::ClientCredentials {
            return Err(format!("OAuth for MCP server '{}': the token lacks scope '{required}'", self.server));
        }
        let url = m.request_scope_upgrade(required).await.map_err(|e| self.describe(e))?;
        let _ = challenge;
        let callback = self.consent(url).await.map_err(|e| format!("OAuth for MCP server '{}': {e}", self.server))?;
        m.exchange_code_for_token_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
            .await
            .map_err(|e| self.describe(e))?;
        Ok(())
    }
}

/// The transport's HTTP client: rmcp's [`AuthClient`] (tokens, refresh on a rejected token) that also
/// answers a 401 by authorizing and a 403 `insufficient_scope` by stepping up, then sends the request
/// again once.
#[derive(Clone)]
pub(super) struct OAuthHttp {
    inner: AuthClient<reqwest::Client>,
    flow: Arc<Flow>,
}

type HttpError = StreamableHttpError<reqwest::Error>;

impl OAuthHttp {
    /// Sends with the stored token ([`Flow::token`]), or without one when there is none; a token the
    /// server refuses (401) is refreshed once ([`Flow::token`] again, which takes a token another client
    /// stored meanwhile) and the request sent again with the new one. rmcp's `AuthClient` does the same
    /// but refreshes without reading the store again under the guard: its manager is used, its sending
    /// is not.
    async fn send<T, F, Fut>(&self, call: F) -> Result<T, HttpError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let Some(sent) = self.flow.token(&self.inner, None).await.map_err(StreamableHttpError::Auth)? else {
            return call(None).await;
        };
        match call(Some(sent.clone())).await {
            Err(StreamableHttpError::AuthRequired(challenge)) => {
                match self.flow.token(&self.inner, Some(&sent)).await.map_err(StreamableHttpError::Auth)? {
                    Some(fresh) if fresh != sent => call(Some(fresh)).await,
                    _ => Err(StreamableHttpError::AuthRequired(challenge)),
                }
            }
            other => other,
        }
    }

    /// Runs `call`; on an auth challenge, authorizes (or steps up) and runs it once more.
    async fn with_auth<T, F, Fut>(&self, call: F) -> Result<T, HttpError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        use std::sync::atomic::Ordering;
        // The authorizations done before this request went out: one done since (by a request that hit
        // the same 401 at the same time) is tried before this one asks for consent again.
        let before = self.flow.authorized.load(Ordering::SeqCst);
        let first = call().await;
        let first = match first {
            Err(StreamableHttpError::AuthRequired(_) | StreamableHttpError::InsufficientScope(_)) => {
                let one = self.flow.authorizing.lock().await;
                if self.flow.authorized.load(Ordering::SeqCst) == before {
                    first
                } else {
                    drop(one);
                    call().await
                }
            }
            other => other,
        };
        match first {
            Err(StreamableHttpError::AuthRequired(e)) => {
                let _one = self.flow.authorizing.lock().await;
                let refused = self.flow.refused.load(Ordering::SeqCst);
                if refused >= MAX_REFUSED {
                    return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(format!(
                        "OAuth for MCP server '{}': {refused} authorizations in a row failed or the server refused their token; not authorizing (or asking for consent) again",
                        self.flow.server
                    ))));
                }
                // A failed authorization counts as refused too (a declined consent, a token endpoint
                // that answers 400), so a server cannot have the host asked again on every request.
                if let Err(reason) = self.flow.authorize(&self.inner, &e.www_authenticate_header).await {
                    self.flow.refused.fetch_add(1, Ordering::SeqCst);
                    return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(reason)));
                }
                self.flow.authorized.fetch_add(1, Ordering::SeqCst);
                let out = call().await;
                if matches!(out, Err(StreamableHttpError::AuthRequired(_))) {
                    self.flow.refused.fetch_add(1, Ordering::SeqCst);
                } else if out.is_ok() {
                    self.flow.refused.store(0, Ordering::SeqCst);
                }
                out
            }
            Err(StreamableHttpError::InsufficientScope(e)) => {
                let params = rmcp::transport::auth::WWWAuthenticateParams::parse(
                    &e.www_authenticate_header,
                    &url::Url::parse(&self.flow.url).map_err(|e| StreamableHttpError::Auth(AuthError::from(e)))?,
                );
                let required = e.required_scope.clone().or(params.scope.clone()).unwrap_or_default();
                let _one = self.flow.authorizing.lock().await;
                // Step-ups share the bound of authorizations in a row.
                let refused = self.flow.refused.load(Ordering::SeqCst);
                if refused >= MAX_REFUSED {
                    return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(format!(
                        "OAuth for MCP server '{}': {refused} authorizations in a row did not satisfy the server; not asking for consent again",
                        self.flow.server
                    ))));
                }
                if let Err(reason) = self.flow.step_up(&self.inner, &e.www_authenticate_header, &required).await {
                    self.flow.refused.fetch_add(1, Ordering::SeqCst);
                    return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(reason)));
                }
                self.flow.authorized.fetch_add(1, Ordering::SeqCst);
                let out = call().await;
                if matches!(out, Err(StreamableHttpError::InsufficientScope(_) | StreamableHttpError::AuthRequired(_)))
                {
                    self.flow.refused.fetch_add(1, Ordering::SeqCst);
                } else if out.is_ok() {
                    self.flow.refused.store(0, Ordering::SeqCst);
                }
                out
            }
            other => {
                if other.is_ok() {
                    self.flow.refused.store(0, std::sync::atomic::Ordering::SeqCst);
                }
                other
            }
        }
    }
}

impl StreamableHttpClient for OAuthHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        // A token the caller passed is the transport's static one (none with OAuth).
        let _ = auth_token;
        let http = &self.inner.http_client;
        self.with_auth(|| {
            self.send(|token| {
                http.post_message(uri.clone(), message.clone(), session_id.clone(), token, custom_headers.clone())
            })
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let _ = auth_token;
        let http = &self.inner.http_client;
        self.with_auth(|| {
            self.send(|token| {
                http.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    limits,
                )
            })
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), HttpError> {
        let _ = auth_token;
        let http = &self.inner.http_client;
        self.send(|token| http.delete_session(uri.clone(), session_id.clone(), token, custom_headers.clone())).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, HttpError> {
        let _ = auth_token;
        let http = &self.inner.http_client;
        self.send(|token| {
            http.get_stream(uri.clone(), session_id.clone(), last_event_id.clone(), token, custom_headers.clone())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that hands out a guard at once, counting them.
    #[derive(Default)]
    struct Counting {
        asked: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl TokenStore for Counting {
        async fn load(&self, _key: &str) -> Result<Option<String>, String> {
            Ok(None)
        }
        async fn save(&self, _key: &str, _value: &str) -> Result<(), String> {
            Ok(())
        }
        async fn clear(&self, _key: &str) -> Result<(), String> {
            Ok(())
        }
        async fn refresh_guard(&self, _key: &str) -> Result<Option<RefreshGuard>, String> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Some(RefreshGuard::new(())))
        }
    }

    /// The outside reader's finding (a): while one task of a client holds the refresh guard and has the
    /// manager refresh, another task of the same client (same store adapter) asking for the guard gets it
    /// from the store (and so waits for the holder), instead of being waved through as the holder. With
    /// the flag per flow it got none. Control: the holder's own request, inside its refresh, is answered
    /// without asking the store again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn attack_another_task_of_the_same_client_waits_for_the_guard() {
        let store = Arc::new(Counting::default());
        let adapter = Arc::new(StoreAdapter {
            store: store.clone(),
            key: "https://mcp.example/mcp".into(),
            secrets: Secrets::new("notes", crate::credentials::Credentials::new()),
        });
        let holder = adapter.clone();
        let other_got_one = as_guard_holder(async move {
            // Control: the holder's own request (the manager's, within its refresh) is already answered.
            assert!(holder.acquire_refresh_guard().await.unwrap().is_none());
            let other = holder.clone();
            tokio::spawn(async move { other.acquire_refresh_guard().await.unwrap().is_some() }).await.unwrap()
        })
        .await;
        assert!(other_got_one, "another task of the client was waved through while the first one refreshed");
        assert_eq!(store.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Outside any refresh, the adapter asks the store.
        assert!(adapter.acquire_refresh_guard().await.unwrap().is_some());
    }

    #[test]
    fn attack_a_localhost_subdomain_is_not_loopback_by_name() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        for bad in ["http://evil.localhost/authorize", "http://a.b.localhost./token", "http://localhost.evil.com/x"] {
            let e = check_scheme(&url(bad)).unwrap_err();
            assert!(e.contains("plain http is allowed only to a loopback address"), "{bad}: {e}");
        }
        // Control: loopback itself, by name and by address, and https anywhere.
        for good in [
            "http://localhost:8080/t",
            "http://LOCALHOST./t",
            "http://127.0.0.1/t",
            "http://[::1]/t",
            "https://evil.localhost/t",
        ] {
            assert!(check_scheme(&url(good)).is_ok(), "{good}");
        }
    }

    #[test]
    fn attack_an_issuer_path_differing_in_case_is_another_issuer() {
        assert!(!same_issuer("https://login.example.com/Tenant-A", "https://login.example.com/tenant-a"));
        // Control: scheme and host case and a trailing slash do not matter.
        assert!(same_issuer("https://login.example.com/Tenant-A", "HTTPS://Login.Example.COM/Tenant-A/"));
    }
}
