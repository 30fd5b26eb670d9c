//! Opening beneath a root by descriptor, on Linux. On Linux ≥ 5.6 the kernel walks the path:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` from the root's
//! descriptor. Where `openat2` is missing (`ENOSYS`, or refused by a seccomp filter), each component is
//! opened with `O_NOFOLLOW` from its parent's descriptor and checked with `fstat`, and the caller
//! re-checks the opened descriptor's path in `/proc/self/fd` ([`real_path`]). Either way a symlink
//! swapped in between the check and the open (a RENAME_EXCHANGE of a file or directory and a link)
//! fails the open with `ELOOP` instead of leading elsewhere. (`RESOLVE_NO_XDEV` is not used: a root may
//! legitimately hold mount points, and the unconfined root `/` always does.)
//!
//! Every path is first opened with `O_PATH`, which never runs a device's open routine and never waits
//! for a FIFO's other end; only a regular file is then opened for reading, through the very inode
//! that was checked (`/proc/self/fd/N`), so no open here can block.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use super::Method;

/// 0: not probed yet, 1: `openat2` works, 2: it does not.
static OPENAT2: AtomicU8 = AtomicU8::new(0);

/// The method this kernel gives, probed once.
pub(super) fn method() -> Method {
    match OPENAT2.load(Ordering::Relaxed) {
        1 => Method::Openat2,
        2 => Method::ComponentWalk,
        _ => {
            // Missing (ENOSYS), or refused by a seccomp filter (EPERM in some container runtimes): either
            // way the component walk is used.
            let works = File::open("/").is_ok_and(|root| openat2(root.as_fd(), c".", libc::O_PATH, 0).is_ok());
            OPENAT2.store(if works { 1 } else { 2 }, Ordering::Relaxed);
            if works { Method::Openat2 } else { Method::ComponentWalk }
        }
    }
}

/// The kernel's `struct open_how` (linux/openat2.h); libc's is not constructible outside libc.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// How many times an `openat2` that met a concurrent rename (`EAGAIN`) is retried.
const OPENAT2_RETRIES: usize = 16;

fn openat2(dir: BorrowedFd<'_>, rel: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: u64::from(mode),
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    let mut tries = 0;
    loop {
        // SAFETY: `dir` is a live descriptor, `rel` a NUL-terminated string and `how` a properly laid
        // out `struct open_how` whose size is passed; all outlive the call.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                rel.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
            // SAFETY: the kernel just returned `fd`; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) if tries < OPENAT2_RETRIES => tries += 1,
            _ => return Err(e),
        }
    }
}

fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `dir` is a live descriptor and `name` a NUL-terminated string, both valid for the
        // call; the mode is passed as the variadic argument open(2) reads with O_CREAT.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: the kernel just returned `fd`; nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// The metadata of an open descriptor (`fstat`; works on `O_PATH` descriptors).
pub(super) fn metadata(fd: BorrowedFd<'_>) -> io::Result<Metadata> {
    let owned = fd.try_clone_to_owned()?;
    File::from(owned).metadata()
}

/// Opens the root directory `path` (absolute and free of symlinks) from `/`, following no link.
pub(super) fn open_root(path: &Path, method: Method) -> io::Result<OwnedFd> {
    let slash = openat(
        // SAFETY: AT_FDCWD is the special value meaning "the current directory"; `name` is absolute
        // so it is not even consulted.
        unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) },
        c"/",
        libc::O_PATH | libc::O_DIRECTORY,
        0,
    )?;
    let rel = path.strip_prefix("/").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if rel.as_os_str().is_empty() {
        return Ok(slash);
    }
    open_beneath(slash.as_fd(), rel, libc::O_PATH | libc::O_DIRECTORY, 0, method)
}

/// Locates `rel` (relative, free of `..` and symlinks) beneath `root` with `O_PATH`: a symlink met on
/// the way fails with `ELOOP`; a symlink as the last component is handed back as itself.
pub(super) fn locate(root: BorrowedFd<'_>, rel: &Path, method: Method) -> io::Result<OwnedFd> {
    open_beneath(root, rel, libc::O_PATH | libc::O_NOFOLLOW, 0, method)
}

/// Opens the located regular file `fd` for reading, through the very inode that was located and
/// checked: by `/proc/self/fd/N`, or where `/proc` is missing by opening `rel` again with `O_NONBLOCK`
/// and comparing device and inode. A mismatch is refused with `None`.
pub(super) fn read_located(
    root: BorrowedFd<'_>,
    rel: &Path,
    fd: BorrowedFd<'_>,
    located: &Metadata,
    method: Method,
) -> io::Result<Option<File>> {
    let flags = libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let fd = open_beneath(root, rel, libc::O_RDONLY | libc::O_NOFOLLOW | flags, 0, method)?;
            File::from(fd)
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if meta.dev() != located.dev() || meta.ino() != located.ino() || !meta.file_type().is_file() {
        return Ok(None);
    }
    Ok(Some(file))
}

/// Opens `rel` beneath `root` for writing, creating it (mode 0644) if missing, never following a link
/// and never waiting (`O_NONBLOCK` makes a FIFO fail with `ENXIO` or open at once); anything but a
/// regular file is refused with `None`.
pub(super) fn create(root: BorrowedFd<'_>, rel: &Path, method: Method) -> io::Result<Option<File>> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK;
    let file = File::from(open_beneath(root, rel, flags, 0o644, method)?);
    let meta = file.metadata()?;
    Ok(meta.file_type().is_file().then_some(file))
}

/// The names in the located directory `fd`, at most `max` of them, and whether there were more.
pub(super) fn list(fd: BorrowedFd<'_>, max: usize) -> io::Result<(Vec<OsString>, bool)> {
    // "." from the O_PATH descriptor: the same directory, opened for reading.
    let fd = openat(fd, c".", libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
    read_names(fd, max)
}

/// The real path of an open descriptor, read back from `/proc/self/fd`.
pub(super) fn real_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// How many entries one [`remove_tree`] removes at most.
const REMOVE_MAX_ENTRIES: usize = 100_000;

/// How deep one [`remove_tree`] goes: a tree deeper (or with more than
/// [`REMOVE_MAX_ENTRIES`] entries) is left (renamed out of the way by the caller) rather than walked
/// without end.
const REMOVE_MAX_DEPTH: usize = 64;

/// Creates the directory `name` (one component) in the located directory `parent`, mode 0755. A name
/// already taken (by anything, a link included) fails with `EEXIST`.
pub(super) fn mkdir_in(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let name = cstring(name)?;
    // SAFETY: `parent.fd` is a live directory descriptor (O_PATH descriptors serve as `dirfd`) and `name`
    // a NUL-terminated single component, so no link is followed.
    let r = unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o755) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Creates the new regular file `name` (one component) in the located directory `parent` for writing,
/// mode 0644: `O_EXCL`, so an existing name, a link included, fails with `EEXIST` instead of being
/// opened.
pub(super) fn create_new_in(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK;
    openat(parent, &cstring(name)?, flags, 0o644).map(File::from)
}

/// Renames `from` to `to`, both single components of the located directory `parent`: atomic, and
/// neither name's link (if it is one) is followed. With `replace` false an existing `to` fails the
/// rename with `EEXIST` (`RENAME_NOREPLACE`).
pub(super) fn rename_in(parent: BorrowedFd<'_>, from: &OsStr, to: &OsStr, replace: bool) -> io::Result<()> {
    let (from, to) = (cstring(from)?, cstring(to)?);
    let fd = parent.as_raw_fd();
    let flags: libc::c_uint = if replace { 0 } else { libc::RENAME_NOREPLACE };
    // SAFETY: `fd` is a live directory descriptor and both names NUL-terminated single components that
    // outlive the call.
    let r = unsafe { libc::syscall(libc::SYS_renameat2, fd, from.as_ptr(), fd, to.as_ptr(), flags) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Removes the name `name` (one component) from the located directory `parent`: a directory (which
/// must be empty) with `dir`, anything else (a link itself, never what it points to) without.
pub(super) fn unlink_in(parent: BorrowedFd<'_>, name: &OsStr, dir: bool) -> io::Result<()> {
    let name = cstring(name)?;
    let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `parent` is a live directory descriptor and `name` a NUL-terminated single component.
    let r = unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), flags) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Removes the directory `name` of the located directory `parent` with everything beneath it, following
/// no link (a link is removed as itself), at most [`REMOVE_MAX_ENTRIES`] entries and 64 levels deep.
pub(super) fn remove_tree(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let mut left = REMOVE_MAX_ENTRIES;
    remove_dir_at(parent, name, 0, &mut left)
}

fn remove_dir_at(parent: BorrowedFd<'_>, name: &OsStr, depth: usize, left: &mut usize) -> io::Result<()> {
    if depth > REMOVE_MAX_DEPTH {
        return Err(io::Error::other(format!("the tree is deeper than {REMOVE_MAX_DEPTH} levels")));
    }
    let dir = openat(parent, &cstring(name)?, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
    let listing = openat(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
    let (names, more) = read_names(listing, *left)?;
    if more {
        return Err(io::Error::other(format!("the tree holds more than {REMOVE_MAX_ENTRIES} entries")));
    }
    for entry in names {
        *left = left.saturating_sub(1);
        let located = openat(dir.as_fd(), &cstring(&entry)?, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        if metadata(located.as_fd())?.file_type().is_dir() {
            remove_dir_at(dir.as_fd(), &entry, depth + 1, left)?;
        } else {
            unlink_in(dir.as_fd(), &entry, false)?;
        }
    }
    unlink_in(parent, name, true)
}

/// Opens `rel` beneath `dir` by `method`, following no symlink.
fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: libc::c_int,
    mode: libc::mode_t,
    method: Method,
) -> io::Result<OwnedFd> {
    let mut names: Vec<&OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            // The caller hands only resolved relative paths; anything else is refused, not interpreted.
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
    }
    match method {
        Method::Openat2 => {
            let joined: PathBuf = names.iter().collect();
            let rel = if names.is_empty() { CString::from(c".") } else { cstring(joined.as_os_str())? };
            openat2(dir, &rel, flags, mode)
        }
        // (A root opened by path never comes here; were it to, the component walk is the safe way.)
        Method::ComponentWalk | Method::Portable => {
            let Some((last, parents)) = names.split_last() else {
                return openat(dir, c".", flags | libc::O_NOFOLLOW, mode);
            };
            let mut held: Option<OwnedFd> = None;
            for name in parents {
                let at = held.as_ref().map_or(dir, |f| f.as_fd());
                let fd = openat(at, &cstring(name)?, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
                let t = metadata(fd.as_fd())?.file_type();
                if t.is_symlink() {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                if !t.is_dir() {
                    return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
                }
                held = Some(fd);
            }
            let at = held.as_ref().map_or(dir, |f| f.as_fd());
            openat(at, &cstring(last)?, flags | libc::O_NOFOLLOW, mode)
        }
    }
}

/// Reads up to `max` names from a directory descriptor opened for reading (which it takes over).
fn read_names(fd: OwnedFd, max: usize) -> io::Result<(Vec<OsString>, bool)> {
    use std::os::fd::IntoRawFd;
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor we own; on success fdopendir owns it and closedir
    // below closes it; on failure we close it ourselves.
    let dir = unsafe { libc::fdopendir(raw) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    struct Closer(*mut libc::DIR);
    impl Drop for Closer {
        fn drop(&mut self) {
            // SAFETY: the DIR came from fdopendir and is closed exactly once, here.
            unsafe { libc::closedir(self.0) };
        }
    }
    let dir = Closer(dir);
    let mut names = Vec::new();
    loop {
        // SAFETY: errno is thread-local; clearing it tells the end of the stream from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dir.0` is a live DIR stream used by this thread only.
        let entry = unsafe { libc::readdir64(dir.0) };
        if entry.is_null() {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(0) | None => Ok((names, false)),
                _ => Err(e),
            };
        }
        // SAFETY: readdir64 returned a valid entry whose d_name is NUL-terminated; it stays valid until
        // the next readdir64 call on this stream, and the name is copied before that.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        if names.len() == max {
            return Ok((names, true));
        }
        names.push(OsStr::from_bytes(bytes).to_os_string());
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Kind, Root};
    use super::*;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ambit-open-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn both() -> Vec<Method> {
        let mut v = vec![Method::ComponentWalk];
        if method() == Method::Openat2 {
            v.push(Method::Openat2);
        }
        v
    }

    #[test]
    fn opens_beneath_and_refuses_every_link_by_both_methods() {
        let d = tempdir("links");
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/f"), "inside").unwrap();
        std::os::unix::fs::symlink(d.join("a"), d.join("abs")).unwrap();
        std::os::unix::fs::symlink("a", d.join("rel")).unwrap();
        std::os::unix::fs::symlink("a/b/f", d.join("flink")).unwrap();
        for m in both() {
            let root = Root::open(&d, m).unwrap();
            let located = root.locate(Path::new("a/b/f")).unwrap();
            assert_eq!(located.kind, Kind::Regular);
            let mut text = String::new();
            use std::io::Read;
            root.read_located(Path::new("a/b/f"), &located).unwrap().unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(text, "inside", "{m:?}");
            for through in ["abs/b/f", "rel/b/f"] {
                let e = root.locate(Path::new(through)).unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{m:?} {through}: {e}");
            }
            assert_eq!(root.locate(Path::new("flink")).unwrap().kind, Kind::Symlink, "{m:?}");
            assert_eq!(root.locate(Path::new("../x")).unwrap_err().raw_os_error(), Some(libc::EXDEV));
            assert_eq!(root.locate(Path::new("")).unwrap().kind, Kind::Directory);
            let (names, more) = root.list(&root.locate(Path::new("a")).unwrap(), 10).unwrap();
            assert_eq!((names, more), (vec![OsString::from("b")], false));
            let (names, more) = root.list(&root.locate(Path::new("")).unwrap(), 2).unwrap();
            assert!(names.len() == 2 && more, "{names:?}");
            assert!(root.create(Path::new("flink")).unwrap_err().raw_os_error() == Some(libc::ELOOP));
        }
        let slash_link = d.join("abs");
        assert!(Root::open(&slash_link, Method::ComponentWalk).is_err(), "a root is opened following no link");
    }

    #[test]
    fn special_files_are_located_without_blocking_and_never_opened() {
        let d = tempdir("special");
        let fifo = CString::new(d.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path valid for the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        for m in both() {
            let root = Root::open(&d, m).unwrap();
            let located = root.locate(Path::new("fifo")).unwrap();
            assert_eq!(located.kind, Kind::Special);
            assert!(root.read_located(Path::new("fifo"), &located).unwrap().is_none());
            // With no reader, the non-blocking write open fails at once instead of waiting.
            assert_eq!(root.create(Path::new("fifo")).unwrap_err().raw_os_error(), Some(libc::ENXIO));
            let dev = Root::open(Path::new("/dev"), m).unwrap();
            let zero = dev.locate(Path::new("zero")).unwrap();
            assert_eq!(zero.kind, Kind::Special);
            assert!(dev.read_located(Path::new("zero"), &zero).unwrap().is_none());
        }
    }

    /// A file and a symlink to a secret outside the root, and a directory and a symlink to a directory
    /// outside, each pair exchanged (RENAME_EXCHANGE) in a loop while the file and a file in the
    /// directory are located and read, by each method: the secret is never read.
    #[test]
    fn a_swap_of_a_file_or_directory_and_a_link_out_never_reads_beyond_by_either_method() {
        use std::io::Read;
        let d = tempdir("swap");
        std::fs::create_dir_all(d.join("root/dir")).unwrap();
        std::fs::create_dir_all(d.join("out")).unwrap();
        std::fs::write(d.join("out/f"), "SECRET").unwrap();
        std::fs::write(d.join("root/f"), "inside").unwrap();
        std::fs::write(d.join("root/dir/f"), "inside").unwrap();
        std::os::unix::fs::symlink(d.join("out/f"), d.join("root/l")).unwrap();
        std::os::unix::fs::symlink(d.join("out"), d.join("root/dl")).unwrap();
        let swapper = super::super::Swapper::start(&d, &[("root/f", "root/l"), ("root/dir", "root/dl")]);
        let (mut read, mut refused) = (0, 0);
        for m in both() {
            let root = Root::open(&d.join("root"), m).unwrap();
            for _ in 0..20_000 {
                for name in ["f", "l", "dir/f", "dl/f"] {
                    let rel = Path::new(name);
                    match root.locate(rel) {
                        Ok(loc) if loc.kind == Kind::Regular => {
                            let mut text = String::new();
                            if let Some(mut f) = root.read_located(rel, &loc).unwrap() {
                                f.read_to_string(&mut text).unwrap();
                            }
                            assert_eq!(text, "inside", "{m:?} {name}");
                            read += 1;
                        }
                        Ok(loc) => {
                            assert_eq!(loc.kind, Kind::Symlink, "{m:?} {name}");
                            refused += 1;
                        }
                        Err(e) => {
                            assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{m:?} {name}: {e}");
                            refused += 1;
                        }
                    }
                }
            }
        }
        let swaps = swapper.stop();
        assert!(swaps > 0 && read > 0 && refused > 0, "the race ran: {swaps} swaps, {read} read, {refused} refused");
    }
}
