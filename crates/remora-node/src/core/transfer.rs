//! The DMA engine: one worker thread per queue copies between the daemon's own mappings of
//! the segments (and, for `SCIStartDmaTransferMem`, the posting process's memory through
//! `/proc/PID/mem`). No payload passes through any socket or through a client.
//!
//! Each job is checked in full before the first byte moves: every local segment must be
//! the session's own (or attached) and prepared, every connection the session's and alive,
//! every range inside its segment. A job then completes (DONE), fails (ERROR) or stops at
//! the next 4 MiB boundary after an abort request (ABORTED). The worker holds its own
//! references to the memory, so a process that dies mid-transfer cannot make it touch
//! anything else; its queue is closed and the worker exits after the job.

use crate::core::{DmaTarget, Registry};
use crate::transport::Pending;
use crate::Node;
use remora_proto::Error;
use remora_sys::dma::*;
use remora_sys::sync::DEFAULT_SPIN;
use remora_sys::Mapping;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A DMA queue served by this node's engine.
#[derive(Debug)]
pub struct DmaQueue {
    /// Owning session.
    pub owner: u64,
    /// The shared page.
    pub page: Arc<DmaPage>,
    /// Capacity.
    pub max: u32,
}

impl Registry {
    /// Register a DMA queue and return its handle.
    pub fn add_dma(&mut self, session: u64, page: Arc<DmaPage>, max: u32) -> u64 {
        let q = self.handle();
        self.dma.insert(q, DmaQueue { owner: session, page, max });
        q
    }

    /// `SCIRemoveDMAQueue`: the engine stops serving it.
    ///
    /// # Errors
    /// `UnknownHandle`.
    pub fn remove_dma(&mut self, session: u64, queue: u64) -> Result<(), Error> {
        match self.dma.get(&queue) {
            Some(q) if q.owner == session => {}
            _ => return Err(Error::UnknownHandle),
        }
        self.dma.remove(&queue).expect("checked").page.close();
        Ok(())
    }
}

const CHUNK: usize = 4 << 20;

/// Start the worker of a queue owned by `session` (process `pid`).
pub fn spawn(node: Arc<Node>, session: u64, pid: u32, page: Arc<DmaPage>) {
    let epoch = node.lock().epoch.clone();
    // The posting process's memory, opened now, while the process that created the queue is
    // alive: the file stays bound to that process even if its pid is reused later.
    let mem = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{pid}/mem"))
        .ok()
        .map(Arc::new);
    let r = std::thread::Builder::new().name("remora-dma".into()).spawn(move || {
        let mut cache = Cache { epoch: u64::MAX, maps: HashMap::new() };
        while page.wait_posted(DEFAULT_SPIN) {
            let (state, err) = run_job(&node, session, pid, mem.clone(), &page, &epoch, &mut cache);
            let counter = if state == DMA_DONE { &node.stats.dma_jobs } else { &node.stats.dma_failed };
            counter.fetch_add(1, Ordering::Relaxed);
            page.complete(state, err);
        }
    });
    if let Err(e) = r {
        tracing::error!("cannot start a DMA worker: {e}");
    }
}

/// What a worker resolved, valid while the registry's epoch stays the same: repeated
/// transfers between the same segments then skip the registry entirely.
struct Cache {
    epoch: u64,
    /// Each target, and whether it may be read (an RSM import may be granted no read).
    maps: HashMap<(u64, bool), (DmaTarget, bool)>,
}

enum Local {
    Seg(Arc<Mapping>),
    User(u64),
}

struct Step {
    local: Local,
    local_off: usize,
    remote: DmaTarget,
    remote_off: usize,
    size: usize,
    read: bool,
}

fn target_len(t: &DmaTarget) -> usize {
    match t {
        DmaTarget::Map(m) => m.len(),
        DmaTarget::Far { size, .. } => *size as usize,
    }
}

fn in_range(map_len: usize, off: u64, size: u64) -> bool {
    off.checked_add(size).is_some_and(|end| end <= map_len as u64)
}

fn plan(
    node: &Node,
    session: u64,
    descs: &[DmaDesc],
    epoch: &AtomicU64,
    cache: &mut Cache,
) -> Result<Vec<Step>, u32> {
    let now = epoch.load(Ordering::SeqCst);
    if now != cache.epoch {
        cache.maps.clear();
        cache.epoch = now;
    }
    let cached = descs.iter().all(|d| {
        cache.maps.contains_key(&(d.remote, true))
            && (d.flags & DMA_F_USER_MEM != 0 || cache.maps.contains_key(&(d.local, false)))
    });
    let mut reg = if cached { None } else { Some(node.lock()) };
    let mut resolve = |h: u64, remote: bool| -> Result<(DmaTarget, bool), u32> {
        if let Some(m) = cache.maps.get(&(h, remote)) {
            return Ok(m.clone());
        }
        let reg = reg.as_mut().expect("locked when anything is missing");
        let m = if remote {
            let readable = reg.conns.get(&h).is_none_or(|c| c.readable);
            (reg.dma_remote(session, h)?, readable)
        } else {
            (DmaTarget::Map(reg.dma_local(session, h)?), true)
        };
        cache.maps.insert((h, remote), m.clone());
        Ok(m)
    };
    descs
        .iter()
        .map(|d| {
            let (remote, readable) = resolve(d.remote, true)?;
            if d.flags & DMA_F_READ != 0 && !readable {
                return Err(DMA_ERR_NOT_CONNECTED);
            }
            if !in_range(target_len(&remote), d.remote_off, d.size) {
                return Err(DMA_ERR_RANGE);
            }
            let local = if d.flags & DMA_F_USER_MEM != 0 {
                d.local.checked_add(d.size).ok_or(DMA_ERR_RANGE)?;
                Local::User(d.local)
            } else {
                let (DmaTarget::Map(m), _) = resolve(d.local, false)? else {
                    return Err(DMA_ERR_NOT_PREPARED);
                };
                if !in_range(m.len(), d.local_off, d.size) {
                    return Err(DMA_ERR_RANGE);
                }
                Local::Seg(m)
            };
            Ok(Step {
                local,
                local_off: d.local_off as usize,
                remote,
                remote_off: d.remote_off as usize,
                size: d.size as usize,
                read: d.flags & DMA_F_READ != 0,
            })
        })
        .collect()
}

/// Consecutive steps that continue each other on both sides (a vector of adjacent pieces)
/// become one: one transfer instead of one per piece (across hosts, a frame and an answer
/// each). The same bytes move between the same places.
fn coalesce(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for s in steps {
        match out.last_mut() {
            Some(last) if continues(last, &s) => last.size += s.size,
            _ => out.push(s),
        }
    }
    out
}

/// Whether `b` starts where `a` ends, on both sides, the same way.
fn continues(a: &Step, b: &Step) -> bool {
    let local = match (&a.local, &b.local) {
        (Local::Seg(x), Local::Seg(y)) => Arc::ptr_eq(x, y) && a.local_off + a.size == b.local_off,
        (Local::User(x), Local::User(y)) => x.checked_add(a.size as u64) == Some(*y),
        _ => false,
    };
    let remote = match (&a.remote, &b.remote) {
        (DmaTarget::Map(x), DmaTarget::Map(y)) => Arc::ptr_eq(x, y),
        (DmaTarget::Far { node: n, remote: r, .. }, DmaTarget::Far { node: m, remote: q, .. }) => {
            n == m && r == q
        }
        _ => false,
    };
    local && remote && a.read == b.read && a.remote_off + a.size == b.remote_off
}

/// The posting process's memory, opened on first use; and what a job looked up once.
struct UserMem {
    pid: u32,
    file: Option<Arc<std::fs::File>>,
    bounce: Option<Arc<Mapping>>,
    /// The transport of the node the job's last far chunk went to.
    far: Option<(u32, Arc<dyn crate::transport::Transport>)>,
}

impl UserMem {
    fn file(&mut self) -> std::io::Result<&std::fs::File> {
        match &self.file {
            Some(f) => Ok(f),
            None => {
                Err(std::io::Error::other(format!("the memory of process {} cannot be opened", self.pid)))
            }
        }
    }

    /// A scratch mapping for user memory that travels to or from another host.
    fn bounce(&mut self) -> std::io::Result<Arc<Mapping>> {
        if self.bounce.is_none() {
            let fd = remora_sys::Memfd::create("dma-bounce", CHUNK as u64)?;
            self.bounce =
                Some(Arc::new(Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, CHUNK, Default::default())?));
        }
        Ok(self.bounce.clone().expect("made"))
    }
}

/// Move one chunk of a step. A chunk between a segment of this node and another host's is
/// only started (the transport streams it); what waits for its end is returned.
fn copy_chunk(
    node: &Node,
    s: &Step,
    done: usize,
    n: usize,
    user: &mut UserMem,
) -> std::io::Result<Option<Pending>> {
    let fail =
        |e: remora_proto::Error| std::io::Error::other(format!("transfer to the other node failed: {e}"));
    // The transport that reaches a node, looked up once per job (the look-up asks the file
    // system whether the node is on this host).
    let mut far = |id: u32| match &user.far {
        Some((n, t)) if *n == id => Ok(t.clone()),
        _ => {
            let t = node
                .transports()
                .to(id)
                .cloned()
                .ok_or_else(|| fail(remora_proto::Error::NodeNotResponding))?;
            user.far = Some((id, t.clone()));
            Ok::<_, std::io::Error>(t)
        }
    };
    let roff = s.remote_off + done;
    if let (Local::Seg(l), DmaTarget::Far { node: id, remote, .. }) = (&s.local, &s.remote) {
        let p = far(*id)?.start_range(*id, *remote, roff as u64, l, s.local_off + done, n, !s.read);
        return p.map(Some).map_err(fail);
    }
    match (&s.local, &s.remote) {
        (Local::Seg(l), DmaTarget::Map(r)) => {
            if s.read {
                l.copy_from(s.local_off + done, r, roff, n)
            } else {
                r.copy_from(roff, l, s.local_off + done, n)
            }
        }
        (Local::User(addr), DmaTarget::Map(r)) => {
            let at = addr + done as u64;
            let f = user.file()?;
            if s.read {
                r.drain_to_file(roff, n, f, at)
            } else {
                r.fill_from_file(roff, n, f, at)
            }
        }
        (Local::Seg(_), DmaTarget::Far { .. }) => unreachable!("started above"),
        (Local::User(addr), DmaTarget::Far { node: id, remote, .. }) => {
            let t = far(*id)?;
            let at = addr + done as u64;
            let b = user.bounce()?;
            if s.read {
                t.read_range(*id, *remote, roff as u64, &b, 0, n).map_err(fail)?;
                b.drain_to_file(0, n, user.file()?, at)
            } else {
                b.fill_from_file(0, n, user.file()?, at)?;
                t.write_range(*id, *remote, roff as u64, &b, 0, n).map_err(fail)
            }
        }
    }
    .map(|()| None)
}

/// Chunks to another host started and not yet waited for, oldest first, with their
/// lengths; their bytes; and where they go (node, read), which the next chunk must share
/// to join them.
#[derive(Default)]
struct InFlight {
    chunks: std::collections::VecDeque<(Pending, usize)>,
    bytes: usize,
    to: Option<(u32, bool)>,
}

impl InFlight {
    /// Bytes kept in flight after a chunk is started: the next chunk is queued on the link
    /// before the engine waits for the one before, so the stream never drains between
    /// chunks; and the small pieces of a vector all go out before the first answer is
    /// waited for (one round trip per job, not per piece: waiting per piece made a vector
    /// of 16 pieces of 4 KiB cost 16 round trips).
    const BYTES: usize = CHUNK;
    /// Chunks kept in flight at most, however small.
    const MAX: usize = 256;

    /// Whether more is in flight than is kept after starting a chunk.
    fn over(&self) -> bool {
        self.bytes > Self::BYTES || self.chunks.len() > Self::MAX
    }

    /// Wait until at most `keep` chunks are in flight (or, with `keep` `None`, until
    /// [`InFlight::over`] no longer holds); the bytes of each that completed are counted.
    /// `false` when one failed (the others are still waited for).
    fn settle(&mut self, node: &Node, keep: Option<usize>) -> bool {
        let mut due = Vec::new();
        while match keep {
            Some(k) => self.chunks.len() > k,
            None => self.over(),
        } {
            let Some((wait, n)) = self.chunks.pop_front() else { break };
            self.bytes -= n;
            due.push((wait, n));
        }
        if self.chunks.is_empty() {
            self.to = None;
        }
        // Every one is waited for, the newest first: a link answers in order, so this thread
        // wakes once for all of them rather than once per answer (16 wake-ups for a vector
        // of 16 small pieces).
        let newest = due.pop();
        newest.into_iter().chain(due).fold(true, |ok, (wait, n)| match wait() {
            Ok(()) => {
                node.stats.dma_bytes.fetch_add(n as u64, Ordering::Relaxed);
                ok
            }
            Err(e) => {
                tracing::warn!("DMA transfer failed: {e}");
                false
            }
        })
    }
}

fn run_job(
    node: &Node,
    session: u64,
    pid: u32,
    mem: Option<Arc<std::fs::File>>,
    page: &DmaPage,
    epoch: &AtomicU64,
    cache: &mut Cache,
) -> (u32, u32) {
    let Some(descs) = page.take() else { return (DMA_ERROR, DMA_ERR_INVALID) };
    let steps = match plan(node, session, &descs, epoch, cache) {
        Ok(s) => coalesce(s),
        Err(e) => return (DMA_ERROR, e),
    };
    let mut user = UserMem { pid, file: mem, bounce: None, far: None };
    let mut planned = epoch.load(Ordering::SeqCst);
    let mut flight = InFlight::default();
    for s in steps {
        // Chunks of this step join those in flight only if they go the same way to the
        // same node (the link keeps them in order); anything else waits for them first.
        let to = match (&s.local, &s.remote) {
            (Local::Seg(_), DmaTarget::Far { node: id, .. }) => Some((*id, s.read)),
            _ => None,
        };
        if (to.is_none() || to != flight.to) && !flight.settle(node, Some(0)) {
            return (DMA_ERROR, DMA_ERR_TRANSFER);
        }
        let mut done = 0;
        while done < s.size {
            if page.abort_requested() {
                flight.settle(node, Some(0));
                return (DMA_ABORTED, 0);
            }
            // Something was disconnected, lost or removed since the job was checked: check
            // it again before moving another byte.
            let now = epoch.load(Ordering::SeqCst);
            if now != planned {
                if let Err(e) = plan(node, session, &descs, epoch, cache) {
                    flight.settle(node, Some(0));
                    return (DMA_ERROR, e);
                }
                planned = now;
            }
            let n = (s.size - done).min(CHUNK);
            match copy_chunk(node, &s, done, n, &mut user) {
                Ok(Some(wait)) => {
                    flight.chunks.push_back((wait, n));
                    flight.bytes += n;
                    flight.to = to;
                    if !flight.settle(node, None) {
                        flight.settle(node, Some(0));
                        return (DMA_ERROR, DMA_ERR_TRANSFER);
                    }
                }
                Ok(None) => {
                    node.stats.dma_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(pid, "DMA transfer failed: {e}");
                    flight.settle(node, Some(0));
                    return (DMA_ERROR, DMA_ERR_TRANSFER);
                }
            }
            done += n;
        }
    }
    if !flight.settle(node, Some(0)) {
        return (DMA_ERROR, DMA_ERR_TRANSFER);
    }
    (DMA_DONE, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(local: &Arc<Mapping>, local_off: usize, remote_off: usize, size: usize, read: bool) -> Step {
        let remote = DmaTarget::Far { node: 8, remote: 3, size: 1 << 20 };
        Step { local: Local::Seg(local.clone()), local_off, remote, remote_off, size, read }
    }

    #[test]
    fn adjacent_pieces_become_one_transfer_and_others_stay() {
        let fd = remora_sys::Memfd::create("coalesce", 1 << 20).unwrap();
        let m = Arc::new(Mapping::new(remora_sys::AsFd::as_fd(&fd), 0, 1 << 20, Default::default()).unwrap());
        let steps = vec![
            step(&m, 0, 100, 4096, false),
            step(&m, 4096, 4196, 4096, false),
            step(&m, 8192, 8292, 4096, false),
            // A gap on the remote side, then the other way, then adjacent again.
            step(&m, 12288, 20000, 10, false),
            step(&m, 12298, 20010, 10, true),
            step(&m, 12308, 20020, 10, true),
        ];
        let got: Vec<_> =
            coalesce(steps).iter().map(|s| (s.local_off, s.remote_off, s.size, s.read)).collect();
        assert_eq!(got, vec![(0, 100, 12288, false), (12288, 20000, 10, false), (12298, 20010, 20, true)]);
    }
}
