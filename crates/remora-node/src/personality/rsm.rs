//! The RSM personality of the node (Sun's RSMAPI): exports made from a process's own
//! memory, published under an id of RSM's own id space with an access list, and imports
//! checked against that list and the exporter's user and group, on the core's books.
//!
//! What RSM keeps beside the core ([`Books`]): for each export, who owns it (user, group),
//! the mode its creator's umask left, the access list, and the exporter's signal interrupt;
//! for each import, the importer's signal interrupt, so a post on the export reaches every
//! importer. Signals themselves are core interrupts (notifiers): a post is a trigger.
//!
//! The rules of `rsm_memseg_export_publish(3RSM)`: an id of 0 makes the node pick one at or
//! above `0x8000_0000`; an explicit id in the system's ranges (up to `0x3F_FFFF`, or at or
//! above `0x8000_0000`) is refused, as Solaris's library refuses it.

use crate::core::{IdSpace, Registry};
use crate::session::{fd_of, is_memfd, Outcome, Session};
use crate::Node;
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{AccessEntry, Credentials, Error, LostReason, Reply, RsmPeerRequest, RsmRequest};
use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;

/// The first id the node picks for a publish with id 0.
pub const AUTO_ID_BASE: u32 = 0x8000_0000;
/// The highest id of the ranges reserved for the system.
const RESERVED_END: u32 = 0x3F_FFFF;

/// An export's RSM particulars.
#[derive(Debug, Clone)]
pub struct Export {
    /// The exporter's user.
    pub uid: u32,
    /// The exporter's group.
    pub gid: u32,
    /// Owner/group/other bits granted when published without an access list.
    pub mode: u32,
    /// The access list; `None` admits every node with `mode`.
    pub acl: Option<Vec<AccessEntry>>,
    /// The exporter's signal interrupt on this node.
    pub signal: u32,
}

/// The RSM personality's books.
#[derive(Debug, Default)]
pub struct Books {
    /// Exports by segment handle.
    pub exports: HashMap<u64, Export>,
    /// The importer's signal (node, interrupt number) of each import, by connection handle.
    pub imports: HashMap<u64, (u32, u32)>,
    /// The number of imports at which [`Books::add_import`] next forgets ended ones.
    prune_at: usize,
}

/// The fewest imports [`Books::add_import`] lets gather before it looks for ended ones.
const PRUNE_MIN: usize = 64;

impl Books {
    /// Book import `conn` with its importer's signal. A process that connects and
    /// disconnects without end must not grow the books until its session ends: when the
    /// imports have doubled since the last look, those whose connection `live` (the node's
    /// connection handles, asked only then) no longer holds are forgotten.
    pub fn add_import(&mut self, conn: u64, signal: (u32, u32), live: impl FnOnce() -> HashSet<u64>) {
        self.imports.insert(conn, signal);
        if self.imports.len() >= self.prune_at.max(PRUNE_MIN) {
            let live = live();
            self.imports.retain(|c, _| live.contains(c));
            self.prune_at = 2 * self.imports.len();
        }
    }
}

/// Whether an explicit id lies in a range reserved for the system.
pub fn reserved_id(id: u32) -> bool {
    id >= AUTO_ID_BASE || id <= RESERVED_END
}

/// Whether a permission value is one an access list or a mode may hold.
pub fn valid_perm(perm: u32) -> bool {
    perm & !0o666 == 0
}

/// The access `creds` of node `node` get to `e`, as an octal digit (4 read, 2 write).
///
/// # Errors
/// `NotPublishedToNode` when an access list does not name the node.
pub fn granted(e: &Export, node: u32, creds: Credentials) -> Result<u32, Error> {
    let bits = match &e.acl {
        None => e.mode,
        Some(acl) => acl.iter().find(|a| a.node == node).ok_or(Error::NotPublishedToNode)?.perm,
    };
    // Root passes every user and group check, as on Solaris.
    Ok(if creds.uid == 0 || creds.uid == e.uid {
        (bits >> 6) & 0o6
    } else if creds.gid == e.gid {
        (bits >> 3) & 0o6
    } else {
        bits & 0o6
    })
}

/// The rights an admitted import holds: exactly what it asked for (Solaris grants the
/// request, not the whole digit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Loads: gets, readable maps, the export's memory handed on this host.
    pub read: bool,
    /// Stores: puts, writable maps.
    pub write: bool,
}

impl Grant {
    /// The rights of an import admitted asking `perm` (`0o400` read, `0o200` write).
    pub fn of(perm: u32) -> Grant {
        Grant { read: perm & 0o400 != 0, write: perm & 0o200 != 0 }
    }
}

/// Check an import asking `perm` (`0o400` read, `0o200` write, both, or none) against
/// `e`, and return the rights it then holds. A request of none passes wherever the node
/// is admitted at all (Solaris's check takes away the granted bits from the asked ones and
/// admits what is left empty), and holds no right.
///
/// # Errors
/// `PermissionDenied` for bits other than read and write, or access not granted;
/// `NotPublishedToNode`.
pub fn admit(e: &Export, node: u32, creds: Credentials, perm: u32) -> Result<Grant, Error> {
    if perm & !0o600 != 0 {
        return Err(Error::PermissionDenied);
    }
    let want = perm >> 6;
    let have = granted(e, node, creds)?;
    if want & !have != 0 {
        return Err(Error::PermissionDenied);
    }
    Ok(Grant::of(perm))
}

fn check_acl(acl: &Option<Vec<AccessEntry>>) -> Result<(), Error> {
    match acl {
        Some(list) if list.iter().any(|a| !valid_perm(a.perm)) => {
            Err(Error::IllegalParameter("access list permission".into()))
        }
        _ => Ok(()),
    }
}

/// Serve one RSM request of session `s`.
pub(crate) async fn handle(s: &mut Session, req: RsmRequest, mut fds: Vec<OwnedFd>) -> Outcome {
    let sid = s.sid;
    let ok = |r: Result<(), Error>| (r.map(|_| Reply::Ok), vec![]);
    match req {
        RsmRequest::Create { mode, signal } => {
            if fds.len() != 1 || !is_memfd(&fds[0]) {
                return (
                    Err(Error::IllegalParameter("an RSM export needs exactly one memfd".into())),
                    vec![],
                );
            }
            if !valid_perm(mode) {
                return (Err(Error::IllegalParameter(format!("mode {mode:#o}"))), vec![]);
            }
            let memfd = match remora_sys::Memfd::from_fd(fds.remove(0)) {
                Ok(m) if m.is_size_sealed() && m.size() > 0 => m,
                Ok(_) => {
                    return (
                        Err(Error::IllegalParameter("the memfd must be sealed and not empty".into())),
                        vec![],
                    )
                }
                Err(e) => return (Err(Error::System(e.to_string())), vec![]),
            };
            let (seg, size) = {
                let mut reg = s.node.lock();
                let seg = reg.create_unnamed(sid, IdSpace::Rsm, memfd);
                (seg.seg, seg.size)
            };
            let e = Export { uid: s.uid, gid: s.gid, mode, acl: None, signal };
            s.node.rsm().exports.insert(seg, e);
            (Ok(Reply::Segment { seg, id: None, size, prepared: true, available: false }), vec![])
        }
        RsmRequest::Publish { seg, id, acl } => {
            if id != 0 && reserved_id(id) {
                return (Err(Error::ReservedId), vec![]);
            }
            if let Err(e) = check_acl(&acl) {
                return (Err(e), vec![]);
            }
            if !owns(s, seg) {
                return (Err(Error::UnknownHandle), vec![]);
            }
            let wanted = (id != 0).then_some(id);
            let r = s.node.lock().name_segment(sid, seg, wanted, AUTO_ID_BASE);
            match r {
                Ok(id) => {
                    if let Some(e) = s.node.rsm().exports.get_mut(&seg) {
                        e.acl = acl;
                    }
                    (Ok(Reply::RsmPublished { id }), vec![])
                }
                Err(e) => (Err(e), vec![]),
            }
        }
        RsmRequest::Republish { seg, acl } => {
            if let Err(e) = check_acl(&acl) {
                return (Err(e), vec![]);
            }
            if !owns(s, seg) {
                return (Err(Error::UnknownHandle), vec![]);
            }
            if s.node.lock().segments.get(&seg).is_none_or(|g| g.id.is_none()) {
                return (Err(Error::IllegalOperation), vec![]);
            }
            if let Some(e) = s.node.rsm().exports.get_mut(&seg) {
                e.acl = acl;
            }
            (Ok(Reply::Ok), vec![])
        }
        RsmRequest::Unpublish { seg } => {
            if !owns(s, seg) {
                return (Err(Error::UnknownHandle), vec![]);
            }
            ok(s.node.lock().unname_segment(sid, seg, LostReason::ForcedDisconnect))
        }
        RsmRequest::Destroy { seg } => {
            if !owns(s, seg) {
                return (Err(Error::UnknownHandle), vec![]);
            }
            let r = {
                let mut reg = s.node.lock();
                if reg.segments.get(&seg).is_some_and(|g| g.id.is_some()) {
                    let _ = reg.unname_segment(sid, seg, LostReason::ForcedDisconnect);
                }
                reg.remove_segment(sid, seg, true)
            };
            s.node.rsm().exports.remove(&seg);
            ok(r)
        }
        RsmRequest::Connect { node, id, perm, signal, creds } => {
            // A daemon of this host speaks for its own processes; root may speak for
            // anyone. Everyone else is who the socket says.
            let own = Credentials { uid: s.uid, gid: s.gid };
            let trusted = s.uid == 0 || s.uid == rustix::process::geteuid().as_raw();
            let creds = match creds {
                Some(c) if trusted => c,
                _ => own,
            };
            if node == s.me() {
                match connect_here(&s.node, sid, s.importer_node(), id, perm, creds, signal) {
                    Ok((reply, fd)) => (Ok(reply), fd.into_iter().collect()),
                    Err(e) => (Err(e), vec![]),
                }
            } else if s.is_peer() {
                (Err(Error::NoSuchNode), vec![])
            } else {
                connect_far(s, node, id, perm, creds, signal).await
            }
        }
        RsmRequest::Importers { seg } => {
            if !owns(s, seg) {
                return (Err(Error::UnknownHandle), vec![]);
            }
            let conns: Vec<u64> = {
                let reg = s.node.lock();
                reg.segments.get(&seg).map(|g| g.importers.iter().copied().collect()).unwrap_or_default()
            };
            let books = s.node.rsm();
            let list = conns.iter().filter_map(|c| books.imports.get(c).copied()).collect();
            (Ok(Reply::RsmSignals(list)), vec![])
        }
    }
}

/// Whether session `s` created export `seg`.
fn owns(s: &Session, seg: u64) -> bool {
    s.node.rsm().exports.contains_key(&seg)
        && s.node.lock().segments.get(&seg).is_some_and(|g| g.owner == s.sid && !g.removed)
}

/// Connect session `sid` (an importer of node `importer`) to export `id` of this node.
/// The export's memory goes with the answer only to an import granted read (read-only
/// unless write is granted too): one without read reaches the memory through the node
/// only, which refuses its loads.
fn connect_here(
    node: &Node,
    sid: u64,
    importer: u32,
    id: u32,
    perm: u32,
    creds: Credentials,
    signal: u32,
) -> Result<(Reply, Option<OwnedFd>), Error> {
    let seg = node.lock().segment_by_id(IdSpace::Rsm, id).map(|g| g.seg).ok_or(Error::NoSuchSegment)?;
    let export = node.rsm().exports.get(&seg).cloned().ok_or(Error::NoSuchSegment)?;
    let Grant { read: readable, write: writable } = admit(&export, importer, creds, perm)?;
    let (conn, size, memfd) = {
        let mut reg: std::sync::MutexGuard<'_, Registry> = node.lock();
        let (conn, size, memfd) = reg.connect_in(sid, importer, IdSpace::Rsm, id).map_err(|w| match w {
            crate::core::ConnectWait::Failed(e) => e,
            _ => Error::NoSuchSegment,
        })?;
        if let Some(c) = reg.conns.get_mut(&conn) {
            c.writable = writable;
            c.readable = readable;
        }
        (conn, size, memfd)
    };
    // The books' lock before the node's, as `owns` takes them.
    node.rsm().add_import(conn, (importer, signal), || node.lock().conns.keys().copied().collect());
    let fd = match (readable, writable) {
        (false, _) => None,
        (true, true) => Some(fd_of(&memfd)?),
        (true, false) => Some(fd_of(&memfd.reopen_readonly().map_err(|e| Error::System(e.to_string()))?)?),
    };
    Ok((Reply::RsmConnected { conn, size, signal: export.signal, writable }, fd))
}

/// `rsm_memseg_import_connect` to an export of another node, through its transport.
async fn connect_far(s: &Session, node: u32, id: u32, perm: u32, creds: Credentials, signal: u32) -> Outcome {
    let t = match s.reach(node, None).await {
        Ok(t) => t,
        Err(e) => return (Err(e), vec![]),
    };
    // The exporter's node hands the memory (where the transport shares it) only to an
    // import granted read; an admitted import holds what it asked for.
    let readable = Grant::of(perm).read;
    let shared = t.shares_memory() && readable;
    let req = PeerRequest::Rsm(RsmPeerRequest::Connect { id, perm, creds, signal });
    match s.ask_via(&t, node, req).await {
        Ok((PeerReply::RsmConnected { conn: remote, size, signal, writable }, fds))
            if fds.len() == usize::from(shared) =>
        {
            let keep =
                fds.first().and_then(|f| f.try_clone().ok()).and_then(|f| remora_sys::Memfd::from_fd(f).ok());
            let size = keep.as_ref().map_or(size, |m| size.min(m.size()));
            let conn = {
                let mut reg = s.node.lock();
                let conn = reg.add_proxied(s.sid, node, id, size, remote, keep);
                if let Some(c) = reg.conns.get_mut(&conn) {
                    c.writable = writable;
                    c.readable = readable;
                }
                conn
            };
            (Ok(Reply::RsmConnected { conn, size, signal, writable }), fds)
        }
        Ok(other) => (Err(Error::Protocol(format!("unexpected answer {:?}", other.0))), vec![]),
        Err(e) => (Err(e), vec![]),
    }
}

/// Serve what the RSM personality of node `from` asks, for its session held here by `sid`.
pub(crate) fn serve_peer(node: &Node, sid: u64, from: u32, req: RsmPeerRequest) -> Result<PeerReply, Error> {
    match req {
        RsmPeerRequest::Connect { id, perm, creds, signal } => {
            let (reply, _fd) = connect_here(node, sid, from, id, perm, creds, signal)?;
            match reply {
                Reply::RsmConnected { conn, size, signal, writable } => {
                    Ok(PeerReply::RsmConnected { conn, size, signal, writable })
                }
                other => Err(Error::Protocol(format!("unexpected answer {other:?}"))),
            }
        }
    }
}

/// Forget what belonged to exports and imports that no longer exist (a session ended).
pub(crate) fn end_session(node: &Node) {
    let (segs, conns): (HashSet<u64>, HashSet<u64>) = {
        let reg = node.lock();
        (
            reg.segments.values().filter(|g| !g.removed).map(|g| g.seg).collect(),
            reg.conns.keys().copied().collect(),
        )
    };
    let mut books = node.rsm();
    books.exports.retain(|seg, _| segs.contains(seg));
    books.imports.retain(|conn, _| conns.contains(conn));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_imports_are_forgotten_as_new_ones_come() {
        let mut books = Books::default();
        // A process that connects and disconnects again and again: one connection live.
        for conn in 0..10_000u64 {
            books.add_import(conn, (1, 7), || HashSet::from([conn]));
            assert!(books.imports.len() <= PRUNE_MIN, "{} imports booked", books.imports.len());
            assert_eq!(books.imports.get(&conn), Some(&(1, 7)));
        }
        // Imports that stay connected are all kept, however many.
        let mut books = Books::default();
        for conn in 0..1000u64 {
            books.add_import(conn, (2, conn as u32), || (0..=conn).collect());
        }
        assert_eq!(books.imports.len(), 1000);
    }

    fn export(mode: u32, acl: Option<Vec<AccessEntry>>) -> Export {
        Export { uid: 1000, gid: 100, mode, acl, signal: 0 }
    }

    #[test]
    fn ids_reserved_for_the_system_are_refused() {
        assert!(reserved_id(0x100));
        assert!(reserved_id(0x3F_FFFF));
        assert!(!reserved_id(0x40_0000));
        assert!(!reserved_id(0x7FFF_FFFF));
        assert!(reserved_id(0x8000_0000));
        assert!(reserved_id(u32::MAX));
        assert!(reserved_id(0x20_0001), "the RSM library's own range too, as Solaris's library");
    }

    #[test]
    fn owner_group_and_other_get_their_digit() {
        // 0624: owner read/write, group write, others read (the guide's example).
        let e = export(0o624, None);
        let owner = Credentials { uid: 1000, gid: 5 };
        let group = Credentials { uid: 7, gid: 100 };
        let other = Credentials { uid: 7, gid: 5 };
        let (rw, w, r, none) = (Grant::of(0o600), Grant::of(0o200), Grant::of(0o400), Grant::of(0));
        assert_eq!(admit(&e, 4, owner, 0o600), Ok(rw));
        assert_eq!(admit(&e, 4, group, 0o200), Ok(w));
        assert_eq!(admit(&e, 4, group, 0o400), Err(Error::PermissionDenied));
        assert_eq!(admit(&e, 4, other, 0o400), Ok(r));
        assert_eq!(admit(&e, 4, other, 0o200), Err(Error::PermissionDenied));
        assert_eq!(admit(&e, 4, Credentials { uid: 0, gid: 0 }, 0o600), Ok(rw), "root");
        assert_eq!(admit(&e, 4, owner, 0o700), Err(Error::PermissionDenied));
        assert_eq!(admit(&e, 4, other, 0), Ok(none), "no access asked, none needed");
        assert_eq!(none, Grant { read: false, write: false }, "and none held");
        assert_eq!(w, Grant { read: false, write: true }, "write alone does not read");
    }

    #[test]
    fn an_access_list_names_the_nodes_that_may_connect() {
        let e = export(0o666, Some(vec![AccessEntry { node: 8, perm: 0o400 }]));
        let owner = Credentials { uid: 1000, gid: 100 };
        assert_eq!(admit(&e, 8, owner, 0o400), Ok(Grant::of(0o400)));
        assert_eq!(admit(&e, 8, owner, 0o600), Err(Error::PermissionDenied));
        assert_eq!(admit(&e, 4, owner, 0o400), Err(Error::NotPublishedToNode));
    }
}
