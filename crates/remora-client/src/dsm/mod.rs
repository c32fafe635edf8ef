//! The DSM pager: loads and stores on a segment of another host, in software.
//!
//! A map of a segment that lives on another host is anonymous memory of this process,
//! registered with userfaultfd. A pager thread serves the maps of one home node (multicast
//! maps share one more: `pagers.rs`, which also says how the calls that reach every map,
//! [`send_all`] among them, treat several pagers), over a
//! TCP connection of its own per segment connection, shared by that connection's maps (a
//! *pager flow*: dialed, authenticated and bound to the connection by this node's daemon,
//! handed over with SCM_RIGHTS, served on the home by a daemon thread that moves frames
//! straight between the socket and the segment). A map made on a session that serves the
//! pager alone ([`DsmMap::on_pager_session`]: SISCI's maps, on their descriptor's pager
//! session) does not wait for its flow: the flow is asked for in the background, and the
//! first fault, store straight home or flush that needs it waits for it (`flow/asked.rs`):
//!
//! ```text
//!   load of a missing page ──► fault ──► pager fetches the page, installs it
//!                                         write-protected
//!   store to a clean page  ──► fault ──► pager keeps a twin (the page as the home has
//!                                         it), lifts protection: the page is *watched*
//!   every tick             ───► a watched page that differs from its twin is copied until
//!                                two copies agree; the changed bytes go home (no answer
//!                                awaited: the flow keeps them in order); the copy becomes
//!                                the twin. A page quiet for `QUIET` is protected again.
//!   every `refresh` (default 1 ms) ───► pager sends what changed and drops every page:
//!                                the next access refetches
//! ```
//!
//! Ticks come every `REMORA_DSM_FLUSH_MIN_US` (default 10) for `HOT` after a change, then
//! less often up to `REMORA_DSM_FLUSH_US` (default 20); a writer that never pauses is looked
//! at every `REMORA_DSM_FLUSH_US`, so its stores batch. A page written again and again
//! costs no fault per store. A map that holds no page has no refresh due (the next comes
//! `refresh` after its next page arrives): a pager whose maps hold no page, as after a
//! refresh of maps nobody touches, sleeps until a fault or a command. After a lone change
//! the pager looks without sleeping for `REMORA_DSM_SPIN_US` (default 50), yielding between
//! looks: in a ping-pong the next store comes one round trip later and leaves at once
//! (longer, up to 15 times, when lone changes come a little further apart; never more than
//! about 4/5 of the time, as a heartbeat or a flag would keep it spinning: `pager/spin.rs`).
//! Two looks of a spin or more (most of its looks, or waiting most of the time), each kept
//! from a core for long (`CROWDED`; those bounds and how long the pager then stops spinning are
//! `pager/spin.rs`'s constants), mean programs that never yield hold the cores: the pager
//! then stops spinning for a while and runs at nice -20 (where allowed) so that its ticks
//! preempt them. Such a look among many short ones is another program's time slice (a
//! compiler on a shared machine), not a crowd: ticking instead of spinning then would make
//! a ping-pong several times slower for the whole while (`pager/spin.rs`).
//!
//! Two copies in a row that agree are a consistent picture for every writer whose stores
//! are seen in program order (x86): if the picture holds a store, the second copy, read
//! entirely after the first, holds every store before it. The home stores a picture's
//! changed bytes in address order, so a reader there may see part of one picture.
//!
//! Consistency model (what a program may rely on):
//! * A store reaches the home node within `REMORA_DSM_FLUSH_US` of landing (plus the
//!   send); at [`DsmMap::flush`] (`SCIStoreBarrier`, `SCICheckSequence`, unmap) the caller
//!   waits until it is there; [`DsmMap::send`] and [`send_all`] (`SCIFlush`) send it at
//!   once without waiting.
//! * A store of [`THROUGH`] bytes or more made with [`DsmMap::write`] (`SCIMemCpy`) goes
//!   home straight over the pager flow, after every store made before it, and is there
//!   when the call returns (`pager/through.rs`).
//! * Stores made with [`DsmMap::store_home`] go home straight over the pager flow, in
//!   order, after every store made before them to maps of the same connection, and are
//!   there when the call returns.
//! * Signals on other paths (interrupt triggers, DMA, SCIF messages and fences) call
//!   [`settle`] first: the stores made before them land before they leave.
//! * Order: stores separated by a flush or a send reach the home in program order (one
//!   flow keeps a connection's stores in order; [`send_all`] waits for the homes' answers
//!   when the maps use several flows, or maps of several pagers can be written). Stores
//!   between two of them may become visible at the home in any order (as through the
//!   write-combining buffers of the adapters): store the data, `SCIFlush`, store the flag.
//! * A load sees every store that reached the home node before the last
//!   [`DsmMap::refresh`] (`SCIStartSequence`), and any page is refetched within `refresh`
//!   (`REMORA_DSM_REFRESH_US`, default 1000): a program polling a word of the map sees the
//!   home's change without calling anything.
//! * Only the bytes a process changed are sent home (diffs against the twin), so processes
//!   on several hosts storing to different bytes of one page never overwrite each other.
//!   Stores of several hosts to the same bytes: the last to reach the home node wins.
//! * When the home node is lost, pages still resident keep their last contents and stores
//!   to them stay local; an access to a page that is not resident (never touched, or
//!   dropped by the last refresh, so within `refresh` every page) raises SIGBUS
//!   (`UFFDIO_POISON`) rather than hanging; [`DsmMap::write`] and [`DsmMap::read`]
//!   (`SCIMemCpy`) answer `ENOTCONN` instead, also when the home is lost while they wait
//!   for a page (`pager/stand_in.rs`). The connection reports the loss
//!   (`SCI_CB_LOST`), sequences report NOT_RETRIABLE, flushes fail. A flow that fails
//!   (no answer for 10 s, or closed) while the route is only down for now
//!   ([`Route::Silent`]: a cable cut) does not lose the home: the pager waits until the
//!   route is back, opens a new flow and does again what failed; the access that needed
//!   it waits meanwhile. The home is given up only once the connection is lost, or no new
//!   flow can be opened over a working route (`pager/revive.rs`). An unmap while the route
//!   is silent waits for neither the route nor the pager ([`DsmMap::release`]).
//!
//! The pager lives in the client process (not the daemon) so that a fault is resolved by a
//! thread of the faulting process: no userfaultfd crosses a socket, and a process that dies
//! takes its pager with it. A SCIF endpoint's maps of its peer's windows (`scif_mmap` of a
//! peer on another host) use a pager flow bound to the peer's windows. Where the daemon
//! cannot open a pager flow, requests go through this node's daemon instead.

mod channel;
mod flow;
mod map;
mod note;
pub mod page;
mod pager;
mod pagers;
mod rma;
#[cfg(test)]
mod tests;

pub use channel::{Channel, ChannelGuard};
pub use flow::{range_read, range_write, FlowStop, HeldFlow};
pub use map::{DsmMap, THROUGH};
pub use note::MapNote;
pub use pagers::{flush_all, send_all, settle};
pub use rma::{Piece, Sink, Source};

use crate::Session;
use pager::Cmd;
use remora_proto::link::{BulkFrame, BulkHeader, BulkOp, BULK_FRAME, MAX_SCIF_FRAME};
use remora_proto::{Reply, Request, MAX_DATA_IO};
use remora_sys::sync::EventFd;
use remora_sys::uffd::{Uffd, UffdRegion};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

const PAGE: usize = 4096;

/// Why a DSM map cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DsmError {
    /// userfaultfd is not available (kernel, permissions, seccomp).
    #[error("userfaultfd unavailable: {0}")]
    Unavailable(String),
    /// Out of descriptors or memory now (`EMFILE`, `ENFILE`, `ENOMEM`): this map fails, a
    /// later one may not.
    #[error("out of resources for a map of another host: {0}")]
    Resources(String),
}

#[derive(Default, Clone)]
struct Page {
    /// Resident, watched, twin: the page protocol's state (`page.rs`).
    st: page::PageState,
    /// When a change was last seen (or the write fault taken).
    changed: Option<Instant>,
}

/// How long a watched page may stay unchanged before the pager protects it again (its next
/// store faults, and it costs nothing until then).
const QUIET: Duration = Duration::from_millis(1);
/// How long after a change the pager keeps looking at the short interval before it backs
/// off (a writer answering a peer writes again about one round trip later).
const HOT: Duration = Duration::from_micros(100);

/// Where a map's pages live, as the pager reaches them. The pager knows nothing else of
/// the memory: the personality that makes the map says how to ask its node for a pager
/// flow to it, and how to read and write it through the daemon where no flow can be had.
pub trait RemoteRange: Send + Sync + std::fmt::Debug {
    /// Names the memory within its session: maps with equal keys share one pager flow (so
    /// their stores reach the home in order).
    fn key(&self) -> u64;
    /// The request that asks this node for a pager flow to the memory (answered with
    /// `Reply::DsmFlow` and the socket).
    fn flow_request(&self) -> Request;
    /// The request that reads `len` bytes at `offset` through the daemon (answered with
    /// `Reply::Data`).
    fn read_request(&self, offset: u64, len: u32) -> Request;
    /// The requests that store these runs through the daemon (at least one, so that the
    /// last can be waited for).
    fn write_requests(&self, runs: Vec<(u64, Vec<u8>)>) -> Vec<Request>;
    /// The route to the memory's home as this process knows it now (from its connection's
    /// link events). A pager whose flow failed waits while it is [`Route::Silent`] and
    /// opens a new flow once it is [`Route::Up`] again (`pager/revive.rs`); the default,
    /// [`Route::Lost`], gives the home up at the first failure.
    fn route(&self) -> Route {
        Route::Lost
    }
}

/// The route to a map's home, as [`RemoteRange::route`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The route works (or nothing was reported against it).
    Up,
    /// The route is down for now (`SCI_CB_NOT_OPERATIONAL`): the connection still exists.
    Silent,
    /// The connection is gone for good (lost, closed, or this node's daemon is gone).
    Lost,
}

pub(super) fn check(off: usize, len: usize, total: usize) -> std::io::Result<()> {
    match off.checked_add(len) {
        Some(e) if e <= total => Ok(()),
        _ => Err(std::io::Error::from_raw_os_error(34)),
    }
}

/// Byte runs where `now` differs from `twin`, with gaps under 16 bytes merged.
///
/// Equal stretches are skipped [`SKIP`] bytes at a time (a slice comparison, which the
/// compiler makes a vector loop): a look that found one changed word in a page walked all
/// 4096 bytes one by one, about a microsecond on the ping-pong's path between the pager
/// seeing a store and sending it.
pub(super) fn diff(twin: &[u8], now: &[u8]) -> Vec<(usize, usize)> {
    let len = now.len();
    let twin = &twin[..len];
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    loop {
        i = first_difference(twin, now, i);
        if i == len {
            return runs;
        }
        let start = i;
        while i < len && twin[i] != now[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 < 16 => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
}

/// The stride [`diff`] skips equal bytes by.
const SKIP: usize = 64;

/// The first index from `i` on where `twin` and `now` (of equal length) differ, or their
/// length.
fn first_difference(twin: &[u8], now: &[u8], mut i: usize) -> usize {
    let len = now.len();
    loop {
        if i.is_multiple_of(SKIP) {
            while i + SKIP <= len && twin[i..i + SKIP] == now[i..i + SKIP] {
                i += SKIP;
            }
        }
        if i == len || twin[i] != now[i] {
            return i;
        }
        i += 1;
    }
}
