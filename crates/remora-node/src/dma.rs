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

use crate::Node;
use remora_sys::dma::*;
use remora_sys::sync::DEFAULT_SPIN;
use remora_sys::Mapping;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const CHUNK: usize = 4 << 20;

/// Start the worker of a queue owned by `session` (process `pid`).
pub fn spawn(node: Arc<Node>, session: u64, pid: u32, page: Arc<DmaPage>) {
    let epoch = node.lock().epoch.clone();
    let r = std::thread::Builder::new().name("remora-dma".into()).spawn(move || {
        let mut cache = Cache { epoch: u64::MAX, maps: HashMap::new() };
        while page.wait_posted(DEFAULT_SPIN) {
            let (state, err) = run_job(&node, session, pid, &page, &epoch, &mut cache);
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
    maps: HashMap<(u64, bool), Arc<Mapping>>,
}

enum Local {
    Seg(Arc<Mapping>),
    User(u64),
}

struct Step {
    local: Local,
    local_off: usize,
    remote: Arc<Mapping>,
    remote_off: usize,
    size: usize,
    read: bool,
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
    let mut resolve = |h: u64, remote: bool| -> Result<Arc<Mapping>, u32> {
        if let Some(m) = cache.maps.get(&(h, remote)) {
            return Ok(m.clone());
        }
        let reg = reg.as_mut().expect("locked when anything is missing");
        let m = if remote { reg.dma_remote(session, h)? } else { reg.dma_local(session, h)? };
        cache.maps.insert((h, remote), m.clone());
        Ok(m)
    };
    descs
        .iter()
        .map(|d| {
            let remote = resolve(d.remote, true)?;
            if !in_range(remote.len(), d.remote_off, d.size) {
                return Err(DMA_ERR_RANGE);
            }
            let local = if d.flags & DMA_F_USER_MEM != 0 {
                d.local.checked_add(d.size).ok_or(DMA_ERR_RANGE)?;
                Local::User(d.local)
            } else {
                let m = resolve(d.local, false)?;
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

fn run_job(
    node: &Node,
    session: u64,
    pid: u32,
    page: &DmaPage,
    epoch: &AtomicU64,
    cache: &mut Cache,
) -> (u32, u32) {
    let Some(descs) = page.take() else { return (DMA_ERROR, DMA_ERR_INVALID) };
    let steps = match plan(node, session, &descs, epoch, cache) {
        Ok(s) => s,
        Err(e) => return (DMA_ERROR, e),
    };
    let mut mem: Option<std::fs::File> = None;
    for s in steps {
        let mut done = 0;
        while done < s.size {
            if page.abort_requested() {
                return (DMA_ABORTED, 0);
            }
            let n = (s.size - done).min(CHUNK);
            let r = match &s.local {
                Local::Seg(l) => {
                    if s.read {
                        l.copy_from(s.local_off + done, &s.remote, s.remote_off + done, n)
                    } else {
                        s.remote.copy_from(s.remote_off + done, l, s.local_off + done, n)
                    }
                }
                Local::User(addr) => {
                    if mem.is_none() {
                        match std::fs::OpenOptions::new()
                            .read(true)
                            .write(true)
                            .open(format!("/proc/{pid}/mem"))
                        {
                            Ok(f) => mem = Some(f),
                            Err(e) => {
                                tracing::warn!(
                                    pid,
                                    "DMA from user memory: cannot open the process's memory: {e}"
                                );
                                return (DMA_ERROR, DMA_ERR_TRANSFER);
                            }
                        }
                    }
                    let f = mem.as_ref().expect("opened above");
                    let at = addr + done as u64;
                    if s.read {
                        s.remote.drain_to_file(s.remote_off + done, n, f, at)
                    } else {
                        s.remote.fill_from_file(s.remote_off + done, n, f, at)
                    }
                }
            };
            if r.is_err() {
                return (DMA_ERROR, DMA_ERR_TRANSFER);
            }
            done += n;
        }
    }
    (DMA_DONE, 0)
}
