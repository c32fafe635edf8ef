//! The legs of this process's multicast connections that reach other hosts, as they change
//! after the connect: a host whose first member joins later is added to every map of the
//! connection, and a host whose member is removed is dropped (`Event::GroupLeg`). The
//! daemon waits for the answer (`Request::GroupLegReady`), sent once the pager did, so the
//! new member copies the group's contents only when every store sent after it reaches the
//! member too.

use crate::map::SegmentRange;
use crate::segment::{RemoteInner, RemoteSegment};
use remora_client::{Config, Session};
use remora_proto::Request;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

#[derive(Default)]
struct Cast {
    /// The legs: the connect's, then those that joined since.
    legs: Vec<u64>,
    /// Where to answer the daemon (`None` until the connect's answer was taken in).
    cfg: Option<Config>,
    /// Changes that came before the connect's answer was taken in: (leg, joined).
    early: Vec<(u64, bool)>,
    /// The connection; the entry goes once it is dropped.
    owner: Weak<RemoteInner>,
}

fn casts() -> MutexGuard<'static, HashMap<u64, Cast>> {
    static CASTS: LazyLock<Mutex<HashMap<u64, Cast>>> = LazyLock::new(Default::default);
    CASTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Held while a multicast map is made and while a leg changes, so a change reaches every
/// map: the ones made before it by the pager, the ones made after it by their legs.
pub(crate) fn mapping() -> MutexGuard<'static, ()> {
    static MAPPING: Mutex<()> = Mutex::new(());
    MAPPING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Answer the daemon of `cfg`: the pager took leg `leg` of `conn` in (or let it go). A
/// session of the process's own per node, as the descriptor's may be in a long request.
fn answer(cfg: &Config, conn: u64, leg: u64) {
    static SESSIONS: LazyLock<Mutex<HashMap<u32, Arc<Session>>>> = LazyLock::new(Default::default);
    // A kept session whose daemon restarted fails once: a new one is opened.
    for _ in 0..2 {
        let session = {
            let mut g = SESSIONS.lock().unwrap_or_else(|p| p.into_inner());
            match g.get(&cfg.node) {
                Some(s) => s.clone(),
                None => match Session::open(cfg) {
                    Ok(s) => g.entry(cfg.node).or_insert(Arc::new(s)).clone(),
                    // The daemon stops waiting after a while, and says so.
                    Err(_) => return,
                },
            }
        };
        match session.request(Request::GroupLegReady { conn, leg }, &[]) {
            // The connection or leg is gone meanwhile: nobody waits.
            Err(remora_client::ClientError::Daemon(_)) => return,
            Err(_) => {
                SESSIONS.lock().unwrap_or_else(|p| p.into_inner()).remove(&cfg.node);
            }
            Ok(_) => return,
        }
    }
}

/// A multicast connection `seg` (daemon handle `conn`, on the daemon of `cfg`) that may
/// reach other hosts, with the legs of its connect: its maps are DSM maps
/// ([`fanout_legs`]). Changes that came before are applied (and answered) now.
pub(crate) fn register(seg: &RemoteSegment, cfg: &Config, conn: u64, legs: Vec<u64>) {
    let _m = mapping();
    let early = {
        let mut g = casts();
        g.retain(|_, c| c.owner.strong_count() > 0 || c.cfg.is_none());
        let c = g.entry(conn).or_default();
        c.legs = legs;
        c.cfg = Some(cfg.clone());
        c.owner = Arc::downgrade(&seg.inner);
        let early = std::mem::take(&mut c.early);
        for &(leg, joined) in &early {
            c.legs.retain(|l| *l != leg);
            if joined {
                c.legs.push(leg);
            }
        }
        early
    };
    for (leg, _) in early {
        answer(cfg, conn, leg);
    }
}

/// The legs of multicast connection `conn` when its maps are DSM maps.
pub(crate) fn fanout_legs(conn: u64) -> Option<Vec<u64>> {
    casts().get(&conn).filter(|c| c.cfg.is_some()).map(|c| c.legs.clone())
}

/// `Event::GroupLeg`: leg `leg` of multicast connection `conn` joined (or left). Runs on
/// the event thread.
pub(crate) fn on_leg(conn: u64, leg: u64, joined: bool) {
    let _m = mapping();
    let cfg = {
        let mut g = casts();
        let c = g.entry(conn).or_default();
        let Some(cfg) = c.cfg.clone() else {
            c.early.push((leg, joined));
            return;
        };
        c.legs.retain(|l| *l != leg);
        if joined {
            c.legs.push(leg);
        }
        cfg
    };
    remora_client::dsm::DsmMap::multicast_leg(conn, Arc::new(SegmentRange { conn: leg }), joined);
    answer(&cfg, conn, leg);
}
