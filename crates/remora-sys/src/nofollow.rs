//! Files removed without following links: a directory opened part by part from `/` with
//! `O_NOFOLLOW` (a link met on the way is refused, also one swapped in while the walk goes),
//! and a name unlinked in it. `remora install --uninstall` removes only what lies inside
//! its prefix this way.

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

/// Open the directory `dir` (an absolute path without `..`) following no link on the
/// way: `Ok(None)` when a part of it is a link or not a directory.
///
/// # Errors
/// What `open`/`openat` answer otherwise (`NotFound` when a part is missing).
pub fn open_dir(dir: &Path) -> io::Result<Option<OwnedFd>> {
    let at = |d: &OwnedFd, part: &OsStr| {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(d, part, flags, Mode::empty())
    };
    let mut fd = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    for part in dir.components() {
        match part {
            Component::RootDir => {}
            Component::Normal(part) => match at(&fd, part) {
                Ok(d) => fd = d,
                Err(Errno::LOOP | Errno::NOTDIR) => return Ok(None),
                Err(e) => return Err(e.into()),
            },
            _ => return Ok(None),
        }
    }
    Ok(Some(fd))
}

/// Unlink `name` in the directory `dir` (opened by [`open_dir`]): a file or a link itself
/// (never what it leads to), or with `is_dir` an empty directory. A name already gone is
/// no error; with `is_dir`, neither is a name that is not a directory (it is left).
///
/// # Errors
/// What `unlinkat` answers otherwise.
pub fn unlink(dir: &OwnedFd, name: &OsStr, is_dir: bool) -> io::Result<()> {
    let flags = if is_dir { AtFlags::REMOVEDIR } else { AtFlags::empty() };
    match rustix::fs::unlinkat(dir, name, flags) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(Errno::NOTDIR) if is_dir => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory reached through a link is refused; a link is removed, not its target.
    #[test]
    fn a_link_on_the_way_is_refused_and_a_link_itself_is_removed() {
        let base = std::env::temp_dir().join(format!("remora-nofollow-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let real = base.join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink(&real, base.join("via")).unwrap();
        std::os::unix::fs::symlink(real.join("f"), base.join("l")).unwrap();
        let top = base.canonicalize().unwrap();
        assert!(open_dir(&top.join("via")).unwrap().is_none());
        let d = open_dir(&top).unwrap().unwrap();
        unlink(&d, OsStr::new("l"), false).unwrap();
        assert!(real.join("f").exists(), "the link's target went");
        assert!(!top.join("l").exists());
        unlink(&d, OsStr::new("gone"), false).unwrap();
        unlink(&d, OsStr::new("via"), true).unwrap();
        assert!(top.join("via").exists(), "a link is not an empty directory");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
