//! Where a session reaches on the file system. Every path a tool touches is resolved (symlinks, `..`)
//! before it is checked, then opened beneath the root that grants it following no link at all
//! (the `open` module), so a symlink swapped in between the check and the use cannot lead outside. A path
//! outside reach is refused in the same words whether or not it exists, and whatever it is.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::open::{self, Kind, Located, Root};

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
    /// The path is outside this session's reach (or does not exist there; the words do not say).
    #[error("path '{0}' is outside this session's reach")]
    OutsideReach(String),
    /// A FIFO, a device, a socket or a directory where a file is read or written. Refused before any
    /// open that could block; the words do not depend on which kind it is.
    #[error("path '{0}' is not a regular file; the file tools open regular files only")]
    NotRegular(String),
    /// The path itself is malformed (empty, a NUL byte, …); the second field says how.
    #[error("path '{0}' is not valid: {1}")]
    Invalid(String, &'static str),
    /// A create that must not replace found the name taken.
    #[error("path '{0}' already exists")]
    Exists(String),
    /// The file system failed (the text is its error).
    #[error("{0}")]
    Io(String),
}

/// Reading or writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading.
    Read,
    /// Writing.
    Write,
}

/// Where writes may land, decided by the session's level (and an approval, which never widens it
/// past the workspace roots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteReach {
    /// No writes (`none`, `read`).
    Nowhere,
    /// Under the workspace directories (`workspace`).
    WorkspaceRoots,
    /// Anywhere the process may write (`unrestricted`).
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
        let workspace_dirs = resolve_list(
            workspace_dirs.into_iter().map(|p| p.as_ref().to_path_buf()).collect(),
            "workspace directory",
        )?;
        let readable_dirs =
            resolve_list(readable_dirs.into_iter().map(|p| p.as_ref().to_path_buf()).collect(), "readable directory")?;
        // A readable directory is never written (SPEC §1); one inside a workspace root would be written
        // with its root, by the file tools and the shell's writable mount alike, so it is refused here.
        for r in &readable_dirs {
            if let Some(root) = std::iter::once(&working_dir).chain(&workspace_dirs).find(|w| r.starts_with(w)) {
                return Err(format!(
                    "readable directory '{}' lies inside the workspace root '{}', where it would be written; \
                     a readable directory is never written, so name one outside the workspace",
                    r.display(),
                    root.display()
                ));
            }
        }
        Ok(Scope { workspace_dirs, readable_dirs, working_dir, confine_reads })
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
        self.granting_root(resolved, access, writes).is_some()
    }

    /// The root directory that grants `access` to the resolved path: a workspace root, a readable
    /// directory, a system directory, or `/` where reach is not confined. The one rule of reach.
    fn granting_root(&self, resolved: &Path, access: Access, writes: WriteReach) -> Option<&Path> {
        let under = |r: &&Path| resolved.starts_with(r);
        match access {
            Access::Write => match writes {
                WriteReach::Anywhere => Some(Path::new("/")),
                WriteReach::Nowhere => None,
                WriteReach::WorkspaceRoots => self.workspace_roots().find(under),
            },
            Access::Read => self
                .workspace_roots()
                .chain(self.readable_dirs.iter().map(PathBuf::as_path))
                .chain(SYSTEM_DIRS.iter().map(Path::new))
                .find(under)
                .or_else(|| (!self.confine_reads).then_some(Path::new("/"))),
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

    /// Checks `given`, then opens the root that grants it and locates the path beneath that root with
    /// `O_PATH`, following no link (see the `open` module). Nothing is opened for reading or writing yet,
    /// so nothing can block. A link met on the way (swapped in after the check) is refused as outside
    /// reach.
    pub(crate) fn locate(&self, given: &str, access: Access, writes: WriteReach) -> Result<Found<'_>, ScopeError> {
        let resolved = self.check(given, access, writes)?;
        let beneath = self.beneath(given, &resolved, access, writes)?;
        let rel = resolved.strip_prefix(beneath.root.path()).unwrap_or(Path::new("")).to_path_buf();
        let located = beneath.locate(&rel).map_err(|e| e.into_scope_error(given))?;
        Ok(Found { resolved, rel, located, beneath })
    }

    /// The root that grants `access` to `resolved`, opened.
    fn beneath(
        &self,
        given: &str,
        resolved: &Path,
        access: Access,
        writes: WriteReach,
    ) -> Result<Beneath<'_>, ScopeError> {
        let root =
            self.granting_root(resolved, access, writes).ok_or_else(|| ScopeError::OutsideReach(given.to_string()))?;
        let root = Root::open(root, open::method()).map_err(|e| refusal(given, e))?;
        Ok(Beneath { scope: self, root, access, writes })
    }

    /// Opens a checked path for reading. Only a regular file is opened; anything else (a FIFO, a device,
    /// a socket, a directory) is refused before any open that could block.
    pub fn open_read(&self, given: &str, writes: WriteReach) -> Result<(PathBuf, File), ScopeError> {
        let found = self.locate(given, Access::Read, writes)?;
        let file = found.open_file(given)?;
        Ok((found.resolved, file))
    }

    /// Opens (creating, and truncating if asked) a checked path for writing, beneath the workspace root
    /// that grants it, following no link. An existing file that is not a regular file is refused before
    /// any open that could block; the open itself never waits (`O_NONBLOCK`).
    pub fn open_write(&self, given: &str, writes: WriteReach, truncate: bool) -> Result<(PathBuf, File), ScopeError> {
        let resolved = self.check(given, Access::Write, writes)?;
        let beneath = self.beneath(given, &resolved, Access::Write, writes)?;
        let rel = resolved.strip_prefix(beneath.root.path()).unwrap_or(Path::new(""));
        if rel.as_os_str().is_empty() {
            return Err(ScopeError::NotRegular(given.to_string()));
        }
        match beneath.locate(rel) {
            Ok(located) if located.kind == Kind::Regular => {}
            Ok(_) => return Err(ScopeError::NotRegular(given.to_string())),
            Err(Refused::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into_scope_error(given)),
        }
        let file = match beneath.root.create(rel) {
            Ok(Some(file)) => file,
            // ENXIO: a FIFO with no reader, raced in after the look above.
            Ok(None) => return Err(ScopeError::NotRegular(given.to_string())),
            Err(e) if open::is_fifo_without_reader(&e) => return Err(ScopeError::NotRegular(given.to_string())),
            Err(e) => return Err(refusal(given, e)),
        };
        beneath.recheck(beneath.root.real_path_of_file(&file)).map_err(|e| e.into_scope_error(given))?;
        if truncate {
            file.set_len(0).map_err(|e| ScopeError::Io(format!("{given}: {e}")))?;
        }
        Ok((resolved, file))
    }
}

impl Scope {
    /// The directory an entry `given` is made in, checked for writing and located beneath the
    /// workspace root that grants it, with the entry's name in it and the path as resolved.
    fn parent_for_write(&self, given: &str, writes: WriteReach) -> Result<ParentDir<'_>, ScopeError> {
        let resolved = self.check(given, Access::Write, writes)?;
        let beneath = self.beneath(given, &resolved, Access::Write, writes)?;
        let rel = resolved.strip_prefix(beneath.root.path()).unwrap_or(Path::new("")).to_path_buf();
        let (Some(name), Some(parent_rel)) = (rel.file_name(), rel.parent()) else {
            return Err(ScopeError::NotRegular(given.to_string()));
        };
        let name = name.to_os_string();
        let parent = beneath.locate(parent_rel).map_err(|e| e.into_scope_error(given))?;
        if parent.kind != Kind::Directory {
            return Err(ScopeError::Io(format!("no such directory for {given}")));
        }
        Ok(ParentDir { resolved, beneath, rel, parent, name })
    }

    /// Writes `bytes` to `given` atomically: a new file beside it (`O_EXCL`, beneath the workspace root
    /// that grants the write, following no link) is written and synced, then renamed over the name, so
    /// a reader sees the old content or the new, never part of it. An existing name that is not a
    /// regular file is refused; with `replace` false an existing file is refused too
    /// ([`ScopeError::Exists`]), atomically (`RENAME_NOREPLACE`).
    pub(crate) fn write_atomic(
        &self,
        given: &str,
        writes: WriteReach,
        bytes: &[u8],
        replace: bool,
    ) -> Result<PathBuf, ScopeError> {
        let at = self.parent_for_write(given, writes)?;
        match at.beneath.locate(&at.rel) {
            Ok(located) if located.kind == Kind::Regular && !replace => {
                return Err(ScopeError::Exists(given.to_string()));
            }
            Ok(located) if located.kind == Kind::Regular => {}
            Ok(_) => return Err(ScopeError::NotRegular(given.to_string())),
            Err(Refused::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into_scope_error(given)),
        }
        let tmp = temp_name(&at.name, "tmp")?;
        let mut file = open::create_new_in(&at.parent, &tmp).map_err(|e| refusal(given, e))?;
        let written = std::io::Write::write_all(&mut file, bytes).and_then(|()| file.sync_all());
        drop(file);
        let renamed = written.and_then(|()| open::rename_in(&at.parent, &tmp, &at.name, replace));
        if let Err(e) = renamed {
            let _ = open::unlink_in(&at.parent, &tmp, false);
            return Err(match e.kind() {
                io::ErrorKind::AlreadyExists => ScopeError::Exists(given.to_string()),
                io::ErrorKind::IsADirectory | io::ErrorKind::NotADirectory => ScopeError::NotRegular(given.to_string()),
                _ => refusal(given, e),
            });
        }
        Ok(at.resolved)
    }

    /// Makes the directory `given` beneath the workspace root that grants the write (its parent must
    /// exist); a directory already there is fine, anything else under the name is refused.
    pub(crate) fn create_dir(&self, given: &str, writes: WriteReach) -> Result<PathBuf, ScopeError> {
        let at = self.parent_for_write(given, writes)?;
        match open::mkdir_in(&at.parent, &at.name) {
            Ok(()) => Ok(at.resolved),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match at.beneath.locate(&at.rel) {
                Ok(located) if located.kind == Kind::Directory => Ok(at.resolved),
                Ok(_) => Err(ScopeError::Exists(given.to_string())),
                Err(e) => Err(e.into_scope_error(given)),
            },
            Err(e) => Err(refusal(given, e)),
        }
    }

    /// Removes the directory `given` and everything beneath it, following no link: first renamed aside
    /// in one step (so it is gone under its name at once, never half there), then emptied and removed
    /// entry by entry beneath the workspace root that grants the write (see [`open::remove_tree`]).
    pub(crate) fn remove_tree(&self, given: &str, writes: WriteReach) -> Result<PathBuf, ScopeError> {
        let at = self.parent_for_write(given, writes)?;
        match at.beneath.locate(&at.rel) {
            Ok(located) if located.kind == Kind::Directory => {}
            Ok(_) => return Err(ScopeError::Io(format!("not a directory: {given}"))),
            Err(e) => return Err(e.into_scope_error(given)),
        }
        let aside = temp_name(&at.name, "removed")?;
        open::rename_in(&at.parent, &at.name, &aside, false).map_err(|e| refusal(given, e))?;
        open::remove_tree(&at.parent, &aside).map_err(|e| {
            ScopeError::Io(format!("{given} was removed from its place, but not all of it was deleted: {e}"))
        })?;
        Ok(at.resolved)
    }
}

/// The parent directory of an entry to be made, located beneath its granting root.
struct ParentDir<'a> {
    resolved: PathBuf,
    beneath: Beneath<'a>,
    /// The entry relative to the granting root.
    rel: PathBuf,
    parent: Located,
    name: OsString,
}

/// A hidden name beside `name` for a file or directory on its way in or out: `.name.what-<random>`.
fn temp_name(name: &std::ffi::OsStr, what: &str) -> Result<OsString, ScopeError> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| ScopeError::Io(format!("no randomness for a temporary name: {e}")))?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut out = OsString::from(".");
    out.push(name);
    out.push(format!(".{what}-{hex}"));
    Ok(out)
}

/// A checked path, located beneath the root that grants it (an `O_PATH` descriptor: nothing opened
/// for reading or writing yet).
#[derive(Debug)]
pub(crate) struct Found<'a> {
    /// The path as resolved and checked.
    pub(crate) resolved: PathBuf,
    /// The path relative to the granting root.
    pub(crate) rel: PathBuf,
    pub(crate) located: Located,
    /// The granting root, to open more beneath it (a directory walk).
    pub(crate) beneath: Beneath<'a>,
}

impl Found<'_> {
    /// What the path is.
    pub(crate) fn kind(&self) -> Kind {
        self.located.kind
    }

    /// Opens the located path for reading if it is a regular file; anything else is refused.
    pub(crate) fn open_file(&self, given: &str) -> Result<File, ScopeError> {
        self.beneath.read(&self.rel, &self.located).map_err(|e| e.into_scope_error(given))
    }
}

/// An opened root that grants an access, with the scope to re-check against where the kernel gives no
/// `openat2`. Everything a directory walk opens goes through here.
#[derive(Debug)]
pub(crate) struct Beneath<'a> {
    scope: &'a Scope,
    root: Root,
    access: Access,
    writes: WriteReach,
}

/// Why an open beneath a root failed, before it is put in words for a given path.
#[derive(Debug)]
pub(crate) enum Refused {
    /// A link was met (swapped in after the check), or the opened file turned out to lie outside.
    Outside,
    /// A FIFO, device, socket or directory where a regular file was wanted.
    NotRegular,
    Io(io::Error),
}

impl Refused {
    fn from_io(e: io::Error) -> Refused {
        if open::is_outside(&e) { Refused::Outside } else { Refused::Io(e) }
    }

    /// The refusal in words, for the path the caller gave.
    pub(crate) fn into_scope_error(self, given: &str) -> ScopeError {
        match self {
            Refused::Outside => ScopeError::OutsideReach(given.to_string()),
            Refused::NotRegular => ScopeError::NotRegular(given.to_string()),
            Refused::Io(e) => refusal(given, e),
        }
    }
}

fn refusal(given: &str, e: io::Error) -> ScopeError {
    match Refused::from_io(e) {
        Refused::Io(e) if e.kind() == io::ErrorKind::NotFound => {
            ScopeError::Io(format!("no such file or directory: {given}"))
        }
        Refused::Io(e) => ScopeError::Io(format!("{given}: {e}")),
        other => other.into_scope_error(given),
    }
}

impl Beneath<'_> {
    /// Locates `rel` beneath the root (`O_PATH`, no link followed). A trailing symlink is refused as
    /// outside reach, like one met on the way.
    pub(crate) fn locate(&self, rel: &Path) -> Result<Located, Refused> {
        let located = self.root.locate(rel).map_err(Refused::from_io)?;
        if located.kind == Kind::Symlink {
            return Err(Refused::Outside);
        }
        self.recheck(self.root.real_path(&located))?;
        Ok(located)
    }

    /// Opens a located regular file for reading; anything else is refused.
    pub(crate) fn read(&self, rel: &Path, located: &Located) -> Result<File, Refused> {
        self.root.read_located(rel, located).map_err(Refused::from_io)?.ok_or(Refused::NotRegular)
    }

    /// The names in a located directory, at most `max`, and whether there were more.
    pub(crate) fn list(&self, located: &Located, max: usize) -> Result<(Vec<std::ffi::OsString>, bool), Refused> {
        self.root.list(located, max).map_err(Refused::from_io)
    }

    /// Where the open method asks for it (Linux without `openat2`: the opened descriptor's real path,
    /// read back from `/proc/self/fd`), the real path must still be in reach. (With `openat2` the
    /// kernel has already kept the walk beneath the root; the portable method has compared the
    /// descriptor's identity with the path's.)
    fn recheck(&self, real: Option<io::Result<PathBuf>>) -> Result<(), Refused> {
        let Some(real) = real else { return Ok(()) };
        let real = real.map_err(Refused::Io)?;
        if self.scope.allows(&real, self.access, self.writes) { Ok(()) } else { Err(Refused::Outside) }
    }
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

    /// Found by an attack from outside: a readable directory inside the workspace was written by the
    /// file tools and the shell. Such a scope is refused, through a symlink too; one beside it is kept.
    #[test]
    fn a_readable_directory_inside_a_workspace_root_is_refused() {
        let d = tempdir("overlap");
        for dir in ["ws/ro", "extra/ro", "beside"] {
            std::fs::create_dir_all(d.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(d.join("ws/ro"), d.join("ro_link")).unwrap();
        let none: Vec<PathBuf> = Vec::new();
        for (workspaces, readable) in [
            (none.clone(), d.join("ws/ro")),
            (none.clone(), d.join("ws")),
            (none.clone(), d.join("ro_link")),
            (vec![d.join("extra")], d.join("extra/ro")),
        ] {
            let e = Scope::new(d.join("ws"), workspaces, [&readable], true).unwrap_err();
            assert!(e.contains("lies inside the workspace root") && e.contains("is never written"), "{e}");
        }
        // Control: a readable directory beside the workspace is accepted.
        let ok = Scope::new(d.join("ws"), none, [d.join("beside")], true).unwrap();
        assert_eq!(ok.readable_dirs, [d.join("beside")]);
    }

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
