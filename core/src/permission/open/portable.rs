//! Opening beneath a root by path, with the standard library only: the method used off Linux (macOS,
//! iOS, Windows), where there is no `openat2` and no `/proc/self/fd`.
//!
//! A path is located by looking at each of its components in turn without following it
//! (`symlink_metadata`): none may be a link, and the last one's identity (device and inode; volume and
//! file index on Windows) is kept. A file is then opened by path with the last component not followed
//! (`O_NOFOLLOW`, or `FILE_FLAG_OPEN_REPARSE_POINT`), and the opened descriptor is checked: its identity
//! must equal the one the path was located with, and the path, looked at component by component again
//! after the open, must still be free of links and lead to that same identity. A component swapped for
//! a symlink between the check and the open (the open then leads elsewhere) fails the first comparison;
//! one swapped in for the open and back after it fails the first or the second. Either is refused as
//! outside reach. A directory is listed by path between two such looks.
//!
//! On unix a file is opened for reading by a walk of descriptors (`openat`, no link followed), which a
//! swapper cannot beat: the suite's free-running swap race read the secret through the path-based open
//! with both looks agreeing (a directory swapped for a link and back between a look's steps).
//!
//! What this cannot give that the Linux method does: for writing, listing and the directory operations
//! the looks and the operation by path are separate steps, so a swapper that wins the race at each of
//! them in turn is not excluded in principle; and opening
//! a file that is swapped for a device between the look and the open runs the device's open routine
//! (the descriptor is then refused, unread).

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};

/// A file's identity on its machine: device and inode (volume and file index on Windows).
#[cfg(unix)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Identity {
    dev: u64,
    ino: u64,
}

/// A file's identity on its machine: volume and file index, from a handle held open.
#[cfg(windows)]
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Identity(same_file::Handle);

#[cfg(unix)]
fn identity_of(_: &Path, meta: &Metadata) -> io::Result<Identity> {
    use std::os::unix::fs::MetadataExt;
    Ok(Identity { dev: meta.dev(), ino: meta.ino() })
}

#[cfg(windows)]
fn identity_of(path: &Path, _: &Metadata) -> io::Result<Identity> {
    same_file::Handle::from_path(path).map(Identity)
}

#[cfg(unix)]
fn identity_of_file(file: &File) -> io::Result<Identity> {
    identity_of(Path::new(""), &file.metadata()?)
}

#[cfg(windows)]
fn identity_of_file(file: &File) -> io::Result<Identity> {
    same_file::Handle::from_file(file.try_clone()?).map(Identity)
}

/// Open options that never follow the last component and never wait (a FIFO opens at once or fails).
fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        /// Opens a reparse point (a symlink, a junction) as itself instead of what it points to.
        const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        opts.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT);
    }
    opts
}

/// The payload of the error for a link met, a path leading out of its root, or a descriptor that is
/// not the file that was located.
#[derive(Debug)]
struct NotWhatWasChecked(&'static str);

impl std::fmt::Display for NotWhatWasChecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for NotWhatWasChecked {}

fn outside(why: &'static str) -> io::Error {
    io::Error::other(NotWhatWasChecked(why))
}

/// Whether `e` is this module's refusal of a link, a way out, or a different file.
pub(super) fn is_outside(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<NotWhatWasChecked>())
}

/// Test hook: with it off, [`read_located`] opens without comparing identities (the negative control
/// of the swap test below).
#[cfg(test)]
static COMPARE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

fn compare() -> bool {
    #[cfg(test)]
    return COMPARE.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    true
}

/// Looks at `path` (absolute) component by component without following any: none may be a link
/// (the last may, with `last_may_be_link`). The last component's metadata.
fn walk(path: &Path, last_may_be_link: bool) -> io::Result<Metadata> {
    let mut at = PathBuf::new();
    let mut names = path.components().peekable();
    let mut meta = None;
    while let Some(c) = names.next() {
        at.push(c);
        match c {
            Component::Normal(_) => {
                let m = std::fs::symlink_metadata(&at)?;
                if m.file_type().is_symlink() && !(last_may_be_link && names.peek().is_none()) {
                    return Err(outside("a symlink on the way"));
                }
                meta = Some(m);
            }
            Component::ParentDir | Component::CurDir => return Err(outside("a path that is not resolved")),
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    match meta {
        Some(m) => Ok(m),
        // The file system's root itself.
        None => std::fs::symlink_metadata(&at),
    }
}

/// Checks that `path` is still free of links and still the file `id`.
fn still(path: &Path, id: &Identity) -> io::Result<()> {
    let meta = walk(path, false)?;
    if identity_of(path, &meta)? == *id { Ok(()) } else { Err(outside("the path now leads to another file")) }
}

/// The root directory `path` (absolute), looked at without following any link: its path and identity.
pub(super) fn open_root(path: &Path) -> io::Result<(PathBuf, Identity)> {
    if !path.is_absolute() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let meta = walk(path, false)?;
    if !meta.is_dir() {
        return Err(io::Error::from(io::ErrorKind::NotADirectory));
    }
    Ok((path.to_path_buf(), identity_of(path, &meta)?))
}

/// `root` joined with `rel`, which must be relative and free of `..`.
fn beneath(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let mut path = root.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(n) => path.push(n),
            Component::CurDir => {}
            // The caller hands only resolved relative paths; anything else is refused, not interpreted.
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(outside("a path leading out of its root"));
            }
        }
    }
    Ok(path)
}

/// Locates `rel` beneath `root`: its absolute path, metadata (of the link itself if the last component
/// is one) and identity.
pub(super) fn locate(root: &Path, rel: &Path) -> io::Result<(PathBuf, Metadata, Identity)> {
    let path = beneath(root, rel)?;
    let meta = walk(&path, true)?;
    let id = identity_of(&path, &meta)?;
    Ok((path, meta, id))
}

/// Opens the located regular file `path` for reading and checks the descriptor: a regular file, the
/// identity it was located with, and the path still leading to it, link-free, after the open.
pub(super) fn read_located(path: &Path, id: &Identity) -> io::Result<Option<File>> {
    if !compare() {
        return Ok(Some(no_follow(OpenOptions::new().read(true)).open(path)?));
    }
    let file = open_for_reading(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    if identity_of_file(&file)? != *id {
        return Err(outside("the opened file is not the one located"));
    }
    still(path, id)?;
    Ok(Some(file))
}

/// Opens the absolute `path` for reading. On unix, one component at a time, each relative to the
/// directory opened before it (`openat` with `O_NOFOLLOW`, directories with `O_DIRECTORY`): no link is
/// followed anywhere on the way, so a component swapped for a link while the path is walked is refused
/// rather than followed (a swapper that changes a directory between two looks by path could otherwise
/// make both looks and the open agree on a file outside). Elsewhere by path, the last component not
/// followed; the identity checks around it are then what refuse a swap.
fn open_for_reading(path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        let names = path
            .components()
            .map(|c| match c {
                Component::Normal(n) => Ok(Some(n)),
                Component::RootDir => Ok(None),
                _ => Err(outside("a path that is not resolved")),
            })
            .collect::<io::Result<Vec<_>>>()?;
        let names: Vec<&OsStr> = names.into_iter().flatten().collect();
        if !path.is_absolute() || names.is_empty() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let mut dir = OwnedFd::from(File::open("/")?);
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            let name =
                std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let flags = libc::O_RDONLY
                | libc::O_NOFOLLOW
                | libc::O_CLOEXEC
                | if last { libc::O_NONBLOCK | libc::O_NOCTTY } else { libc::O_DIRECTORY };
            // SAFETY: `dir` is an open directory descriptor and `name` a NUL-terminated component.
            let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
            if fd < 0 {
                let e = io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::ELOOP) => outside("a symlink on the way"),
                    Some(libc::ENOTDIR) if !last => outside("a symlink on the way"),
                    _ => e,
                });
            }
            // SAFETY: `fd` was just returned by `openat`, open and owned by no one else.
            let next = unsafe { OwnedFd::from_raw_fd(fd) };
            if last {
                return Ok(File::from(next));
            }
            dir = next;
        }
        Err(io::Error::from(io::ErrorKind::InvalidInput))
    }
    #[cfg(not(unix))]
    {
        no_follow(OpenOptions::new().read(true)).open(path)
    }
}

/// Opens `rel` beneath `root` for writing, creating it if missing, and checks the descriptor against
/// the path looked at after the open.
pub(super) fn create(root: &Path, rel: &Path) -> io::Result<Option<File>> {
    let path = locate_parent(root, rel)?;
    let file = create_mode(no_follow(OpenOptions::new().write(true).create(true))).open(&path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let id = identity_of_file(&file)?;
    still(&path, &id)?;
    Ok(Some(file))
}

/// Mode 0644 for a file made here (unix).
fn create_mode(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o644);
    }
    opts
}

/// `rel`'s absolute path beneath `root`, its parent looked at (link-free, a directory).
fn locate_parent(root: &Path, rel: &Path) -> io::Result<PathBuf> {
    let path = beneath(root, rel)?;
    let parent = path.parent().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    if !walk(parent, false)?.is_dir() {
        return Err(io::Error::from(io::ErrorKind::NotADirectory));
    }
    Ok(path)
}

/// The names in the located directory `path`, at most `max`, and whether there were more: listed
/// between two looks that find it link-free and still the directory `id`.
pub(super) fn list(path: &Path, id: &Identity, max: usize) -> io::Result<(Vec<OsString>, bool)> {
    still(path, id)?;
    let mut names = Vec::new();
    let mut more = false;
    for entry in std::fs::read_dir(path)? {
        if names.len() == max {
            more = true;
            break;
        }
        names.push(entry?.file_name());
    }
    still(path, id)?;
    Ok((names, more))
}

/// `name` in the directory `parent`, which must still be link-free and the directory `id`; `name` must
/// be one plain component.
fn entry(parent: &Path, id: &Identity, name: &OsStr) -> io::Result<PathBuf> {
    let mut one = Path::new(name).components();
    if !matches!((one.next(), one.next()), (Some(Component::Normal(_)), None)) {
        return Err(outside("a name that is not one component"));
    }
    still(parent, id)?;
    Ok(parent.join(name))
}

pub(super) fn mkdir_in(parent: &Path, id: &Identity, name: &OsStr) -> io::Result<()> {
    std::fs::create_dir(entry(parent, id, name)?)
}

pub(super) fn create_new_in(parent: &Path, id: &Identity, name: &OsStr) -> io::Result<File> {
    let path = entry(parent, id, name)?;
    // create_new: O_EXCL, which never follows a link at the last component.
    let file = create_mode(no_follow(OpenOptions::new().write(true).create_new(true))).open(&path)?;
    still(&path, &identity_of_file(&file)?)?;
    Ok(file)
}

/// Renames within `parent`. Without `replace`, a regular file is moved by a hard link to the new name
/// (which fails if the name is taken, atomically) and the removal of the old one; anything else (a
/// directory moved aside under a random name) after a look that the new name is free.
pub(super) fn rename_in(parent: &Path, id: &Identity, from: &OsStr, to: &OsStr, replace: bool) -> io::Result<()> {
    let (from, to) = (entry(parent, id, from)?, entry(parent, id, to)?);
    if replace {
        return std::fs::rename(from, to);
    }
    if std::fs::symlink_metadata(&from)?.is_file() {
        std::fs::hard_link(&from, &to)?;
        return std::fs::remove_file(from);
    }
    match std::fs::symlink_metadata(&to) {
        Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::rename(from, to),
        Err(e) => Err(e),
    }
}

pub(super) fn unlink_in(parent: &Path, id: &Identity, name: &OsStr, dir: bool) -> io::Result<()> {
    let path = entry(parent, id, name)?;
    if dir { std::fs::remove_dir(path) } else { std::fs::remove_file(path) }
}

/// Removes the tree `name` in `parent` with the standard library's removal, which follows no link
/// (a link is removed as itself).
pub(super) fn remove_tree(parent: &Path, id: &Identity, name: &OsStr) -> io::Result<()> {
    std::fs::remove_dir_all(entry(parent, id, name)?)
}

#[cfg(all(test, unix))]
mod tests {
    use super::super::{Kind, Method, Root, is_outside};
    use super::*;
    use std::io::Read;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ambit-portable-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn read(root: &Root, rel: &str) -> io::Result<Option<String>> {
        let located = root.locate(Path::new(rel))?;
        let Some(mut f) = root.read_located(Path::new(rel), &located)? else { return Ok(None) };
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        Ok(Some(text))
    }

    /// root/dir/f inside, out/f (the secret) outside: `root/dir` is renamed away and a symlink to `out`
    /// put in its place between the locate and the open, so the open by path reaches `out/f`.
    fn swap_component_between_locate_and_open(d: &Path) -> io::Result<Option<String>> {
        let root = Root::open(&d.join("root"), Method::Portable)?;
        let located = root.locate(Path::new("dir/f"))?;
        assert_eq!(located.kind, Kind::Regular);
        std::fs::rename(d.join("root/dir"), d.join("root/dir.away")).unwrap();
        std::os::unix::fs::symlink(d.join("out"), d.join("root/dir")).unwrap();
        let opened = root.read_located(Path::new("dir/f"), &located);
        std::fs::remove_file(d.join("root/dir")).unwrap();
        std::fs::rename(d.join("root/dir.away"), d.join("root/dir")).unwrap();
        let mut text = String::new();
        match opened? {
            Some(mut f) => f.read_to_string(&mut text).map(|_| Some(text)),
            None => Ok(None),
        }
    }

    fn tree(name: &str) -> PathBuf {
        let d = tempdir(name);
        std::fs::create_dir_all(d.join("root/dir")).unwrap();
        std::fs::create_dir_all(d.join("out")).unwrap();
        std::fs::write(d.join("root/dir/f"), "inside").unwrap();
        std::fs::write(d.join("out/f"), "SECRET").unwrap();
        d
    }

    /// The attack the portable check exists for: a path component swapped for a symlink out between
    /// the locate (after the scope's check) and the open. The descriptor's identity is not the located
    /// one: refused as outside. With the comparison off (the negative control) the same steps read the
    /// secret, so the attack is real and the check is what stops it.
    #[test]
    fn a_component_swapped_for_a_link_between_locate_and_open_is_refused() {
        let d = tree("component");
        let e = swap_component_between_locate_and_open(&d).unwrap_err();
        assert!(is_outside(&e), "{e}");
        // Unswapped, the same file reads.
        let root = Root::open(&d.join("root"), Method::Portable).unwrap();
        assert_eq!(read(&root, "dir/f").unwrap().as_deref(), Some("inside"));

        COMPARE.store(false, std::sync::atomic::Ordering::Relaxed);
        let leaked = swap_component_between_locate_and_open(&d);
        COMPARE.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(leaked.unwrap().as_deref(), Some("SECRET"), "the negative control: unchecked, the open leads out");
    }

    /// Links on the way are refused, a trailing link is located as itself, FIFOs and devices are
    /// located without being opened, and writes never follow a link.
    #[test]
    fn links_and_special_files_by_path() {
        let d = tree("links");
        std::os::unix::fs::symlink(d.join("out"), d.join("root/dl")).unwrap();
        std::os::unix::fs::symlink(d.join("out/f"), d.join("root/fl")).unwrap();
        let fifo = std::ffi::CString::new(d.join("root/fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path valid for the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let root = Root::open(&d.join("root"), Method::Portable).unwrap();
        assert!(is_outside(&root.locate(Path::new("dl/f")).unwrap_err()));
        assert_eq!(root.locate(Path::new("fl")).unwrap().kind, Kind::Symlink);
        assert!(is_outside(&root.locate(Path::new("../out/f")).unwrap_err()));
        let located = root.locate(Path::new("fifo")).unwrap();
        assert_eq!(located.kind, Kind::Special);
        assert!(root.read_located(Path::new("fifo"), &located).unwrap().is_none());
        // The write open of a FIFO with no reader fails at once instead of waiting.
        assert!(super::super::is_fifo_without_reader(&root.create(Path::new("fifo")).unwrap_err()));
        // A write through a trailing link fails (O_NOFOLLOW) and the secret is untouched.
        assert!(root.create(Path::new("fl")).is_err());
        assert_eq!(std::fs::read_to_string(d.join("out/f")).unwrap(), "SECRET");
        let dev = Root::open(Path::new("/dev"), Method::Portable).unwrap();
        let zero = dev.locate(Path::new("zero")).unwrap();
        assert_eq!(zero.kind, Kind::Special);
        assert!(dev.read_located(Path::new("zero"), &zero).unwrap().is_none());
        assert!(Root::open(&d.join("root/dl"), Method::Portable).is_err(), "a root is opened following no link");
        let (names, more) = root.list(&root.locate(Path::new("")).unwrap(), 2).unwrap();
        assert!(names.len() == 2 && more, "{names:?}");
    }

    /// A file and a symlink to the secret, and a directory and a symlink to a directory outside, each
    /// pair exchanged (RENAME_EXCHANGE) in a loop while the file and the file in the directory are
    /// located and read by path: the secret is never read, and both sides of the race are seen.
    /// (RENAME_EXCHANGE is Linux's: the race runs where the suite does.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_swap_race_never_reads_beyond() {
        let d = tree("race");
        std::fs::write(d.join("root/f"), "inside").unwrap();
        std::os::unix::fs::symlink(d.join("out/f"), d.join("root/l")).unwrap();
        std::os::unix::fs::symlink(d.join("out"), d.join("root/dl")).unwrap();
        let swapper = super::super::Swapper::start(&d, &[("root/f", "root/l"), ("root/dir", "root/dl")]);
        let root = Root::open(&d.join("root"), Method::Portable).unwrap();
        let (mut read_ok, mut refused) = (0, 0);
        for _ in 0..20_000 {
            for name in ["f", "l", "dir/f", "dl/f"] {
                match read(&root, name) {
                    Ok(Some(text)) => {
                        assert_eq!(text, "inside", "{name}");
                        read_ok += 1;
                    }
                    Ok(None) => refused += 1,
                    Err(e) => {
                        assert!(is_outside(&e) || e.kind() == io::ErrorKind::NotFound, "{name}: {e}");
                        refused += 1;
                    }
                }
            }
        }
        let swaps = swapper.stop();
        println!("portable race: {swaps} swaps, {read_ok} read, {refused} refused");
        assert!(
            swaps > 0 && read_ok > 0 && refused > 0,
            "the race ran: {swaps} swaps, {read_ok} read, {refused} refused"
        );
    }
}
