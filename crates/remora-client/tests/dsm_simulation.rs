//! The DSM page protocol under a controlled scheduler (shuttle): no store is lost.
//!
//! The pager's decisions for one page (`remora_client::dsm::page`, the same code the pager
//! thread runs) are driven here over a simulated page instead of a userfaultfd region. The
//! page behaves as the MMU makes it behave: a store lands only on a present, unprotected
//! page, else the storing thread faults and waits for the pager; the pager's copies read the
//! page word by word while stores land between the words; protecting it takes effect at
//! once. Threads:
//!
//! * two writers storing rounds of increasing values into their own words of the page (one
//!   in address order, one against it), loading each word back after the store, and now and
//!   then asking for a flush (`SCIStoreBarrier`) and checking that the home then holds
//!   every store they made before it;
//! * a clock sending the pager ticks (quiet or not: the page stays watched, or is
//!   protected again) and refreshes (acquire points: watched pages settled, clean pages
//!   dropped, refetched from the home at the next access);
//! * the pager: serves missing-page and write-protect faults, ticks, refreshes and flushes,
//!   and sends what changed to the home.
//!
//! Checked in every execution: a load sees the thread's own last store (a dropped page
//! comes back with it); at a flush, and at the end after the last flush, the home holds
//! every store; every picture sent home is one the page really held (each writer's words
//! never show a later store without the earlier ones). The schedules are shuttle's random
//! and PCT schedulers, bounded so that the file runs in a few seconds.
//!
//! The test also proves that the simulation has teeth: the same code over a page whose
//! protection takes effect only after the next copy (the lost-store window: a store after
//! the copy, before the protection) must lose a store, and the checks must say so.

use remora_client::dsm::page::{PageMemory, PageState, WriteFault};
use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::sync::mpsc::{channel, Receiver, Sender};
use shuttle::sync::Mutex;
use std::sync::Arc;

/// Words of the simulated page (8 bytes each).
const WORDS: usize = 8;
/// Rounds each writer stores.
const ROUNDS: u64 = 3;

/// The page as the MMU and the kernel hold it.
struct Cell {
    words: [u64; WORDS],
    present: bool,
    protected: bool,
}

/// What the pager's threads send it.
enum Msg {
    Missing(Sender<()>),
    Write(Sender<()>),
    Flush(Sender<()>),
    Tick { quiet: bool },
    Refresh,
    Done,
}

/// The protocol as the pager runs it, or with one ordering broken (to show the checks
/// catch it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `dsm/page.rs` and the pager's bookkeeping as they are.
    Real,
    /// Protection takes effect only after the next copy: copy, then protect.
    LateProtect,
    /// A page no longer watched stops counting as pending before its changes are sent
    /// (the pager's order before the simulation found the window).
    EarlyRelease,
}

/// The shared world: the page, the home's copy of it, and the way to the pager.
struct World {
    page: Mutex<Cell>,
    home: Mutex<[u64; WORDS]>,
    /// Watched pages (the pager's `WATCHED`): a settle point with none is free.
    watched: AtomicUsize,
    /// Each writer's words in its program order (writer 1's may be empty: no such writer).
    order: [Vec<usize>; 2],
    variant: Variant,
    /// The pager refreshes right after each writer's round.
    refresh_after_store: bool,
}

/// The simulated page as the protocol reaches it.
struct Mem<'a> {
    w: &'a World,
    /// A protection asked for but not yet in effect (only with `late_protect`).
    pending: bool,
}

impl PageMemory for Mem<'_> {
    fn size(&self) -> usize {
        WORDS * 8
    }

    fn protect(&mut self, on: bool) -> std::io::Result<()> {
        if on && self.w.variant == Variant::LateProtect {
            self.pending = true;
        } else {
            self.w.page.lock().unwrap().protected = on;
        }
        Ok(())
    }

    fn read(&mut self, out: &mut [u8]) -> std::io::Result<()> {
        // Word by word: stores of the writers land between the words.
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            let c = self.w.page.lock().unwrap();
            if !c.present {
                return Err(std::io::Error::from_raw_os_error(14));
            }
            chunk.copy_from_slice(&c.words[i].to_ne_bytes());
        }
        if std::mem::take(&mut self.pending) {
            self.w.page.lock().unwrap().protected = true;
        }
        Ok(())
    }

    fn differs(&mut self, twin: &[u8]) -> bool {
        twin.chunks(8).enumerate().any(|(i, t)| {
            let c = self.w.page.lock().unwrap();
            !c.present || c.words[i].to_ne_bytes() != t
        })
    }
}

/// A store by a writer thread: lands on a present, writable page, else faults and waits.
fn store(w: &World, pager: &Sender<Msg>, i: usize, v: u64) {
    loop {
        let fault = {
            let mut c = w.page.lock().unwrap();
            if c.present && !c.protected {
                c.words[i] = v;
                return;
            }
            c.present
        };
        let (tx, rx) = channel();
        pager.send(if fault { Msg::Write(tx) } else { Msg::Missing(tx) }).unwrap();
        rx.recv().unwrap();
    }
}

/// A load by a writer thread: faults while the page is missing.
fn load(w: &World, pager: &Sender<Msg>, i: usize) -> u64 {
    loop {
        {
            let c = w.page.lock().unwrap();
            if c.present {
                return c.words[i];
            }
        }
        let (tx, rx) = channel();
        pager.send(Msg::Missing(tx)).unwrap();
        rx.recv().unwrap();
    }
}

fn writer(w: Arc<World>, me: usize, pager: Sender<Msg>) {
    for r in 1..=ROUNDS {
        for &i in &w.order[me] {
            store(&w, &pager, i, r);
            assert_eq!(load(&w, &pager, i), r, "writer {me} lost its own store to word {i}");
        }
        if w.refresh_after_store {
            // The refresh timer fires right after the stores (every 1 ms in the pager).
            pager.send(Msg::Refresh).unwrap();
        }
        // Writer 0 flushes (`SCIStoreBarrier`) every other round; writer 1 passes a settle
        // point (before an interrupt trigger) every round: free when nothing is pending.
        let point = if me == 0 && r % 2 == 0 {
            Some("flush")
        } else if me == 1 && w.watched.load(Ordering::SeqCst) == 0 {
            Some("settle point that found nothing pending")
        } else if me == 1 {
            Some("settle point")
        } else {
            None
        };
        if let Some(point) = point {
            if point != "settle point that found nothing pending" {
                let (tx, rx) = channel();
                pager.send(Msg::Flush(tx)).unwrap();
                rx.recv().unwrap();
            }
            let home = *w.home.lock().unwrap();
            for &i in &w.order[me] {
                assert_eq!(home[i], r, "after a {point} the home lacks writer {me}'s store to word {i}");
            }
        }
    }
    pager.send(Msg::Done).unwrap();
}

/// Every writer's words at the home: a picture the page held (stores in program order).
fn check_picture(w: &World, home: &[u64; WORDS]) {
    for (me, order) in w.order.iter().enumerate().filter(|(_, o)| !o.is_empty()) {
        let vals: Vec<u64> = order.iter().map(|&i| home[i]).collect();
        let consistent = vals.windows(2).all(|p| p[0] >= p[1]) && vals[0] <= vals[vals.len() - 1] + 1;
        assert!(consistent, "the home shows writer {me}'s stores out of program order: {vals:?}");
    }
}

/// Send a look's runs home (in order, as the pager flow does).
fn send_home(w: &World, cur: &[u8], runs: &[(usize, usize)]) {
    let mut home = w.home.lock().unwrap();
    let mut bytes: Vec<u8> = home.iter().flat_map(|v| v.to_ne_bytes()).collect();
    for &(a, b) in runs {
        bytes[a..b].copy_from_slice(&cur[a..b]);
    }
    for (i, c) in bytes.chunks(8).enumerate() {
        home[i] = u64::from_ne_bytes(c.try_into().unwrap());
    }
    check_picture(w, &home);
}

/// The pager thread: the same decisions as `dsm/pager.rs`, over the simulated page.
fn pager(w: Arc<World>, rx: Receiver<Msg>, senders: usize) {
    let mut st = PageState::default();
    let mut mem = Mem { w: &w, pending: false };
    let (mut cur, mut again) = (vec![0u8; WORDS * 8], vec![0u8; WORDS * 8]);
    let mut done = 0;
    // As `flush_pages`: look, send, and only then stop counting a released page.
    let mut look = |st: &mut PageState, mem: &mut Mem, quiet: bool, settle: bool| {
        let l = st.look(mem, quiet, settle, &mut cur, &mut again);
        let early = mem.w.variant == Variant::EarlyRelease;
        if l.released && early {
            mem.w.watched.fetch_sub(1, Ordering::SeqCst);
        }
        if !l.runs.is_empty() {
            send_home(mem.w, &cur, &l.runs);
        }
        if l.released && !early {
            mem.w.watched.fetch_sub(1, Ordering::SeqCst);
        }
    };
    while done < senders {
        match rx.recv().unwrap() {
            Msg::Missing(reply) => {
                let mut c = w.page.lock().unwrap();
                if !c.present {
                    // UFFDIO_COPY of the home's page, write-protected.
                    c.words = *w.home.lock().unwrap();
                    c.present = true;
                    c.protected = true;
                    st.filled();
                }
                drop(c);
                reply.send(()).unwrap();
            }
            Msg::Write(reply) => {
                // As `on_write`: counted before the protection is lifted; the writer is woken
                // and stores again.
                w.watched.fetch_add(1, Ordering::SeqCst);
                if st.write_fault(&mut mem) != WriteFault::Watched {
                    w.watched.fetch_sub(1, Ordering::SeqCst);
                }
                reply.send(()).unwrap();
            }
            Msg::Flush(reply) => {
                look(&mut st, &mut mem, false, false);
                reply.send(()).unwrap();
            }
            Msg::Tick { quiet } => look(&mut st, &mut mem, quiet, false),
            Msg::Refresh => {
                look(&mut st, &mut mem, false, true);
                if st.droppable() {
                    let mut c = w.page.lock().unwrap();
                    c.present = false;
                    c.words = [0; WORDS];
                    st.dropped();
                }
            }
            Msg::Done => done += 1,
        }
    }
    // The unmap's flush: everything still watched goes home.
    look(&mut st, &mut mem, false, false);
}

fn clock(pager: Sender<Msg>) {
    for quiet in [false, true, false, true] {
        pager.send(Msg::Tick { quiet }).unwrap();
        shuttle::thread::yield_now();
        if quiet {
            pager.send(Msg::Refresh).unwrap();
        }
    }
    pager.send(Msg::Done).unwrap();
}

/// One execution: writers, clock and pager; at the end the home holds every last store.
fn execution(variant: Variant) {
    run(variant, [vec![0, 1, 2, 3], vec![7, 6, 5, 4]], false);
}

/// One writer whose every round is followed at once by a refresh, racing the writer's
/// settle point: the window between a page's release and the send of its last changes.
fn settle_race(variant: Variant) {
    run(variant, [vec![], vec![3, 2, 1, 0]], true);
}

fn run(variant: Variant, order: [Vec<usize>; 2], refresh_after_store: bool) {
    let writers: Vec<usize> = (0..2).filter(|&me| !order[me].is_empty()).collect();
    let mut last = [0u64; WORDS];
    for o in writers.iter().flat_map(|&me| order[me].iter()) {
        last[*o] = ROUNDS;
    }
    let w = Arc::new(World {
        page: Mutex::new(Cell { words: [0; WORDS], present: false, protected: false }),
        home: Mutex::new([0; WORDS]),
        watched: AtomicUsize::new(0),
        order,
        variant,
        refresh_after_store,
    });
    let (tx, rx) = channel();
    let p = {
        let w = w.clone();
        let senders = writers.len() + usize::from(!refresh_after_store);
        shuttle::thread::spawn(move || pager(w, rx, senders))
    };
    let mut threads = Vec::new();
    for &me in &writers {
        let (w, tx) = (w.clone(), tx.clone());
        threads.push(shuttle::thread::spawn(move || writer(w, me, tx)));
    }
    if !refresh_after_store {
        threads.push(shuttle::thread::spawn(move || clock(tx)));
    }
    for t in threads {
        t.join().unwrap();
    }
    p.join().unwrap();
    let home = *w.home.lock().unwrap();
    assert_eq!(home, last, "the home lacks stores after the last flush");
}

/// Executions per scheduler: `REMORA_SIM_ITERATIONS` (default 500, a few seconds; raise
/// it for a long run).
fn iterations() -> usize {
    std::env::var("REMORA_SIM_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(500)
}

#[test]
fn no_store_is_lost_under_random_schedules() {
    shuttle::check_random(|| execution(Variant::Real), iterations());
}

#[test]
fn no_store_is_lost_under_pct_schedules() {
    shuttle::check_pct(|| execution(Variant::Real), iterations(), 3);
}

// The broken variants run with fixed seeds, so that the schedule that catches them is the
// same in every run; the real protocol runs under fresh schedules each time (a failure
// prints the schedule, which `shuttle::replay` reproduces).

/// The checks find the classic lost-store window when the protocol's memory protects the
/// page only after its final copy: a store in between lands on a page no longer watched.
#[test]
fn copying_before_protecting_loses_a_store_and_is_caught() {
    let caught = std::panic::catch_unwind(|| {
        shuttle::check_random_with_seed(|| execution(Variant::LateProtect), 18, 3000)
    });
    assert!(caught.is_err(), "no schedule lost a store with the protection after the copy");
}

#[test]
fn no_settle_point_overtakes_a_store() {
    shuttle::check_random(|| settle_race(Variant::Real), iterations());
    shuttle::check_pct(|| settle_race(Variant::Real), iterations(), 2);
}

/// Regression of the window the simulation found in the pager: a page released by a look
/// stopped counting as pending before its changes were sent, so a settle point in that
/// window (free when nothing is pending) let its signal overtake the store.
#[test]
fn releasing_before_sending_lets_a_settle_point_overtake_a_store() {
    let caught = std::panic::catch_unwind(|| {
        let pct = shuttle::scheduler::PctScheduler::new_from_seed(18, 2, 3000);
        shuttle::Runner::new(pct, Default::default()).run(|| settle_race(Variant::EarlyRelease))
    });
    assert!(caught.is_err(), "no schedule let a settle point overtake a store");
}
