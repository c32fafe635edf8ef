//! A pager thread: serves the faults of its maps of another host's memory (those of one
//! home node, or the multicast maps: `pagers.rs`), watches written pages against their
//! twins and sends what changed home, refreshes clean pages, and answers flush commands.

pub(super) mod fanout;
mod flush;
mod revive;
mod spin;
mod stand_in;
mod through;

use super::flow::{Flow, Soon};
use super::page::{Look, PageMemory, WriteFault};
use super::*;

/// One page of a map as the page protocol reaches it: through the pager's userfaultfd.
struct Mem<'a> {
    uffd: &'a Uffd,
    region: &'a UffdRegion,
    addr: usize,
}

impl PageMemory for Mem<'_> {
    fn size(&self) -> usize {
        PAGE
    }
    fn protect(&mut self, on: bool) -> std::io::Result<()> {
        self.uffd.protect(self.region, self.addr, PAGE, on)
    }
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<()> {
        self.region.read_present_page(self.addr, out)
    }
    fn differs(&mut self, twin: &[u8]) -> bool {
        self.region.present_page_differs(self.addr, twin).unwrap_or(true)
    }
}

pub(super) struct PMap {
    pub(super) region: Arc<UffdRegion>,
    pub(super) session: Arc<Session>,
    pub(super) home: Arc<dyn RemoteRange>,
    /// The pager's own connection to the home, when one could be made (otherwise requests
    /// go through this node's daemon); maybe still on its way (`flow/asked.rs`).
    pub(super) direct: Soon,
    pub(super) seg_off: u64,
    pub(super) seg_size: u64,
    pub(super) readonly: bool,
    pub(super) pages: Vec<Page>,
    /// Pages resident, or being fetched (raised before the fetch takes the flow, lowered
    /// when a page is dropped or its fetch failed): a store straight home that finds none
    /// after it went has no page to drop (`DsmMap::write`).
    pub(super) resident: Arc<AtomicUsize>,
    pub(super) lost: Arc<AtomicBool>,
    /// The counts of its pager (what is not home yet).
    pub(super) pending: Arc<Pending>,
    /// When the pager next looks at the watched pages.
    pub(super) next_tick: Option<Instant>,
    /// Whether the last look found changes (a writer storing without pause).
    pub(super) streaming: bool,
    /// Until when the pager keeps looking at the map without sleeping (after a lone change:
    /// the next one, in a ping-pong, comes one round trip later).
    pub(super) spin_until: Option<Instant>,
    /// When the last lone change was found (`spin.rs`: how long the next spin lasts).
    pub(super) last_lone: Option<Instant>,
    pub(super) last_refresh: Instant,
    /// Stores were sent without waiting for the home's answer.
    pub(super) unanswered: bool,
    /// Stores went out on a flow that failed before the home answered them (a new flow
    /// took over: `revive.rs`), so they may never have landed: the next flush that waits
    /// for the home answers `false` once (a sequence's check says RETRIABLE).
    pub(super) doubtful: bool,
    /// The current flush delay: short while pages are written now and then (a store goes
    /// home almost at once), doubled up to `flush` while pages are written again right
    /// after each flush (stores are batched).
    pub(super) delay: Duration,
    /// A multicast map: where its stores go and its pages come from (`home` and `direct`
    /// are then unused).
    pub(super) fan: Option<fanout::Fanout>,
    /// The map is being unmapped: a failed path home is not waited for (`revive.rs`).
    pub(super) leaving: bool,
    /// Pages of a lost home filled with zeros for a copy of the API (`stand_in.rs`).
    pub(super) stand_ins: Vec<usize>,
}

pub(super) enum Cmd {
    /// Flush every map; wait for the homes' answers when set.
    FlushAll(Sender<bool>, bool),
    Add(u64, Box<PMap>),
    /// Flush one map; wait for the home's answer when set.
    Flush(u64, Sender<bool>, bool),
    Refresh(u64, Sender<bool>),
    Remove(u64, Sender<()>),
    /// Drop the map's stand-ins (`stand_in.rs`).
    Forget(u64, Sender<()>),
    /// Before a store of `len` bytes at byte `start` of a map goes home straight over its
    /// pager flow (`through.rs`): the flow and the home's offset of `start`, once the pages
    /// the store touches sent their changes (`None`: the store goes through the map).
    Through {
        id: u64,
        start: usize,
        len: usize,
        tx: Sender<Option<(Flow, u64)>>,
    },
    /// A store of `data` at byte `start` straight home, all of it on the pager's thread
    /// (`None`: it must go through the map).
    Store {
        id: u64,
        start: usize,
        data: Vec<u8>,
        tx: Sender<Option<std::io::Result<()>>>,
    },
    /// After it: those pages drop what they hold (their next access refetches it);
    /// `broken`: the flow failed on the store (a new one is opened once the route is
    /// back; the home is lost otherwise).
    Landed {
        id: u64,
        start: usize,
        len: usize,
        broken: bool,
        tx: Sender<()>,
    },
    /// No map uses the pager any more and none can (`pagers.rs` dropped it from its
    /// list): the thread ends.
    Exit,
    /// Add a leg to (or drop one from) the multicast maps of a connection (`fanout::leg`).
    Leg {
        key: u64,
        home: Arc<dyn RemoteRange>,
        joined: bool,
        done: Sender<()>,
    },
}

pub(super) struct Pager {
    pub(super) uffd: Uffd,
    pub(super) waker: EventFd,
    pub(super) cmds: Mutex<VecDeque<Cmd>>,
    pub(super) next: AtomicU64,
    pub(super) flush: Duration,
    pub(super) flush_min: Duration,
    pub(super) refresh: Duration,
    /// How long the pager looks without sleeping after a lone change.
    pub(super) spin: Duration,
    /// What the pager's maps hold that is not home yet.
    pub(super) pending: Arc<Pending>,
    /// How many of its maps can be written (a store to one may have to wait for another
    /// pager's homes: `pagers.rs`, `send_all`).
    pub(super) writers: AtomicUsize,
    /// The process the pager's thread runs in (a child made by fork has no such thread).
    pub(super) pid: u32,
    /// When a map last asked for this pager (`pagers.rs` ends pagers unused for long).
    pub(super) used: Mutex<Instant>,
    /// Set by [`Cmd::Exit`]: the thread ends once it has no map.
    pub(super) quit: AtomicBool,
    /// The threads copying through its maps for a call of the API now (`stand_in.rs`).
    pub(super) copiers: stand_in::Copiers,
}

/// What a pager's maps hold that is not home yet, counted where every thread can look.
#[derive(Default)]
pub(super) struct Pending {
    /// Pages watched (written, their changes maybe not sent yet). Raised before a writer
    /// resumes from its write fault, and lowered only after the changes of a page no longer
    /// watched went out, so a writer that sees 0 after its store has nothing unsent.
    watched: AtomicUsize,
    /// Maps whose last stores went out without waiting for the home's answer.
    unanswered: AtomicUsize,
}

/// The sum of every pager's counts: 0 when no store of the process is left to send or to
/// be answered (raised before a pager's count, lowered after it, so never below their sum).
static ANY_PENDING: AtomicUsize = AtomicUsize::new(0);

impl Pending {
    fn add(c: &AtomicUsize, n: usize) {
        if n > 0 {
            ANY_PENDING.fetch_add(n, Ordering::SeqCst);
            c.fetch_add(n, Ordering::SeqCst);
        }
    }

    fn sub(c: &AtomicUsize, n: usize) {
        if n > 0 {
            c.fetch_sub(n, Ordering::SeqCst);
            ANY_PENDING.fetch_sub(n, Ordering::SeqCst);
        }
    }

    pub(super) fn watch(&self, n: usize) {
        Self::add(&self.watched, n);
    }

    pub(super) fn unwatch(&self, n: usize) {
        Self::sub(&self.watched, n);
    }

    /// No page of the pager's maps is watched: every store made to them so far is on its
    /// way home.
    pub(super) fn nothing_watched(&self) -> bool {
        self.watched.load(Ordering::SeqCst) == 0
    }

    /// Every store made to the pager's maps so far is home (or they were lost).
    pub(super) fn nothing(&self) -> bool {
        self.watched.load(Ordering::SeqCst) == 0 && self.unanswered.load(Ordering::SeqCst) == 0
    }
}

/// No store made so far to any map of another host is left to send or to be answered.
pub(super) fn nothing_pending() -> bool {
    ANY_PENDING.load(Ordering::SeqCst) == 0
}

/// In a child made by fork, before it has a pager of its own: the counts of its parent's
/// pagers, whose threads are not here, are no stores of this process's to wait for.
pub(super) fn forget_pending() {
    ANY_PENDING.store(0, Ordering::SeqCst);
}

pub(super) fn set_unanswered(m: &mut PMap, v: bool) {
    if m.unanswered != v {
        m.unanswered = v;
        if v {
            Pending::add(&m.pending.unanswered, 1);
        } else {
            Pending::sub(&m.pending.unanswered, 1);
        }
    }
}

impl Pager {
    pub(super) fn command(&self, c: Cmd) {
        self.queue(c);
        self.waker.signal();
    }

    /// Queue a command without waking the pager: it is taken with the next command, or at
    /// the first fault of a map it adds (a fault of a region the pager does not know yet
    /// takes the queue first). Waking a thread whose core is idle costs its waker
    /// (a halted virtual CPU: tens of µs).
    pub(super) fn queue(&self, c: Cmd) {
        self.cmds.lock().unwrap_or_else(|p| p.into_inner()).push_back(c);
    }

    pub(super) fn run(&self) {
        remora_sys::sync::precise_timers();
        // Programs that poll without ever yielding can hold every core (`spin.rs`): the pager
        // then stops spinning for a while and runs urgent (nice -20, where allowed), so its
        // ticks and faults preempt the pollers. Otherwise it runs at the default priority,
        // where yielding really gives the core away. It never spins most of the time.
        let (mut crowd, mut share) = (spin::Crowd::default(), spin::Share::default());
        let mut urgent = false;
        let mut looks = 0u32;
        let mut maps: BTreeMap<usize, (u64, PMap)> = BTreeMap::new();
        loop {
            // A bug must not leave faulting threads waiting for a pager that died: a
            // panicking look is logged and the next one goes on.
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let now = Instant::now();
                let due = maps
                    .values()
                    .flat_map(|(_, m)| [m.next_tick, m.refresh_due(self.refresh)])
                    .flatten()
                    .min();
                let crowded = crowd.crowded(now);
                let wants = !crowded && maps.values().any(|(_, m)| m.spin_until.is_some_and(|u| now < u));
                let spinning = share.look(wants, now);
                if !spinning {
                    for (_, m) in maps.values_mut() {
                        m.spin_until = None;
                    }
                }
                if urgent != crowded {
                    urgent = crowded;
                    remora_sys::sync::urgent_thread(urgent);
                }
                let timeout = if spinning {
                    // Looking without sleeping: give the core to whoever else wants it first.
                    let y = Instant::now();
                    std::thread::yield_now();
                    let (waited, back) = (y.elapsed(), Instant::now());
                    crowd.yielded(waited, back);
                    share.gave_away(waited, back);
                    Some(Duration::ZERO)
                } else {
                    due.map(|d| d.saturating_duration_since(now))
                };
                // While spinning, the descriptors are polled every fourth look only (a fault or a
                // command waits a few looks at most); commands are seen in their queue anyway.
                looks = looks.wrapping_add(1);
                let ready = if spinning && !looks.is_multiple_of(4) {
                    let queued = !self.cmds.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
                    if queued {
                        2
                    } else {
                        0
                    }
                } else {
                    use std::os::fd::AsFd;
                    // A failed wait looks at everything.
                    remora_sys::poller::wait_ready(&[self.uffd.as_fd(), self.waker.as_fd()], timeout)
                        .unwrap_or(3)
                };
                // A tick that found nothing ready costs no further system call.
                if ready & 2 != 0 {
                    self.waker.drain();
                    self.drain_cmds(&mut maps);
                }
                let mut faults = ready & 1 != 0;
                while faults {
                    let Ok(Some(f)) = self.uffd.next_fault() else {
                        faults = false;
                        continue;
                    };
                    // A fault may come from a map whose registration is still queued.
                    if !maps
                        .range(..=f.addr)
                        .next_back()
                        .is_some_and(|(_, (_, m))| m.region.contains(f.addr, PAGE))
                    {
                        self.drain_cmds(&mut maps);
                    }
                    let Some((_, (id, m))) = maps.range_mut(..=f.addr).next_back() else { continue };
                    if !m.region.contains(f.addr, PAGE) {
                        continue;
                    }
                    let idx = (f.addr - m.region.base()) / PAGE;
                    if f.wp {
                        self.on_write(m, idx, f.addr);
                    } else {
                        self.on_missing(*id, m, idx, f.addr, f.tid);
                    }
                }
                let now = Instant::now();
                for (_, m) in maps.values_mut() {
                    if m.next_tick.is_some_and(|d| now >= d) || m.spin_until.is_some_and(|u| now < u) {
                        self.tick(m);
                    }
                    if now >= m.last_refresh + self.refresh {
                        self.refresh_map(m);
                    }
                }
            }));
            if step.is_err() {
                tracing::error!("the DSM pager recovered from a panic");
            }
            if maps.is_empty() && self.quit.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    fn drain_cmds(&self, maps: &mut BTreeMap<usize, (u64, PMap)>) {
        loop {
            let cmd = self.cmds.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
            let Some(cmd) = cmd else { break };
            match cmd {
                Cmd::FlushAll(tx, wait) => {
                    // Stores travel in order along one path (a pager flow, or this node's
                    // daemon); across several, only waiting for every home keeps them so.
                    // A map whose flow is still on its way holds no store (its first
                    // access waits for the flow): not waited for here, so that a home that
                    // stopped answering a dial does not hold up every other home's flush.
                    let mut paths: Vec<usize> = maps
                        .values()
                        .filter(|(_, m)| !m.readonly)
                        .filter_map(|(_, m)| match m.direct.peek()? {
                            Some(d) => Some(Arc::as_ptr(&d) as usize),
                            None => Some(Arc::as_ptr(&m.session) as usize),
                        })
                        .collect();
                    paths.sort_unstable();
                    paths.dedup();
                    let wait = wait || paths.len() > 1;
                    let mut ok = true;
                    for (_, m) in maps.values_mut() {
                        ok &= self.flush_map(m, wait);
                    }
                    let _ = tx.send(ok);
                }
                Cmd::Add(id, m) => {
                    maps.insert(m.region.base(), (id, *m));
                }
                Cmd::Flush(id, tx, wait) => {
                    self.flush_siblings(maps, id);
                    let ok = find_id(maps, id).map(|m| self.flush_map(m, wait)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Refresh(id, tx) => {
                    self.flush_siblings(maps, id);
                    let ok = find_id(maps, id).map(|m| self.refresh_map(m)).unwrap_or(false);
                    let _ = tx.send(ok);
                }
                Cmd::Remove(id, tx) => {
                    if let Some(m) = find_id(maps, id) {
                        // Its stores go home if the path works; an unmap never waits out a
                        // cable cut for them: while the route is silent they are sent
                        // without waiting for the home's answer (they land if the cable
                        // comes back in time), and a path that fails is not revived.
                        m.leaving = true;
                        let wait = m.home.route() != Route::Silent;
                        self.flush_map(m, wait);
                        let watched = m.pages.iter().filter(|p| p.st.dirty).count();
                        self.pending.unwatch(watched);
                        set_unanswered(m, false);
                    }
                    maps.retain(|_, (i, _)| *i != id);
                    let _ = tx.send(());
                }
                Cmd::Forget(id, tx) => {
                    if let Some(m) = find_id(maps, id) {
                        self.forget_stand_ins(m);
                    }
                    let _ = tx.send(());
                }
                Cmd::Through { id, start, len, tx } => {
                    self.flush_siblings(maps, id);
                    let _ = tx.send(find_id(maps, id).and_then(|m| self.through(m, start, len)));
                }
                Cmd::Store { id, start, data, tx } => {
                    self.flush_siblings(maps, id);
                    let _ = tx.send(find_id(maps, id).and_then(|m| self.store(m, start, &data)));
                }
                Cmd::Landed { id, start, len, broken, tx } => {
                    if let Some(m) = find_id(maps, id) {
                        let _ = self.landed(m, start, len, broken);
                    }
                    let _ = tx.send(());
                }
                Cmd::Exit => self.quit.store(true, Ordering::SeqCst),
                Cmd::Leg { key, home, joined, done } => {
                    fanout::leg(self, maps, key, home, joined);
                    let _ = done.send(());
                }
            }
        }
    }

    fn on_missing(&self, id: u64, m: &mut PMap, idx: usize, addr: usize, tid: u32) {
        let first = m.resident.fetch_add(1, Ordering::SeqCst) == 0;
        let off = m.seg_off + (idx * PAGE) as u64;
        let mut page = vec![0u8; PAGE];
        let fetched = if m.lost.load(Ordering::SeqCst) || off >= m.seg_size {
            None
        } else if let Some(f) = m.fan.as_mut() {
            let len = (m.seg_size - off).min(PAGE as u64) as usize;
            f.read(&m.session, off, &mut page[..len]).then_some(page)
        } else {
            let len = (m.seg_size - off).min(PAGE as u64) as u32;
            fetch(m, off, &mut page[..len as usize]).then_some(page)
        };
        match fetched {
            Some(page) => {
                if self.uffd.copy_page(&m.region, addr, &page, !m.readonly).is_ok() {
                    m.pages[idx].st.filled();
                    if first {
                        // The map's refreshes, paused while it held no page, start again
                        // from this one's arrival.
                        m.last_refresh = Instant::now();
                    }
                } else {
                    m.resident.fetch_sub(1, Ordering::SeqCst);
                }
            }
            None => {
                m.resident.fetch_sub(1, Ordering::SeqCst);
                // The page can never be filled: the access fails instead of hanging.
                self.unfillable(id, m, idx, addr, tid);
            }
        }
    }

    fn on_write(&self, m: &mut PMap, idx: usize, addr: usize) {
        let mut mem = Mem { uffd: &self.uffd, region: &m.region, addr };
        // Raised before the protection is lifted (before the writer resumes).
        self.pending.watch(1);
        match m.pages[idx].st.write_fault(&mut mem) {
            WriteFault::Retry => {
                // The page was dropped after this store faulted: reading it here would fault
                // on the pager's own thread. Let the writer retry; it will fault as missing.
                self.pending.unwatch(1);
                let _ = self.uffd.wake(&m.region, addr, PAGE);
            }
            WriteFault::AlreadyWatched => {
                self.pending.unwatch(1);
            }
            WriteFault::Watched => {
                let now = Instant::now();
                m.pages[idx].changed = Some(now);
                if m.next_tick.is_none() {
                    m.delay = self.flush_min;
                    m.streaming = false;
                    m.next_tick = Some(now + m.delay);
                }
            }
        }
    }

    /// Look at the watched pages: send what changed, protect those quiet for [`QUIET`], and
    /// plan the next look: soon after a change (later while a writer streams, to batch its
    /// stores), backing off while nothing changes.
    fn tick(&self, m: &mut PMap) {
        let t = Instant::now();
        let (changed, watching) = self.flush_pages(m, false, false, t);
        if changed {
            // A lone change opens a spell of looking without sleeping; a writer that keeps
            // storing ends it (its stores batch at the tick).
            let lone = !m.streaming && !self.spin.is_zero();
            m.spin_until = lone.then(|| t + spin::after_lone(m, self.spin, t));
        }
        if !watching {
            m.spin_until = None;
        }
        m.next_tick = watching.then(|| {
            if changed {
                m.delay = if m.streaming { (m.delay * 2).min(self.flush) } else { self.flush_min };
                m.streaming = true;
                t + m.delay
            } else {
                m.streaming = false;
                let last = m.pages.iter().filter(|p| p.st.dirty).filter_map(|p| p.changed).max();
                let quiet = last.map_or(QUIET, |l| t - l);
                let wait = if quiet < HOT { m.delay } else { (quiet / 4).clamp(m.delay, self.flush) };
                t + wait
            }
        });
    }
}

impl PMap {
    /// When the map's next refresh is due: never while it holds no page (nor fetches one),
    /// as a refresh would find nothing to send or drop, so a pager whose maps hold no page
    /// sleeps until a fault or a command; the clock starts again at the next page
    /// (`Pager::on_missing`).
    /// Nor once its home is lost: nothing can be sent or fetched any more, and the pages
    /// it holds stay as they are.
    fn refresh_due(&self, every: Duration) -> Option<Instant> {
        let idle = self.resident.load(Ordering::SeqCst) == 0 || self.lost.load(Ordering::SeqCst);
        (!idle).then(|| self.last_refresh + every)
    }
}

impl Pager {
    /// Before a store of map `id` goes home straight over its flow, and before its flush or
    /// refresh: the changes of the other maps of the same memory (same session and key: the
    /// same flow) go first, so an earlier store through one of them cannot land after it
    /// and overwrite it, and a load after the refresh sees it.
    fn flush_siblings(&self, maps: &mut BTreeMap<usize, (u64, PMap)>, id: u64) {
        let Some(m) = find_id(maps, id) else { return };
        let (session, key) = (m.session.clone(), m.home.key());
        for (i, o) in maps.values_mut() {
            if *i != id && !o.readonly && o.home.key() == key && Arc::ptr_eq(&o.session, &session) {
                self.flush_map(o, false);
            }
        }
    }
}

/// Fetch `page` from byte `off` of the map's home: over its flow, or through this node's
/// daemon. A failed path is revived while the route is only down (`revive.rs`); `false`
/// (the map marked lost) once the home is lost.
fn fetch(m: &mut PMap, off: u64, page: &mut [u8]) -> bool {
    for attempt in 1..=revive::TRIES {
        let failed = if let Some(d) = &m.direct.get() {
            let r = d.lock().unwrap_or_else(|p| p.into_inner()).read(off, page);
            match r {
                Err(e) => {
                    tracing::warn!("DSM: a page could not be fetched from the home node: {e}");
                    // A refusal of the home is final; a flow that failed is revived.
                    e.kind() != std::io::ErrorKind::PermissionDenied
                }
                // The home answers in order: every store the map sent on the flow
                // before this fetch is there (no settle point waits for them).
                Ok(()) => {
                    set_unanswered(m, false);
                    return true;
                }
            }
        } else {
            let req = m.home.read_request(off, page.len() as u32);
            match m.session.request(req, &[]) {
                Ok((Reply::Data(d), _)) if d.len() == page.len() => {
                    page.copy_from_slice(&d);
                    return true;
                }
                // Also a refusal: where the route is up, done again a few times at most.
                Ok(_) | Err(_) => true,
            }
        };
        if !failed || attempt == revive::TRIES || !m.revive() {
            break;
        }
    }
    m.lost.store(true, Ordering::SeqCst);
    false
}

fn find_id(maps: &mut BTreeMap<usize, (u64, PMap)>, id: u64) -> Option<&mut PMap> {
    maps.values_mut().find(|(i, _)| *i == id).map(|(_, m)| m)
}
