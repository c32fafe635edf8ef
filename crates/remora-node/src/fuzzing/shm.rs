//! The shared-memory targets: a region is made as the daemon makes it, then the input is a
//! script of operations — [`PATCH`] writes bytes anywhere in it, as a hostile process
//! sharing it may, and the others are the calls of its producer and consumer. While no
//! patch came, each call is checked against a model (what was queued comes out, in
//! order); after one, only that nothing panics nor reaches outside the region (every
//! access of `remora_sys` is bounds-checked, and checked again by its debug assertions).
//!
//! A script is a mode byte, then operations: an op byte (its low 3 bits the code, bit 3
//! a direction or side, bit 4 a flag) and its arguments, little-endian.

use super::kept::Kept;
use super::Ops;
use remora_sys::dma::{page_bytes, DmaDesc, DmaPage, MAX_ENTRIES};
use remora_sys::intr::{IntrPage, TriggerError, DATA_SLOTS, MAX_DATA};
use remora_sys::msgring::{size_for, MsgRegion, EXACT_QUEUE};
use remora_sys::sync::EventFd;
use remora_sys::{AsFd, Mapping, Memfd};
use std::collections::VecDeque;
use std::time::Duration;

/// Op: write bytes into the region (`u32` offset, modulo its size; `u8` length; bytes).
pub(crate) const PATCH: u8 = 0;
/// Op: queue (ring push, DMA post, data-interrupt send): a `u16` length.
pub(crate) const PUT: u8 = 1;
/// Op: take (ring pop, DMA take, data-interrupt receive): a `u16` length.
pub(crate) const GET: u8 = 2;
/// Op: the flags and waits of the page (watch, abort, arm, triggers…): a `u8` argument.
pub(crate) const FLAG: u8 = 3;
/// Op: the queries (has data, has room, pending…).
pub(crate) const ASK: u8 = 4;
/// Op: map the region again as a new holder would (`open`): a `u8` argument.
pub(crate) const REOPEN: u8 = 5;
/// Op: complete, remove or close (the daemon's side): a `u8` and a `u32` argument.
pub(crate) const END: u8 = 6;
/// Bit of the op byte: direction 1 (ring) / engine side.
pub(crate) const SIDE: u8 = 1 << 3;
/// Bit of the op byte: the flag argument of the operation.
pub(crate) const ON: u8 = 1 << 4;

/// The queues a `scif_ring` script's mode byte chooses from (its low 2 bits); mode bit 7
/// offers a foreign memfd (a `u32` size follows) instead of a region.
pub(crate) const RING_QUEUES: [usize; 4] = [256, 4096, 5000, 70_000];
/// Mode bit of `scif_ring`: a memfd of any size and content, not a region.
pub(crate) const FOREIGN: u8 = 0x80;

/// The period of [`pattern`]: a prime, so no ring or slot size lines up with it.
const PERIOD: usize = 251;

/// Bytes `k..k+n` of an endless pattern (byte `i` is `i % 251`), so the model knows what
/// was queued; `n` is at most `u16::MAX`. A slice of a table made once: building the
/// bytes one by one, instrumented, took half of a `scif_ring` run.
fn pattern(k: &mut u64, n: usize) -> &'static [u8] {
    static TABLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let table =
        TABLE.get_or_init(|| (0..PERIOD + usize::from(u16::MAX)).map(|i| (i % PERIOD) as u8).collect());
    let at = (*k % PERIOD as u64) as usize;
    *k = k.wrapping_add(n as u64);
    &table[at..at + n]
}

/// Take `got.len()` bytes from the front of `model`, checking them against `got` (a slice
/// compare of the deque's two halves, not a byte at a time).
fn take_checked(model: &mut VecDeque<u8>, got: &[u8]) {
    let (a, b) = model.as_slices();
    let (ga, gb) = got.split_at(got.len().min(a.len()));
    assert!(a[..ga.len()] == *ga && b[..gb.len()] == *gb, "in order");
    model.drain(..got.len());
}

/// Apply a [`PATCH`] op's arguments to `raw`.
fn patch(raw: Option<&Mapping>, ops: &mut Ops<'_>) {
    let off = ops.u32() as usize;
    let n = ops.byte() as usize;
    let bytes = ops.take(n);
    if let Some(m) = raw {
        let off = off % m.len();
        let n = bytes.len().min(m.len() - off);
        m.write(off, &bytes[..n]).expect("inside the region");
    }
}

/// The bytes of the longest take of a script (a `u16` length).
const SCRATCH: usize = u16::MAX as usize;

/// A byte no [`pattern`] has: a buffer is filled with it before a take, so a byte the take
/// claims but did not write never passes for what was queued.
const UNWRITTEN: u8 = 0xff;

thread_local! {
    /// The buffer every take of this thread's scripts reads into (made once: a zeroed
    /// allocation per take cost `scif_ring` a tenth of its time).
    static TAKE_BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![UNWRITTEN; SCRATCH]);
}

/// Target `scif_ring`: a SCIF connection's region (two message rings) that the peer
/// process may scribble on, driven through both ends' calls. A region of each queue size
/// is made once per thread and given back to each script as it was made (`kept.rs`); a
/// foreign memfd is made per script.
pub fn scif_ring(data: &[u8]) {
    thread_local! {
        static REGIONS: std::cell::RefCell<[Option<Kept<MsgRegion>>; 4]> =
            const { std::cell::RefCell::new([const { None }; 4]) };
    }
    let mut ops = Ops(data);
    let mode = ops.byte();
    let queue = RING_QUEUES[(mode & 3) as usize];
    let exact = queue <= EXACT_QUEUE;
    TAKE_BUF.with_borrow_mut(|buf| {
        if mode & FOREIGN != 0 {
            let Ok(fd) = Memfd::create("fuzz-scif", u64::from(ops.u32() % (2 << 20))) else { return };
            let raw = Mapping::new(fd.as_fd(), 0, fd.size() as usize, Default::default()).ok();
            let r = MsgRegion::open(fd.as_fd()).ok();
            ring_script(&fd, raw.as_ref(), r.as_ref(), false, exact, ops, buf);
            return;
        }
        REGIONS.with_borrow_mut(|regions| {
            let slot = &mut regions[(mode & 3) as usize];
            if slot.is_none() {
                *slot = MsgRegion::create(queue)
                    .and_then(|fd| Kept::new(fd, |fd| MsgRegion::open(fd.as_fd())))
                    .ok();
            }
            let Some(kept) = slot else { return };
            let k = kept.renew();
            ring_script(&k.fd, Some(&k.raw), Some(&k.held), true, exact, ops, buf);
        });
    });
}

/// The operations of a `scif_ring` script on the region in `fd`: `raw` maps all of it,
/// `first` is the region as opened before the script (a [`REOPEN`] opens it again);
/// `pristine` when it is a region as made, whose rings the model follows.
fn ring_script(
    fd: &Memfd,
    raw: Option<&Mapping>,
    first: Option<&MsgRegion>,
    mut pristine: bool,
    exact: bool,
    mut ops: Ops<'_>,
    buf: &mut [u8],
) {
    let mut again: Option<MsgRegion> = None;
    let mut model = [VecDeque::new(), VecDeque::new()];
    let (mut k, mut unseen) = (0u64, None);
    while ops.more() {
        let op = ops.byte();
        let d = usize::from(op & SIDE != 0);
        match op & 7 {
            PATCH => {
                patch(raw, &mut ops);
                pristine = false;
            }
            REOPEN => {
                if let Ok(a) = MsgRegion::open(fd.as_fd()) {
                    assert!(a.capacity() < a.queue());
                    assert!(raw.is_some_and(|m| m.len() >= size_for(a.queue())));
                    again = Some(a);
                }
            }
            code => {
                let Some(r) = again.as_ref().or(first) else { continue };
                let model = pristine.then_some(&mut model[d]);
                ring_op(r, code, op, d, &mut ops, model, exact, &mut k, &mut unseen, buf);
            }
        }
    }
}

/// One operation of a `scif_ring` script on ring `d` of `r`; `model` is the ring's bytes
/// while the region is pristine.
#[allow(clippy::too_many_arguments)]
fn ring_op(
    r: &MsgRegion,
    code: u8,
    op: u8,
    d: usize,
    ops: &mut Ops<'_>,
    model: Option<&mut VecDeque<u8>>,
    exact: bool,
    k: &mut u64,
    unseen: &mut Option<remora_sys::msgring::Unseen>,
    scratch: &mut [u8],
) {
    let cap = r.capacity();
    match code {
        PUT => {
            let data = pattern(k, ops.u16() as usize);
            let (sent, u) = r.push(d, data);
            assert!(sent <= data.len());
            if let Some(m) = model {
                let room = cap - m.len();
                if exact {
                    assert_eq!(sent, data.len().min(room), "the queue, not the slots, bounds a push");
                } else {
                    assert!(sent <= room);
                }
                m.extend(&data[..sent]);
            }
            *unseen = u.or(*unseen);
        }
        GET => {
            let buf = &mut scratch[..ops.u16() as usize];
            if let Some(m) = &model {
                let n = m.len().min(buf.len());
                buf[..n].fill(UNWRITTEN);
            }
            let (got, _inside) = if op & ON != 0 { r.pop_ex(d, buf) } else { (r.pop(d, buf), false) };
            assert!(got <= buf.len());
            if let Some(m) = model {
                assert_eq!(got, buf.len().min(m.len()), "a pop takes what is there");
                take_checked(m, &buf[..got]);
            }
        }
        FLAG => match ops.byte() % 4 {
            0 => r.watch(d, op & ON != 0),
            1 => {
                let _ = r.settle_wait(d);
            }
            2 => {
                let _ = r.stuffed_wait(d);
            }
            _ => {
                r.bell_pending(d).fetch_xor(1, std::sync::atomic::Ordering::Relaxed);
                r.tx_stuffed(d).fetch_xor(1, std::sync::atomic::Ordering::Relaxed);
            }
        },
        ASK => {
            let has = r.has_data(d);
            let room = r.has_room(d);
            if let Some(m) = model {
                assert_eq!(has, !m.is_empty());
                if exact {
                    assert_eq!(room, m.len() < cap);
                }
            }
            if let Some(u) = unseen {
                let _ = r.noticed(u);
            }
            let _ = (r.closed(d).load(std::sync::atomic::Ordering::Relaxed), r.win_gen(d));
            let _ = (r.rma_started(d), r.rma_done(d));
        }
        _ => {}
    }
}

/// Target `dma_page`: a DMA queue page the posting process may scribble on, posted by the
/// process and taken and completed by the engine.
pub fn dma_page(data: &[u8]) {
    thread_local! {
        /// A page of each size, made once (see [`Kept`]): the client's and the engine's view.
        static PAGES: std::cell::RefCell<Vec<Option<Kept<[DmaPage; 2]>>>> =
            std::cell::RefCell::new((0..64).map(|_| None).collect());
    }
    let mut ops = Ops(data);
    let max = 1 + u32::from(ops.byte() % 64);
    PAGES.with_borrow_mut(|pages| {
        let slot = &mut pages[max as usize - 1];
        if slot.is_none() {
            let views = |fd: &Memfd| {
                let ev = EventFd::new()?;
                let ev2 = ev.try_clone()?;
                Ok([DmaPage::open(fd, ev, max)?, DmaPage::open(fd, ev2, max)?])
            };
            *slot = DmaPage::create(max).and_then(|fd| Kept::new(fd, views)).ok();
        }
        let Some(kept) = slot else { return };
        let k = kept.renew();
        let _ = k.held[0].event().drain();
        dma_script(&k.fd, &k.raw, &k.held[0], &k.held[1], max, ops);
    });
}

/// The operations of a `dma_page` script on the page in `fd` (`raw` maps all of it) for
/// `max` descriptors, posted by `client` and taken by `engine`.
fn dma_script(fd: &Memfd, raw: &Mapping, client: &DmaPage, engine: &DmaPage, max: u32, mut ops: Ops<'_>) {
    let raw = Some(raw);
    let mut pristine = true;
    let mut posted: Option<Vec<DmaDesc>> = None;
    while ops.more() {
        let op = ops.byte();
        match op & 7 {
            PATCH => {
                patch(raw, &mut ops);
                pristine = false;
            }
            PUT => {
                let n = ops.u16() as usize % (max as usize + 2);
                let descs: Vec<DmaDesc> = (0..n)
                    .map(|_| DmaDesc {
                        local: ops.u64(),
                        remote: ops.u64(),
                        local_off: ops.u64(),
                        remote_off: ops.u64(),
                        size: ops.u64(),
                        flags: ops.u32(),
                    })
                    .collect();
                let ok = client.post(&descs).is_ok();
                assert_eq!(ok, n > 0 && n <= max as usize);
                if ok {
                    posted = Some(descs);
                }
            }
            GET => {
                let _ = ops.u16();
                let taken = engine.take();
                if let Some(t) = &taken {
                    assert!(!t.is_empty() && t.len() <= max as usize);
                }
                if pristine {
                    assert_eq!(taken, posted.clone(), "the engine takes what was posted");
                }
            }
            FLAG => match ops.byte() % 3 {
                0 => {
                    client.request_abort();
                    assert!(engine.abort_requested());
                }
                1 => client.set_armed(op & ON != 0),
                _ => {
                    client.reset();
                    let _ = client.event().drain();
                }
            },
            ASK => {
                let _ = (client.state(), client.error(), engine.abort_requested(), client.max_entries());
            }
            REOPEN => {
                let want = 1 + u32::from(ops.byte()) * 4;
                let fits = page_bytes(want) as u64 <= fd.size() && want <= MAX_ENTRIES;
                let Ok(ev) = EventFd::new() else { continue };
                match DmaPage::open(fd, ev, want) {
                    Ok(other) => {
                        assert!(fits);
                        if let Some(t) = other.take() {
                            assert!(t.len() <= want as usize);
                        }
                    }
                    Err(_) => assert!(!fits),
                }
            }
            END => {
                let state = u32::from(ops.byte() % 6);
                let err = ops.u32();
                if op & ON != 0 {
                    engine.close();
                    assert!(!engine.wait_posted(Duration::ZERO), "a closed queue ends the engine's wait");
                } else {
                    engine.complete(state, err);
                    if pristine {
                        assert_eq!((client.state(), client.error()), (state, err));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Target `intr_page`: an interrupt page every connected process may scribble on, with
/// data interrupts sent and received and plain triggers counted.
pub fn intr_page(data: &[u8]) {
    thread_local! {
        /// The page, made once (see [`Kept`]).
        static PAGE: std::cell::RefCell<Option<Kept<IntrPage>>> = const { std::cell::RefCell::new(None) };
    }
    let mut ops = Ops(data);
    let _mode = ops.byte();
    PAGE.with_borrow_mut(|slot| {
        if slot.is_none() {
            let page = |fd: &Memfd| IntrPage::open(fd, EventFd::new()?);
            *slot = IntrPage::create("fuzz-intr").and_then(|fd| Kept::new(fd, page)).ok();
        }
        let Some(kept) = slot else { return };
        let k = kept.renew();
        let _ = k.held.event().drain();
        TAKE_BUF.with_borrow_mut(|buf| intr_script(&k.raw, &k.held, ops, buf));
    });
}

/// The operations of an `intr_page` script on `page` (`raw` maps all of it).
fn intr_script(raw: &Mapping, page: &IntrPage, mut ops: Ops<'_>, scratch: &mut [u8]) {
    let raw = Some(raw);
    let mut pristine = true;
    let mut removed = false;
    let mut model: VecDeque<&[u8]> = VecDeque::new();
    let mut k = 0u64;
    while ops.more() {
        let op = ops.byte();
        match op & 7 {
            PATCH => {
                patch(raw, &mut ops);
                pristine = false;
            }
            PUT => {
                let data = pattern(&mut k, ops.u16() as usize % (MAX_DATA + 64));
                let r = page.send(data);
                if data.len() > MAX_DATA {
                    assert_eq!(r, Err(TriggerError::TooLong));
                } else if pristine {
                    let want = if removed {
                        Err(TriggerError::Removed)
                    } else if model.len() == DATA_SLOTS {
                        Err(TriggerError::Full)
                    } else {
                        Ok(())
                    };
                    assert_eq!(r, want);
                    if r.is_ok() {
                        model.push_back(data);
                    }
                }
            }
            GET => {
                let buf = &mut scratch[..ops.u16() as usize % (MAX_DATA + 64)];
                if let (true, Some(w)) = (pristine, model.front()) {
                    let n = w.len().min(buf.len());
                    buf[..n].fill(UNWRITTEN);
                }
                let peek = page.peek_len();
                let got = page.recv(buf);
                if let Some(n) = got {
                    assert!(n <= buf.len() && n <= MAX_DATA);
                }
                if pristine {
                    let want = model.pop_front();
                    assert_eq!(peek, want.map(<[u8]>::len));
                    assert_eq!(got, want.map(|w| w.len().min(buf.len())));
                    if let (Some(n), Some(w)) = (got, want) {
                        assert_eq!(buf[..n], w[..n], "the payload sent");
                    }
                }
            }
            FLAG => match ops.byte() % 4 {
                0 => page.set_armed(op & ON != 0),
                1 => assert_eq!(page.trigger().is_ok(), !page.is_removed()),
                2 => {
                    let _ = page.trigger_unless_pending();
                }
                _ => {
                    // The count of an RSM signal shares the word of the data queue's head.
                    if page.consume_one() {
                        pristine = false;
                    }
                }
            },
            ASK => {
                let has = page.has_data();
                if pristine {
                    assert_eq!(has, !model.is_empty());
                }
                let _ = (page.pending(), page.triggers(), page.is_removed(), page.event().drain());
            }
            END if op & ON != 0 => {
                page.remove();
                removed = true;
                assert!(page.is_removed());
            }
            _ => {}
        }
    }
}
