//! What `remora install` wrote under a prefix, kept in `share/remora/install-manifest` so that
//! `remora install --uninstall` removes exactly that: every file and link it wrote, and every
//! directory it made that is empty once they are gone.
//!
//! A path is recorded only once it is written: every file and link is made under a temporary
//! name in its directory (`NAME.remora-new`, removed again when that fails) and renamed over
//! the destination, so a link there is replaced, never written through. A manifest is read
//! with suspicion (a user may own the prefix and `--uninstall` run as root): every entry must
//! be an absolute path under the prefix without `..`, and nothing is removed whose directory
//! leads out of the prefix through a symbolic link.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

/// Where the manifest of an install under `prefix` lives.
pub(super) fn manifest_path(prefix: &Path) -> PathBuf {
    prefix.join("share/remora/install-manifest")
}

/// The temporary name `path` is made under before it is renamed into place.
pub(super) fn temp_of(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{name}.remora-new"))
}

/// Run `make` (which creates `tmp`), then rename `tmp` to `to`; on any failure `tmp` is
/// removed. A file or link left at `tmp` by an earlier run is removed first.
fn via_temp(tmp: &Path, to: &Path, make: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match std::fs::remove_file(tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", tmp.display())),
    }
    let done = make().and_then(|()| std::fs::rename(tmp, to).map_err(|e| format!("{}: {e}", to.display())));
    if done.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    done
}

/// Create `tmp` (never following a link there) holding what `from` reads.
fn create(tmp: &Path, mut from: impl std::io::Read) -> Result<std::fs::File, String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::io::copy(&mut from, &mut f).map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.flush().map_err(|e| format!("{}: {e}", tmp.display()))?;
    Ok(f)
}

/// What [`Record::remove`] left in place.
#[derive(Default)]
pub(super) struct Left {
    /// Directories the install made that hold other files.
    pub(super) dirs: Vec<PathBuf>,
    /// Entries whose directory leads out of the prefix (through a symbolic link).
    pub(super) outside: Vec<PathBuf>,
}

/// The files (and links) an install wrote and the directories it made, as absolute paths,
/// all under `prefix`.
pub(super) struct Record {
    prefix: PathBuf,
    files: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
    /// Files and links this install wrote over that no earlier install recorded.
    replaced: Vec<PathBuf>,
}

impl Record {
    /// The record of an earlier install under `prefix` (an absolute path without `.` or `..`
    /// parts; empty without one): an install over it keeps what it made, so the directories an
    /// earlier install created go on being removed by the uninstall.
    ///
    /// Fails for a manifest that names a path not absolute, with `..`, or not under `prefix`.
    pub(super) fn read(prefix: &Path) -> Result<Record, String> {
        let mut r = Record {
            prefix: prefix.to_path_buf(),
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
            replaced: Vec::new(),
        };
        let path = manifest_path(prefix);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(r),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            let (kind, p) = match line.split_once(' ') {
                Some((k @ ("file" | "dir"), p)) => (k, Path::new(p)),
                _ => return Err(format!("{}: not a manifest line: {line:?}", path.display())),
            };
            let inside = p.is_absolute()
                && !p.components().any(|c| c == Component::ParentDir)
                && p.starts_with(prefix)
                && (kind == "dir" || p != prefix);
            if !inside {
                return Err(format!(
                    "{}: {line:?} names a path outside {}: the manifest is not one `remora install` \
                     wrote; nothing was touched",
                    path.display(),
                    prefix.display()
                ));
            }
            match kind {
                "file" => r.files.insert(p.to_path_buf()),
                _ => r.dirs.insert(p.to_path_buf()),
            };
        }
        Ok(r)
    }

    /// Whether an earlier install left a manifest under `prefix`.
    pub(super) fn exists(prefix: &Path) -> bool {
        manifest_path(prefix).is_file()
    }

    /// Make `dir` and its missing parents, recording each one made at or under the prefix.
    /// Fails, making nothing there, where one under the prefix would be made in a directory
    /// that leads out of it (through a symbolic link).
    pub(super) fn dir(&mut self, dir: &Path) -> Result<(), String> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        for d in missing.into_iter().rev() {
            if d.starts_with(&self.prefix) && d != self.prefix {
                self.check_inside(&d)?;
            }
            match std::fs::create_dir(&d) {
                Ok(()) if d.starts_with(&self.prefix) => {
                    self.dirs.insert(d);
                }
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("{}: {e}", d.display())),
            }
        }
        Ok(())
    }

    /// Write `bytes` to `path` (replacing a file or link there, not writing through it) and
    /// record it.
    pub(super) fn write(&mut self, path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), String> {
        self.made(path, |tmp| create(tmp, bytes.as_ref()).map(drop))
    }

    /// Copy `from` to `to` with its permissions (through a temporary name, so a running
    /// program keeps its old file) and record it.
    pub(super) fn copy(&mut self, from: &Path, to: &Path) -> Result<(), String> {
        self.made(to, |tmp| {
            let src = std::fs::File::open(from).map_err(|e| format!("{}: {e}", from.display()))?;
            let perm = src.metadata().map_err(|e| format!("{}: {e}", from.display()))?.permissions();
            let f = create(tmp, src)?;
            f.set_permissions(perm).map_err(|e| format!("{}: {e}", tmp.display()))
        })
    }

    /// Make `at` a symbolic link to `target` (replacing what is there) and record it.
    pub(super) fn link(&mut self, target: &str, at: &Path) -> Result<(), String> {
        self.made(at, |tmp| {
            std::os::unix::fs::symlink(target, tmp).map_err(|e| format!("{}: {e}", tmp.display()))
        })
    }

    /// Fails unless `path`'s directory lies under the prefix once its links are followed (a
    /// directory of the prefix that is a link out of it would put the file elsewhere, where
    /// `--uninstall` leaves it alone).
    fn check_inside(&self, path: &Path) -> Result<(), String> {
        match self.parent_inside(path) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(format!(
                "{}: its directory leads out of {} (a symbolic link): `remora install` writes only \
                 inside the prefix; nothing was written there",
                path.display(),
                self.prefix.display()
            )),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Let `make` create `temp_of(to)` (e.g. a tool writing its output there), rename it to
    /// `to` and record it. Fails, writing nothing, where `to`'s directory leads out of the
    /// prefix. A file or link already at `to` that no earlier install recorded is noted in
    /// [`Record::replaced`].
    pub(super) fn made(
        &mut self,
        to: &Path,
        make: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<(), String> {
        self.check_inside(to)?;
        let existed = to.symlink_metadata().is_ok() && !self.files.contains(to);
        let tmp = temp_of(to);
        via_temp(&tmp, to, || make(&tmp))?;
        if existed {
            self.replaced.push(to.to_path_buf());
        }
        self.files.insert(to.to_path_buf());
        Ok(())
    }

    /// The files and links this install replaced that no earlier install recorded (another
    /// program's, e.g. a vendor's library): `--uninstall` removes them with the rest.
    pub(super) fn replaced(&self) -> &[PathBuf] {
        &self.replaced
    }

    /// Write the manifest (itself recorded in it) under the prefix.
    pub(super) fn save(&mut self) -> Result<(), String> {
        let path = manifest_path(&self.prefix);
        self.dir(path.parent().ok_or("no manifest directory")?)?;
        self.files.insert(path.clone());
        let mut text = String::from(
            "# Written by `remora install`; `remora install --uninstall --prefix DIR` removes\n\
             # these files and links, and these directories once empty.\n",
        );
        for f in &self.files {
            text += &format!("file {}\n", f.display());
        }
        for d in &self.dirs {
            text += &format!("dir {}\n", d.display());
        }
        self.write(&path, text.as_bytes())
    }

    /// The directory `path` is in, opened so that nothing is removed outside the prefix:
    /// resolved (links inside the prefix are fine), checked to lie under the prefix, then
    /// opened part by part from `/` following no link (one swapped in since fails), with
    /// `path`'s name in it. `Ok(None)`: the directory leads out of the prefix.
    fn parent_inside(&self, path: &Path) -> std::io::Result<Option<(OwnedFd, PathBuf)>> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        let parent = parent.canonicalize()?;
        if !parent.starts_with(self.prefix.canonicalize()?) {
            return Ok(None);
        }
        Ok(remora_sys::nofollow::open_dir(&parent)?.map(|dir| (dir, PathBuf::from(name))))
    }

    /// Remove `path` (a file or link, or with `dir` an empty directory) unless its directory
    /// leads out of the prefix. Whether it was inside (gone already counts).
    fn remove_one(&self, path: &Path, dir: bool) -> std::io::Result<bool> {
        let (fd, name) = match self.parent_inside(path) {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(e),
        };
        remora_sys::nofollow::unlink(&fd, name.as_os_str(), dir)?;
        Ok(true)
    }

    /// Remove what the record names: every file and link (one already gone is no error; a
    /// link itself, never what it leads to), then every directory it made, deepest first,
    /// that is empty by then. Nothing is removed whose directory leads out of the prefix.
    pub(super) fn remove(&self) -> Result<Left, String> {
        let mut left = Left::default();
        for f in &self.files {
            if !self.remove_one(f, false).map_err(|e| format!("{}: {e}", f.display()))? {
                left.outside.push(f.clone());
            }
        }
        let mut dirs: Vec<&PathBuf> = self.dirs.iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            // The prefix itself is what the user named: its own directory is outside it.
            let removed = if *d == self.prefix {
                std::fs::remove_dir(d).map(|()| true)
            } else {
                self.remove_one(d, true)
            };
            match removed {
                Ok(true) => {}
                Ok(false) => left.outside.push(d.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => left.dirs.push(d.clone()),
                Err(e) if *d == self.prefix && e.kind() == std::io::ErrorKind::NotADirectory => {}
                Err(e) => return Err(format!("{}: {e}", d.display())),
            }
        }
        Ok(left)
    }

    /// How many files and links the record names.
    pub(super) fn file_count(&self) -> usize {
        self.files.len()
    }
}
