//! The shared-memory targets: a region is made as the daemon makes it, then the input is a
//! script of operations — [`PATCH`] writes bytes anywhere in it, as a hostile process
//! sharing it may, and the others are the calls of its producer and consumer. While no
//! patch came, each call is checked against a model (what was queued comes out, in
//! order); after one, only that nothing panics nor reaches outside the region (every
//! access of `remora_sys` is bounds-checked, and checked again by its debug assertions).
//!
//! A script is a mode byte, then operations: an op byte (its low 3 bits the code, bit 3
//! a direction or side, bit 4 a flag) and its arguments, little-endian.

use super::Ops;
use remora_sys::dma::{page_bytes, DmaDesc, DmaPage, MAX_ENTRIES};
use remora_sys::intr::{IntrPage, TriggerError, DATA_SLOTS, MAX_DATA, PAGE_BYTES};
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

/// Bytes `k..k+n` of an endless pattern (so the model knows what was queued).
fn pattern(k: &mut u64, n: usize) -> Vec<u8> {
    let out = (0..n as u64).map(|i| (k.wrapping_add(i) % 251) as u8).collect();
    *k = k.wrapping_add(n as u64);
    out
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

/// Target `scif_ring`: a SCIF connection's region (two message rings) that the peer
/// process may scribble on, driven through both ends' calls.
pub fn scif_ring(data: &[u8]) {
    let mut ops = Ops(data);
    let mode = ops.byte();
    let queue = RING_QUEUES[(mode & 3) as usize];
    let fd = if mode & FOREIGN != 0 {
        Memfd::create("fuzz-scif", u64::from(ops.u32() % (2 << 20)))
    } else {
        MsgRegion::create(queue)
    };
    let Ok(fd) = fd else { return };
    let raw = Mapping::new(fd.as_fd(), 0, fd.size() as usize, Default::default()).ok();
    let mut r = MsgRegion::open(fd.as_fd()).ok();
    let mut pristine = mode & FOREIGN == 0;
    let exact = queue <= EXACT_QUEUE;
    let mut model = [VecDeque::new(), VecDeque::new()];
    let (mut k, mut unseen) = (0u64, None);
    while ops.more() {
        let op = ops.byte();
        let d = usize::from(op & SIDE != 0);
        match op & 7 {
            PATCH => {
                patch(raw.as_ref(), &mut ops);
                pristine = false;
            }
            REOPEN => {
                if let Ok(again) = MsgRegion::open(fd.as_fd()) {
                    assert!(again.capacity() < again.queue());
                    assert!(raw.as_ref().is_some_and(|m| m.len() >= size_for(again.queue())));
                    r = Some(again);
                }
            }
            code => {
                let Some(r) = &r else { continue };
                ring_op(
                    r,
                    code,
                    op,
                    d,
                    &mut ops,
                    pristine.then_some(&mut model[d]),
                    exact,
                    &mut k,
                    &mut unseen,
                );
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
) {
    let cap = r.capacity();
    match code {
        PUT => {
            let data = pattern(k, ops.u16() as usize);
            let (sent, u) = r.push(d, &data);
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
            let mut buf = vec![0u8; ops.u16() as usize];
            let (got, _inside) =
                if op & ON != 0 { r.pop_ex(d, &mut buf) } else { (r.pop(d, &mut buf), false) };
            assert!(got <= buf.len());
            if let Some(m) = model {
                assert_eq!(got, buf.len().min(m.len()), "a pop takes what is there");
                assert!(m.drain(..got).eq(buf[..got].iter().copied()), "in order");
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
    let mut ops = Ops(data);
    let max = 1 + u32::from(ops.byte() % 64);
    let Ok(fd) = DmaPage::create(max) else { return };
    let Ok(ev) = EventFd::new() else { return };
    let Ok(ev2) = ev.try_clone() else { return };
    let (Ok(client), Ok(engine)) = (DmaPage::open(&fd, ev, max), DmaPage::open(&fd, ev2, max)) else {
        return;
    };
    let raw = Mapping::new(fd.as_fd(), 0, page_bytes(max), Default::default()).ok();
    let mut pristine = true;
    let mut posted: Option<Vec<DmaDesc>> = None;
    while ops.more() {
        let op = ops.byte();
        match op & 7 {
            PATCH => {
                patch(raw.as_ref(), &mut ops);
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
                match DmaPage::open(&fd, ev, want) {
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
    let mut ops = Ops(data);
    let _mode = ops.byte();
    let Ok(fd) = IntrPage::create("fuzz-intr") else { return };
    let Ok(ev) = EventFd::new() else { return };
    let Ok(page) = IntrPage::open(&fd, ev) else { return };
    let raw = Mapping::new(fd.as_fd(), 0, PAGE_BYTES, Default::default()).ok();
    let mut pristine = true;
    let mut removed = false;
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let mut k = 0u64;
    while ops.more() {
        let op = ops.byte();
        match op & 7 {
            PATCH => {
                patch(raw.as_ref(), &mut ops);
                pristine = false;
            }
            PUT => {
                let data = pattern(&mut k, ops.u16() as usize % (MAX_DATA + 64));
                let r = page.send(&data);
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
                let mut buf = vec![0u8; ops.u16() as usize % (MAX_DATA + 64)];
                let peek = page.peek_len();
                let got = page.recv(&mut buf);
                if let Some(n) = got {
                    assert!(n <= buf.len() && n <= MAX_DATA);
                }
                if pristine {
                    let want = model.pop_front();
                    assert_eq!(peek, want.as_ref().map(Vec::len));
                    assert_eq!(got, want.as_ref().map(|w| w.len().min(buf.len())));
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
