//! The file tools and web_fetch under attack, through an Agent driven by the scripted test provider:
//! a file swapped for a symlink out (RENAME_EXCHANGE) while the model reads, searches and walks; FIFOs,
//! devices and sockets; a 3 GB sparse file and an endless HTTP body, with the peak memory measured in a
//! child process; FIFOs on a single-threaded runtime beside another run. Each attack has a negative
//! control showing the same attack succeeds against the naive way (open by path, read whole).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ambit::permission::{Access, WriteReach};
use ambit::tools::builtin;
use ambit::{Agent, Level, Network, OpenAiChat, Policy, RunResult, Scope};
use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

const SECRET: &str = "SECRET-d3adb33f-outside";
/// Set in a child process this test binary starts to measure peak memory: names what it runs.
const CHILD: &str = "AMBIT_FILE_HARDENING_CHILD";

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ambit-hardening-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

fn mkfifo(p: &Path) {
    // SAFETY: a NUL-terminated path valid for the call.
    assert_eq!(unsafe { libc::mkfifo(cpath(p).as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
}

/// One run: the model asks for `calls` (each `(name, arguments)`) in one turn, then answers "done".
async fn run(policy: Policy, calls: &[(&str, Value)], scratchpad: bool) -> RunResult {
    run_turns(policy, &[calls], scratchpad).await
}

/// One run over several turns, each asking for its calls at once; then the model answers "done".
async fn run_turns(policy: Policy, turns: &[&[(&str, Value)]], scratchpad: bool) -> RunResult {
    let mut exchanges: Vec<Value> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    let mut n = 0;
    for calls in turns {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|(name, args)| {
                n += 1;
                json!({"id": format!("c{n}"), "name": name, "arguments": args})
            })
            .collect();
        exchanges.push(json!({"respond": {"tool_calls": tool_calls}}));
        names.extend(calls.iter().map(|(name, _)| *name).filter(|name| !name.starts_with("scratchpad")));
    }
    exchanges.push(json!({"respond": {"content": "done"}}));
    let script: Script =
        serde_json::from_value(json!({"name": "file_hardening", "wire": "openai_chat", "exchanges": exchanges}))
            .unwrap();
    let provider = Provider::start(script).await.unwrap();
    names.sort();
    names.dedup();
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tools(names.iter().map(|name| builtin::by_name(name).unwrap()))
        .policy(policy)
        .scratchpad(scratchpad)
        .max_turns(turns.len() as u32 + 1)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.output, "done");
    assert_eq!(result.tool_calls.len(), n);
    result
}

/// The error text a tool's failure reaches the model as.
fn failed(tool: &str, message: &str) -> String {
    format!("Error: tool '{tool}' failed: {message}")
}

fn outside(given: &str) -> String {
    format!("path '{given}' is outside this session's reach")
}

fn not_regular(given: &str) -> String {
    format!("path '{given}' is not a regular file; the file tools open regular files only")
}

/// A thread exchanging `a` and `b` (RENAME_EXCHANGE) until told to stop; counts its swaps.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(a: &Path, b: &Path) -> Swapper {
        let (a, b) = (cpath(a), cpath(b));
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let (stop2, swaps2) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths, valid for the call.
                let rc = unsafe {
                    libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE)
                };
                assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
                swaps2.fetch_add(1, Ordering::Relaxed);
            }
        });
        Swapper { stop, swaps, thread: Some(thread) }
    }

    fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// ws/race/victim (a file inside) and ws/race/lnk (a symlink to the secret outside), for swapping.
fn race_tree(name: &str) -> (PathBuf, PathBuf, Scope) {
    let root = tempdir(name);
    let (ws, out) = (root.join("ws"), root.join("outside"));
    std::fs::create_dir_all(ws.join("race")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("race/victim"), "public data\n").unwrap();
    std::os::unix::fs::symlink(out.join("secret.txt"), ws.join("race/lnk")).unwrap();
    let scope = Scope::new(&ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    (ws, out, scope)
}

/// The attack: while a swapper exchanges a file inside and a symlink to a secret outside, the model
/// reads the file, searches it by name and walks its directory, thousands of times. The secret never
/// shows. The run continues until the race has been seen from both sides (a call that met the file,
/// one that met the link), bounded at 20,000 calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_swapped_with_a_symlink_out_never_leaks_through_read_search_or_walk() {
    let (ws, _out, scope) = race_tree("swap");
    let swapper = Swapper::start(&ws.join("race/victim"), &ws.join("race/lnk"));
    let calls: Vec<(&str, Value)> = (0..20)
        .flat_map(|_| {
            [
                ("file_read", json!({"path": "race/victim"})),
                ("file_search", json!({"pattern": "public|SECRET", "path": "race/victim"})),
                ("file_search", json!({"pattern": "public|SECRET", "path": "race"})),
                ("file_search", json!({"pattern": "public|SECRET"})),
                ("file_find", json!({"pattern": "**"})),
            ]
        })
        .collect();
    let (mut total, mut inside, mut refused) = (0usize, 0usize, 0usize);
    while total < 2_000 || ((inside == 0 || refused == 0) && total < 20_000) {
        let result = run(Policy::level(Level::Workspace).scope(scope.clone()), &calls, false).await;
        for call in &result.tool_calls {
            total += 1;
            assert!(
                !call.result.contains(SECRET),
                "{} {} leaked the secret: {}",
                call.name,
                call.arguments,
                call.result
            );
            if call.result.contains("public data") {
                inside += 1;
            }
            if call.result.contains("outside this session's reach") || call.result.contains("no such file") {
                refused += 1;
            }
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    println!("swap race: {total} calls, {swaps} swaps, {inside} saw the file inside, {refused} refused");
    assert!(
        swaps > 0 && inside > 0 && refused > 0,
        "the race was exercised: {swaps} swaps, {inside} inside, {refused} refused"
    );
}

/// The negative control: under the same swapper, the naive way (the old file_search: the scope's
/// check, then open by path; and a read_dir walk that trusts the entry's type) does return the secret,
/// so the attack above is real and its test can fail.
#[test]
fn negative_control_open_by_path_after_the_check_leaks_under_the_same_swapper() {
    let (ws, _out, scope) = race_tree("swap-naive");
    let swapper = Swapper::start(&ws.join("race/victim"), &ws.join("race/lnk"));
    let (mut by_path, mut by_walk) = (0u32, 0u32);
    for _ in 0..2_000_000 {
        if let Ok(resolved) = scope.check("race/victim", Access::Read, WriteReach::WorkspaceRoots)
            && std::fs::read_to_string(&resolved).is_ok_and(|t| t.contains(SECRET))
        {
            by_path += 1;
        }
        for e in std::fs::read_dir(ws.join("race")).unwrap().flatten() {
            if e.file_type().is_ok_and(|t| t.is_file())
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(SECRET))
            {
                by_walk += 1;
            }
        }
        if by_path > 0 && by_walk > 0 {
            break;
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    println!("naive: {swaps} swaps, leaked by path {by_path}, by walk {by_walk}");
    assert!(by_path > 0 && by_walk > 0, "the naive reads leaked: by path {by_path}, by walk {by_walk}");
}

/// A tree with special files: a FIFO and a unix socket inside the working directory, a FIFO outside.
struct Specials {
    root: PathBuf,
    ws: PathBuf,
    _socket: std::os::unix::net::UnixListener,
}

fn specials(name: &str) -> Specials {
    let root = tempdir(name);
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(root.join("outside")).unwrap();
    mkfifo(&ws.join("pipe"));
    mkfifo(&ws.join("pipe2"));
    mkfifo(&root.join("outside/pipe"));
    std::fs::write(ws.join("plain.txt"), "plain text\n").unwrap();
    let socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    Specials { root, ws, _socket: socket }
}

/// FIFOs, a socket and devices are refused by every file tool with one sentence, whatever their kind;
/// outside reach, a FIFO is refused in exactly the words of a path that does not exist. A regular file
/// beside them is read: the refusal is about the kind, not the place.
#[tokio::test]
async fn special_files_are_refused_in_one_sentence_and_outside_reach_like_missing_ones() {
    let s = specials("special");
    let confined = Scope::new(&s.ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let specials_inside = ["pipe", "sock", "./pipe2"];
    let mut calls: Vec<(&str, Value)> = Vec::new();
    for p in specials_inside {
        calls.push(("file_read", json!({"path": p})));
        calls.push(("file_search", json!({"pattern": "x", "path": p})));
        calls.push(("file_edit", json!({"path": p, "old_text": "a", "new_text": "b"})));
        calls.push(("file_write", json!({"path": p, "content": "x"})));
    }
    calls.push(("file_read", json!({"path": "plain.txt"})));
    let result = run(Policy::level(Level::Workspace).scope(confined.clone()), &calls, false).await;
    for call in &result.tool_calls {
        let path = call.arguments["path"].as_str().unwrap();
        if path == "plain.txt" {
            assert_eq!(call.result, "plain text\n");
        } else {
            assert_eq!(call.result, failed(&call.name, &not_regular(path)), "{}", call.name);
        }
    }

    // Outside reach: an existing FIFO, a missing file and a device read the same.
    let out_fifo = s.root.join("outside/pipe").display().to_string();
    let out_missing = s.root.join("outside/missing").display().to_string();
    let mut calls = Vec::new();
    for p in [
        out_fifo.as_str(),
        out_missing.as_str(),
        "../outside/pipe",
        "../outside/missing",
        "/dev/zero",
        "/dev/nonexistent",
    ] {
        for tool in ["file_read", "file_search", "file_find", "file_write", "file_edit"] {
            let args = match tool {
                "file_read" => json!({"path": p}),
                "file_search" | "file_find" => json!({"pattern": "x", "path": p}),
                "file_write" => json!({"path": p, "content": "x"}),
                _ => json!({"path": p, "old_text": "a", "new_text": "b"}),
            };
            calls.push((tool, args));
        }
    }
    let result = run(Policy::level(Level::Workspace).scope(confined), &calls, false).await;
    for call in &result.tool_calls {
        let path = call.arguments["path"].as_str().unwrap();
        assert_eq!(call.result, failed(&call.name, &outside(path)), "{} {path}", call.name);
    }

    // Reads not confined: devices are in reach, and refused as not regular files.
    let open = Scope::new(&s.ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), false).unwrap();
    let mut calls = Vec::new();
    for p in ["/dev/zero", "/dev/urandom", "/dev/null", out_fifo.as_str()] {
        calls.push(("file_read", json!({"path": p})));
        calls.push(("file_search", json!({"pattern": "x", "path": p})));
    }
    calls.push(("file_read", json!({"path": "/dev/nonexistent"})));
    let result = run(Policy::level(Level::Read).scope(open), &calls, false).await;
    for call in &result.tool_calls {
        let path = call.arguments["path"].as_str().unwrap();
        let want = if path == "/dev/nonexistent" {
            failed(&call.name, "no such file or directory: /dev/nonexistent")
        } else {
            failed(&call.name, &not_regular(path))
        };
        assert_eq!(call.result, want);
    }
}

/// The negative control for the FIFOs: opened the naive way (by path, for reading), a FIFO blocks the
/// opening thread, seen from /proc as a thread sitting in openat(2) until a writer comes.
#[test]
fn negative_control_a_naive_open_of_a_fifo_blocks() {
    let s = specials("fifo-naive");
    let fifo = s.ws.join("pipe");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::fs::File::open(&fifo).map(|_| ())
        })
    };
    let tid = rx.recv().unwrap();
    let mut blocked = false;
    for _ in 0..60_000 {
        let syscall = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
        if syscall.split_whitespace().next() == Some(libc::SYS_openat.to_string().as_str()) {
            blocked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Let it go: a writer opening (non-blocking, now that a reader waits) ends the open.
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .expect("a reader is waiting on the FIFO");
    reader.join().unwrap().unwrap();
    drop(writer);
    assert!(blocked, "the naive open of a FIFO was seen blocked in openat");
}

use std::os::unix::fs::OpenOptionsExt;

/// Two runs on one single-threaded runtime: one whose model reads, edits and writes FIFOs (at once, in
/// one turn), and one reading a plain file. Both finish: no file tool blocks the runtime's only worker.
/// The old code opened the FIFOs by path on that worker, so neither run could ever finish; a watchdog
/// on another thread turns that into a failure instead of a hang.
#[test]
fn fifos_never_stall_the_runtime_for_other_runs() {
    let s = specials("stall");
    let ws = s.ws.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let outcome = rt.block_on(async move {
            let scope = Scope::new(&ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
            let fifo_calls = vec![
                ("file_read", json!({"path": "pipe"})),
                ("file_read", json!({"path": "pipe2"})),
                ("file_edit", json!({"path": "pipe", "old_text": "a", "new_text": "b"})),
                ("file_write", json!({"path": "pipe2", "content": "x"})),
            ];
            let plain_calls = vec![("file_read", json!({"path": "plain.txt"}))];
            let fifos = run(Policy::level(Level::Workspace).scope(scope.clone()), &fifo_calls, false);
            let plain = run(Policy::level(Level::Workspace).scope(scope), &plain_calls, false);
            let (fifos, plain) = tokio::join!(fifos, plain);
            (fifos.tool_calls.iter().map(|c| c.result.clone()).collect::<Vec<_>>(), plain.tool_calls[0].result.clone())
        });
        let _ = tx.send(outcome);
    });
    let (fifos, plain) = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("the runs finished: a file tool blocked the runtime's only worker");
    assert_eq!(plain, "plain text\n");
    assert_eq!(
        fifos,
        vec![
            failed("file_read", &not_regular("pipe")),
            failed("file_read", &not_regular("pipe2")),
            failed("file_edit", &not_regular("pipe")),
            failed("file_write", &not_regular("pipe2")),
        ]
    );
}

#[path = "support/rss.rs"]
mod rss;
use rss::peak_rss_kib;

/// Runs this test binary's test `test` alone in a child process with [`CHILD`] set to `mode`; answers
/// the child's peak memory in KiB, which it prints as `PEAK_RSS_KIB=<n>`.
fn child_peak(test: &str, mode: &str) -> u64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child {mode} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let peak = stdout
        .lines()
        .find_map(|l| l.split_once("PEAK_RSS_KIB=").map(|(_, n)| n))
        .unwrap_or_else(|| panic!("child {mode} printed no peak:\n{stdout}"));
    peak.trim().parse().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A bound far under what a whole read of either hostile input would take (the controls below read
/// 256 MiB and go past it), and far over what the bounded readers need.
const PEAK_BOUND_KIB: u64 = 160 * 1024;
/// The size of the inputs the negative controls read whole.
const CONTROL_BYTES: u64 = 256 << 20;

/// A 3 GB sparse file (`truncate -s 3G`) read, searched by name, searched in a walk, and /dev/zero: the
/// answers are clipped, and the peak memory of the process doing it stays under [`PEAK_BOUND_KIB`].
/// The negative control reads a 256 MiB sparse file whole (as the old file_read did) in the same kind
/// of child, and its peak goes past the bound.
#[test]
fn a_3gb_sparse_file_is_read_and_searched_in_bounded_memory() {
    let test = "a_3gb_sparse_file_is_read_and_searched_in_bounded_memory";
    if let Ok(mode) = std::env::var(CHILD) {
        return sparse_child(&mode);
    }
    let bounded = child_peak(test, "bounded");
    let naive = child_peak(test, "naive");
    println!(
        "peak RSS: bounded file tools on a 3 GB sparse file {bounded} KiB; naive whole read of 256 MiB {naive} KiB"
    );
    assert!(bounded < PEAK_BOUND_KIB, "the file tools' peak {bounded} KiB is under {PEAK_BOUND_KIB} KiB");
    assert!(naive > PEAK_BOUND_KIB, "the naive whole read's peak {naive} KiB is over {PEAK_BOUND_KIB} KiB");
}

fn sparse_child(mode: &str) {
    let dir = tempdir(&format!("sparse-{mode}"));
    let big = dir.join("big.bin");
    if mode == "naive" {
        std::fs::File::create(&big).unwrap().set_len(CONTROL_BYTES).unwrap();
        let bytes = std::fs::read(&big).unwrap();
        assert_eq!(bytes.len() as u64, CONTROL_BYTES);
        std::fs::remove_dir_all(&dir).unwrap();
        println!("PEAK_RSS_KIB={}", peak_rss_kib());
        return;
    }
    // `truncate -s 3G`: all hole, all zero bytes.
    let status = std::process::Command::new("truncate").args(["-s", "3G"]).arg(&big).status().unwrap();
    assert!(status.success());
    // Text lines, then a hole to 3 GB: not binary at its head, so file_search reads it up to its bound.
    let text = dir.join("text-then-hole.txt");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&text).unwrap();
        for i in 0..2000 {
            writeln!(f, "line {i} needle").unwrap();
        }
        f.set_len(3 << 30).unwrap();
    }
    let scope = Scope::new(&dir, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), false).unwrap();
    let calls = vec![
        ("file_read", json!({"path": "big.bin"})),
        ("file_read", json!({"path": "big.bin", "offset": 2, "limit": 1})),
        ("file_read", json!({"path": "text-then-hole.txt", "offset": 1990})),
        ("file_search", json!({"pattern": "needle", "path": "big.bin"})),
        ("file_search", json!({"pattern": "needle", "path": "text-then-hole.txt", "scratchpad": "hits"})),
        ("file_search", json!({"pattern": "needle"})),
        ("file_edit", json!({"path": "big.bin", "old_text": "a", "new_text": "b"})),
        ("file_read", json!({"path": "/dev/zero"})),
        ("file_search", json!({"pattern": "x", "path": "/dev/zero"})),
    ];
    let result = runtime().block_on(run(Policy::level(Level::Workspace).scope(scope), &calls, true));
    let r: Vec<&str> = result.tool_calls.iter().map(|c| c.result.as_str()).collect();
    assert!(r[0].starts_with("\0\0\0") && r[0].chars().count() < 262_144 + 300, "{}", r[0].len());
    assert!(
        r[0].ends_with("[… 3220963328 more bytes of the file not shown: file_read returns at most 262144 characters; use offset and limit to read further]"),
        "{}",
        &r[0][r[0].len() - 200..]
    );
    assert_eq!(
        r[1],
        "Error: tool 'file_read' failed: offset 2 lies past the first 1 GiB of big.bin, the most file_read reads through to reach a line"
    );
    assert!(r[2].starts_with("line 1989 needle\n"), "{}", &r[2][..100]);
    assert!(r[2].ends_with("use offset and limit to read further]"), "{}", &r[2][r[2].len() - 200..]);
    assert_eq!(r[3], "no matches", "a binary file is skipped");
    assert!(r[4].starts_with("Saved "), "{}", r[4]);
    assert!(r[5].starts_with("text-then-hole.txt:1: line 0 needle\n"), "{}", &r[5][..100]);
    assert!(r[5].contains("[… 1900 more matches not shown; the cap is 100]"), "{}", r[5]);
    assert!(
        r[5].ends_with("[1 file(s) were searched only in their first 16 MiB, the most file_search reads of one file]\n[1 line(s) longer than 64 KiB were matched on their first 64 KiB only]"),
        "{r:?}",
        r = &r[5][r[5].len() - 300..]
    );
    assert_eq!(r[6], "Error: tool 'file_edit' failed: big.bin is larger than 32 MiB, the largest file file_edit edits");
    assert_eq!(r[7], failed("file_read", &not_regular("/dev/zero")));
    assert_eq!(r[8], failed("file_search", &not_regular("/dev/zero")));
    std::fs::remove_dir_all(&dir).unwrap();
    println!("PEAK_RSS_KIB={}", peak_rss_kib());
}

/// A loopback HTTP server answering every request with 200 and a body: endless (chunked, until the
/// client goes away) or `len` bytes.
async fn body_server(len: Option<u64>) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let chunk = vec![b'a'; 64 << 10];
                match len {
                    None => {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let framed = [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk, b"\r\n".to_vec()].concat();
                        while s.write_all(&framed).await.is_ok() {}
                    }
                    Some(n) => {
                        let head =
                            format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {n}\r\n\r\n");
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let mut left = n;
                        while left > 0 {
                            let k = left.min(chunk.len() as u64) as usize;
                            if s.write_all(&chunk[..k]).await.is_err() {
                                return;
                            }
                            left -= k as u64;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// web_fetch against an endless body: by default, with a huge max_length, and saved to the scratchpad
/// (which lifts the length limit, not the byte ceiling). Each ends with the body cut and a note naming
/// the limit, and the process's peak memory stays under [`PEAK_BOUND_KIB`]. The negative control
/// reads a 256 MiB body whole (as the old web_fetch did) and goes past the bound.
#[test]
fn an_endless_http_body_is_fetched_in_bounded_memory() {
    let test = "an_endless_http_body_is_fetched_in_bounded_memory";
    if let Ok(mode) = std::env::var(CHILD) {
        return fetch_child(&mode);
    }
    let bounded = child_peak(test, "bounded");
    let naive = child_peak(test, "naive");
    println!("peak RSS: web_fetch of an endless body {bounded} KiB; naive whole read of a 256 MiB body {naive} KiB");
    assert!(bounded < PEAK_BOUND_KIB, "web_fetch's peak {bounded} KiB is under {PEAK_BOUND_KIB} KiB");
    assert!(naive > PEAK_BOUND_KIB, "the naive whole read's peak {naive} KiB is over {PEAK_BOUND_KIB} KiB");
}

fn fetch_child(mode: &str) {
    runtime().block_on(async {
        if mode == "naive" {
            let addr = body_server(Some(CONTROL_BYTES)).await;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let body = reqwest::get(format!("http://{addr}/")).await.unwrap().text().await.unwrap();
            assert_eq!(body.len() as u64, CONTROL_BYTES);
            println!("PEAK_RSS_KIB={}", peak_rss_kib());
            return;
        }
        let addr = body_server(None).await;
        let url = format!("http://{addr}/");
        let calls = vec![
            ("web_fetch", json!({"url": url})),
            ("web_fetch", json!({"url": url, "max_length": 1_000_000_000})),
            ("web_fetch", json!({"url": url, "scratchpad": "page"})),
        ];
        let list = vec![("scratchpad_list", json!({}))];
        let scope = Scope::new(std::env::temp_dir(), Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), false).unwrap();
        let policy = Policy::level(Level::Read).scope(scope).network(Network::Unrestricted);
        let result = run_turns(policy, &[&calls, &list], true).await;
        let r: Vec<&str> = result.tool_calls.iter().map(|c| c.result.as_str()).collect();
        assert!(r[0].starts_with("HTTP 200\n\naaaa"), "{}", &r[0][..50]);
        let a = r[0].trim_start_matches("HTTP 200\n\n");
        assert_eq!(a.find('\n'), Some(100_000), "max_length characters, then the note");
        assert!(
            a.ends_with(
                "[… more of the body not shown: reading stopped after 465536 bytes, enough for max_length 100000]"
            ),
            "{}",
            &a[100_000..]
        );
        let b = r[1].trim_start_matches("HTTP 200\n\n");
        assert_eq!(b.find('\n'), Some(1 << 20), "the inline ceiling's worth of characters");
        assert!(
            b.ends_with("[… more of the body not shown: web_fetch reads at most 1 MiB of a body for an answer returned inline; save it to the scratchpad to read up to 8 MiB]"),
            "{}",
            &b[1 << 20..]
        );
        assert!(r[2].starts_with("Saved "), "{}", r[2]);
        // The saved entry: the status line, the ceiling's worth of the body and the note.
        let want = "HTTP 200\n\n".len()
            + (8 << 20)
            + "\n[… more of the body not shown: web_fetch reads at most 8 MiB of a body]".chars().count();
        assert_eq!(r[3], format!("page: {want} characters"));
        println!("PEAK_RSS_KIB={}", peak_rss_kib());
    });
}

/// scratchpad_save_file writes through the file tools' one open path: a FIFO is refused at once (the old
/// write by path waited for a reader forever, and the run with it), a link out is refused as outside
/// reach, and a plain path in the workspace is written (the control).
#[tokio::test]
async fn scratchpad_save_file_refuses_fifos_and_links_out() {
    let s = specials("save");
    std::os::unix::fs::symlink(s.root.join("outside/target.txt"), s.ws.join("link_out")).unwrap();
    let scope = Scope::new(&s.ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let write = [("scratchpad_write", json!({"name": "n", "content": "hello"}))];
    let save: Vec<(&str, Value)> = ["pipe", "link_out", "../outside/x.txt", "saved.txt"]
        .iter()
        .map(|p| ("scratchpad_save_file", json!({"name": "n", "path": p})))
        .collect();
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        run_turns(Policy::level(Level::Workspace).scope(scope), &[&write, &save], true),
    )
    .await
    .expect("the run finished: a save to a FIFO does not wait for a reader");
    let r: Vec<&str> = result.tool_calls.iter().map(|c| c.result.as_str()).collect();
    assert_eq!(r[1], failed("scratchpad_save_file", &not_regular("pipe")));
    assert_eq!(r[2], failed("scratchpad_save_file", &outside("link_out")));
    assert_eq!(r[3], failed("scratchpad_save_file", &outside("../outside/x.txt")));
    assert_eq!(r[4], format!("Saved scratchpad 'n' (5 bytes) to {}.", s.ws.join("saved.txt").display()));
    assert_eq!(std::fs::read_to_string(s.ws.join("saved.txt")).unwrap(), "hello");
    assert!(!s.root.join("outside/target.txt").exists() && !s.root.join("outside/x.txt").exists());
}
