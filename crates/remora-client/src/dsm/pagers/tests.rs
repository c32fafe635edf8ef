//! The books of pagers: which refusals of userfaultfd are kept for the life of the process.
//! Each test keeps books of its own, never the process's (other tests make maps).

use super::*;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A userfaultfd refused with `errno`.
fn refused(errno: i32) -> impl FnOnce() -> io::Result<Uffd> {
    move || Err(io::Error::from_raw_os_error(errno))
}

fn books() -> Pagers {
    Pagers { pid: std::process::id(), list: Vec::new(), failed: None }
}

fn home(dir: &str, node: u32) -> Home {
    Some((PathBuf::from(dir), node))
}

// Linux's numbers.
const EPERM: i32 = 1;
const ENOMEM: i32 = 12;
const EINVAL: i32 = 22;
const ENFILE: i32 = 23;
const EMFILE: i32 = 24;
const ENOSYS: i32 = 38;

#[test]
fn a_refusal_for_want_of_descriptors_or_memory_fails_that_map_only() {
    let mut b = books();
    for errno in [EMFILE, ENFILE, ENOMEM] {
        let got = b.get(home("/a", 4), refused(errno));
        assert!(matches!(got, Err(DsmError::Resources(_))), "errno {errno}: {:?}", got.err());
        assert!(b.failed.is_none(), "errno {errno} was kept");
        assert!(b.list.is_empty());
    }
    // Descriptors are free again: the next home's first map has its pager.
    let uffd = match Uffd::new() {
        Ok(u) => u,
        Err(e) => return eprintln!("skipped the pager's making: userfaultfd unavailable here ({e})"),
    };
    assert!(b.get(home("/a", 8), move || Ok(uffd)).is_ok());
    assert_eq!(b.list.len(), 1);
}

#[test]
fn a_refusal_of_userfaultfd_itself_is_kept() {
    for errno in [EPERM, ENOSYS, EINVAL] {
        let mut b = books();
        assert!(b.get(home("/a", 4), refused(errno)).is_err());
        assert!(b.failed.is_some(), "errno {errno} was not kept");
        // Every later home is refused without asking the kernel again.
        let got = b.get(home("/a", 8), || unreachable!("userfaultfd asked again after errno {errno}"));
        assert!(matches!(got, Err(DsmError::Unavailable(_))));
    }
}

#[test]
fn the_same_node_of_two_clusters_has_two_pagers() {
    let mut b = books();
    let (Ok(u1), Ok(u2)) = (Uffd::new(), Uffd::new()) else {
        return eprintln!("skipped: userfaultfd unavailable here");
    };
    let p1 = b.get(home("/cluster-1", 4), move || Ok(u1)).unwrap();
    let p2 = b.get(home("/cluster-2", 4), move || Ok(u2)).unwrap();
    assert!(!Arc::ptr_eq(&p1, &p2), "node 4 of two clusters share a pager");
    // The same home again: its pager, no new userfaultfd.
    let again = b.get(home("/cluster-1", 4), || unreachable!("a second pager for one home")).unwrap();
    assert!(Arc::ptr_eq(&p1, &again));
}

#[test]
fn a_pager_unused_for_long_ends_when_another_home_gets_one() {
    let mut b = books();
    let (Ok(u1), Ok(u2), Ok(u3)) = (Uffd::new(), Uffd::new(), Uffd::new()) else {
        return eprintln!("skipped: userfaultfd unavailable here");
    };
    let old = b.get(home("/c", 4), move || Ok(u1)).unwrap();
    let held = b.get(home("/c", 8), move || Ok(u2)).unwrap();
    let gone = Arc::downgrade(&old);
    drop(old);
    // Long unused, as both are now; but the one a map still holds stays.
    let long_ago = Instant::now() - UNUSED - Duration::from_secs(1);
    for (_, p) in &b.list {
        *p.used.lock().unwrap() = long_ago;
    }
    let _third = b.get(home("/c", 12), move || Ok(u3)).unwrap();
    assert_eq!(b.list.len(), 2, "the unused pager is still listed");
    assert!(b.list.iter().any(|(_, p)| Arc::ptr_eq(p, &held)), "a pager a map holds was ended");
    // Its thread ends and lets go of it (its userfaultfd and eventfd close).
    let until = Instant::now() + Duration::from_secs(5);
    while gone.upgrade().is_some() {
        assert!(Instant::now() < until, "the unused pager's thread did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_pager_asked_for_lately_is_kept() {
    let mut b = books();
    let (Ok(u1), Ok(u2)) = (Uffd::new(), Uffd::new()) else {
        return eprintln!("skipped: userfaultfd unavailable here");
    };
    drop(b.get(home("/c", 4), move || Ok(u1)).unwrap());
    drop(b.get(home("/c", 8), move || Ok(u2)).unwrap());
    assert_eq!(b.list.len(), 2, "a pager unused for a moment only was ended");
}
