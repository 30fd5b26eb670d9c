//! The one way the file tools open anything: beneath the root that grants the access, following no
//! symlink, and checked after the open that what was opened is what was checked.
//!
//! [`super::scope::Scope`] resolves a path (symlinks, `..`) and checks it first, so the path handed
//! here is free of links in its existing part; this module then opens exactly that path. There are two
//! ways ([`Method`]):
//!
//! - On Linux, by descriptor (the `linux` module): beneath an `O_PATH` descriptor of the root, by
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` or one `openat(O_NOFOLLOW)` per component, so a
//!   symlink swapped in between the check and the open fails the open instead of leading elsewhere.
//! - Everywhere else (macOS, iOS, Windows), by path (the `portable` module): each component is looked
//!   at without following it and must not be a link, the path is opened, and the opened descriptor's
//!   device and inode must equal those the path was located with and those it has when looked at again
//!   after the open; a mismatch is refused as outside reach. On Linux this method is used only when a
//!   test forces it ([`crate::testing::force_portable_file_open`]), or in a build with
//!   `--cfg ambit_force_portable`, which compiles the core as it is compiled off Linux.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(all(target_os = "linux", not(ambit_force_portable)))]
mod linux;
mod portable;

#[cfg(all(target_os = "linux", not(ambit_force_portable)))]
use std::os::fd::{AsFd, OwnedFd};

/// How a path is opened beneath a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (Linux ≥ 5.6).
    #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
    Openat2,
    /// One `openat(…, O_NOFOLLOW)` per component, each checked by `fstat`; the caller re-checks the
    /// result through `/proc/self/fd` ([`real_path`]).
    #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
    ComponentWalk,
    /// By path, no component a link, the opened descriptor's device and inode compared with the path's
    /// (the `portable` module).
    Portable,
}

/// Set by a test to use [`Method::Portable`] on Linux too.
static FORCE_PORTABLE: AtomicBool = AtomicBool::new(false);

/// Makes every root opened from now on in this process use [`Method::Portable`] (on), or the method
/// this platform gives (off). For tests: the portable method is the one used off Linux.
pub(crate) fn force_portable(on: bool) {
    FORCE_PORTABLE.store(on, Ordering::Relaxed);
}

/// The method this platform gives: on Linux the kernel's (probed once), elsewhere [`Method::Portable`].
pub(crate) fn method() -> Method {
    if FORCE_PORTABLE.load(Ordering::Relaxed) {
        return Method::Portable;
    }
    #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
    return linux::method();
    #[cfg(not(all(target_os = "linux", not(ambit_force_portable))))]
    Method::Portable
}

/// What an opened path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Regular,
    Directory,
    /// The last component itself is a symlink (it was located without being followed).
    Symlink,
    /// A FIFO, a character or block device, or a socket.
    Special,
}

impl Kind {
    pub(crate) fn of(meta: &Metadata) -> Kind {
        let t = meta.file_type();
        if t.is_file() {
            Kind::Regular
        } else if t.is_dir() {
            Kind::Directory
        } else if t.is_symlink() {
            Kind::Symlink
        } else {
            Kind::Special
        }
    }
}

/// What a located path or an opened root is held by.
#[derive(Debug)]
enum Handle {
    /// An `O_PATH` descriptor (Linux).
    #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
    Fd(OwnedFd),
    /// The absolute path and the identity (device and inode) it was located with.
    Path(PathBuf, portable::Identity),
}

/// A path located beneath a root, and what it is. Locating never blocks and never runs a device's
/// open routine.
#[derive(Debug)]
pub(crate) struct Located {
    handle: Handle,
    pub(crate) meta: Metadata,
    pub(crate) kind: Kind,
}

/// An open directory that grants access to everything beneath it.
#[derive(Debug)]
pub(crate) struct Root {
    handle: Handle,
    path: PathBuf,
    #[cfg_attr(not(all(target_os = "linux", not(ambit_force_portable))), allow(dead_code))]
    method: Method,
}

/// The error for a root and a located path held by different methods (never made by this module).
#[cfg(all(target_os = "linux", not(ambit_force_portable)))]
fn mixed() -> io::Error {
    io::Error::other("a path located by one open method was used with another")
}

/// Whether an open failed because it met a link (swapped in after the check), a path leading out of
/// the root, or a descriptor that is not what was checked: the caller refuses it as outside reach.
pub(crate) fn is_outside(e: &io::Error) -> bool {
    #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
    if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EXDEV)) {
        return true;
    }
    portable::is_outside(e)
}

/// Whether a non-blocking open for writing failed because the path is a FIFO with no reader.
pub(crate) fn is_fifo_without_reader(e: &io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::ENXIO);
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

impl Root {
    /// Opens the root directory `path` (absolute and free of symlinks), following no link.
    pub(crate) fn open(path: &Path, method: Method) -> io::Result<Root> {
        let handle = match method {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            Method::Openat2 | Method::ComponentWalk => Handle::Fd(linux::open_root(path, method)?),
            Method::Portable => {
                let (path, id) = portable::open_root(path)?;
                Handle::Path(path, id)
            }
        };
        Ok(Root { handle, path: path.to_path_buf(), method })
    }

    /// The root's own path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Locates `rel` (relative, free of `..` and symlinks) beneath the root without opening it for
    /// reading or writing: a symlink met on the way fails as outside ([`is_outside`]); a symlink as the
    /// last component is handed back as itself.
    pub(crate) fn locate(&self, rel: &Path) -> io::Result<Located> {
        match &self.handle {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            Handle::Fd(root) => {
                let fd = linux::locate(root.as_fd(), rel, self.method)?;
                let meta = linux::metadata(fd.as_fd())?;
                Ok(Located { kind: Kind::of(&meta), meta, handle: Handle::Fd(fd) })
            }
            Handle::Path(root, _) => {
                let (path, meta, id) = portable::locate(root, rel)?;
                Ok(Located { kind: Kind::of(&meta), meta, handle: Handle::Path(path, id) })
            }
        }
    }

    /// Opens a located regular file for reading, through the very file that was located and checked.
    /// Anything but a regular file is refused with `None`.
    pub(crate) fn read_located(&self, rel: &Path, located: &Located) -> io::Result<Option<File>> {
        if located.kind != Kind::Regular {
            return Ok(None);
        }
        match (&self.handle, &located.handle) {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            (Handle::Fd(root), Handle::Fd(fd)) => {
                linux::read_located(root.as_fd(), rel, fd.as_fd(), &located.meta, self.method)
            }
            (Handle::Path(..), Handle::Path(path, id)) => {
                let _ = rel;
                portable::read_located(path, id)
            }
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            _ => Err(mixed()),
        }
    }

    /// Opens `rel` for writing, creating it (mode 0644) if missing, never following a link and never
    /// waiting: a FIFO fails (or opens at once), and anything but a regular file is refused with `None`
    /// before a byte is written. Call [`Root::locate`] first so an existing special file is refused
    /// before this open is even tried.
    pub(crate) fn create(&self, rel: &Path) -> io::Result<Option<File>> {
        match &self.handle {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            Handle::Fd(root) => linux::create(root.as_fd(), rel, self.method),
            Handle::Path(root, _) => portable::create(root, rel),
        }
    }

    /// The names in the located directory, at most `max` of them (`.` and `..` left out), and whether
    /// there were more.
    pub(crate) fn list(&self, located: &Located, max: usize) -> io::Result<(Vec<OsString>, bool)> {
        if located.kind != Kind::Directory {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        match &located.handle {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            Handle::Fd(fd) => linux::list(fd.as_fd(), max),
            Handle::Path(path, id) => portable::list(path, id, max),
        }
    }

    /// Where this root's method needs it (the component walk on Linux), the real path of a located
    /// path, for the caller to check against the scope again; `None` where the method has already kept
    /// the open beneath the root.
    pub(crate) fn real_path(&self, located: &Located) -> Option<io::Result<PathBuf>> {
        match &located.handle {
            #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
            Handle::Fd(fd) => (self.method == Method::ComponentWalk).then(|| linux::real_path(fd.as_fd())),
            Handle::Path(..) => None,
        }
    }

    /// As [`Root::real_path`], for a file this root opened.
    pub(crate) fn real_path_of_file(&self, file: &File) -> Option<io::Result<PathBuf>> {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        if self.method == Method::ComponentWalk {
            return Some(linux::real_path(file.as_fd()));
        }
        let _ = file;
        None
    }
}

/// Creates the directory `name` (one component) in the located directory `parent`, mode 0755. A name
/// already taken (by anything, a link included) fails with `AlreadyExists`.
pub(crate) fn mkdir_in(parent: &Located, name: &OsStr) -> io::Result<()> {
    match &parent.handle {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        Handle::Fd(fd) => linux::mkdir_in(fd.as_fd(), name),
        Handle::Path(path, id) => portable::mkdir_in(path, id, name),
    }
}

/// Creates the new regular file `name` (one component) in the located directory `parent` for writing,
/// mode 0644: an existing name, a link included, fails with `AlreadyExists` instead of being opened.
pub(crate) fn create_new_in(parent: &Located, name: &OsStr) -> io::Result<File> {
    match &parent.handle {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        Handle::Fd(fd) => linux::create_new_in(fd.as_fd(), name),
        Handle::Path(path, id) => portable::create_new_in(path, id, name),
    }
}

/// Renames `from` to `to`, both single components of the located directory `parent`: neither name's
/// link (if it is one) is followed. With `replace` false an existing `to` fails the rename with
/// `AlreadyExists`.
pub(crate) fn rename_in(parent: &Located, from: &OsStr, to: &OsStr, replace: bool) -> io::Result<()> {
    match &parent.handle {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        Handle::Fd(fd) => linux::rename_in(fd.as_fd(), from, to, replace),
        Handle::Path(path, id) => portable::rename_in(path, id, from, to, replace),
    }
}

/// Removes the name `name` (one component) from the located directory `parent`: a directory (which
/// must be empty) with `dir`, anything else (a link itself, never what it points to) without.
pub(crate) fn unlink_in(parent: &Located, name: &OsStr, dir: bool) -> io::Result<()> {
    match &parent.handle {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        Handle::Fd(fd) => linux::unlink_in(fd.as_fd(), name, dir),
        Handle::Path(path, id) => portable::unlink_in(path, id, name, dir),
    }
}

/// Removes the directory `name` of the located directory `parent` with everything beneath it,
/// following no link (a link is removed as itself): on Linux at most 100,000 entries and 64 levels
/// deep; elsewhere by the standard library's removal, which follows no link either, without a bound.
pub(crate) fn remove_tree(parent: &Located, name: &OsStr) -> io::Result<()> {
    match &parent.handle {
        #[cfg(all(target_os = "linux", not(ambit_force_portable)))]
        Handle::Fd(fd) => linux::remove_tree(fd.as_fd(), name),
        Handle::Path(path, id) => portable::remove_tree(path, id, name),
    }
}

/// Test support for the swap races of both methods: a thread exchanging each pair of paths (Linux's
/// `RENAME_EXCHANGE`, so each name is always one or the other) until stopped.
#[cfg(all(test, target_os = "linux"))]
struct Swapper {
    stop: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

#[cfg(all(test, target_os = "linux"))]
impl Swapper {
    /// Starts swapping each `(a, b)` pair of paths under `dir`.
    fn start(dir: &Path, pairs: &[(&str, &str)]) -> Swapper {
        let c = |p: &str| std::ffi::CString::new(dir.join(p).into_os_string().into_encoded_bytes()).unwrap();
        let pairs: Vec<_> = pairs.iter().map(|(a, b)| (c(a), c(b))).collect();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                for (a, b) in &pairs {
                    // SAFETY: two NUL-terminated paths valid for the call.
                    let rc = unsafe {
                        libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE)
                    };
                    assert_eq!(rc, 0);
                    swaps += 1;
                }
            }
            swaps
        });
        Swapper { stop, thread }
    }

    /// Stops the thread; how many swaps it made.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}
