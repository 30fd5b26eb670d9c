//! Scope and sandbox, against the real file system and the real Landlock: a corpus of path attacks
//! through the built-in file tools, a symlink swapped between check and use, and the shell at each level.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ambit::tools::builtin::{self, sandbox_available};
use ambit::{Level, Network, Scope, ToolContext};
use serde_json::{Value, json};

struct Tree {
    root: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

const SECRET: &str = "TOP SECRET";

fn tree(name: &str) -> Tree {
    let root = std::env::temp_dir().join(format!("ambit-perm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let root = std::fs::canonicalize(&root).unwrap();
    let ws = root.join("ws");
    let outside = root.join("outside");
    for d in [ws.join("sub"), outside.clone(), root.join("readable")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    std::fs::write(ws.join("sub/secret.txt"), "public\n").unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("readable/r.txt"), "readable\n").unwrap();
    let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, ws.join(name)).unwrap();
    link(Path::new("../outside"), "link_out");
    link(Path::new("../outside/secret.txt"), "link_out_file");
    link(&outside, "abs_link");
    link(Path::new("sub"), "link_in");
    link(Path::new("loop2"), "loop1");
    link(Path::new("loop1"), "loop2");
    link(Path::new("chain2"), "chain1");
    link(Path::new("link_out"), "chain2");
    link(Path::new("/"), "root_link");
    Tree { root, ws, outside }
}

fn ctx(t: &Tree, level: Level) -> ToolContext {
    let scope = Scope::new(&t.ws, Vec::<PathBuf>::new(), [t.root.join("readable")], true).unwrap();
    ToolContext {
        call_id: "c".into(),
        level,
        scope: Arc::new(scope),
        network: Network::Unrestricted,
        allow_local_addresses: Arc::from([]),
        credentials: None,
        declared: Arc::from([]),
        context: None,
    }
}

async fn call(name: &str, args: Value, ctx: &ToolContext) -> Result<String, String> {
    let tool = builtin::by_name(name).unwrap();
    let spec = tool.spec().clone();
    let args = ambit::tools::args::read_arguments(&spec.parameters, &spec.allow_blank, args)?;
    tool.call_in(args, ctx).await.map(|v| v.as_str().unwrap_or_default().to_string()).map_err(|e| e.to_string())
}

/// Paths that lead outside the session's reach (working directory ws, readable dir, system dirs).
fn attacks(t: &Tree) -> Vec<String> {
    let abs = t.root.display().to_string();
    let mut v: Vec<String> = vec![
        "../outside/secret.txt".into(),
        "../outside/missing.txt".into(),
        format!("{abs}/outside/secret.txt"),
        format!("{abs}/outside/missing.txt"),
        "link_out/secret.txt".into(),
        "link_out/missing.txt".into(),
        "link_out_file".into(),
        "sub/../../outside/secret.txt".into(),
        "sub/../../outside/missing".into(),
        "./../outside/secret.txt".into(),
        "link_in/../../outside/secret.txt".into(),
        format!("/proc/self/root{abs}/outside/secret.txt"),
        format!("/proc/self/root{abs}/outside/missing"),
        format!("/proc/self/root/proc/self/root{abs}/outside/secret.txt"),
        "/proc/self/cwd/../outside/secret.txt".into(),
        format!("{abs}/ws/../outside/secret.txt"),
        format!("{abs}/ws/link_out/../outside/secret.txt"),
        format!("{abs}/ws/link_out/secret.txt"),
        "abs_link/secret.txt".into(),
        "abs_link/missing.txt".into(),
        "a.txt/../../outside/secret.txt".into(),
        "chain1/secret.txt".into(),
        "chain1/missing".into(),
        "../outside/se\ncret.txt".into(),
        "../outside/new\nline".into(),
        "../../../../../../../../../root/.bashrc".into(),
        "/root/.ssh/id_rsa".into(),
        "/etc/shadow".into(),
        "/etc/passwd".into(),
        "/tmp".into(),
        "/var/log/syslog".into(),
        format!("{abs}/outside"),
        format!("{abs}/outside/"),
        format!("{abs}//outside//secret.txt"),
        format!("{abs}/./outside/./secret.txt"),
        "root_link/etc/shadow".into(),
        format!("root_link{abs}/outside/secret.txt"),
        "link_out/../outside/secret.txt".into(),
        "link_in/../link_out/secret.txt".into(),
        "sub/../link_out_file".into(),
        "..".into(),
        "../".into(),
        "../..".into(),
        "/".into(),
        "//".into(),
        format!("{abs}/ws/../../"),
        "/proc/self/environ".into(),
        "/proc/1/root/etc/shadow".into(),
        "/dev/shm/x".into(),
        "/home".into(),
        format!("{abs}/readable/../outside/secret.txt"),
    ];
    // A descriptor of this process open on the secret: /proc/self/fd/N points outside.
    let f = std::fs::File::open(t.outside.join("secret.txt")).unwrap();
    use std::os::fd::IntoRawFd;
    v.push(format!("/proc/self/fd/{}", f.into_raw_fd()));
    v
}

fn outside_msg(given: &str) -> String {
    format!("path '{given}' is outside this session's reach")
}

#[tokio::test]
async fn no_path_attack_reads_or_lists_outside_reach() {
    let t = tree("read");
    let ctx = ctx(&t, Level::Workspace);
    let attacks = attacks(&t);
    assert!(attacks.len() >= 50, "{} attacks", attacks.len());
    for given in &attacks {
        let r = call("file_read", json!({"path": given}), &ctx).await;
        assert_eq!(r.as_deref().map_err(String::as_str), Err(outside_msg(given).as_str()), "file_read {given:?}");
        let r = call("file_search", json!({"pattern": "SECRET", "path": given}), &ctx).await;
        assert!(r.as_ref().is_err_and(|e| e == &outside_msg(given)), "file_search {given:?}: {r:?}");
        let r = call("file_find", json!({"pattern": "**", "path": given}), &ctx).await;
        assert!(r.as_ref().is_err_and(|e| e == &outside_msg(given)), "file_find {given:?}: {r:?}");
    }
    // Searching the whole workspace never follows a link out.
    let r = call("file_search", json!({"pattern": "SECRET"}), &ctx).await.unwrap();
    assert_eq!(r, "no matches");
    let r = call("file_find", json!({"pattern": "**/*.txt"}), &ctx).await.unwrap();
    assert_eq!(r, "a.txt\nsub/secret.txt");
    // Inside reach works, and a missing file inside reach says so.
    assert_eq!(call("file_read", json!({"path": "a.txt"}), &ctx).await.unwrap(), "hello\n");
    assert_eq!(call("file_read", json!({"path": "link_in/secret.txt"}), &ctx).await.unwrap(), "public\n");
    let readable = t.root.join("readable/r.txt").display().to_string();
    assert_eq!(call("file_read", json!({"path": readable}), &ctx).await.unwrap(), "readable\n");
    assert_eq!(
        call("file_read", json!({"path": "nope.txt"}), &ctx).await.unwrap_err(),
        "no such file or directory: nope.txt"
    );
}

#[tokio::test]
async fn refusals_read_the_same_whether_or_not_the_target_exists() {
    let t = tree("same");
    let ctx = ctx(&t, Level::Workspace);
    let abs = t.root.display().to_string();
    for (exists, missing) in [
        ("../outside/secret.txt".to_string(), "../outside/missing.txt".to_string()),
        (format!("{abs}/outside/secret.txt"), format!("{abs}/outside/missing.txt")),
        ("link_out/secret.txt".into(), "link_out/missing.txt".into()),
        ("abs_link/secret.txt".into(), "abs_link/missing.txt".into()),
        ("../outside".into(), "../nowhere".into()),
    ] {
        for tool in ["file_read", "file_write", "file_edit"] {
            let args = |p: &str| json!({"path": p, "content": "x", "old_text": "a", "new_text": "b"});
            let mut a = args(&exists);
            let mut b = args(&missing);
            if tool == "file_read" {
                a = json!({"path": exists});
                b = json!({"path": missing});
            }
            let ea = call(tool, a, &ctx).await.unwrap_err();
            let eb = call(tool, b, &ctx).await.unwrap_err();
            assert_eq!(ea.replace(&exists, "P"), eb.replace(&missing, "P"), "{tool}: {ea} / {eb}");
        }
    }
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn no_path_attack_writes_outside_the_workspace() {
    let t = tree("write");
    let ctx = ctx(&t, Level::Workspace);
    let before = snapshot(&t.outside);
    let mut attacks = attacks(&t);
    attacks.push("readable_is_not_writable".into()); // replaced below with the readable dir
    let last = attacks.len() - 1;
    attacks[last] = t.root.join("readable/r.txt").display().to_string();
    for given in &attacks {
        let w = call("file_write", json!({"path": given, "content": "pwned"}), &ctx).await;
        assert!(w.is_err(), "file_write {given:?} succeeded");
        let e = call("file_edit", json!({"path": given, "old_text": SECRET, "new_text": "pwned"}), &ctx).await;
        assert!(e.is_err(), "file_edit {given:?} succeeded");
    }
    assert_eq!(snapshot(&t.outside), before, "nothing outside changed");
    assert_eq!(std::fs::read_to_string(t.root.join("readable/r.txt")).unwrap(), "readable\n");
    // Inside the workspace writes land, names with newlines included, and an empty content is kept.
    call("file_write", json!({"path": "new\nline.txt", "content": ""}), &ctx).await.unwrap();
    assert_eq!(std::fs::read(t.ws.join("new\nline.txt")).unwrap(), b"");
    call("file_edit", json!({"path": "a.txt", "old_text": "hello", "new_text": ""}), &ctx).await.unwrap();
    assert_eq!(std::fs::read_to_string(t.ws.join("a.txt")).unwrap(), "\n");
    // At read nothing is writable, not even the workspace; at unrestricted the outside is.
    let read = ctx_with(&t, Level::Read);
    assert_eq!(
        call("file_write", json!({"path": "b.txt", "content": "x"}), &read).await.unwrap_err(),
        outside_msg("b.txt")
    );
    let free = ctx_with(&t, Level::Unrestricted);
    call("file_write", json!({"path": "../outside/ok.txt", "content": "x"}), &free).await.unwrap();
}

fn ctx_with(t: &Tree, level: Level) -> ToolContext {
    ctx(t, level)
}

#[tokio::test]
async fn invalid_paths_are_refused_without_touching_the_file_system() {
    let t = tree("invalid");
    let ctx = ctx(&t, Level::Workspace);
    let nul = call("file_read", json!({"path": "a.txt\u{0}../../outside/secret.txt"}), &ctx).await.unwrap_err();
    assert!(nul.contains("contains a NUL byte"), "{nul}");
    let long = "a/".repeat(3000);
    let e = call("file_write", json!({"path": long, "content": "x"}), &ctx).await.unwrap_err();
    assert!(e.contains("is too long"), "{e}");
    let e = call("file_read", json!({"path": "loop1/x"}), &ctx).await.unwrap_err();
    assert!(e.contains("outside this session's reach") || e.contains("no such file"), "{e}");
    let e = call("file_read", json!({"path": "  "}), &ctx).await.unwrap_err();
    assert_eq!(e, "argument 'path' is required");
}

/// A directory on the checked path swapped for a symlink out (atomically, with RENAME_EXCHANGE) while
/// reads and writes go through it: the resolved path holds no link, so only the check on the opened
/// descriptor can catch a swap that lands between the check and the open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_between_check_and_use_never_leads_outside() {
    let t = tree("race");
    let ctx = ctx(&t, Level::Workspace);
    std::fs::create_dir(t.ws.join("racedir")).unwrap();
    std::fs::write(t.ws.join("racedir/secret.txt"), "public\n").unwrap();
    std::os::unix::fs::symlink("../outside", t.ws.join("racelink")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (ws, stop2) = (t.ws.clone(), stop.clone());
    let flipper = std::thread::spawn(move || {
        let a = std::ffi::CString::new(ws.join("racedir").into_os_string().into_encoded_bytes()).unwrap();
        let b = std::ffi::CString::new(ws.join("racelink").into_os_string().into_encoded_bytes()).unwrap();
        let mut swaps = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            // SAFETY: two NUL-terminated paths, valid for the call.
            let rc = unsafe {
                libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE)
            };
            assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
            swaps += 1;
        }
        swaps
    });
    let before = snapshot(&t.outside);
    let (mut ok, mut refused) = (0, 0);
    for i in 0..4000 {
        match call("file_read", json!({"path": "racedir/secret.txt"}), &ctx).await {
            Ok(text) => {
                assert_eq!(text, "public\n", "read outside through a swapped directory");
                ok += 1;
            }
            Err(e) => {
                assert!(e == outside_msg("racedir/secret.txt") || e.starts_with("no such file"), "{e}");
                refused += 1;
            }
        }
        let _ = call("file_write", json!({"path": format!("racedir/w{}.txt", i % 7), "content": "x"}), &ctx).await;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = flipper.join().unwrap();
    assert_eq!(snapshot(&t.outside), before, "a write escaped through the swapped directory");
    println!("race: {swaps} swaps, {ok} reads inside, {refused} refused");
    assert!(swaps > 100 && refused > 0 && ok > 0, "the race was exercised: {swaps} swaps, {ok} ok, {refused} refused");
}

fn exit_code(out: &str) -> i32 {
    out.lines().next().and_then(|l| l.strip_prefix("exit code: ")).and_then(|c| c.parse().ok()).unwrap_or(-999)
}

#[tokio::test]
async fn shell_at_read_cannot_write_anywhere() {
    assert!(sandbox_available(), "Landlock is required on this machine for the shell tests");
    let t = tree("shell-read");
    let ctx = ctx(&t, Level::Read);
    let out = call("shell_execute", json!({"command": "cat a.txt && echo ok > /dev/null"}), &ctx).await.unwrap();
    assert_eq!(exit_code(&out), 0, "{out}");
    assert!(out.contains("hello"), "{out}");
    let tmp = std::env::temp_dir().join(format!("ambit-shell-read-{}", std::process::id()));
    for cmd in [
        "echo x > inside.txt".to_string(),
        format!("echo x > {}/escaped.txt", t.outside.display()),
        format!("echo x > {}", tmp.display()),
        "mkdir newdir".into(),
        "rm a.txt".into(),
        "touch sub/t".into(),
    ] {
        let out = call("shell_execute", json!({"command": cmd}), &ctx).await.unwrap();
        assert_ne!(exit_code(&out), 0, "{cmd} succeeded at read: {out}");
    }
    assert!(!t.ws.join("inside.txt").exists() && !t.outside.join("escaped.txt").exists() && !tmp.exists());
    assert!(t.ws.join("a.txt").exists() && !t.ws.join("newdir").exists());
}

#[tokio::test]
async fn shell_at_workspace_writes_only_under_the_workspace_roots() {
    let t = tree("shell-ws");
    let ctx = ctx(&t, Level::Workspace);
    let out = call("shell_execute", json!({"command": "echo x > inside.txt && mkdir -p d/e && touch d/e/f"}), &ctx)
        .await
        .unwrap();
    assert_eq!(exit_code(&out), 0, "{out}");
    assert!(t.ws.join("inside.txt").exists() && t.ws.join("d/e/f").exists());
    let before = snapshot(&t.outside);
    for cmd in [
        format!("echo x > {}/escaped.txt", t.outside.display()),
        "echo x > link_out/escaped.txt".into(),
        "echo x > link_out_file".into(),
        format!("echo x > {}/readable/w.txt", t.root.display()),
        "echo x > /tmp/ambit-escaped.txt".into(),
        "ln -s /etc/passwd p && echo x >> p".into(),
    ] {
        let out = call("shell_execute", json!({"command": cmd}), &ctx).await.unwrap();
        assert_ne!(exit_code(&out), 0, "{cmd} succeeded at workspace: {out}");
    }
    assert_eq!(snapshot(&t.outside), before);
    assert!(!Path::new("/tmp/ambit-escaped.txt").exists());
    // At unrestricted nothing is sandboxed.
    let free = ctx_with(&t, Level::Unrestricted);
    let out = call("shell_execute", json!({"command": format!("echo x > {}/free.txt", t.outside.display())}), &free)
        .await
        .unwrap();
    assert_eq!(exit_code(&out), 0, "{out}");
}

#[tokio::test]
async fn shell_network_none_blocks_tcp_and_unrestricted_allows_it() {
    let t = tree("shell-net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5).close()'");
    let mut c = ctx(&t, Level::Workspace);
    let out = call("shell_execute", json!({"command": cmd}), &c).await.unwrap();
    assert_eq!(exit_code(&out), 0, "unrestricted network: {out}");
    for net in [Network::None, Network::Remote] {
        c.network = net;
        let out = call("shell_execute", json!({"command": cmd}), &c).await.unwrap();
        assert_ne!(exit_code(&out), 0, "network {net}: {out}");
        assert!(out.contains("PermissionError") || out.contains("Permission denied"), "{out}");
    }
}

#[tokio::test]
async fn shell_reports_exit_codes_caps_output_and_times_out() {
    let t = tree("shell-misc");
    let ctx = ctx(&t, Level::Read);
    let out = call("shell_execute", json!({"command": "echo out; echo err >&2; exit 3"}), &ctx).await.unwrap();
    assert_eq!(out, "exit code: 3\nstdout:\nout\nstderr:\nerr\n");
    let out = call("shell_execute", json!({"command": "head -c 100000 /dev/zero | tr '\\0' a"}), &ctx).await.unwrap();
    assert!(out.contains("characters of output not shown"), "{}", &out[..200]);
    assert!(out.chars().count() < 30_200);
    let e = call("shell_execute", json!({"command": "sleep 30", "timeout_seconds": 1}), &ctx).await.unwrap_err();
    assert_eq!(e, "the command timed out after 1 s and was killed");
    let e = call("shell_execute", json!({"command": "true", "timeout_seconds": 0}), &ctx).await.unwrap_err();
    assert!(e.contains("must be at least 1"), "{e}");
}

#[tokio::test]
async fn web_fetch_honours_the_network_setting() {
    let t = tree("web");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let body = if req.contains("x-probe: yes") { "probed" } else { "hello from loopback" };
            let resp = if req.starts_with("GET /to-metadata") {
                "HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\n\r\n"
                    .to_string()
            } else if req.starts_with("GET /redirect") {
                format!("HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/\r\ncontent-length: 0\r\n\r\n")
            } else {
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len())
            };
            let _ = s.write_all(resp.as_bytes()).await;
        }
    });
    let mut c = ctx(&t, Level::Read);
    let url = format!("http://127.0.0.1:{port}/");
    assert_eq!(call("web_fetch", json!({"url": url}), &c).await.unwrap(), "HTTP 200\n\nhello from loopback");
    let out = call(
        "web_fetch",
        json!({"url": format!("http://127.0.0.1:{port}/redirect"), "headers": {"x-probe": "yes"}}),
        &c,
    )
    .await
    .unwrap();
    assert_eq!(out, "HTTP 200\n\nprobed");
    assert_eq!(
        call("web_fetch", json!({"url": url, "max_length": 5}), &c).await.unwrap(),
        "HTTP 200\n\nhello\n[… 14 more characters of the body not shown]"
    );
    let e = call("web_fetch", json!({"url": url, "headers": "{\"a\":\"b\"}"}), &c).await.unwrap_err();
    assert!(e.contains("argument 'headers' must be an object, not a string"), "{e}");
    c.network = Network::Remote;
    let e = call("web_fetch", json!({"url": url}), &c).await.unwrap_err();
    assert!(e.contains("is this machine, which is not reachable under network: remote"), "{e}");
    let e = call("web_fetch", json!({"url": format!("http://localhost:{port}/")}), &c).await.unwrap_err();
    assert!(e.contains("not reachable under network: remote"), "{e}");
    // Link-local addresses (cloud metadata services) are refused like this machine's, by address and
    // through a redirect; nothing is sent to them.
    for meta in ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[::ffff:169.254.169.254]/"] {
        let e = call("web_fetch", json!({"url": meta}), &c).await.unwrap_err();
        assert!(e.contains("is link-local") && e.contains("not reachable under network: remote"), "{meta}: {e}");
    }
    // A policy that names this machine's address lets it through under remote (the control: the same
    // fetch refused above now reaches the server), and a redirect from there to the metadata address
    // is still refused.
    let named = ambit::Policy::level(Level::Read).allow_local_addresses(["127.0.0.1"]).unwrap();
    c.allow_local_addresses = named.allow_local_addresses.clone();
    assert_eq!(call("web_fetch", json!({"url": url}), &c).await.unwrap(), "HTTP 200\n\nhello from loopback");
    let e = call("web_fetch", json!({"url": format!("http://127.0.0.1:{port}/to-metadata")}), &c).await.unwrap_err();
    assert!(e.contains("169.254.169.254 is link-local"), "{e}");
    let e = ambit::Policy::level(Level::Read).allow_local_addresses(["metadata.internal"]).unwrap_err();
    assert!(e.to_string().contains("allow_local_addresses: 'metadata.internal' is not an IP address"), "{e}");
    c.network = Network::None;
    let e = call("web_fetch", json!({"url": url}), &c).await.unwrap_err();
    assert_eq!(e, "the network is off for this session (network: none)");
}
