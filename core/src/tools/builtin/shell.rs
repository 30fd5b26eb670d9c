//! shell_execute: `sh -c COMMAND` (`cmd.exe /C` on Windows) in the working directory. Below
//! `unrestricted` it runs in the sandbox of [`super::sandbox`] (read-only at `read`, writable only under
//! the workspace roots at `workspace`, no network under `none`, and `remote` held as `none`); when this
//! kernel cannot make it read-only, and on every platform but Linux (no sandbox backend), the tool
//! requires `unrestricted` (SPEC §1) and its description says why. On Linux every process a call starts
//! ends with the call, at every level; elsewhere see the no-backend module (`sandbox_none.rs`).
//! Output is streamed: the head and the tail are kept, in memory bounded by [`OUTPUT_CAP`].

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::sandbox::{Plan, SHELL, features, stop_call};
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The most characters of output returned (the head and the tail are kept).
pub const OUTPUT_CAP: usize = 30_000;
const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 600;
/// How long the supervisor gets to end the call's processes after it is told to, before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

/// Whether the shell can run sandboxed on this kernel (read-only at `read`): see
/// [`super::sandbox::Features::read_only`].
pub fn sandbox_available() -> bool {
    features().read_only()
}

/// shell_execute.
pub struct ShellExecute {
    spec: ToolSpec,
}

impl ShellExecute {
    /// The tool.
    pub fn new() -> Self {
        let f = features();
        let level = if f.read_only() { Level::Read } else { Level::Unrestricted };
        let description = format!(
            "Runs a shell command (sh -c) in the working directory and returns its exit code and output; every process it starts ends when the call ends. Below unrestricted it runs sandboxed: at read nothing outside the sandbox changes (files, their metadata, other processes, devices), at workspace only the workspace roots change; device nodes are never created; unix sockets are refused; under network none nothing is reachable, and remote is held as none (no network at all). {}",
            f.describe()
        );
        ShellExecute {
            spec: ToolSpec::new(
                "shell_execute",
                description,
                json!({"type": "object", "properties": {
                    "command": {"type": "string"},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "description": "Default 120, at most 600"}
                }, "required": ["command"], "additionalProperties": false}),
            )
            .with_level(level),
        }
    }
}

impl Default for ShellExecute {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes kept at each end of a stream: half the cap in characters of up to four bytes, and one more
/// character's worth for a cut in the middle of one.
const KEEP: usize = OUTPUT_CAP / 2 * 4 + 4;

/// One output stream as it arrives: its first [`KEEP`] bytes, its last [`KEEP`] bytes, and how many
/// characters fell between them.
#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Characters (UTF-8 lead bytes) dropped between the head and the tail.
    dropped: usize,
}

/// Whether `b` starts a character (is not a UTF-8 continuation byte).
fn starts_char(b: u8) -> bool {
    b & 0xC0 != 0x80
}

impl Kept {
    fn push(&mut self, mut data: &[u8]) {
        if self.head.len() < KEEP {
            let n = (KEEP - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        self.tail.extend(data);
        if self.tail.len() > KEEP {
            let excess = self.tail.len() - KEEP;
            self.dropped += self.tail.drain(..excess).filter(|&b| starts_char(b)).count();
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    fn last_byte(&self) -> Option<u8> {
        self.tail.back().or(self.head.last()).copied()
    }

    /// The stream as pieces of text, with the characters not kept between them.
    fn pieces(self, out: &mut Vec<Piece>) {
        let mut tail: Vec<u8> = self.tail.into();
        if self.dropped == 0 {
            let mut all = self.head;
            all.append(&mut tail);
            out.push(Piece::Text(String::from_utf8_lossy(&all).into_owned()));
            return;
        }
        // Cut at character boundaries: a character split by the gap counts as not shown.
        let mut head = self.head;
        let mut dropped = self.dropped;
        if let Some(start) = head.iter().rposition(|&b| starts_char(b))
            && std::str::from_utf8(&head[start..]).is_err()
        {
            head.truncate(start);
            dropped += 1;
        }
        let skip = tail.iter().position(|&b| starts_char(b)).unwrap_or(tail.len());
        out.push(Piece::Text(String::from_utf8_lossy(&head).into_owned()));
        out.push(Piece::Gap(dropped));
        out.push(Piece::Text(String::from_utf8_lossy(&tail[skip..]).into_owned()));
    }
}

/// Part of the result text: known text, or a count of characters not kept.
enum Piece {
    Text(String),
    Gap(usize),
}

/// The result text: the exit code, then stdout and stderr, the head and the tail kept when it is longer
/// than [`OUTPUT_CAP`] characters.
fn render(code: &str, out: Kept, err: Kept) -> String {
    let mut pieces = vec![Piece::Text(format!("exit code: {code}\n"))];
    let out_ends_line = out.last_byte().is_none_or(|b| b == b'\n');
    if !out.is_empty() {
        pieces.push(Piece::Text("stdout:\n".into()));
        out.pieces(&mut pieces);
    }
    if !err.is_empty() {
        pieces.push(Piece::Text(format!("{}stderr:\n", if out_ends_line { "" } else { "\n" })));
        err.pieces(&mut pieces);
    }
    let n: usize = pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.chars().count(),
            Piece::Gap(g) => *g,
        })
        .sum();
    if n <= OUTPUT_CAP {
        return pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                Piece::Gap(_) => None,
            })
            .collect();
    }
    let half = OUTPUT_CAP / 2;
    let mut head = String::new();
    let mut want = half;
    for p in &pieces {
        match p {
            Piece::Text(t) => {
                head.extend(t.chars().take(want));
                want -= t.chars().count().min(want);
            }
            Piece::Gap(_) => break,
        }
        if want == 0 {
            break;
        }
    }
    let mut tail_parts: Vec<String> = Vec::new();
    let mut want = half;
    for p in pieces.iter().rev() {
        match p {
            Piece::Text(t) => {
                let c = t.chars().count();
                let take = c.min(want);
                tail_parts.push(t.chars().skip(c - take).collect());
                want -= take;
            }
            Piece::Gap(_) => break,
        }
        if want == 0 {
            break;
        }
    }
    let tail: String = tail_parts.into_iter().rev().collect();
    format!("{head}\n[… {} characters of output not shown …]\n{tail}", n - OUTPUT_CAP)
}

/// The most of an output line a progress note carries.
const NOTE_CAP: usize = 200;

/// The progress note for a chunk of output: its last non-blank line, cut to [`NOTE_CAP`] characters.
fn progress_note(chunk: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(chunk);
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let cut: String = line.chars().take(NOTE_CAP).collect();
    Some(if cut.len() < line.len() { format!("{cut}…") } else { cut })
}

/// Reads a stream to its end into a [`Kept`], through a fixed buffer. In a background call, each chunk's
/// last line is the task's progress note as it comes (SPEC §5), which is also its heartbeat: a long
/// command that writes output is not failed as dead.
async fn keep(mut r: impl AsyncRead + Unpin) -> std::io::Result<Kept> {
    let mut kept = Kept::default();
    let mut buf = vec![0u8; 64 * 1024];
    let task = crate::agent::background::TaskHandle::current();
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(kept);
        }
        if let (Some(task), Some(note)) = (&task, progress_note(&buf[..n])) {
            task.progress(note);
        }
        kept.push(&buf[..n]);
    }
}

/// The supervisor of a running call ([`super::sandbox`]). Dropped before the call ended (the run was
/// cancelled, the future dropped), it tells the supervisor to end every process the call started.
struct Running {
    child: tokio::process::Child,
    pid: Option<u32>,
    ended: bool,
}

impl Running {
    /// Tells the supervisor to end the call, unless it has already ended (been reaped: its pid may then
    /// be another process's).
    fn stop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        if let Some(pid) = self.pid {
            stop_call(&mut self.child, pid);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.ended {
            // The runtime reaps the supervisor once it has ended everything.
            self.stop();
        }
    }
}

#[async_trait]
impl Tool for ShellExecute {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn confinement(&self) -> Option<String> {
        Some(features().describe())
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("shell_execute runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let command = args.get("command").and_then(Value::as_str).unwrap_or_default().to_string();
        let timeout =
            args.get("timeout_seconds").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT_SECS).min(MAX_TIMEOUT_SECS);
        let sandboxed = ctx.level != Level::Unrestricted;
        if sandboxed && !sandbox_available() {
            return Err(fail(format!("the shell runs only at unrestricted here: {}", features().describe())));
        }
        let plan = Plan::for_call(ctx, timeout).map_err(|e| fail(format!("the sandbox could not be prepared: {e}")))?;
        let [shell, flag] = SHELL;
        let mut cmd = tokio::process::Command::new(shell);
        // Credentials (crate::credentials): the variables backing `env` credentials are taken out, and
        // those the broker's shell rules name are set.
        if let Some(c) = &ctx.credentials {
            for var in c.source_variables() {
                cmd.env_remove(var);
            }
            cmd.envs(c.shell_environment().await.map_err(fail)?);
        }
        cmd.arg(flag)
            .arg(&command)
            .current_dir(&ctx.scope.working_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        plan.apply(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| fail(format!("the shell could not start: {e}")))?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let stderr = child.stderr.take().ok_or_else(|| fail("no stderr"))?;
        let pid = child.id();
        let mut running = Running { child, pid, ended: false };
        // The supervisor exits only once every process of the call has ended, so the pipes then close.
        let run = async {
            let (out, err, status) = tokio::join!(keep(stdout), keep(stderr), running.child.wait());
            let status = status.map_err(fail)?;
            Ok::<_, ToolError>((status, out.map_err(fail)?, err.map_err(fail)?))
        };
        let outcome = tokio::time::timeout(Duration::from_secs(timeout), run).await;
        let (status, out, err) = match outcome {
            Ok(r) => {
                running.ended = true;
                r?
            }
            Err(_) => {
                running.stop();
                if tokio::time::timeout(STOP_GRACE, running.child.wait()).await.is_err() {
                    let _ = running.child.start_kill();
                }
                running.ended = true;
                return Err(fail(format!("the command timed out after {timeout} s and was killed")));
            }
        };
        let code = status.code().map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
        Ok(Value::String(render(&code, out, err)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_a_background_call_each_chunk_of_output_is_a_progress_note() {
        use crate::agent::background::Tasks;
        use tokio::io::AsyncWriteExt;
        let tasks = std::sync::Arc::new(Tasks::default());
        tokio::spawn(tasks.driver());
        let events = crate::agent::events::Emitter::default();
        let long = "x".repeat(500);
        let id = tasks
            .spawn("shell_execute", &events, async move {
                let (mut w, r) = tokio::io::duplex(4096);
                w.write_all(format!("step 1\n{long}\n\n").as_bytes()).await.unwrap();
                drop(w);
                let kept = keep(r).await.unwrap();
                (format!("{}", !kept.is_empty()), false, Vec::new())
            })
            .await
            .unwrap();
        let report = tasks.next_report(Duration::from_secs(60)).await.unwrap();
        assert_eq!((report.id.as_str(), report.result.as_str()), (id.as_str(), "true"));
        // The last non-blank line, cut to the cap.
        let listed = tasks.list();
        assert!(listed.contains(&format!("latest note: {}…", "x".repeat(NOTE_CAP))), "{listed}");
        // Blank output is no note (the negative control: the note is the output's, not a constant).
        assert_eq!(progress_note(b"\n  \n"), None);
        assert_eq!(progress_note(b"done\n"), Some("done".to_string()));
    }

    /// The text the tool returned before output was streamed: everything buffered, then cut.
    fn whole(code: &str, out: &str, err: &str) -> String {
        let mut text = format!("exit code: {code}\n");
        if !out.is_empty() {
            text.push_str(&format!("stdout:\n{out}"));
        }
        if !err.is_empty() {
            text.push_str(&format!("{}stderr:\n{err}", if out.is_empty() || out.ends_with('\n') { "" } else { "\n" }));
        }
        let n = text.chars().count();
        if n <= OUTPUT_CAP {
            return text;
        }
        let half = OUTPUT_CAP / 2;
        let head: String = text.chars().take(half).collect();
        let tail: String = text.chars().skip(n - half).collect();
        format!("{head}\n[… {} characters of output not shown …]\n{tail}", n - OUTPUT_CAP)
    }

    fn streamed(text: &str, chunk: usize) -> Kept {
        let mut k = Kept::default();
        for piece in text.as_bytes().chunks(chunk) {
            k.push(piece);
        }
        k
    }

    #[test]
    fn streaming_keeps_the_same_head_and_tail_as_buffering_everything() {
        let samples = |seed: usize| -> Vec<String> {
            [0, 1, 100, 14_999, 15_000, 29_990, 30_000, 30_001, 60_000, 120_007, 120_010, 400_000]
                .iter()
                .map(|&n| {
                    (0..n)
                        .map(|i| match (i + seed) % 7 {
                            0 => 'é',
                            1 => '\n',
                            2 => '😀',
                            3 => 'ж',
                            _ => char::from(b'a' + ((i / 7) % 26) as u8),
                        })
                        .collect()
                })
                .collect()
        };
        for (i, out) in samples(0).iter().enumerate() {
            for err in samples(i).iter().step_by(3) {
                for chunk in [1usize, 7, 4096, 65_536] {
                    if chunk == 1 && out.len() + err.len() > 200_000 {
                        continue;
                    }
                    let got = render("0", streamed(out, chunk), streamed(err, chunk));
                    assert_eq!(
                        got,
                        whole("0", out, err),
                        "stdout {} bytes, stderr {} bytes, chunks of {chunk}",
                        out.len(),
                        err.len()
                    );
                }
            }
        }
    }
}
