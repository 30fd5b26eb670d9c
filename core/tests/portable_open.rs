//! The file tools as they run off Linux (macOS, iOS, Windows), exercised here on Linux through the test
//! switch `ambit::testing::force_portable_file_open`: every path is opened by path, each component
//! looked at without following it, and the opened descriptor's device and inode compared with the
//! path's. Through an Agent driven by the scripted test provider: the tools work, links out are
//! refused, and a path component (a directory) or the file itself swapped for a symlink out in a loop
//! never leaks the file outside; the negative control shows the same swapper makes a naive open by
//! path after the scope's check read it.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ambit::permission::{Access, WriteReach};
use ambit::tools::builtin;
use ambit::{Agent, Level, OpenAiChat, Policy, RunResult, Scope};
use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

const SECRET: &str = "SECRET-portable-0ff11nux";

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ambit-portable-open-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

/// One run: the model asks for `calls` in one turn, then answers "done".
async fn run(scope: &Scope, calls: &[(&str, Value)]) -> RunResult {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    let script: Script = serde_json::from_value(json!({"name": "portable_open", "wire": "openai_chat", "exchanges": [
        {"respond": {"tool_calls": tool_calls}},
        {"respond": {"content": "done"}}
    ]}))
    .unwrap();
    let provider = Provider::start(script).await.unwrap();
    let mut names: Vec<&str> = calls.iter().map(|(n, _)| *n).collect();
    names.sort();
    names.dedup();
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .tools(names.iter().map(|n| builtin::by_name(n).unwrap()))
        .policy(Policy::level(Level::Workspace).scope(scope.clone()))
        .max_turns(2)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!((result.output.as_str(), result.tool_calls.len()), ("done", calls.len()));
    result
}

/// ws/ (the working directory, reads confined) and outside/ holding the secret.
fn tree(name: &str) -> (PathBuf, PathBuf, Scope) {
    let root = tempdir(name);
    let (ws, out) = (root.join("ws"), root.join("outside"));
    std::fs::create_dir_all(ws.join("race/dir")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("f"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("race/dir/f"), "public data\n").unwrap();
    std::fs::write(ws.join("race/victim"), "public data\n").unwrap();
    std::os::unix::fs::symlink(&out, ws.join("race/dl")).unwrap();
    std::os::unix::fs::symlink(out.join("f"), ws.join("race/lnk")).unwrap();
    let scope = Scope::new(&ws, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    (ws, out, scope)
}

#[tokio::test]
async fn the_file_tools_work_by_path_and_refuse_links_out() {
    ambit::testing::force_portable_file_open(true);
    let (ws, out, scope) = tree("tools");
    let calls = [
        ("file_write", json!({"path": "new/../notes.txt", "content": "alpha\nbeta\n"})),
        ("file_read", json!({"path": "notes.txt"})),
        ("file_edit", json!({"path": "notes.txt", "old_text": "beta", "new_text": "gamma"})),
        ("file_search", json!({"pattern": "gamma|public"})),
        ("file_find", json!({"pattern": "**/f"})),
        ("file_read", json!({"path": "race/dl/f"})),
        ("file_read", json!({"path": "race/lnk"})),
        ("file_write", json!({"path": "race/lnk", "content": "overwritten"})),
        ("file_write", json!({"path": "race/dl/new", "content": "planted"})),
    ];
    // One run per call: calls in one turn may run at once, and these depend on each other's order.
    let mut results = Vec::new();
    for call in calls {
        results.push(run(&scope, std::slice::from_ref(&call)).await.tool_calls.remove(0).result);
    }
    let r: Vec<&str> = results.iter().map(String::as_str).collect();
    assert!(r[1].contains("alpha") && r[1].contains("beta"), "{}", r[1]);
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "alpha\ngamma\n");
    assert!(r[3].contains("notes.txt") && r[3].contains("race/dir/f"), "{}", r[3]);
    assert!(r[4].contains("race/dir/f") && !r[4].contains("dl/f"), "{}", r[4]);
    for (i, given) in [(5, "race/dl/f"), (6, "race/lnk"), (7, "race/lnk"), (8, "race/dl/new")] {
        assert!(r[i].contains(&format!("path '{given}' is outside this session's reach")), "{i}: {}", r[i]);
    }
    assert!(r.iter().all(|t| !t.contains(SECRET)));
    assert_eq!(std::fs::read_to_string(out.join("f")).unwrap(), format!("{SECRET}\n"));
    assert!(!out.join("new").exists());
}

/// A thread exchanging `a` and `b` (RENAME_EXCHANGE) until dropped; counts its swaps.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(a: &Path, b: &Path) -> Swapper {
        let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let (a, b) = (c(a), c(b));
        let (stop, swaps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
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
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The attack: `race/dir` (a directory inside) and `race/dl` (a symlink to the directory outside that
/// holds a file of the same name) exchanged in a loop, and likewise the file `race/victim` and a
/// symlink to the secret, while the model reads, searches and walks through them, thousands of
/// times. The secret never shows; the run goes on until both sides of the race were seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_or_file_swapped_for_a_link_out_never_leaks_by_path() {
    ambit::testing::force_portable_file_open(true);
    let (ws, _out, scope) = tree("race");
    let dirs = Swapper::start(&ws.join("race/dir"), &ws.join("race/dl"));
    let files = Swapper::start(&ws.join("race/victim"), &ws.join("race/lnk"));
    let calls: Vec<(&str, Value)> = (0..10)
        .flat_map(|_| {
            [
                ("file_read", json!({"path": "race/dir/f"})),
                ("file_read", json!({"path": "race/victim"})),
                ("file_search", json!({"pattern": "public|SECRET", "path": "race/dir/f"})),
                ("file_search", json!({"pattern": "public|SECRET", "path": "race"})),
                ("file_find", json!({"pattern": "**"})),
            ]
        })
        .collect();
    let (mut total, mut inside, mut refused) = (0usize, 0usize, 0usize);
    while total < 2_000 || ((inside == 0 || refused == 0) && total < 20_000) {
        for call in &run(&scope, &calls).await.tool_calls {
            total += 1;
            assert!(!call.result.contains(SECRET), "{} {} leaked: {}", call.name, call.arguments, call.result);
            inside += usize::from(call.result.contains("public data"));
            refused += usize::from(
                call.result.contains("outside this session's reach") || call.result.contains("no such file"),
            );
        }
    }
    let swaps = dirs.swaps.load(Ordering::Relaxed) + files.swaps.load(Ordering::Relaxed);
    drop((dirs, files));
    println!("portable swap race: {total} calls, {swaps} swaps, {inside} saw the file inside, {refused} refused");
    assert!(swaps > 0 && inside > 0 && refused > 0, "the race ran: {swaps} swaps, {inside} inside, {refused} refused");
}

/// The negative control: under the same swapper of a directory and a link out, the scope's check and
/// then an open by path (what the portable method does before its comparison) reads the secret.
#[test]
fn negative_control_an_open_by_path_after_the_check_leaks_under_the_component_swapper() {
    let (ws, _out, scope) = tree("naive");
    let dirs = Swapper::start(&ws.join("race/dir"), &ws.join("race/dl"));
    let mut leaked = 0u32;
    for _ in 0..2_000_000 {
        if let Ok(resolved) = scope.check("race/dir/f", Access::Read, WriteReach::WorkspaceRoots)
            && std::fs::read_to_string(&resolved).is_ok_and(|t| t.contains(SECRET))
        {
            leaked += 1;
            break;
        }
    }
    let swaps = dirs.swaps.load(Ordering::Relaxed);
    drop(dirs);
    println!("naive open by path: {swaps} swaps, leaked {leaked}");
    assert!(leaked > 0, "the naive open by path leaked the secret under the swapper");
}
