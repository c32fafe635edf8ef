//! The process's pagers: one per home node (the node a map names: SISCI's maps of another
//! host's segment, SCIF's maps of a peer's windows), made at the first map of that home,
//! and one shared by the maps of several homes (multicast maps). Each has a
//! userfaultfd and a thread of its own (`remora-pager`), so a home that stops answering holds
//! up only the faults, flushes, refreshes and stores of its own maps: a fault waits for its
//! home up to the flow's patience (10 s), and a map of a healthy home must not queue behind
//! it. A home is a node of one cluster: the runtime directory of the daemon the map goes
//! through and the node's number, so that the node 4 of two clusters a process reaches (tests
//! of one binary, each with a cluster of its own) have a pager each. A pager whose maps are
//! gone sleeps in `poll` without a timeout; once no map has asked for it for [`UNUSED`] and
//! nothing of it is on its way home, the next first map of another home ends its thread
//! (a process that reaches node after node keeps a thread per home it still maps, not per
//! home it ever mapped; a home mapped again soon keeps its thread).
//!
//! What reaches every map consults every pager:
//!
//! * [`settle`] and [`flush_all`] ask each pager that holds stores not home yet (sent or
//!   not, answered or not) to send them and wait for every answer; a pager with nothing
//!   pending is not asked (all its stores are home), so a stopped home with nothing pending
//!   holds up no settle point.
//! * [`send_all`] (`SCIFlush`) asks the pagers that hold stores not home yet. Where only one
//!   pager has maps that can be written, it sends them without waiting (its flows keep them
//!   before the later stores; it waits only when its own maps use several flows, as ever).
//!   Where several have (maps of several homes), a store after the call may go to another
//!   home than the stores before it (data to one home, `SCIFlush`, a flag to another), and
//!   only the homes' answers keep it behind them: each pager asked sends and waits, as the
//!   one pager did when its maps used several flows. So `SCIFlush` waits also for a
//!   stopped home that holds stores of the program not home yet (at most as long as a
//!   settle point, 5 s), never for one that holds none. Pagers are asked at once and
//!   answer in parallel.
//! * A map that can be written, made while stores are on their way (a flush sent them
//!   without waiting), is made once they are home (`DsmMap::make` settles first): a flag
//!   stored into a map made after `SCIFlush` never overtakes the data before it.
//! * Multicast maps all live on the shared pager, so [`DsmMap::multicast_leg`] asks only
//!   that one.
//!
//! A child made by fork has none of its parent's pager threads: the maps it inherited are
//! plain memory there (the kernel does not pass the userfaultfd registration on), the calls
//! above do not ask the parent's pagers, commands of the inherited maps (a flush too) answer
//! at once as failed, their flows are never written from the child (`flow.rs`), and a map
//! the child makes gets a pager of the child's own.

use super::pager::{Cmd, Pager};
use super::*;
use std::sync::mpsc::Receiver;

/// The home node a map names, or `None` for a multicast map (the pager they share).
pub(super) type PagerKey = Option<u32>;

/// Which pager serves a map: its home's, the node of the cluster whose runtime directory
/// the map's session names, or (`None`) the one multicast maps share.
type Home = Option<(std::path::PathBuf, u32)>;

/// The pagers of the process whose threads run here, and why none can be made (userfaultfd
/// unavailable: told once).
struct Pagers {
    pid: u32,
    list: Vec<(Home, Arc<Pager>)>,
    failed: Option<String>,
}

static PAGERS: Mutex<Pagers> = Mutex::new(Pagers { pid: 0, list: Vec::new(), failed: None });

fn pagers() -> std::sync::MutexGuard<'static, Pagers> {
    let mut g = PAGERS.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    if g.pid != pid {
        // A child made by fork: its parent's pagers have no thread here (nor any pager of
        // the child's yet, all being made under this lock).
        g.pid = pid;
        g.list.clear();
        pager::forget_pending();
    }
    g
}

/// The pager of the maps of `node` (`None`: multicast maps) through `session`'s cluster,
/// made (with its thread) at its first use.
pub(super) fn pager_for(session: &Session, node: PagerKey) -> Result<Arc<Pager>, DsmError> {
    pagers().get(node.map(|n| (session.runtime_dir().to_path_buf(), n)), Uffd::new)
}

impl Pagers {
    /// The pager of `home`, made at its first use with the userfaultfd `uffd` makes.
    fn get(
        &mut self,
        home: Home,
        uffd: impl FnOnce() -> std::io::Result<Uffd>,
    ) -> Result<Arc<Pager>, DsmError> {
        if let Some((_, p)) = self.list.iter().find(|(k, _)| *k == home) {
            *p.used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            return Ok(p.clone());
        }
        self.end_unused(Instant::now());
        if let Some(e) = &self.failed {
            return Err(DsmError::Unavailable(e.clone()));
        }
        let uffd = uffd().map_err(|e| {
            // Userfaultfd itself refused: every later map would be too. Anything else (out
            // of descriptors or memory) may pass, and fails this map only.
            if permanent(&e) {
                self.failed = Some(e.to_string());
                DsmError::Unavailable(e.to_string())
            } else {
                DsmError::Resources(e.to_string())
            }
        })?;
        // Its eventfd or thread could not be made: out of resources now.
        let p = make(uffd, self.pid).map_err(DsmError::Resources)?;
        self.list.push((home, p.clone()));
        Ok(p)
    }

    /// End the pagers that no map has asked for since `now - UNUSED`, that no one holds but
    /// this list and their own thread (no map, no settle point in progress) and that have
    /// nothing on its way home. Under the list's lock, so no one can take one meanwhile.
    fn end_unused(&mut self, now: Instant) {
        self.list.retain(|(_, p)| {
            let used = *p.used.lock().unwrap_or_else(|e| e.into_inner());
            let end = Arc::strong_count(p) == 2 && p.pending.nothing() && now.duration_since(used) >= UNUSED;
            if end {
                p.command(Cmd::Exit);
            }
            !end
        });
    }
}

/// How long a pager no map uses is kept for a map of its home to come (module docs).
const UNUSED: Duration = Duration::from_secs(10);

/// Whether userfaultfd's refusal `e` holds for the life of the process: not allowed
/// (`EPERM`, also a seccomp filter's), absent (`ENOSYS`), or without the write-protect
/// faults the pager needs (`EINVAL`).
fn permanent(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidInput, PermissionDenied, Unsupported};
    matches!(e.kind(), PermissionDenied | Unsupported | InvalidInput)
}

fn make(uffd: Uffd, pid: u32) -> Result<Arc<Pager>, String> {
    let waker = EventFd::new().map_err(|e| e.to_string())?;
    let cfg = &remora_config::Config::get().dsm;
    let p = Arc::new(Pager {
        uffd,
        waker,
        cmds: Mutex::new(VecDeque::new()),
        next: AtomicU64::new(1),
        flush: cfg.flush,
        flush_min: cfg.flush_min,
        refresh: cfg.refresh,
        spin: cfg.spin,
        pending: Arc::default(),
        writers: AtomicUsize::new(0),
        pid,
        used: Mutex::new(Instant::now()),
        quit: AtomicBool::new(false),
        copiers: Default::default(),
    });
    let runner = p.clone();
    std::thread::Builder::new()
        .name("remora-pager".into())
        .spawn(move || runner.run())
        .map_err(|e| e.to_string())?;
    Ok(p)
}

/// The shared pager, if it was made (in this process).
pub(super) fn shared() -> Option<Arc<Pager>> {
    pagers().list.iter().find(|(k, _)| k.is_none()).map(|(_, p)| p.clone())
}

/// The pagers that hold stores not home yet, and whether more than one pager has maps that
/// can be written.
fn pending() -> (Vec<Arc<Pager>>, bool) {
    if pager::nothing_pending() {
        return (Vec::new(), false);
    }
    let g = pagers();
    let writers = g.list.iter().filter(|(_, p)| p.writers.load(Ordering::SeqCst) > 0).count();
    let pending = g.list.iter().filter(|(_, p)| !p.pending.nothing()).map(|(_, p)| p.clone()).collect();
    (pending, writers > 1)
}

impl Pager {
    /// Send the command `cmd` makes (with the sender of its answer) and wait for the
    /// answer; `None` when the pager's thread does not run in this process (a child made by
    /// fork) or ended.
    pub(super) fn ask<T>(&self, cmd: impl FnOnce(Sender<T>) -> Cmd) -> Option<T> {
        self.asked(cmd)?.recv().ok()
    }

    /// Whether the pager's thread runs in this process (not in a child made by fork).
    pub(super) fn runs_here(&self) -> bool {
        self.pid == std::process::id()
    }

    /// Send the command without waiting for its answer.
    pub(super) fn asked<T>(&self, cmd: impl FnOnce(Sender<T>) -> Cmd) -> Option<Receiver<T>> {
        if !self.runs_here() {
            return None;
        }
        let (tx, rx) = channel();
        self.command(cmd(tx));
        Some(rx)
    }
}

/// Wait until every store made so far to maps of other hosts has reached its home (at most
/// 5 s), when any may still be on its way: for a signal that travels another path (an
/// interrupt trigger, a DMA transfer, a SCIF message), which must not overtake them. Free
/// when nothing is pending. `false` if a home could not be reached.
pub fn settle() -> bool {
    if pager::nothing_pending() {
        return true;
    }
    flush_all(SETTLE_LIMIT)
}

/// The longest a settle point or `SCIFlush` waits for the homes' answers.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// Send every DSM map's stores home and wait (at most `limit`): for `SCITerminate` and
/// process exit. Asks only the pagers that hold stores not home yet (module docs); does
/// nothing when there are none. `false` if a home could not be reached (or did not answer
/// within `limit`).
pub fn flush_all(limit: Duration) -> bool {
    wait_for(&pending().0, limit)
}

/// As [`settle`], for the pagers of `session`'s cluster only: before a writable map of
/// that cluster is made (stores to another cluster's nodes are no concern of its flags,
/// and a process that reaches several clusters, a test binary, must not tie them).
pub(super) fn settle_cluster(session: &Session) -> bool {
    if pager::nothing_pending() {
        return true;
    }
    let mine: Vec<Arc<Pager>> = pagers()
        .list
        .iter()
        .filter(|(k, p)| {
            k.as_ref().is_none_or(|(dir, _)| dir == session.runtime_dir()) && !p.pending.nothing()
        })
        .map(|(_, p)| p.clone())
        .collect();
    wait_for(&mine, SETTLE_LIMIT)
}

/// Ask `pagers` to send their stores and wait for the homes' answers (at most `limit`).
fn wait_for(pagers: &[Arc<Pager>], limit: Duration) -> bool {
    let until = Instant::now() + limit;
    let asked: Vec<_> = pagers.iter().map(|p| p.asked(|tx| Cmd::FlushAll(tx, true))).collect();
    let mut ok = true;
    for rx in asked {
        let left = until.saturating_duration_since(Instant::now());
        ok &= rx.is_some_and(|rx| rx.recv_timeout(left).unwrap_or(false));
    }
    ok
}

/// Send the stores made so far to every DSM map's home, without waiting for the homes to
/// answer where one pager holds them all: stores made after this call reach each home
/// after them (`SCIFlush`; with stores pending on several pagers it waits for their homes,
/// see the module docs). Does nothing when no store is pending.
pub fn send_all() -> bool {
    // Waits when a store after the call may go to another pager's home than the stores
    // before it (module docs).
    let (pending, several) = pending();
    let wait = several || pending.len() > 1;
    let asked: Vec<_> = pending.iter().map(|p| p.asked(|tx| Cmd::FlushAll(tx, wait))).collect();
    // As long as a settle point at most: a pager waits for each flow of a stopped home in
    // turn, up to the flow's patience each.
    let until = Instant::now() + SETTLE_LIMIT;
    let mut ok = true;
    for rx in asked {
        let left = until.saturating_duration_since(Instant::now());
        ok &= rx.is_some_and(|rx| rx.recv_timeout(left).unwrap_or(false));
    }
    ok
}

#[cfg(test)]
mod tests;
