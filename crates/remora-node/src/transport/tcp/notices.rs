//! What this node told a peer that must reach it although the connection it went on may
//! break: the requests it gave up ([`LinkMsg::GaveUp`]) and the ends of its sessions
//! ([`LinkMsg::SessionEnd`]). Each is kept until the peer notes it
//! ([`LinkMsg::GaveUpNoted`], [`LinkMsg::SessionEndNoted`]) and told again on every new
//! connection to the same start of the peer; a new start holds nothing of ours, and they
//! are forgotten. The peer acts on each once and ignores it after (nothing is left to
//! act on), so telling one twice does no harm.

use remora_proto::link::LinkMsg;
use std::collections::BTreeSet;

/// The notices a peer has not noted yet.
#[derive(Debug, Default)]
pub(in crate::transport) struct Notices {
    gave_up: BTreeSet<u64>,
    ended: BTreeSet<u64>,
}

impl Notices {
    /// Request `id` was given up: the message that says so, kept until noted.
    pub(in crate::transport) fn gave_up(&mut self, id: u64) -> LinkMsg {
        self.gave_up.insert(id);
        LinkMsg::GaveUp { id }
    }

    /// Session `origin` ended: the message that says so, kept until noted.
    pub(in crate::transport) fn ended(&mut self, origin: u64) -> LinkMsg {
        self.ended.insert(origin);
        LinkMsg::SessionEnd { origin }
    }

    /// The end of session `origin` was not sent after all (someone else remembers it).
    pub(in crate::transport) fn unsent_end(&mut self, origin: u64) {
        self.ended.remove(&origin);
    }

    /// The peer noted `m` (a [`LinkMsg::GaveUpNoted`] or [`LinkMsg::SessionEndNoted`]).
    pub(in crate::transport) fn noted(&mut self, m: &LinkMsg) {
        match m {
            LinkMsg::GaveUpNoted { id } => {
                self.gave_up.remove(id);
            }
            LinkMsg::SessionEndNoted { origin } => {
                self.ended.remove(origin);
            }
            _ => {}
        }
    }

    /// Everything not noted yet, to tell again on a new connection.
    pub(in crate::transport) fn again(&self) -> Vec<LinkMsg> {
        let gave_up = self.gave_up.iter().map(|&id| LinkMsg::GaveUp { id });
        gave_up.chain(self.ended.iter().map(|&origin| LinkMsg::SessionEnd { origin })).collect()
    }

    /// The peer restarted: its new start holds nothing the notices were about.
    pub(in crate::transport) fn clear(&mut self) {
        self.gave_up.clear();
        self.ended.clear();
    }

    /// How many are not noted yet (requests given up, session ends).
    #[cfg(test)]
    pub(in crate::transport) fn waiting(&self) -> (usize, usize) {
        (self.gave_up.len(), self.ended.len())
    }
}

#[cfg(test)]
mod tests {
    use super::super::peer::tests::peer;
    use crate::transport::liveness::Action;
    use remora_proto::link::{LinkMsg, PeerRequest};
    use remora_proto::Error;
    use std::collections::HashMap;
    use std::time::Duration;
    use tokio::sync::mpsc;

    /// The id of the next request sent.
    async fn sent_id(out: &mut mpsc::UnboundedReceiver<LinkMsg>) -> u64 {
        match out.recv().await {
            Some(LinkMsg::Request { id, .. }) => id,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn requests_whose_answer_is_not_taken_are_told_as_given_up_until_noted() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (p, mut out) = peer();
            let mut sent = HashMap::new();
            // Given up by its caller (the future dropped) after it went: told.
            let ask = p.request(1, PeerRequest::Probe);
            assert!(tokio::time::timeout(Duration::from_millis(20), ask).await.is_err());
            let given_up = sent_id(&mut out).await;
            assert_eq!(out.recv().await, Some(LinkMsg::GaveUp { id: given_up }));
            // Answered (a refusal too): nothing told.
            let q = p.clone();
            let answered = tokio::spawn(async move { q.request(1, PeerRequest::Probe).await });
            let id = sent_id(&mut out).await;
            p.serve_ctrl(LinkMsg::Reply { id, result: Err(Error::NoSuchSegment) }, &mut sent);
            assert_eq!(answered.await.unwrap().unwrap_err(), Error::NoSuchSegment);
            // Failed by its connection's break (the peer may have it): told.
            let q = p.clone();
            let broken = tokio::spawn(async move { q.request(1, PeerRequest::Probe).await });
            let failed = sent_id(&mut out).await;
            p.apply(vec![Action::FailRequests]);
            assert_eq!(broken.await.unwrap().unwrap_err(), Error::NodeNotResponding);
            assert_eq!(out.recv().await, Some(LinkMsg::GaveUp { id: failed }));
            p.apply(vec![Action::SendSessionEnd(7)]);
            assert_eq!(out.recv().await, Some(LinkMsg::SessionEnd { origin: 7 }));
            assert_eq!(p.notices().waiting(), (2, 1));
            // A new connection: everything not noted goes again, until noted.
            let (tx, mut again) = mpsc::unbounded_channel();
            *p.ctrl.lock().unwrap() = Some(tx);
            p.tell_again();
            for want in [
                LinkMsg::GaveUp { id: given_up },
                LinkMsg::GaveUp { id: failed },
                LinkMsg::SessionEnd { origin: 7 },
            ] {
                assert_eq!(again.recv().await, Some(want));
            }
            p.serve_ctrl(LinkMsg::GaveUpNoted { id: given_up }, &mut sent);
            p.serve_ctrl(LinkMsg::SessionEndNoted { origin: 7 }, &mut sent);
            assert_eq!(p.notices().waiting(), (1, 0));
            // The receiving side notes what it acted on.
            p.serve_ctrl(LinkMsg::GaveUp { id: 99 }, &mut sent);
            assert_eq!(again.recv().await, Some(LinkMsg::GaveUpNoted { id: 99 }));
            p.serve_ctrl(LinkMsg::SessionEnd { origin: 3 }, &mut sent);
            assert_eq!(again.recv().await, Some(LinkMsg::SessionEndNoted { origin: 3 }));
        });
    }
}
