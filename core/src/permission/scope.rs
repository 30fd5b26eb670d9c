//! Where a session reaches on the file system. Every path a tool touches is resolved (symlinks, `..`)
//! before it is checked, and checked again on the opened file descriptor, so a symlink swapped between
//! the check and the use cannot lead outside. A path outside reach is refused in the same words whether
//! or not it exists.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Directories readable by every session even when reads are confined: programs and libraries. (/etc
/// is not among them: it holds secrets as well as configuration. The shell's sandbox adds it, since
/// programs need their configuration.)
pub const SYSTEM_DIRS: [&str; 5] = ["/usr", "/lib", "/lib64", "/bin", "/sbin"];

/// The longest path accepted, in bytes (Linux's PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;

/// How many symlinks one resolution may follow (Linux's limit).
const MAX_SYMLINKS: usize = 40;

/// A session's directories. All are absolute and resolved once, when the scope is made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Relative paths resolve here; writable at `workspace`, read-only at `read`.
    pub working_dir: PathBuf,
    /// More of the workspace: the working directory's rights.
    pub workspace_dirs: Vec<PathBuf>,
    /// Readable, never written.
    pub readable_dirs: Vec<PathBuf>,
    /// When on, reads outside the directories above and the system directories are refused.
    pub confine_reads: bool,
}

/// Why a path was refused. The message never says whether a path outside reach exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("path '{0}' is outside this session's reach")]
    OutsideReach(String),
    #[error("path '{0}' is not valid: {1}")]
    Invalid(String, &'static str),
    #[error("{0}")]
    Io(String),
}

/// Reading or writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Where writes may land, decided by the session's level (and an approval, which never widens it
/// past the workspace roots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteReach {
    Nowhere,
    WorkspaceRoots,
    Anywhere,
}

impl Scope {
    /// A scope whose directories are resolved now; each must exist and be a directory.
    pub fn new(
        working_dir: impl AsRef<Path>,
        workspace_dirs: impl IntoIterator<Item = impl AsRef<Path>>,
        readable_dirs: impl IntoIterator<Item = impl AsRef<Path>>,
        confine_reads: bool,
    ) -> Result<Scope, String> {
        let canon = |p: &Path, what: &str| -> Result<PathBuf, String> {
            let c = std::fs::canonicalize(p).map_err(|e| format!("{what} '{}': {e}", p.display()))?;
            if !c.is_dir() {
                return Err(format!("{what} '{}' is not a directory", p.display()));
            }
            Ok(c)
        };
        let working_dir = canon(working_dir.as_ref(), "working directory")?;
        let resolve_list = |list: Vec<PathBuf>, what: &str| -> Result<Vec<PathBuf>, String> {
            list.iter().map(|p| canon(&working_dir.join(p), what)).collect()
        };
        Ok(Scope {
            workspace_dirs: resolve_list(
                workspace_dirs.into_iter().map(|p| p.as_ref().to_path_buf()).collect(),
                "workspace directory",
            )?,
            readable_dirs: resolve_list(
                readable_dirs.into_iter().map(|p| p.as_ref().to_path_buf()).collect(),
                "readable directory",
            )?,
            working_dir,
            confine_reads,
        })
    }

    /// The process's current directory, nothing more, reads not confined.
    pub fn current_dir() -> Result<Scope, String> {
        let cwd = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
        Scope::new(cwd, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), false)
    }

    /// The roots writes may land under at `workspace`.
    pub fn workspace_roots(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.working_dir.as_path()).chain(self.workspace_dirs.iter().map(PathBuf::as_path))
    }

    /// Whether a resolved path may be accessed.
    pub fn allows(&self, resolved: &Path, access: Access, writes: WriteReach) -> bool {
        match access {
            Access::Write => match writes {
                WriteReach::Anywhere => true,
                WriteReach::Nowhere => false,
                WriteReach::WorkspaceRoots => self.workspace_roots().any(|r| resolved.starts_with(r)),
            },
            Access::Read => {
                !self.confine_reads
                    || self.workspace_roots().any(|r| resolved.starts_with(r))
                    || self.readable_dirs.iter().any(|r| resolved.starts_with(r))
                    || SYSTEM_DIRS.iter().any(|r| resolved.starts_with(r))
            }
        }
    }

    /// Resolves `given` (relative to the working directory) and checks it. The answer for a path
    /// outside reach is the same whether or not it exists.
    pub fn check(&self, given: &str, access: Access, writes: WriteReach) -> Result<PathBuf, ScopeError> {
        validate(given)?;
        let resolved = resolve(&self.working_dir, Path::new(given));
        if self.allows(&resolved, access, writes) {
            Ok(resolved)
        } else {
            Err(ScopeError::OutsideReach(given.to_string()))
        }
    }

    /// Opens a checked path for reading, and checks the opened file again by its descriptor.
    pub fn open_read(&self, given: &str, writes: WriteReach) -> Result<(PathBuf, File), ScopeError> {
        let resolved = self.check(given, Access::Read, writes)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&resolved)
            .map_err(|e| self.io_error(given, &resolved, Access::Read, writes, e))?;
        self.recheck(given, &file, Access::Read, writes)?;
        Ok((resolved, file))
    }

    /// Opens (creating or truncating) a checked path for writing. The parent directory is opened and
    /// checked by descriptor first, then the file is created relative to it without following links.
    pub fn open_write(&self, given: &str, writes: WriteReach, truncate: bool) -> Result<(PathBuf, File), ScopeError> {
        let resolved = self.check(given, Access::Write, writes)?;
        let parent = resolved.parent().ok_or_else(|| ScopeError::Invalid(given.to_string(), "no file name"))?;
        let name = resolved.file_name().ok_or_else(|| ScopeError::Invalid(given.to_string(), "no file name"))?;
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(parent)
            .map_err(|e| self.io_error(given, parent, Access::Write, writes, e))?;
        self.recheck(given, &dir, Access::Write, writes)?;
        let file = openat_write(&dir, name, truncate).map_err(|e| ScopeError::Io(format!("{given}: {e}")))?;
        self.recheck(given, &file, Access::Write, writes)?;
        Ok((resolved, file))
    }

    fn recheck(&self, given: &str, file: &File, access: Access, writes: WriteReach) -> Result<(), ScopeError> {
        use std::os::fd::AsRawFd;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| ScopeError::Io(format!("{given}: {e}")))?;
        if self.allows(&real, access, writes) { Ok(()) } else { Err(ScopeError::OutsideReach(given.to_string())) }
    }

    fn io_error(&self, given: &str, path: &Path, access: Access, writes: WriteReach, e: io::Error) -> ScopeError {
        // ELOOP: the last component became a symlink after the check. Say nothing about where it points.
        if e.raw_os_error() == Some(libc::ELOOP) || !self.allows(path, access, writes) {
            return ScopeError::OutsideReach(given.to_string());
        }
        match e.kind() {
            io::ErrorKind::NotFound => ScopeError::Io(format!("no such file or directory: {given}")),
            _ => ScopeError::Io(format!("{given}: {e}")),
        }
    }
}

fn openat_write(dir: &File, name: &std::ffi::OsStr, truncate: bool) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let cname = std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut flags = libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if truncate {
        flags |= libc::O_TRUNC;
    }
    // SAFETY: `dir` is an open directory descriptor and `cname` a NUL-terminated string, both live for
    // the call; the returned descriptor is owned by the File made from it.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), cname.as_ptr(), flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Refuses what is no path at all: empty, NUL bytes, longer than [`MAX_PATH_BYTES`].
pub fn validate(given: &str) -> Result<(), ScopeError> {
    if given.trim().is_empty() {
        return Err(ScopeError::Invalid(given.to_string(), "it is empty"));
    }
    if given.contains('\0') {
        return Err(ScopeError::Invalid(given.escape_default().to_string(), "it contains a NUL byte"));
    }
    if given.len() > MAX_PATH_BYTES {
        return Err(ScopeError::Invalid(format!("{}…", &given[..given.floor_char_boundary(64)]), "it is too long"));
    }
    Ok(())
}

/// Resolves `path` against `base` the way the kernel would: symlinks followed (up to 40), `..` taken
/// after the symlinks before it. Components that do not exist are appended as they are. The result is
/// absolute and free of `.`, `..` and symlinks in its existing part.
pub fn resolve(base: &Path, path: &Path) -> PathBuf {
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut out =
        if path.is_absolute() || base == Path::new("/") { PathBuf::from("/") } else { resolve(Path::new("/"), base) };
    let mut links = 0;
    let mut missing = false;
    while let Some(comp) = pending.pop() {
        match comp.to_str() {
            Some("..") => {
                out.pop();
                continue;
            }
            Some(".") | Some("") => continue,
            _ => {}
        }
        let next = out.join(&comp);
        if !missing {
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    let target = std::fs::read_link(&next).unwrap_or_default();
                    if links > MAX_SYMLINKS || target.as_os_str().is_empty() {
                        // Unresolvable: treat as a name that does not exist.
                        out = next;
                        missing = true;
                        continue;
                    }
                    if target.is_absolute() {
                        out = PathBuf::from("/");
                    }
                    push_components(&mut pending, &target);
                    continue;
                }
                Ok(_) => {}
                Err(_) => missing = true,
            }
        }
        out = next;
    }
    out
}

/// Pushes the components of `p` onto a stack so they pop in order.
fn push_components(stack: &mut Vec<OsString>, p: &Path) {
    let comps: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(comps.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_dots_and_symlinks() {
        let d = tempdir("resolve");
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::os::unix::fs::symlink(d.join("a/b"), d.join("link")).unwrap();
        assert_eq!(resolve(&d, Path::new("link/../x")), d.join("a/x"));
        assert_eq!(resolve(&d, Path::new("a/./b/../b")), d.join("a/b"));
        assert_eq!(resolve(&d, Path::new("missing/../a")), d.join("a"));
        assert_eq!(resolve(&d, Path::new("/../../etc")), PathBuf::from("/etc"));
    }

    #[test]
    fn symlink_loops_do_not_hang() {
        let d = tempdir("loop");
        std::os::unix::fs::symlink(d.join("l2"), d.join("l1")).unwrap();
        std::os::unix::fs::symlink(d.join("l1"), d.join("l2")).unwrap();
        let r = resolve(&d, Path::new("l1/x"));
        assert!(r.starts_with(&d));
    }

    pub(crate) fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ambit-scope-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
    }
}
