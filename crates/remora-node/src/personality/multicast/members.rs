//! Members that join a group, or leave it, after multicast connections of the group were
//! made on other hosts.
//!
//! **Join.** A host's first member of group *g* (on node *n*) is recorded, marked
//! *filling*, and announced to every node of the other hosts
//! (`PeerRequest::GroupMembers`). Each such node connects every multicast connection of *g*
//! it holds to *n*'s member (a new *leg*), tells the connection's process
//! (`Event::GroupLeg`) and answers once every process said its pager took the leg in
//! (`Request::GroupLegReady`; a pager first waits until the stores it sent before reached
//! the member hosts it already had). Only then does *n* copy the group's contents from a
//! member of another host, and while it copies, stores that arrive down the new legs wait
//! (pager flows and daemon writes alike), so the copy never overwrites them; then the
//! member is done and the create returns.
//!
//! **What that guarantees.** A store is either sent down the new leg (its pager held the
//! leg when it sent it) and lands after the copy, or was sent before the pager took the leg
//! in, and then it reached every member host the writer had before the copy began, so the
//! copy holds it. A store flushed after the member's create returned therefore reaches the
//! new member (and every store before it does, by the copy or the leg). A process that does
//! not answer within [`LEG_READY`] is not waited for further (logged); a copy that takes
//! longer than [`FILL_LIMIT`] lets the waiting stores through.
//!
//! **Leave.** `SCIRemoveSegment` of a member tells the other hosts: their legs to that node
//! are dropped from the processes' pagers, then disconnected; when another node of the
//! host still has a member, the legs move to it first. A member host that dies drops out of
//! the maps on the first store that fails (`remora-client` `dsm/pager/fanout.rs`).

use super::{fetch_contents, ASK_NEVER_SEEN, ASK_OTHER_HOST};
use crate::session::Session;
use crate::transport::LinkState;
use crate::Node;
use remora_proto::link::{PeerReply, PeerRequest};
use remora_proto::{Error, Event};
use remora_sys::Memfd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a node waits for the processes to take a new leg in (or let one go).
pub(super) const LEG_READY: Duration = Duration::from_secs(5);
/// How long stores to a member wait for its copy of the group's contents (a pager gives a
/// member host up after 10 s without an answer).
const FILL_LIMIT: Duration = Duration::from_secs(8);

/// Whether `n` is a node of another host.
fn elsewhere(node: &Node, n: u32) -> bool {
    n != node.lock().node && node.transports().to(n).is_some_and(|t| !t.shares_memory())
}

/// Whether the cluster names a node of another host.
pub(super) fn cluster_has_other_hosts(node: &Node) -> bool {
    node.transports().links().iter().any(|l| elsewhere(node, l.node))
}

/// Tell every node of the other hosts (links not up yet are dialed) that this host's
/// members of `group` changed, and wait for their answers.
async fn announce(s: &Session, group: u32, joined: Option<u32>, left: Option<u32>) {
    let mut asks = tokio::task::JoinSet::new();
    for l in s.node.transports().links() {
        if matches!(l.state, LinkState::Lost | LinkState::NotOperational) || !elsewhere(&s.node, l.node) {
            continue;
        }
        let Some(t) = s.node.transports().to(l.node).cloned() else { continue };
        let (sid, node) = (s.sid, l.node);
        let limit = if l.state == LinkState::Down { ASK_NEVER_SEEN } else { ASK_OTHER_HOST + LEG_READY };
        asks.spawn(async move {
            let ask = t.request(node, sid, PeerRequest::GroupMembers { group, joined, left });
            match tokio::time::timeout(limit, ask).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::debug!(node, "group {group}: a change of members was not taken: {e}"),
                Err(_) => tracing::debug!(node, "group {group}: a change of members was not answered"),
            }
        });
    }
    while asks.join_next().await.is_some() {}
}

/// A host's first member of `group` (segment `seg`, memory `memory`, marked filling):
/// announce it, then copy the group's contents, then let stores in.
///
/// # Errors
/// The copy failed: the member is removed again (and its leaving announced).
pub(super) async fn join(s: &Session, group: u32, seg: u64, memory: &Memfd) -> Result<(), Error> {
    announce(s, group, Some(s.me()), None).await;
    let r = fetch_contents(s, group, memory).await;
    let failed = {
        let mut reg = s.node.lock();
        reg.group_books.filling.remove(&group);
        r.is_err() && reg.remove_segment(s.sid, seg, true).is_ok()
    };
    s.node.changed.notify_waiters();
    if failed {
        announce(s, group, None, Some(s.me())).await;
    }
    r
}

/// `SCIRemoveSegment`: when `seg` is a member of a group, tell the other hosts (its legs
/// move to another member of this host, or are dropped).
pub(super) async fn remove(s: &Session, seg: u64, force: bool) -> Result<(), Error> {
    let group = {
        let mut reg = s.node.lock();
        let group = reg.segments.get(&seg).filter(|x| x.owner == s.sid).and_then(|x| x.multicast);
        reg.remove_segment(s.sid, seg, force)?;
        group.map(|m| m.group)
    };
    if let Some(group) = group {
        let successor = super::find_on_host(s, group).await.map(|(n, _)| n);
        announce(s, group, successor, Some(s.me())).await;
    }
    Ok(())
}

/// Connect multicast connection `conn` (of session `sess`, `size` bytes) to node `n`'s
/// member of `group`, unless it reaches that host already (other than through node
/// `left`), or the member is too small. Returns the new leg.
pub(super) async fn reach(
    node: &Node,
    (conn, sess, size): (u64, u64, u64),
    group: u32,
    n: u32,
    left: Option<u32>,
) -> Option<u64> {
    let t = node.transports().to(n).cloned()?;
    let ask = t.request(n, sess, PeerRequest::ConnectGroup { group });
    let Ok(Ok((PeerReply::GroupConnected { conn: remote, size: theirs, memory }, _))) =
        tokio::time::timeout(ASK_OTHER_HOST, ask).await
    else {
        return None;
    };
    let leg = {
        let mut reg = node.lock();
        let covered = reg.legs_of(conn).iter().any(|&(_, nd, m)| m == memory && Some(nd) != left);
        if theirs < size {
            tracing::warn!(n, "group {group}: a member of {theirs} bytes cannot take a connection of {size}");
        }
        (reg.conns.contains_key(&conn) && !covered && theirs >= size)
            .then(|| reg.add_group_leg(conn, sess, n, group, size, remote, memory))
    };
    if leg.is_none() {
        let _ = tokio::time::timeout(
            ASK_OTHER_HOST,
            t.request(n, sess, PeerRequest::Disconnect { conn: remote }),
        )
        .await;
    }
    leg
}

/// Wait until the processes said every one of `legs` is taken in (or let go), at most
/// [`LEG_READY`]; forget their word.
async fn wait_ready(node: &Node, legs: &[u64]) {
    let deadline = Instant::now() + LEG_READY;
    loop {
        let notified = node.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if node.lock().legs_ready(legs) {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!("multicast: a process did not take a change of members in within {LEG_READY:?}");
            break;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(left.min(Duration::from_millis(50))) => {}
        }
    }
    let mut reg = node.lock();
    for l in legs {
        reg.group_books.ready.remove(l);
    }
}

/// `PeerRequest::GroupMembers` from node `from`: add legs to `joined`'s member and drop the
/// legs to `left`, for every multicast connection of `group` here; answered once the
/// processes took the change in.
///
/// # Errors
/// `IllegalParameter` for a bad group.
pub(crate) async fn serve(
    node: Arc<Node>,
    from: u32,
    group: u32,
    joined: Option<u32>,
    left: Option<u32>,
) -> Result<PeerReply, Error> {
    super::check_group(group)?;
    let conns = node.lock().group_connections(group);
    let mut added = Vec::new();
    if let Some(n) = joined.filter(|&n| elsewhere(&node, n)) {
        node.lock().group_books.note_join(group, n);
        for &c in &conns {
            if let Some(leg) = reach(&node, c, group, n, left).await {
                node.lock().tell_session(c.1, Event::GroupLeg { conn: c.0, leg, joined: true });
                added.push(leg);
            }
        }
    }
    wait_ready(&node, &added).await;
    let Some(n) = left.filter(|&n| n == from) else { return Ok(PeerReply::Ok) };
    let mut gone = Vec::new();
    {
        let reg = node.lock();
        for &(conn, sess, _) in &conns {
            for (leg, _, _) in reg.legs_of(conn).into_iter().filter(|l| l.1 == n) {
                reg.tell_session(sess, Event::GroupLeg { conn, leg, joined: false });
                gone.push((conn, sess, leg));
            }
        }
    }
    wait_ready(&node, &gone.iter().map(|g| g.2).collect::<Vec<_>>()).await;
    for (conn, sess, leg) in gone {
        let r = {
            let mut reg = node.lock();
            reg.drop_group_leg(conn, leg);
            reg.disconnect(sess, leg)
        };
        let Ok((kind, nd)) = r else { continue };
        let (Some(remote), Some(t)) = (kind.remote(), node.transports().to(nd).cloned()) else { continue };
        let ask = t.request(nd, sess, PeerRequest::Disconnect { conn: remote });
        let _ = tokio::time::timeout(ASK_OTHER_HOST, ask).await;
    }
    Ok(PeerReply::Ok)
}

/// Wait while stores through connection `conn` (a peer's) must: it reaches this node's
/// member of a group that is still copying its contents (at most [`FILL_LIMIT`]).
pub(crate) async fn filled(node: &Node, conn: u64) {
    let deadline = Instant::now() + FILL_LIMIT;
    while node.lock().group_filling(conn) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// [`filled`] for a thread that may block (a pager flow's).
pub(crate) fn block_filled(node: &Node, conn: u64) {
    let deadline = Instant::now() + FILL_LIMIT;
    while node.lock().group_filling(conn) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
