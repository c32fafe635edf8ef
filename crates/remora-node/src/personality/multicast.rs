//! SISCI reflective memory (`SCI_FLAG_BROADCAST`) on the node: member segments of a group,
//! the group's multicast connection, and the questions peers ask about a group's memory.
//! The rules are the core's (`core/groups.rs`); here is what waits.
//!
//! A member created on this node takes the group's memfd from whichever other node of this
//! host already has a member (asked through the `local` transport, which hands the memfd
//! over), under a host-wide `flock` so two first members never make two copies; with none,
//! it makes the memfd and, when a node of another host holds a member, copies that
//! member's contents into it (a late member across hosts sees what the group holds). The
//! multicast connection maps the same memfd. When nodes of other hosts hold members, the
//! multicast connect also connects to one member per other host (`PeerRequest::ConnectGroup`,
//! every node of the cluster asked at once, links not up yet dialed, within the connect's
//! time): those *legs* go back to the caller, whose DSM pager sends its stores down each
//! (`Reply::GroupConnected`). A host whose first member joins later is added to them
//! (`members.rs`). Where the cluster names other hosts, a multicast connection is always
//! made for a DSM map (so it can reach them later); else it maps the memfd plainly.

mod members;

pub(crate) use members::{block_filled, filled, serve as serve_members};

use crate::core::groups::check_group;
use crate::session::{fd_of, is_memfd, Outcome, Session};
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{paths, Error, Reply};
use remora_sys::{AsFd, Memfd};
use std::time::{Duration, Instant};

/// How long a question to a node of another host about a group may take.
const ASK_OTHER_HOST: Duration = Duration::from_secs(2);
/// How long a node whose link was never up is waited for (the link dials again at least
/// every second): a node of the cluster whose daemon does not run holds no member.
const ASK_NEVER_SEEN: Duration = Duration::from_millis(1200);

fn sys(e: std::io::Error) -> Error {
    Error::System(e.to_string())
}

/// The host-wide lock of `group`'s memory, held until dropped (taken without blocking
/// the runtime: the other daemons keep answering while this one waits).
async fn host_lock(s: &Session, group: u32) -> Result<std::fs::File, Error> {
    let path = paths::group_lock_path(&s.node.config.runtime_dir, group);
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(sys)?;
    loop {
        if remora_sys::try_lock_file(&file, false).map_err(sys)? {
            return Ok(file);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            _ = s.hangup() => return Err(Error::Protocol("caller hung up".into())),
        }
    }
}

/// The memfd of `group` held by another node of this host, if one has a member, and that
/// node.
async fn find_on_host(s: &Session, group: u32) -> Option<(u32, Memfd)> {
    for node in paths::nodes_in(&s.node.config.runtime_dir) {
        if node == s.me() {
            continue;
        }
        let Some(t) = s.node.transports().to(node).cloned() else { continue };
        if !t.shares_memory() {
            continue;
        }
        let Ok((PeerReply::Connected { .. }, mut fds)) =
            s.ask_via(&t, node, PeerRequest::GroupMemory { group }).await
        else {
            continue;
        };
        if fds.len() == 1 && is_memfd(&fds[0]) {
            if let Ok(m) = Memfd::from_fd(fds.remove(0)) {
                return Some((node, m));
            }
        }
    }
    None
}

/// A member of `group` on a node of another host, connected for this session.
struct Leg {
    node: u32,
    conn: u64,
    size: u64,
    memory: u64,
}

/// Connect to one member of `group` on each other host that has one: every node of the
/// cluster reached by a transport that does not share memory (links not up yet are
/// dialed, for at most [`ASK_NEVER_SEEN`]; links known lost or silent are skipped) is
/// asked at once, each answer awaited at most `limit`. A host whose several nodes hold members is reached once (the extra
/// connections are released).
async fn legs_elsewhere(s: &Session, group: u32, limit: Duration) -> Vec<Leg> {
    use crate::transport::LinkState;
    let mut asks = tokio::task::JoinSet::new();
    for l in s.node.transports().links() {
        if l.node == s.me() || matches!(l.state, LinkState::Lost | LinkState::NotOperational) {
            continue;
        }
        let Some(t) = s.node.transports().to(l.node).cloned() else { continue };
        if t.shares_memory() {
            continue;
        }
        let (sid, node) = (s.sid, l.node);
        let limit = if l.state == LinkState::Down { limit.min(ASK_NEVER_SEEN) } else { limit };
        asks.spawn(async move {
            let ask = t.request(node, sid, PeerRequest::ConnectGroup { group });
            match tokio::time::timeout(limit, ask).await {
                Ok(Ok((PeerReply::GroupConnected { conn, size, memory }, _))) => {
                    Some(Leg { node, conn, size, memory })
                }
                _ => None,
            }
        });
    }
    let mut found: Vec<Leg> = Vec::new();
    while let Some(r) = asks.join_next().await {
        if let Ok(Some(leg)) = r {
            found.push(leg);
        }
    }
    found.sort_by_key(|l| l.node);
    let mut legs: Vec<Leg> = Vec::new();
    for leg in found {
        if legs.iter().any(|l| l.memory == leg.memory) {
            let _ = s.ask(leg.node, PeerRequest::Disconnect { conn: leg.conn }).await;
        } else {
            legs.push(leg);
        }
    }
    legs
}

/// Copy what a member of `group` on another host holds into `memory` (a host's first
/// member joining a group that lives elsewhere). Nothing when no other host has one.
async fn fetch_contents(s: &Session, group: u32, memory: &Memfd) -> Result<(), Error> {
    let legs = legs_elsewhere(s, group, ASK_OTHER_HOST).await;
    let Some(first) = legs.first() else { return Ok(()) };
    let map = remora_sys::Mapping::new(memory.as_fd(), 0, memory.size() as usize, Default::default())
        .map_err(sys)?;
    let len = first.size.min(memory.size());
    let mut r = Ok(());
    let mut at = 0u64;
    while at < len && r.is_ok() {
        let n = (len - at).min(remora_proto::MAX_DATA_IO as u64) as u32;
        r = match s.ask(first.node, PeerRequest::Read { conn: first.conn, offset: at, len: n }).await {
            Ok((PeerReply::Data(d), _)) if d.len() == n as usize => map.write(at as usize, &d).map_err(sys),
            Ok(_) => Err(Error::System("a member of another host answered a read oddly".into())),
            Err(e) => Err(e),
        };
        at += n as u64;
    }
    for leg in &legs {
        let _ = s.ask(leg.node, PeerRequest::Disconnect { conn: leg.conn }).await;
    }
    r
}

/// `Request::CreateGroupSegment`: this node's member of `group`.
pub(crate) async fn create(s: &Session, group: u32, size: u64, unicast: bool) -> Outcome {
    match create_member(s, group, size, unicast).await {
        Ok(x) => x,
        Err(e) => (Err(e), vec![]),
    }
}

async fn create_member(s: &Session, group: u32, size: u64, unicast: bool) -> Result<Outcome, Error> {
    check_group(group)?;
    if s.node.lock().group_id_used(group) {
        return Err(Error::SegmentIdUsed);
    }
    let _held = host_lock(s, group).await?;
    let (memory, first) = match find_on_host(s, group).await {
        Some((_, m)) => (m, false),
        None => {
            let m = Memfd::create(&format!("n{}-group{group}", s.me()), size).map_err(|e| {
                // Out of memory, or beyond the daemon's file size limit (`ulimit -f`).
                if matches!(e.raw_os_error(), Some(12 | 27)) {
                    Error::NoSpace
                } else {
                    sys(e)
                }
            })?;
            (m, true)
        }
    };
    let keep = memory.try_clone().map_err(sys)?;
    let (reply, fd, seg) = {
        let mut reg = s.node.lock();
        let seg = reg.create_group_segment(s.sid, group, size, unicast, memory)?;
        let reply =
            Reply::Segment { seg: seg.seg, id: seg.id, size: seg.size, prepared: false, available: false };
        let fd = fd_of(seg.memfd.as_ref().expect("a member has memory"))?;
        let seg = seg.seg;
        if first {
            // Stores of other hosts wait until the contents are copied (`members.rs`).
            reg.group_books.filling.insert(group);
        }
        (reply, fd, seg)
    };
    if first {
        // The first member of this host: the group may live on other hosts already. Their
        // multicast connections reach it before its contents are copied.
        members::join(s, group, seg, &keep).await?;
    }
    Ok((Ok(reply), vec![fd]))
}

/// `Request::RemoveSegment`: a member's removal is told to the other hosts.
pub(crate) async fn remove(s: &Session, seg: u64, force: bool) -> Outcome {
    match members::remove(s, seg, force).await {
        Ok(()) => (Ok(Reply::Ok), vec![]),
        Err(e) => (Err(e), vec![]),
    }
}

/// `Request::ConnectGroup`: the multicast connection of `group`, once a member exists on
/// this host (waiting up to `timeout_ms`; `None` waits forever).
pub(crate) async fn connect(s: &Session, group: u32, timeout_ms: Option<u32>) -> Outcome {
    match connect_group(s, group, timeout_ms).await {
        Ok(x) => x,
        Err(e) => (Err(e), vec![]),
    }
}

async fn connect_group(s: &Session, group: u32, timeout_ms: Option<u32>) -> Result<Outcome, Error> {
    check_group(group)?;
    let deadline = timeout_ms.map(|t| Instant::now() + Duration::from_millis(t.into()));
    loop {
        let own = s.node.lock().group_memory(group).map(|(m, _)| m.try_clone());
        let memory = match own {
            Some(m) => Some(m.map_err(sys)?),
            None => find_on_host(s, group).await.map(|(_, m)| m),
        };
        let mark = s.node.lock().group_books.next_join;
        let left = deadline.map_or(ASK_OTHER_HOST, |d| d.saturating_duration_since(Instant::now()));
        let legs = legs_elsewhere(s, group, left.clamp(Duration::from_millis(50), ASK_OTHER_HOST)).await;
        if memory.is_some() || !legs.is_empty() {
            let fd = memory.as_ref().map(fd_of).transpose()?;
            let size = memory.iter().map(|m| m.size()).chain(legs.iter().map(|l| l.size)).min().unwrap_or(0);
            if legs.is_empty() && !members::cluster_has_other_hosts(&s.node) {
                // One host: a plain map of the memfd is every member.
                let conn = s.node.lock().add_group_connection(s.sid, group, memory, size, vec![]);
                return Ok((Ok(Reply::Connected { conn, size }), fd.into_iter().collect()));
            }
            let (conn, late) = {
                let mut reg = s.node.lock();
                let handles: Vec<u64> = legs
                    .iter()
                    .map(|l| {
                        let h = reg.add_proxied(s.sid, l.node, group, l.size, l.conn, None);
                        reg.group_books.legs.insert(h, (l.node, l.memory));
                        h
                    })
                    .collect();
                let conn = reg.add_group_connection(s.sid, group, memory, size, handles);
                (conn, reg.group_books.joined_since(group, mark))
            };
            // Members that joined on other hosts while this connect asked around.
            for n in late {
                members::reach(&s.node, (conn, s.sid, size), group, n, None).await;
            }
            let legs = s.node.lock().legs_of(conn).into_iter().map(|l| l.0).collect();
            return Ok((Ok(Reply::GroupConnected { conn, size, legs }), fd.into_iter().collect()));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::NoSuchSegment);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            _ = s.hangup() => return Err(Error::Protocol("caller hung up".into())),
        }
    }
}

/// `Request::Disconnect` of a multicast connection: release its legs (connections to
/// members on other hosts) too. Nothing for any other connection.
pub(crate) async fn disconnect_legs(s: &Session, conn: u64) {
    let legs = {
        let mut reg = s.node.lock();
        if reg.conns.get(&conn).is_none_or(|c| c.session != s.sid) {
            return;
        }
        reg.take_group_legs(conn)
    };
    for leg in legs {
        let r = s.node.lock().disconnect(s.sid, leg);
        if let Ok((kind, node)) = r {
            if let Some(remote) = kind.remote() {
                s.release_far(node, PeerRequest::Disconnect { conn: remote }).await;
            }
        }
    }
}

/// `Request::GroupMemory` from a peer daemon of this host: this node's member's memfd.
pub(crate) fn memory(s: &Session, group: u32) -> Outcome {
    let reg = s.node.lock();
    match reg.group_memory(group) {
        Some((m, size)) => match fd_of(m) {
            Ok(fd) => (Ok(Reply::Connected { conn: 0, size }), vec![fd]),
            Err(e) => (Err(e), vec![]),
        },
        None => (Err(Error::NoSuchSegment), vec![]),
    }
}

/// `PeerRequest::ConnectGroup` from a node of another host: a connection of its session
/// `sid` to this node's member (a leg of its multicast connection, or a late member's
/// fetch of the contents).
///
/// # Errors
/// `NoSuchSegment` when this node holds no member.
pub(crate) fn serve_connect(node: &crate::Node, sid: u64, from: u32, group: u32) -> Result<PeerReply, Error> {
    let (conn, size, memory) = node.lock().connect_member(sid, from, group)?;
    Ok(PeerReply::GroupConnected { conn, size, memory })
}

/// `PeerRequest::GroupMemory` from a node of another host: whether this node has a member.
///
/// # Errors
/// `NoSuchSegment` when it has none.
pub(crate) fn serve_peer(node: &crate::Node, group: u32) -> Result<PeerReply, Error> {
    node.lock()
        .group_memory(group)
        .map(|(_, size)| PeerReply::Connected { conn: 0, size })
        .ok_or(Error::NoSuchSegment)
}
