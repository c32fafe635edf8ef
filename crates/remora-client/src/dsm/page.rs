//! The page protocol of the DSM pager: what happens to one page of a map of another host's
//! memory, apart from the system calls that carry it out.
//!
//! A page is *missing* until its first access (the pager fills it from the home,
//! write-protected: [`PageState::filled`]), *clean* while protected (the home has every
//! store to it), and *watched* (`dirty`) from its first store on: the write-protect fault
//! ([`PageState::write_fault`]) keeps a *twin* (the page as the home has it from us) and
//! lifts the protection, so later stores cost nothing. The pager then looks at the page
//! ([`PageState::look`]) at every tick, at flush points and at refresh points: what differs
//! from the twin goes home, and a quiet page (or every page, at a refresh) is protected
//! again. A refresh (acquire point) drops the clean pages ([`PageState::droppable`]) so the
//! next access refetches them.
//!
//! The orderings that keep every store (each one a window where a store could be lost):
//!
//! * The twin is taken while the page is still protected (in the write fault, before the
//!   protection is lifted): no store lands between the twin and the lifting.
//! * A page that stops being watched is protected *first* and copied *after*: a store
//!   that lands after the copy faults and makes the page watched again; copying first
//!   would leave a store made between the copy and the protection on a clean page, never
//!   sent home (the classic lost-store window).
//! * A page that stays watched keeps the copy as its twin: a store that lands after the
//!   copy differs from it at the next look. A copy is sent only once two copies in a row
//!   agree (a picture the page really held, for writers whose stores are seen in program
//!   order), or taken with the page protected.
//! * Only clean pages are dropped, after the look that protected them; a write fault that
//!   finds its page dropped is retried by the writer (it faults again as missing, and the
//!   refetched page holds every store sent home).
//!
//! The pager (`pager.rs`) runs this over a [`PageMemory`] of a userfaultfd region; the
//! simulation in `crates/remora-client/tests/dsm_simulation.rs` runs the same code over a
//! simulated page whose stores, protection and copies interleave under a controlled
//! scheduler, and checks that the home ends with every store.

use super::diff;

/// The memory of one page, as the pager reaches it.
pub trait PageMemory {
    /// The page's length in bytes.
    fn size(&self) -> usize;
    /// Write-protect the page (`true`; a store then faults) or lift the protection.
    ///
    /// # Errors
    /// What the system call answers.
    fn protect(&mut self, on: bool) -> std::io::Result<()>;
    /// Copy the page out as it is now (stores of other threads may land during the copy).
    ///
    /// # Errors
    /// The page is not present, or the copy could not be made.
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<()>;
    /// Whether the page differs from `twin` (a quick look without copying; `true` when it
    /// cannot be told).
    fn differs(&mut self, twin: &[u8]) -> bool;
}

/// What the pager knows of one page.
#[derive(Debug, Default, Clone)]
pub struct PageState {
    /// Filled from the home (and not dropped since).
    pub resident: bool,
    /// Writable since its write fault: watched for changes against `twin`.
    pub dirty: bool,
    /// The page as the home has it from us (fetched, plus every change sent since).
    pub twin: Option<Box<[u8]>>,
}

/// What a write fault asks of the pager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFault {
    /// The page was dropped after the store faulted: wake the writer, whose store then
    /// faults as missing.
    Retry,
    /// The page became watched (protection lifted).
    Watched,
    /// It was watched already (protection lifted again).
    AlreadyWatched,
}

/// What one look at a page found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Look {
    /// Some bytes differed from the twin: they are in `runs`.
    pub changed: bool,
    /// The page is still watched.
    pub watching: bool,
    /// The page stopped being watched (protected again, clean).
    pub released: bool,
    /// The byte runs `(start, end)` of the copy to send home.
    pub runs: Vec<(usize, usize)>,
}

/// Copies of a changing page tried before the writer is stopped for one copy.
const COPIES: usize = 8;

impl PageState {
    /// The page was filled from the home (installed write-protected).
    pub fn filled(&mut self) {
        self.resident = true;
    }

    /// The page was dropped (its next access refetches it).
    pub fn dropped(&mut self) {
        self.resident = false;
    }

    /// Whether a refresh may drop the page: resident, and nothing unsent in it.
    pub fn droppable(&self) -> bool {
        self.resident && !self.dirty
    }

    /// A store faulted on the protected page: keep its twin (while it is still protected),
    /// watch it, and lift the protection.
    pub fn write_fault(&mut self, mem: &mut impl PageMemory) -> WriteFault {
        if !self.resident {
            return WriteFault::Retry;
        }
        let became = !self.dirty;
        if became {
            let mut twin = vec![0u8; mem.size()].into_boxed_slice();
            if mem.read(&mut twin).is_ok() {
                self.twin = Some(twin);
            }
            self.dirty = true;
        }
        let _ = mem.protect(false);
        if became {
            WriteFault::Watched
        } else {
            WriteFault::AlreadyWatched
        }
    }

    /// Look at a watched page: leave it (unchanged and not `quiet`), or copy it into `cur`
    /// and say which runs of the copy go home. A `quiet` page that did not change, or every
    /// page with `settle` (a refresh), is protected again and stops being watched. `again`
    /// is scratch space of the page's size.
    pub fn look(
        &mut self,
        mem: &mut impl PageMemory,
        quiet: bool,
        settle: bool,
        cur: &mut [u8],
        again: &mut [u8],
    ) -> Look {
        let mut out = Look::default();
        if !self.dirty {
            return out;
        }
        let mut protect = settle;
        // Most looks find nothing: compare in place before copying.
        let differs = match self.twin.as_deref() {
            Some(tw) => mem.differs(tw),
            None => true,
        };
        if !(differs || quiet || settle) {
            out.watching = true;
            return out;
        }
        if mem.read(cur).is_err() {
            return out;
        }
        let same = self.twin.as_deref().is_some_and(|tw| tw == &cur[..]);
        if same && !(quiet || settle) {
            out.watching = true;
            return out;
        }
        if same {
            protect = true;
        }
        if protect {
            // No store lands after this: the copy below is final.
            let _ = mem.protect(true);
            let _ = mem.read(cur);
        } else {
            let mut stable = false;
            for _ in 0..COPIES {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                let _ = mem.read(again);
                if again == cur {
                    stable = true;
                    break;
                }
                cur.swap_with_slice(again);
            }
            if !stable {
                // A writer that never pauses: stop it for one copy.
                protect = true;
                let _ = mem.protect(true);
                let _ = mem.read(cur);
            }
        }
        let twin = self.twin.get_or_insert_with(|| vec![0u8; cur.len()].into_boxed_slice());
        out.runs = diff(twin, cur);
        out.changed = !out.runs.is_empty();
        twin.copy_from_slice(cur);
        if protect {
            self.dirty = false;
            self.twin = None;
            out.released = true;
        } else {
            out.watching = true;
        }
        out
    }
}
