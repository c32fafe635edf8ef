//! SISCI reflective memory (`SCI_FLAG_BROADCAST`) on the node: member segments of a group,
//! the group's multicast connection, and the question peers of this host ask about a
//! group's memory. The rules are the core's (`core/groups.rs`); here is what waits.
//!
//! A member created on this node takes the group's memfd from whichever other node of this
//! host already has a member (asked through the `local` transport, which hands the memfd
//! over), under a host-wide `flock` so two first members never make two copies; with none,
//! it makes the memfd. A late member so maps the current contents. The multicast
//! connection maps the same memfd. Members on another host are not reached: a multicast
//! connect that finds one answers `ConnRefused` (the library's `SCI_ERR_NOT_SUPPORTED`).

use crate::core::groups::check_group;
use crate::session::{fd_of, is_memfd, Outcome, Session};
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{paths, Error, Reply};
use remora_sys::Memfd;
use std::time::{Duration, Instant};

/// How long a question to a node of another host about a group may take.
const ASK_OTHER_HOST: Duration = Duration::from_secs(2);

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

/// The memfd of `group` held by another node of this host, if one has a member.
async fn find_on_host(s: &Session, group: u32) -> Option<Memfd> {
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
                return Some(m);
            }
        }
    }
    None
}

/// Whether a node of another host (a link that is up) holds a member of `group`.
async fn member_on_other_host(s: &Session, group: u32) -> bool {
    let links = s.node.transports().links();
    for l in links.iter().filter(|l| l.state == crate::transport::LinkState::Up) {
        let Some(t) = s.node.transports().to(l.node).cloned() else { continue };
        if t.shares_memory() {
            continue;
        }
        let ask = s.ask_via(&t, l.node, PeerRequest::GroupMemory { group });
        if let Ok(Ok((PeerReply::Connected { .. }, _))) = tokio::time::timeout(ASK_OTHER_HOST, ask).await {
            return true;
        }
    }
    false
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
    let memory = match find_on_host(s, group).await {
        Some(m) => m,
        None => Memfd::create(&format!("n{}-group{group}", s.me()), size).map_err(|e| {
            if e.raw_os_error() == Some(12) {
                Error::NoSpace
            } else {
                sys(e)
            }
        })?,
    };
    let mut reg = s.node.lock();
    let seg = reg.create_group_segment(s.sid, group, size, unicast, memory)?;
    let reply =
        Reply::Segment { seg: seg.seg, id: seg.id, size: seg.size, prepared: false, available: false };
    let fd = fd_of(seg.memfd.as_ref().expect("a member has memory"))?;
    Ok((Ok(reply), vec![fd]))
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
            None => find_on_host(s, group).await,
        };
        if member_on_other_host(s, group).await {
            return Err(Error::ConnRefused);
        }
        if let Some(m) = memory {
            let fd = fd_of(&m)?;
            let (conn, size) = s.node.lock().add_group_connection(s.sid, group, m);
            return Ok((Ok(Reply::Connected { conn, size }), vec![fd]));
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
