//! What `remora install` wrote under a prefix, kept in `share/remora/install-manifest` so that
//! `remora install --uninstall` removes exactly that: every file and link it wrote, and every
//! directory it made that is empty once they are gone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where the manifest of an install under `prefix` lives.
pub(super) fn manifest_path(prefix: &Path) -> PathBuf {
    prefix.join("share/remora/install-manifest")
}

/// The files (and links) an install wrote and the directories it made, as absolute paths.
#[derive(Default)]
pub(super) struct Record {
    files: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
}

impl Record {
    /// The record of an earlier install under `prefix` (empty without one): an install over
    /// it keeps what it made, so the directories an earlier install created go on being
    /// removed by the uninstall.
    pub(super) fn read(prefix: &Path) -> Result<Record, String> {
        let path = manifest_path(prefix);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut r = Record::default();
        for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
            match line.split_once(' ') {
                Some(("file", p)) => r.files.insert(PathBuf::from(p)),
                Some(("dir", p)) => r.dirs.insert(PathBuf::from(p)),
                _ => return Err(format!("{}: not a manifest line: {line:?}", path.display())),
            };
        }
        Ok(r)
    }

    /// Whether an earlier install left a manifest under `prefix`.
    pub(super) fn exists(prefix: &Path) -> bool {
        manifest_path(prefix).is_file()
    }

    /// Make `dir` and its missing parents, recording each one made.
    pub(super) fn dir(&mut self, dir: &Path) -> Result<(), String> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(&d) {
                Ok(()) => {
                    self.dirs.insert(d);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("{}: {e}", d.display())),
            }
        }
        Ok(())
    }

    /// Note `file` (a file or a link) as written by the install.
    pub(super) fn file(&mut self, file: &Path) {
        self.files.insert(file.to_path_buf());
    }

    /// Write the manifest (itself recorded in it) under `prefix`.
    pub(super) fn save(&mut self, prefix: &Path) -> Result<(), String> {
        let path = manifest_path(prefix);
        self.dir(path.parent().ok_or("no manifest directory")?)?;
        self.file(&path);
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
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Remove what the record names: every file and link (one already gone is no error),
    /// then every directory it made, deepest first, that is empty by then. Returns the
    /// directories kept because something else is in them.
    pub(super) fn remove(&self) -> Result<Vec<PathBuf>, String> {
        for f in &self.files {
            match std::fs::remove_file(f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", f.display())),
            }
        }
        let mut dirs: Vec<&PathBuf> = self.dirs.iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        let mut kept = Vec::new();
        for d in dirs {
            match std::fs::remove_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => kept.push(d.clone()),
                Err(e) => return Err(format!("{}: {e}", d.display())),
            }
        }
        Ok(kept)
    }

    /// How many files and links the record names.
    pub(super) fn file_count(&self) -> usize {
        self.files.len()
    }
}
