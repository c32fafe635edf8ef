//! The mappings of this process as `/proc/self/maps` lists them, parsed: what the arenas,
//! the program's own shared files and the give-back of moved ranges are judged by.

use super::FileId;

/// One mapping of `/proc/self/maps`.
pub(super) struct Vma<'a> {
    pub(super) lo: usize,
    pub(super) hi: usize,
    pub(super) perms: &'a str,
    pub(super) off: u64,
    /// The file's device, major and minor.
    pub(super) dev: (u32, u32),
    pub(super) ino: u64,
    pub(super) path: &'a str,
}

impl Vma<'_> {
    /// The file mapped: device and inode.
    pub(super) fn file(&self) -> FileId {
        (self.dev, self.ino)
    }
}

/// The mappings `maps` (`/proc/self/maps`' text) lists.
pub(super) fn vmas(maps: &str) -> impl Iterator<Item = Vma<'_>> {
    maps.lines().filter_map(|line| {
        let mut parts = line.split_whitespace();
        let (lo, hi) = parts.next()?.split_once('-')?;
        let perms = parts.next()?;
        let off = u64::from_str_radix(parts.next()?, 16).ok()?;
        let (major, minor) = parts.next()?.split_once(':')?;
        let dev = (u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
        let ino = parts.next()?.parse().ok()?;
        let path = parts.next().unwrap_or("");
        let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
        Some(Vma { lo, hi, perms, off, dev, ino, path })
    })
}
