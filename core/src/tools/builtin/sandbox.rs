//! The shell's sandbox on Linux, in layers, each used when the kernel has it (detected once, at run
//! time, by [`features`]):
//!
//! - **Landlock** at the highest ABI the kernel reports: the file system read-only outside the writable
//!   roots, device ioctls refused, TCP off under network `none` or `remote`, and (ABI 6+) signals and abstract unix
//!   sockets scoped to the sandbox. Device creation (`MakeChar`, `MakeBlock`) is never granted.
//! - **seccomp**: device nodes (`mknod` of a character or block device), `socket(2)` (every family under
//!   network `none` or `remote`, unix sockets at every sandboxed level: they lead to other processes), io_uring
//!   (which would bypass the socket filter), the kernel key rings, raising the core limit (held at 1: no
//!   dump, not even to a piped `core_pattern` helper outside), and at `read` every call that changes
//!   file metadata (mode, owner, times, extended attributes, inode flags), which Landlock does not mediate.
//! - **Namespaces**, as bubblewrap sets them up: a user namespace mapping only the caller's own ids, a
//!   mount namespace in which every mount is read-only except the workspace roots (so metadata and access
//!   times outside them cannot change either), a PID namespace with its own `/proc` (no process outside is
//!   visible or signalable, and every process dies with the shell, its init), an IPC namespace, and under
//!   network `none` (and `remote`, held as `none`) a network namespace with nothing in it. Every
//!   capability is dropped before `exec`, and `/proc` is read-only (no nested user namespace).
//!
//! Every call, sandboxed or not, runs under a supervisor: the child the host spawns starts a new session,
//! becomes a child subreaper and forks the shell. When the shell ends, or the call times out or is
//! cancelled (the supervisor gets `SIGTERM`), the supervisor kills everything the shell started (the PID
//! namespace's init, or every descendant re-parented to it) before it exits, so no process outlives its
//! call. The code that runs between `fork` and `exec` makes system calls only: it does not allocate.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use crate::permission::scope::SYSTEM_DIRS;
use crate::permission::{Level, Network, WriteReach};
use crate::tools::ToolContext;

/// The program and flag that run a command line.
pub(crate) const SHELL: [&str; 2] = ["/bin/sh", "-c"];

/// What this kernel offers the sandbox, detected once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// The Landlock ABI version the kernel reports (0 when Landlock is absent or disabled).
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// Whether the namespace layer (user, mount, PID, IPC and network namespaces with read-only mounts)
    /// could be set up: it is tried once with a real command.
    pub namespaces: bool,
}

impl Features {
    /// Whether the shell can be made read-only (SPEC §1): Landlock for file contents, seccomp for
    /// metadata and unix sockets, and signal scoping from Landlock ABI 6 or a PID namespace.
    pub fn read_only(&self) -> bool {
        self.landlock_abi >= 1 && self.seccomp && (self.landlock_abi >= 6 || self.namespaces)
    }

    /// What confines the shell below `unrestricted` on this kernel, in words for the model and the
    /// listing API.
    pub fn describe(&self) -> String {
        if !self.read_only() {
            let mut missing = Vec::new();
            if self.landlock_abi < 1 {
                missing.push("Landlock");
            }
            if !self.seccomp {
                missing.push("seccomp");
            }
            if self.landlock_abi < 6 && !self.namespaces {
                missing.push("signal scoping (Landlock ABI 6) or user namespaces");
            }
            return format!(
                "This kernel cannot make the shell read-only (missing: {}), so it runs only at unrestricted.",
                missing.join(", ")
            );
        }
        let mut layers = vec![format!(
            "Landlock ABI {} (file system{}{})",
            self.landlock_abi,
            if self.landlock_abi >= 4 { ", TCP" } else { "" },
            if self.landlock_abi >= 6 { ", signals and abstract unix sockets scoped to the sandbox" } else { "" }
        )];
        layers.push(
            "seccomp (no device nodes, no unix sockets, no sockets at all under network none or remote, no io_uring, no key rings, no core dumps, no metadata changes at read)"
                .into(),
        );
        if self.namespaces {
            layers.push("user, mount, PID, IPC and network namespaces (every mount read-only but the workspace roots, no process outside visible, no network under none or remote)".into());
        }
        let mut text = format!("Confined on this kernel by: {}.", layers.join("; "));
        if !self.namespaces {
            text.push_str(" Without user namespaces here, file metadata (mode, owner, times, attributes) cannot be changed anywhere below unrestricted, even in the workspace, and reads may still update access times.");
        }
        text
    }
}

static FEATURES: OnceLock<Features> = OnceLock::new();

/// The sandbox layers this kernel has, detected on first use and cached.
pub fn features() -> &'static Features {
    FEATURES.get_or_init(|| {
        let landlock_abi = landlock_abi();
        let seccomp = seccomp_available();
        let namespaces = probe_namespaces();
        tracing::debug!(landlock_abi, seccomp, namespaces, "shell sandbox layers");
        Features { landlock_abi, seccomp, namespaces }
    })
}

fn landlock_abi() -> i32 {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only returns
    // the ABI version (or an error); it touches no memory.
    let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    i32::try_from(abi).unwrap_or(0).max(0)
}

fn seccomp_available() -> bool {
    if seccompiler::TargetArch::try_from(std::env::consts::ARCH).is_err() {
        return false;
    }
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: asks whether an action is available; the kernel reads the u32 it points to.
    let rc = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0u32, &action as *const u32) };
    rc == 0
}

/// Runs `true` under the namespace layer alone (read level, network off): the layer is there when it
/// exits 0.
fn probe_namespaces() -> bool {
    let layers = Features { landlock_abi: 0, seccomp: false, namespaces: true };
    let Ok(plan) = Plan::build(&layers, Level::Read, Network::None, &[], Path::new("/"), None, 10) else {
        return false;
    };
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg("exit 0").current_dir("/").stdin(std::process::Stdio::null());
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut plan = Some(plan);
    // SAFETY: see `Plan::enter`: system calls only.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || match plan.take() {
            Some(p) => p.enter(),
            None => Ok(()),
        });
    }
    matches!(cmd.status(), Ok(s) if s.success())
}

/// Everything a call's sandbox needs, prepared in the parent (it opens files and allocates) and entered
/// in the child between `fork` and `exec` ([`Plan::enter`]).
pub(crate) struct Plan {
    landlock: Option<Landlocked>,
    seccomp: Option<BpfProgram>,
    namespaces: Option<Namespaces>,
    /// The supervisor's own deadline: it ends the call even if the host is gone.
    alarm_secs: u32,
}

/// A created Landlock ruleset, enforced in the worker.
struct Landlocked {
    ruleset: OwnedFd,
    /// With reads confined: the read rights to grant on the worker's own `/proc` once it is mounted
    /// (a rule made in the parent names the host's `/proc`, another file system).
    proc_read: Option<u64>,
}

struct Namespaces {
    flags: libc::c_int,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// The workspace roots, writable at `workspace`.
    writable: Vec<CString>,
    /// The working directory, entered again once the mounts are in place.
    working_dir: CString,
}

/// A failure preparing the sandbox, in words.
fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

impl Plan {
    /// The plan for one call: no confinement at `unrestricted` (the supervisor still ends every
    /// process), every layer `layers` has below it.
    pub(crate) fn for_call(ctx: &ToolContext, timeout_secs: u64) -> Result<Plan, String> {
        let roots: Vec<PathBuf> = match ctx.write_reach() {
            WriteReach::WorkspaceRoots => ctx.scope.workspace_roots().map(Path::to_path_buf).collect(),
            _ => Vec::new(),
        };
        let readable = ctx.scope.confine_reads.then(|| {
            let mut v: Vec<PathBuf> = ctx.scope.workspace_roots().map(Path::to_path_buf).collect();
            v.extend(ctx.scope.readable_dirs.iter().cloned());
            v.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
            v.extend(["/etc", "/proc", "/dev"].map(PathBuf::from));
            v
        });
        let alarm = u32::try_from(timeout_secs.saturating_add(30)).unwrap_or(u32::MAX);
        Plan::build(features(), ctx.level, ctx.network, &roots, &ctx.scope.working_dir, readable, alarm)
    }

    fn build(
        layers: &Features,
        level: Level,
        network: Network,
        writable: &[PathBuf],
        working_dir: &Path,
        readable: Option<Vec<PathBuf>>,
        alarm_secs: u32,
    ) -> Result<Plan, String> {
        if level == Level::Unrestricted {
            return Ok(Plan { landlock: None, seccomp: None, namespaces: None, alarm_secs });
        }
        let net_off = network != Network::Unrestricted;
        let confine_reads = readable.is_some();
        let landlock = (layers.landlock_abi >= 1)
            .then(|| {
                let created = landlock_ruleset(net_off, writable, readable)?;
                let ruleset: Option<OwnedFd> = created.into();
                let ruleset = ruleset.ok_or("this kernel does not enforce the ruleset")?;
                let proc_read = (confine_reads && layers.namespaces).then(|| AccessFs::from_read(LANDLOCK_ABI).bits());
                Ok::<_, String>(Landlocked { ruleset, proc_read })
            })
            .transpose()
            .map_err(|e| err("Landlock", e))?;
        let seccomp = layers
            .seccomp
            .then(|| seccomp_filter(level, net_off, layers.namespaces))
            .transpose()
            .map_err(|e| err("seccomp", e))?;
        let namespaces = layers.namespaces.then(|| {
            let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
            if net_off {
                flags |= libc::CLONE_NEWNET;
            }
            // SAFETY: plain getters.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            let cstr = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(|e| err("a path", e));
            Ok::<_, String>(Namespaces {
                flags,
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
                writable: writable.iter().map(|p| cstr(p)).collect::<Result<_, _>>()?,
                working_dir: cstr(working_dir)?,
            })
        });
        Ok(Plan { landlock, seccomp, namespaces: namespaces.transpose()?, alarm_secs })
    }

    /// Sets the command up to enter the plan in the child, between `fork` and `exec`.
    pub(crate) fn apply(self, cmd: &mut tokio::process::Command) {
        let mut plan = Some(self);
        // SAFETY: the closure runs in the forked child before exec; `Plan::enter` makes system calls
        // only, on a plan prepared in the parent: it does not allocate or take locks.
        unsafe {
            cmd.pre_exec(move || match plan.take() {
                Some(p) => p.enter(),
                None => Ok(()),
            });
        }
    }

    /// Enters the plan in the child the host forked, before `exec`: becomes the supervisor, forks the
    /// worker, and returns (to `exec` the shell) only in the worker, once every layer is in place. The
    /// supervisor never returns: it waits for the worker, ends every process left, and exits as the
    /// shell did.
    ///
    /// Runs between `fork` and `exec`: system calls only, no allocation, no locks, and nothing freed
    /// (the plan is never dropped here: `exec` discards it, its descriptors are close-on-exec).
    pub(crate) fn enter(self) -> io::Result<()> {
        let plan = std::mem::ManuallyDrop::new(self);
        // A session of its own: no controlling terminal to inject input into, no group shared with the host.
        // SAFETY (every unsafe block below): plain system calls on values owned here.
        check(unsafe { libc::setsid() })?;
        check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
        if let Some(ns) = &plan.namespaces {
            check(unsafe { libc::unshare(ns.flags) })?;
            // Without setgroups denied, an unprivileged process may not write its gid map.
            let _ = write_file(c"/proc/self/setgroups", b"deny");
            write_file(c"/proc/self/uid_map", &ns.uid_map)?;
            write_file(c"/proc/self/gid_map", &ns.gid_map)?;
        }
        // The worker's end must be waited for, whatever the host made of SIGCHLD (ignored, children
        // are reaped unseen).
        unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
        // Signals that end the call reach the supervisor only once it knows the worker.
        let stops = stop_signals();
        check(unsafe { libc::sigprocmask(libc::SIG_BLOCK, &stops, std::ptr::null_mut()) })?;
        // A raw fork: glibc's fork() runs the host's at-fork handlers and takes malloc's locks, which
        // another host thread may have held when the host forked us.
        // SAFETY: clone with SIGCHLD only is fork; both sides continue on their own copy of this stack.
        let worker =
            unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) };
        let worker = libc::pid_t::try_from(worker).unwrap_or(-1);
        if worker < 0 {
            return Err(io::Error::last_os_error());
        }
        if worker > 0 {
            supervise(worker, &stops, plan.alarm_secs);
        }
        // The worker: the shell to be.
        unsafe {
            for sig in [libc::SIGTERM, libc::SIGALRM, libc::SIGHUP, libc::SIGINT, libc::SIGCHLD] {
                libc::signal(sig, libc::SIG_DFL);
            }
            check(libc::sigprocmask(libc::SIG_UNBLOCK, &stops, std::ptr::null_mut()))?;
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
            check(libc::setpgid(0, 0))?;
        }
        if let Some(ns) = &plan.namespaces {
            mounts(ns)?;
            drop_capabilities()?;
        }
        if plan.seccomp.is_some() {
            // A core limit of 1 turns a crash's dump away even from a piped core_pattern helper (which
            // would run outside the sandbox and write there); the filter keeps the limit where it is.
            let one = libc::rlimit { rlim_cur: 1, rlim_max: 1 };
            check(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &one) })?;
        }
        if let Some(rules) = &plan.landlock {
            restrict(rules)?;
        }
        if let Some(filter) = &plan.seccomp {
            seccompiler::apply_filter(filter).map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        // No descriptor the host leaked without close-on-exec reaches the shell.
        // SAFETY: marks descriptors close-on-exec; the kernel touches no memory of ours.
        let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
        if rc != 0 {
            for fd in 3..open_files_limit() {
                // SAFETY: as above, one descriptor at a time (EBADF for those not open).
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
        Ok(())
    }
}

/// Tells the supervisor of a call (the host's child `pid`, not reaped yet) to end every process the
/// call started.
pub(crate) fn stop_call(_: &mut tokio::process::Child, pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: signals our own child, which has not been reaped (so the pid is still its).
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

/// One past the highest descriptor this process may hold (for kernels before `close_range`, 5.9).
fn open_files_limit() -> libc::c_int {
    // SAFETY: fills a struct we own.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 65_536;
    }
    libc::c_int::try_from(lim.rlim_cur.min(1 << 20)).unwrap_or(1 << 20)
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: libc::c_int,
}

/// Enforces the ruleset on the worker, first granting reads on its own `/proc` when reads are confined.
fn restrict(rules: &Landlocked) -> io::Result<()> {
    let fd = rules.ruleset.as_raw_fd();
    // SAFETY (every unsafe block below): system calls on descriptors and structs we own.
    if let Some(access) = rules.proc_read {
        let proc_fd = unsafe { libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if proc_fd >= 0 {
            let attr = PathBeneathAttr { allowed_access: access, parent_fd: proc_fd };
            // LANDLOCK_RULE_PATH_BENEATH. A failure leaves /proc unreadable: the safe side.
            unsafe { libc::syscall(libc::SYS_landlock_add_rule, fd, 1u32, &attr as *const PathBeneathAttr, 0u32) };
            unsafe { libc::close(proc_fd) };
        }
    }
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
    if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open, write and close on a buffer and a C string we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = io::Error::last_os_error();
        libc::close(fd);
        if n < 0 || n as usize != data.len() { Err(e) } else { Ok(()) }
    }
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: fills a signal set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGALRM, libc::SIGHUP, libc::SIGINT] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// The worker the supervisor watches (its own copy of this static, after `fork`).
static WORKER: AtomicI32 = AtomicI32::new(0);

extern "C" fn stop(_: libc::c_int) {
    let w = WORKER.load(Ordering::SeqCst);
    if w > 0 {
        // SAFETY: kill is async-signal-safe. The worker's group, then the worker (the PID namespace's
        // init: with it goes everything in the namespace).
        unsafe {
            libc::kill(-w, libc::SIGKILL);
            libc::kill(w, libc::SIGKILL);
        }
    }
}

/// The supervisor: waits for the worker, or for the signal that ends the call, then kills every process
/// left and exits as the worker did.
fn supervise(worker: libc::pid_t, stops: &libc::sigset_t, alarm_secs: u32) -> ! {
    WORKER.store(worker, Ordering::SeqCst);
    // SAFETY (every unsafe block below): system calls on values owned here.
    unsafe {
        // The supervisor holds nothing of the host's: in particular not the pipe through which the host
        // learns that `exec` happened (the worker holds it until then).
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
            for fd in 3..open_files_limit() {
                libc::close(fd);
            }
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = stop as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGALRM, libc::SIGHUP, libc::SIGINT] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        libc::alarm(alarm_secs);
        libc::sigprocmask(libc::SIG_UNBLOCK, stops, std::ptr::null_mut());
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(worker, &mut status, 0) };
        if r == worker {
            break;
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            status = libc::SIGKILL;
            break;
        }
    }
    end_everything(worker);
    // SAFETY: exits (or dies by the worker's signal) without running anything of the host's.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigprocmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// Kills every process left: the worker's group, and every descendant re-parented to this supervisor
/// (it is their subreaper), until none is left. In a PID namespace the kernel has already killed the
/// rest with its init.
fn end_everything(worker: libc::pid_t) {
    loop {
        // SAFETY: signals our own processes; reaps our own children.
        unsafe { libc::kill(-worker, libc::SIGKILL) };
        for_each_child(|pid| unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
        });
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Calls `f` with each child of this (single-threaded) process, read from
/// `/proc/thread-self/children` into a buffer on the stack.
fn for_each_child(mut f: impl FnMut(libc::pid_t)) {
    // SAFETY: open, read and close with a buffer on our stack.
    unsafe {
        let fd = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut buf = [0u8; 1024];
        let mut pid: libc::pid_t = 0;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &b in buf.iter().take(n as usize) {
                if b.is_ascii_digit() {
                    pid = pid.saturating_mul(10).saturating_add(libc::pid_t::from(b - b'0'));
                } else {
                    if pid > 0 {
                        f(pid);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            f(pid);
        }
        libc::close(fd);
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

fn mount_setattr(path: &std::ffi::CStr, flags: libc::c_int, attr: &MountAttr) -> io::Result<()> {
    // SAFETY: the kernel reads the attribute struct and the path we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// In the worker (init of the new PID namespace, in the new mount namespace): its own `/proc`, every
/// mount read-only, then the workspace roots writable again.
fn mounts(ns: &Namespaces) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    // SAFETY (every unsafe block below): mount calls on C strings we own.
    check(unsafe { libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) })?;
    // A /proc that shows this namespace's processes only. Where the host's /proc is partly masked
    // (some containers) the kernel refuses it; the host's /proc then stays, its processes out of reach
    // all the same (not in this PID namespace).
    unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    for root in &ns.writable {
        check(unsafe {
            libc::mount(root.as_ptr(), root.as_ptr(), none, libc::MS_BIND | libc::MS_REC, std::ptr::null())
        })?;
    }
    let ro = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
    mount_setattr(c"/", libc::AT_RECURSIVE, &ro)?;
    let rw = MountAttr { attr_set: 0, attr_clr: MOUNT_ATTR_RDONLY, propagation: 0, userns_fd: 0 };
    for root in &ns.writable {
        // A mount under the root that was read-only for the host stays so (the kernel locks it), and a
        // root on a file system the host has read-only stays read-only: the shell may write no more
        // than the host could.
        if mount_setattr(root, libc::AT_RECURSIVE, &rw).is_err() {
            let _ = mount_setattr(root, 0, &rw);
        }
    }
    // The working directory again, now on the new mounts.
    check(unsafe { libc::chdir(ns.working_dir.as_ptr()) })
}

/// Drops every capability the user namespace gave, for good: nothing the shell runs (even as uid 0 in
/// the namespace) gains one back, so no mount can be undone.
fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl calls on integers.
    unsafe {
        let bits = libc::SECBIT_NOROOT
            | libc::SECBIT_NOROOT_LOCKED
            | libc::SECBIT_NO_SETUID_FIXUP
            | libc::SECBIT_NO_SETUID_FIXUP_LOCKED;
        check(libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0))?;
        check(libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0))?;
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINVAL) => break,
                    _ => return Err(io::Error::last_os_error()),
                }
            }
        }
    }
    Ok(())
}

/// The newest Landlock ABI the crate knows; best effort leaves out what the kernel lacks.
const LANDLOCK_ABI: ABI = ABI::V10;

/// The Landlock ruleset: every right the kernel knows handled, reads where the scope allows, writes
/// (never device creation) under the writable roots, `/dev/null` and friends writable, TCP off when
/// the network is, signals and abstract unix sockets scoped to the sandbox.
fn landlock_ruleset(
    net_off: bool,
    writable: &[PathBuf],
    readable: Option<Vec<PathBuf>>,
) -> Result<RulesetCreated, String> {
    let fd = |p: &Path| PathFd::new(p).map_err(|e| err(&p.display().to_string(), e));
    let e = |e: landlock::RulesetError| e.to_string();
    let abi = LANDLOCK_ABI;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?
        .scope(Scope::from_all(abi))
        .map_err(e)?;
    if net_off {
        rs = rs.handle_access(AccessNet::ConnectTcp | AccessNet::BindTcp).map_err(e)?;
    }
    let mut created = rs.create().map_err(e)?;
    let read = AccessFs::from_read(abi);
    let readable = readable.unwrap_or_else(|| vec![PathBuf::from("/")]);
    for p in readable.iter().filter(|p| p.exists()) {
        created = created.add_rule(PathBeneath::new(fd(p)?, read)).map_err(e)?;
    }
    // Writing to /dev/null and friends is what commands do to discard output.
    for dev in ["/dev/null", "/dev/zero", "/dev/full"] {
        let rw = AccessFs::WriteFile | AccessFs::ReadFile | AccessFs::Truncate;
        created = created.add_rule(PathBeneath::new(fd(Path::new(dev))?, rw)).map_err(e)?;
    }
    let write = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    for root in writable {
        created = created.add_rule(PathBeneath::new(fd(root)?, write)).map_err(e)?;
    }
    Ok(created)
}

/// System calls numbered alike on every architecture (the unified table: Linux 6.6 and 6.13+); the
/// libc crate does not name them on every architecture yet.
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
/// Linux 6.17: sets inode attributes (the `FS_IOC_FSSETXATTR` fields) by path.
const SYS_FILE_SETATTR: i64 = 469;
/// ioctl requests that change inode flags (chattr).
const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u64 = 0x401c_5820;

/// The seccomp filter (errno EPERM on a match, everything else allowed).
fn seccomp_filter(level: Level, net_off: bool, namespaces: bool) -> Result<BpfProgram, String> {
    build_filter(level, net_off, namespaces).map_err(|e| e.to_string()).and_then(guard_x32)
}

fn build_filter(level: Level, net_off: bool, namespaces: bool) -> Result<BpfProgram, seccompiler::BackendError> {
    use std::collections::BTreeMap;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let always = |rules: &mut BTreeMap<i64, Vec<SeccompRule>>, nrs: &[i64]| {
        for &nr in nrs {
            rules.insert(nr, Vec::new());
        }
    };
    let arg =
        |index: u8, op: SeccompCmpOp, value: u64| SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value);
    // Device nodes: mknod of a character or block device, whatever the level (FIFOs and sockets stay).
    let device = |mode_arg: u8| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        let ifmt = libc::S_IFMT as u64;
        Ok(vec![
            SeccompRule::new(vec![arg(mode_arg, SeccompCmpOp::MaskedEq(ifmt), libc::S_IFCHR as u64)?])?,
            SeccompRule::new(vec![arg(mode_arg, SeccompCmpOp::MaskedEq(ifmt), libc::S_IFBLK as u64)?])?,
        ])
    };
    rules.insert(libc::SYS_mknodat, device(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device(1)?);
    // Sockets: none at all with the network off; no unix sockets at any sandboxed level (they lead to
    // other processes: a container engine, the session bus). socketpair stays: it reaches nothing.
    if net_off {
        always(&mut rules, &[libc::SYS_socket]);
    } else {
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![arg(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?])?]);
    }
    // The core limit (1: no dump, not even to a piped core_pattern helper outside) stays.
    rules.insert(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![
            arg(1, SeccompCmpOp::Eq, libc::RLIMIT_CORE as u64)?,
            SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?,
        ])?],
    );
    rules.insert(
        libc::SYS_setrlimit,
        vec![SeccompRule::new(vec![arg(0, SeccompCmpOp::Eq, libc::RLIMIT_CORE as u64)?])?],
    );
    // io_uring opens sockets and files without the system calls above.
    always(&mut rules, &[libc::SYS_io_uring_setup, libc::SYS_io_uring_enter, libc::SYS_io_uring_register]);
    // The user's key rings live outside the sandbox.
    always(&mut rules, &[libc::SYS_add_key, libc::SYS_request_key, libc::SYS_keyctl]);
    if !namespaces {
        // Without an IPC namespace, System V IPC objects are shared with the rest of the machine.
        always(
            &mut rules,
            &[
                libc::SYS_msgget,
                libc::SYS_msgsnd,
                libc::SYS_msgctl,
                libc::SYS_semget,
                libc::SYS_semop,
                libc::SYS_semtimedop,
                libc::SYS_semctl,
                libc::SYS_shmget,
                libc::SYS_shmat,
                libc::SYS_shmctl,
            ],
        );
    }
    // Metadata, which Landlock does not mediate: at read nowhere; at workspace, without read-only mounts
    // to confine it to the workspace roots, nowhere either.
    if level == Level::Read || !namespaces {
        always(
            &mut rules,
            &[
                libc::SYS_fchmod,
                libc::SYS_fchmodat,
                SYS_FCHMODAT2,
                libc::SYS_fchown,
                libc::SYS_fchownat,
                libc::SYS_utimensat,
                libc::SYS_setxattr,
                libc::SYS_lsetxattr,
                libc::SYS_fsetxattr,
                libc::SYS_removexattr,
                libc::SYS_lremovexattr,
                libc::SYS_fremovexattr,
                SYS_SETXATTRAT,
                SYS_REMOVEXATTRAT,
                SYS_FILE_SETATTR,
            ],
        );
        #[cfg(target_arch = "x86_64")]
        always(
            &mut rules,
            &[
                libc::SYS_chmod,
                libc::SYS_chown,
                libc::SYS_lchown,
                libc::SYS_utime,
                libc::SYS_utimes,
                libc::SYS_futimesat,
            ],
        );
        let ioctl = [FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR]
            .into_iter()
            .map(|req| SeccompRule::new(vec![arg(1, SeccompCmpOp::Eq, req)?]))
            .collect::<Result<Vec<_>, _>>()?;
        rules.insert(libc::SYS_ioctl, ioctl);
    }
    let arch = std::env::consts::ARCH.try_into()?;
    SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)?.try_into()
}

/// On x86_64 the x32 ABI reaches the same system calls under numbers with bit 30 set, which the rules
/// above do not name: refuse every such number. The program opens with the architecture check (three
/// instructions) and the load of the system call number; the guard goes right after that load (BPF
/// jumps only forward, so no jump crosses it).
fn guard_x32(mut program: BpfProgram) -> Result<BpfProgram, String> {
    if cfg!(target_arch = "x86_64") {
        const LD_W_ABS: u16 = 0x20;
        const JGE_K: u16 = 0x05 | 0x30;
        const RET_K: u16 = 0x06;
        let loads_nr = program.get(3).is_some_and(|i| i.code == LD_W_ABS && i.k == 0);
        if !loads_nr {
            return Err("the filter does not open as expected: no room for the x32 guard".into());
        }
        let errno = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        program.splice(
            4..4,
            [
                seccompiler::sock_filter { code: JGE_K, jt: 0, jf: 1, k: 0x4000_0000 },
                seccompiler::sock_filter { code: RET_K, jt: 0, jf: 0, k: errno },
            ],
        );
    }
    Ok(program)
}

/// Each layer alone, and the fallback a kernel without user namespaces gets, against real processes and
/// files (the agent-level attacks with both users are in core/tests/shell_sandbox.rs).
#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;

    fn tree(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!("ambit-layers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (ws, outside) = (root.join("ws"), root.join("outside"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f"), "x").unwrap();
        (root, ws, outside)
    }

    /// Runs `command` under exactly `layers`, as the shell tool would; returns its output.
    fn run(layers: &Features, level: Level, network: Network, ws: &Path, command: &str) -> String {
        run_confined(layers, level, network, ws, None, command)
    }

    fn run_confined(
        layers: &Features,
        level: Level,
        network: Network,
        ws: &Path,
        readable: Option<Vec<PathBuf>>,
        command: &str,
    ) -> String {
        let writable = if level == Level::Workspace { vec![ws.to_path_buf()] } else { Vec::new() };
        let plan = Plan::build(layers, level, network, &writable, ws, readable, 60).unwrap();
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(command).current_dir(ws).stdin(std::process::Stdio::null());
        let mut plan = Some(plan);
        // SAFETY: `Plan::enter` makes system calls only.
        unsafe {
            cmd.pre_exec(move || match plan.take() {
                Some(p) => p.enter(),
                None => Ok(()),
            });
        }
        let out = cmd.output().unwrap();
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    fn live(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit(')').next().is_some_and(|s| !s.trim_start().starts_with('Z')))
    }

    /// Metadata, a signal to a process of this test's, a `setsid` escapee, a device node and a TCP
    /// connection, under `layers` at `level`.
    fn attacks(layers: &Features, level: Level, name: &str) -> (String, bool, bool, bool) {
        let (root, ws, outside) = tree(name);
        let f = outside.join("f");
        let before = std::fs::metadata(&f).unwrap();
        let mut victim = std::process::Command::new("sleep").arg("1000").spawn().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let mark = format!("1000.{}{}", std::process::id(), name.len());
        let cmd = format!(
            "chmod 700 {f}; echo chmod=$?; touch -d 2001-01-01 {f}; echo touch=$?; kill -9 {v}; echo kill=$?; \
             mknod {ws}/c c 1 3; echo mknod=$?; setsid sleep {mark} & \
             /usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'; echo tcp=$?",
            f = f.display(),
            v = victim.id(),
            ws = ws.display(),
            port = listener.local_addr().unwrap().port(),
        );
        let out = run(layers, level, Network::None, &ws, &cmd);
        let after = std::fs::metadata(&f).unwrap();
        let unchanged = (after.mode(), after.mtime(), after.ctime()) == (before.mode(), before.mtime(), before.ctime());
        let victim_lives = live(victim.id());
        let _ = victim.kill();
        let _ = victim.wait();
        // The call has ended: no escapee may be left.
        let escaped = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok).any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.windows(mark.len()).any(|w| w == mark.as_bytes()))
        });
        let _ = std::fs::remove_dir_all(&root);
        let out = format!("{out}\ntcp arrived={}", listener.accept().is_ok());
        (out, unchanged, victim_lives, escaped)
    }

    #[test]
    fn without_namespaces_landlock_and_seccomp_still_confine() {
        let real = features();
        let layers = Features { landlock_abi: real.landlock_abi, seccomp: true, namespaces: false };
        assert!(layers.read_only(), "this kernel has Landlock ABI 6+: {real:?}");
        for level in [Level::Read, Level::Workspace] {
            let (out, unchanged, victim_lives, escaped) = attacks(&layers, level, &format!("fallback-{level:?}"));
            assert!(unchanged && victim_lives && !escaped, "{level:?}: {out}");
            for what in ["chmod=0", "touch=0", "kill=0", "mknod=0", "tcp=0", "arrived=true"] {
                assert!(!out.contains(what), "{level:?}: {what}: {out}");
            }
        }
    }

    #[test]
    fn namespaces_alone_confine_files_processes_and_network() {
        assert!(features().namespaces, "this kernel has unprivileged user namespaces");
        let layers = Features { landlock_abi: 0, seccomp: false, namespaces: true };
        let (out, unchanged, victim_lives, escaped) = attacks(&layers, Level::Workspace, "ns");
        assert!(unchanged && victim_lives && !escaped, "{out}");
        for what in ["chmod=0", "touch=0", "kill=0", "mknod=0", "tcp=0", "arrived=true"] {
            assert!(!out.contains(what), "{what}: {out}");
        }
        // The workspace stays writable, metadata included.
        let (root, ws, _) = tree("ns-ws");
        let out = run(&layers, Level::Workspace, Network::None, &ws, "echo x > new; chmod 600 new; echo rc=$?");
        assert!(out.contains("rc=0") && std::fs::read_to_string(ws.join("new")).unwrap() == "x\n", "{out}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn seccomp_alone_refuses_metadata_devices_and_sockets() {
        let layers = Features { landlock_abi: 0, seccomp: true, namespaces: false };
        let (root, ws, outside) = tree("seccomp");
        let cmd = format!(
            "chmod 700 {f}; echo chmod=$?; mknod {ws}/c c 1 3; echo mknod=$?; mkfifo {ws}/p; echo fifo=$?; \
             /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX)'; echo unix=$?; \
             /usr/bin/python3 -c 'import resource as r; print(\"core=%d,%d\" % r.getrlimit(r.RLIMIT_CORE)); \
             r.setrlimit(r.RLIMIT_CORE, (0, 0))'; echo lower=$?",
            f = outside.join("f").display(),
            ws = ws.display()
        );
        let out = run(&layers, Level::Read, Network::Unrestricted, &ws, &cmd);
        for what in ["chmod=1", "mknod=1", "fifo=0", "unix=1", "core=1,1", "lower=1"] {
            assert!(out.contains(what), "{what}: {out}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn no_layer_at_unrestricted_but_every_process_still_ends() {
        // Negative control for the tests above: at unrestricted the same attacks land, and the
        // supervisor alone still ends the escapee.
        let (out, unchanged, victim_lives, escaped) = attacks(features(), Level::Unrestricted, "unrestricted");
        assert!(!unchanged && !victim_lives && !escaped, "{out}");
        assert!(out.contains("chmod=0") && out.contains("kill=0") && out.contains("arrived=true"), "{out}");
    }

    #[test]
    fn a_descriptor_the_host_leaked_does_not_reach_the_shell() {
        let (root, ws, outside) = tree("leak");
        let f = outside.join("f");
        let c = std::ffi::CString::new(f.as_os_str().as_bytes()).unwrap();
        // SAFETY: opens a file of ours without close-on-exec, as a careless host library would.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_APPEND) };
        assert!(fd > 2);
        // Written by Python, not a shell redirection: the descriptor's number depends on what the other
        // tests of this process hold open, and `sh` takes single-digit descriptors only.
        let cmd = format!("/usr/bin/python3 -c 'import os; os.write({fd}, b\"leaked\\n\")'; echo rc=$?");
        // Negative control: a plain child inherits it and writes through it.
        let plain = std::process::Command::new("/bin/sh").arg("-c").arg(&cmd).output().unwrap();
        assert!(String::from_utf8_lossy(&plain.stdout).contains("rc=0"));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "xleaked\n");
        let out = run(features(), Level::Read, Network::None, &ws, &cmd);
        // SAFETY: closes the descriptor opened above.
        unsafe { libc::close(fd) };
        assert!(!out.contains("rc=0"), "{out}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "xleaked\n", "{out}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn with_reads_confined_the_sandbox_reads_its_own_proc_and_nothing_outside() {
        let (root, ws, outside) = tree("confined");
        let readable = vec![ws.clone(), PathBuf::from("/usr"), PathBuf::from("/lib"), PathBuf::from("/bin")];
        let readable =
            Some(readable.into_iter().chain(["/lib64", "/etc", "/proc", "/dev"].map(PathBuf::from)).collect());
        let cmd =
            format!("head -1 /proc/self/status; ls /proc | grep -c '^[0-9]'; cat {}/f; echo cat=$?", outside.display());
        let out = run_confined(features(), Level::Read, Network::None, &ws, readable, &cmd);
        // Its own /proc (only its own processes: the shell, ls, grep, and nothing of the host's).
        assert!(out.starts_with("Name:\thead\n"), "{out}");
        assert!(out.lines().nth(1).and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n <= 4), "{out}");
        assert!(out.contains("cat=1") && !out.contains("\nx"), "{out}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_filter_refuses_x32_numbers() {
        let program = seccomp_filter(Level::Read, true, true).unwrap();
        if cfg!(target_arch = "x86_64") {
            assert_eq!((program[4].code, program[4].k), (0x35, 0x4000_0000));
            assert_eq!(program[5].k, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        }
    }
}
