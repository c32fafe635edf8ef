//! Multicast maps (SISCI reflective memory across hosts): one DSM map whose stores go to
//! several homes. The pager watches and diffs its pages exactly as for any map of another
//! host; each picture's changed bytes then go down every *leg* (a pager flow to a member of
//! each other host that holds one, in order per leg) and straight into this host's group
//! memory when this host has a member (a store into a shared mapping: every local member
//! sees it at once). Pages are fetched from this host's group memory when there is one,
//! else from the first leg still reachable.
//!
//! A leg whose host is lost (its flow fails, or its answer takes longer than the flow's
//! patience, 10 s) drops out, logged: the other members keep receiving and flushes keep
//! succeeding. Only when no member is left is the map lost (flushes fail, pages that are
//! not resident raise SIGBUS), as for any DSM map.

use super::super::flow::{shared_flow, Flow};
use super::super::*;
use super::{set_unanswered, PMap};
use remora_sys::Mapping;

/// A member of another host, as the pager reaches it.
pub(in crate::dsm) struct Leg {
    home: Arc<dyn RemoteRange>,
    /// The pager flow to it (else requests go through this node's daemon).
    direct: Option<Flow>,
    lost: bool,
}

/// Where a multicast map's stores go besides its pages.
pub(in crate::dsm) struct Fanout {
    /// Names the multicast connection: legs that join later are added to every map with
    /// this key ([`leg`]).
    key: u64,
    /// This host's group memory (the whole memfd, from offset 0), when it has a member.
    local: Option<Arc<Mapping>>,
    legs: Vec<Leg>,
}

/// The home of a multicast map that has no leg (yet): every page comes from this host's
/// group memory, so nothing asks it anything.
#[derive(Debug)]
pub(in crate::dsm) struct NoHome;

impl RemoteRange for NoHome {
    fn key(&self) -> u64 {
        u64::MAX
    }
    fn flow_request(&self) -> Request {
        Request::Probe { node: u32::MAX }
    }
    fn read_request(&self, _: u64, _: u32) -> Request {
        Request::Probe { node: u32::MAX }
    }
    fn write_requests(&self, _: Vec<(u64, Vec<u8>)>) -> Vec<Request> {
        vec![Request::Probe { node: u32::MAX }]
    }
}

impl Fanout {
    /// The legs to `homes` (a pager flow each where the daemon can open one) and this
    /// host's group memory, for the multicast connection named `key`.
    pub(in crate::dsm) fn new(
        session: &Arc<Session>,
        key: u64,
        homes: Vec<Arc<dyn RemoteRange>>,
        local: Option<Arc<Mapping>>,
    ) -> Fanout {
        let legs = homes
            .into_iter()
            .map(|home| Leg { direct: shared_flow(session, &home), home, lost: false })
            .collect();
        Fanout { key, local, legs }
    }

    /// Whether every leg has a pager flow of its own.
    pub(in crate::dsm) fn is_direct(&self) -> bool {
        self.legs.iter().all(|l| l.direct.is_some())
    }

    /// Fetch `page.len()` bytes at `off`: from this host's group memory, else from the
    /// first leg that answers (the others drop out). `false` when none can.
    pub(super) fn read(&mut self, session: &Session, off: u64, page: &mut [u8]) -> bool {
        if let Some(local) = &self.local {
            return local.read(off as usize, page).is_ok();
        }
        for leg in self.legs.iter_mut().filter(|l| !l.lost) {
            let ok = match &leg.direct {
                Some(d) => d.lock().unwrap_or_else(|p| p.into_inner()).read(off, page).is_ok(),
                None => match session.request(leg.home.read_request(off, page.len() as u32), &[]) {
                    Ok((Reply::Data(d), _)) if d.len() == page.len() => {
                        page.copy_from_slice(&d);
                        true
                    }
                    _ => false,
                },
            };
            if ok {
                return true;
            }
            drop_out(leg, "a page could not be fetched");
        }
        false
    }

    fn alive(&self) -> bool {
        self.local.is_some() || self.legs.iter().any(|l| !l.lost)
    }
}

fn drop_out(leg: &mut Leg, why: &str) {
    leg.lost = true;
    tracing::warn!("multicast: {why} from a member host; it drops out of this map ({:?})", leg.home);
}

/// [`super::flush::send`] for a multicast map: the runs go into this host's group memory and down
/// every leg (waiting for every leg's answer with `wait`). `false` once no member is left.
pub(super) fn send(m: &mut PMap, runs: Vec<(u64, Vec<u8>)>, wait: bool) -> bool {
    let session = m.session.clone();
    let Some(f) = m.fan.as_mut() else { return false };
    if let Some(local) = &f.local {
        for (offset, data) in &runs {
            let _ = local.write(*offset as usize, data);
        }
    }
    let mut sent = false;
    for leg in f.legs.iter_mut().filter(|l| !l.lost) {
        let r = match &leg.direct {
            Some(d) => {
                let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
                for (offset, data) in &runs {
                    d.push(*offset, data);
                }
                d.send(wait).map_err(|e| e.to_string())
            }
            None => {
                let reqs = leg.home.write_requests(runs.clone());
                let last = reqs.len().saturating_sub(1);
                let mut r = Ok(());
                for (i, req) in reqs.into_iter().enumerate() {
                    r = if wait && i == last {
                        session.request(req, &[]).map(|_| ())
                    } else {
                        session.note(req)
                    };
                    if r.is_err() {
                        break;
                    }
                }
                r.map_err(|e| e.to_string())
            }
        };
        match r {
            Ok(()) => sent = true,
            Err(e) => drop_out(leg, &format!("stores could not be sent ({e})")),
        }
    }
    let alive = f.alive();
    set_unanswered(m, !wait && sent);
    if !alive {
        tracing::warn!("multicast: no member of the group is left for this map");
        m.lost.store(true, Ordering::SeqCst);
    }
    alive
}

/// `Cmd::Leg`: add `home` to every multicast map of connection `key` (`joined`), after
/// waiting until the stores each sent before reached the member hosts it had (so a member
/// that copies the group's contents once the leg is in sees them), or drop the leg whose
/// key is `home`'s.
pub(super) fn leg(
    pager: &super::Pager,
    maps: &mut std::collections::BTreeMap<usize, (u64, PMap)>,
    key: u64,
    home: Arc<dyn RemoteRange>,
    joined: bool,
) {
    for (_, m) in maps.values_mut() {
        if m.fan.as_ref().is_none_or(|f| f.key != key) {
            continue;
        }
        if joined {
            pager.flush_map(m, true);
            let direct = shared_flow(&m.session, &home);
            if let Some(f) = m.fan.as_mut() {
                f.legs.push(Leg { home: home.clone(), direct, lost: false });
            }
        } else if let Some(f) = m.fan.as_mut() {
            // Stores sent so far are on their way in order; the daemon disconnects after.
            f.legs.retain(|l| l.home.key() != home.key());
        }
    }
}
