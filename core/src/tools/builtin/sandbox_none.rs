//! The shell off Linux (macOS, iOS, Windows): there is no sandbox backend, so shell_execute asks for
//! `unrestricted` (SPEC §1) and says why in its description. A call still ends the processes it
//! started where the platform lets that be done without a backend: on unix the shell leads a process
//! group of its own, killed whole when the call ends, times out or is cancelled (a process that leaves
//! the group, with `setsid`, is not followed); on Windows the shell process itself is killed (the
//! processes it started are not: that needs a job object, not built yet).
//!
//! The same API as the Linux sandbox module (`sandbox.rs`), so the shell tool has one body.

use std::sync::OnceLock;

use crate::tools::ToolContext;

/// The program and flag that run a command line.
#[cfg(not(windows))]
pub(crate) const SHELL: [&str; 2] = ["/bin/sh", "-c"];
/// The program and flag that run a command line.
#[cfg(windows)]
pub(crate) const SHELL: [&str; 2] = ["cmd.exe", "/C"];

/// What this platform offers the sandbox: nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// The operating system, as Rust names it (`macos`, `ios`, `windows`, …).
    pub os: &'static str,
}

impl Features {
    /// Whether the shell can be made read-only: never without a backend.
    pub fn read_only(&self) -> bool {
        false
    }

    /// Why the shell runs only at `unrestricted` here, in words for the model and the listing API.
    pub fn describe(&self) -> String {
        format!(
            "ambit has no shell sandbox backend on {} (its only backend is Linux's Landlock and seccomp), so the shell cannot be made read-only here and runs only at unrestricted. {}",
            self.os,
            if cfg!(windows) {
                "When a call ends, times out or is cancelled the shell process is killed; processes it started may outlive it."
            } else {
                "When a call ends, times out or is cancelled its whole process group is killed."
            }
        )
    }
}

static FEATURES: OnceLock<Features> = OnceLock::new();

/// The sandbox layers this platform has: none.
pub fn features() -> &'static Features {
    FEATURES.get_or_init(|| Features { os: std::env::consts::OS })
}

/// A call's preparation: nothing to confine; the shell is put in a process group of its own.
pub(crate) struct Plan;

impl Plan {
    /// The plan for one call (the shell tool refuses every level below `unrestricted` before this).
    pub(crate) fn for_call(_: &ToolContext, _: u64) -> Result<Plan, String> {
        Ok(Plan)
    }

    /// Sets the command up to run under the plan: on unix, as the leader of a new process group.
    pub(crate) fn apply(self, cmd: &mut tokio::process::Command) {
        #[cfg(unix)]
        cmd.process_group(0);
        #[cfg(not(unix))]
        let _ = cmd;
    }
}

/// Ends the call's processes: on unix the shell's whole process group, on Windows the shell itself.
pub(crate) fn stop_call(child: &mut tokio::process::Child, pid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        let _ = child;
        // SAFETY: signals the group our own child leads; the child has not been reaped (the caller
        // checks), so the group id is still its.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        let _ = child.start_kill();
    }
}
