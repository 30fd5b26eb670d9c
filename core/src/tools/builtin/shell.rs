//! shell_execute: `sh -c COMMAND` in the working directory, under Linux Landlock below `unrestricted`:
//! read-only everywhere at `read`, writable only under the workspace roots at `workspace`. Without a
//! sandbox backend the tool requires `unrestricted` (SPEC §1). Under network `none` (and `remote`, which
//! Landlock cannot express, so the shell holds it as the narrower `none`) TCP connect and bind are denied.

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr,
};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::error::ToolError;
use crate::permission::scope::SYSTEM_DIRS;
use crate::permission::{Level, Network, WriteReach};
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The most characters of output returned (the head and the tail are kept).
pub const OUTPUT_CAP: usize = 30_000;
const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 600;

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

/// Whether this kernel enforces Landlock (ABI 1 or later).
pub fn sandbox_available() -> bool {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only returns
    // the ABI version (or an error); it touches no memory.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    abi >= 1
}

/// shell_execute.
pub struct ShellExecute {
    spec: ToolSpec,
}

impl ShellExecute {
    pub fn new() -> Self {
        let level = if sandbox_available() { Level::Read } else { Level::Unrestricted };
        ShellExecute {
            spec: ToolSpec::new(
                "shell_execute",
                "Runs a shell command (sh -c) in the working directory and returns its exit code and output. Below unrestricted it runs sandboxed: read-only at read, writable only in the workspace at workspace.",
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

/// The Landlock ruleset for a call, built in the parent (it opens files and allocates), applied in the
/// child just before exec.
fn ruleset(ctx: &ToolContext) -> Result<RulesetCreated, String> {
    let abi = ABI::V5;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| e.to_string())?;
    let net_off = ctx.network != Network::Unrestricted;
    if net_off {
        rs = rs.handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp).map_err(|e| e.to_string())?;
    }
    let mut created = rs.create().map_err(|e| e.to_string())?;
    let read = AccessFs::from_read(abi);
    let mut readable: Vec<std::path::PathBuf> = Vec::new();
    if ctx.scope.confine_reads {
        readable.extend(ctx.scope.workspace_roots().map(|p| p.to_path_buf()));
        readable.extend(ctx.scope.readable_dirs.iter().cloned());
        readable.extend(SYSTEM_DIRS.iter().map(std::path::PathBuf::from));
        readable.push("/etc".into());
        readable.push("/proc".into());
        readable.push("/dev".into());
    } else {
        readable.push("/".into());
    }
    for p in readable.iter().filter(|p| p.exists()) {
        let fd = PathFd::new(p).map_err(|e| e.to_string())?;
        created = created.add_rule(PathBeneath::new(fd, read)).map_err(|e| e.to_string())?;
    }
    // Writing to /dev/null and friends is what commands do to discard output.
    for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
        let fd = PathFd::new(dev).map_err(|e| e.to_string())?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::WriteFile | AccessFs::ReadFile | AccessFs::Truncate))
            .map_err(|e| e.to_string())?;
    }
    if ctx.write_reach() == WriteReach::WorkspaceRoots {
        for root in ctx.scope.workspace_roots() {
            let fd = PathFd::new(root).map_err(|e| e.to_string())?;
            created = created.add_rule(PathBeneath::new(fd, AccessFs::from_all(abi))).map_err(|e| e.to_string())?;
        }
    }
    Ok(created)
}

/// Keeps the head and the tail of long output.
fn cap_output(text: &str) -> String {
    let n = text.chars().count();
    if n <= OUTPUT_CAP {
        return text.to_string();
    }
    let half = OUTPUT_CAP / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(n - half).collect();
    format!("{head}\n[… {} characters of output not shown …]\n{tail}", n - OUTPUT_CAP)
}

#[async_trait]
impl Tool for ShellExecute {
    fn spec(&self) -> &ToolSpec {
        &self.spec
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
            return Err(fail("no sandbox backend is available here, so the shell runs only at unrestricted"));
        }
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&command)
            .current_dir(&ctx.scope.working_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if sandboxed {
            let mut rules = Some(ruleset(ctx).map_err(|e| fail(format!("the sandbox could not be prepared: {e}")))?);
            // SAFETY: the closure runs in the forked child before exec. It only makes syscalls
            // (prctl and landlock_restrict_self) on a ruleset prepared in the parent; it does not
            // allocate or take locks.
            unsafe {
                cmd.pre_exec(move || {
                    let Some(r) = rules.take() else { return Ok(()) };
                    match r.restrict_self() {
                        Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => Ok(()),
                        _ => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
                    }
                });
            }
        }
        let mut child = cmd.spawn().map_err(|e| fail(format!("the shell could not start: {e}")))?;
        let mut stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let mut stderr = child.stderr.take().ok_or_else(|| fail("no stderr"))?;
        let pid = child.id();
        let run = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let (a, b, status) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err), child.wait());
            a.and(b).map_err(|e| fail(e.to_string()))?;
            Ok::<_, ToolError>((status.map_err(|e| fail(e.to_string()))?, out, err))
        };
        let (status, out, err) = match tokio::time::timeout(Duration::from_secs(timeout), run).await {
            Ok(r) => r?,
            Err(_) => {
                if let Some(pid) = pid {
                    // SAFETY: signals the process group the child leads; no memory is involved.
                    unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
                }
                return Err(fail(format!("the command timed out after {timeout} s and was killed")));
            }
        };
        let code = status.code().map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
        let mut text = format!("exit code: {code}\n");
        let out = String::from_utf8_lossy(&out);
        let err = String::from_utf8_lossy(&err);
        if !out.is_empty() {
            text.push_str(&format!("stdout:\n{out}"));
        }
        if !err.is_empty() {
            text.push_str(&format!("{}stderr:\n{err}", if out.is_empty() || out.ends_with('\n') { "" } else { "\n" }));
        }
        Ok(Value::String(cap_output(&text)))
    }
}
