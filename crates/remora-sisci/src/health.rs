//! What a connection's link has been through, as sequences need it: up, down for now (the
//! route is silent: `SCI_CB_NOT_OPERATIONAL`), back after an outage, or gone for good; and
//! the route as a map's pager asks for it (`HomeRoute`).

use crate::events::SegmentReason;
use crate::map::SegmentRange;
use crate::segment::{RemoteInner, RemoteSegment};
use crate::Error;
use remora_client::dsm::{FlowStop, Route};
use remora_proto::{LostReason, Request};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The link events of one connection, counted: whether the route is down now, and how many
/// outages it has had (a sequence compares the count with the one it saw last).
#[derive(Debug, Default)]
pub(crate) struct LinkWatch {
    down: AtomicBool,
    outages: AtomicU64,
    changed: (Mutex<()>, Condvar),
    /// Flows of the process's own to the connection's memory (small DMA) stopped when the
    /// route falls silent: a transfer blocked on one fails then, not after its patience.
    stops: Mutex<Vec<Weak<FlowStop>>>,
}

impl LinkWatch {
    /// Take in a segment event (only the link ones change anything).
    pub(crate) fn note(&self, reason: SegmentReason) {
        let _g = self.changed.0.lock().unwrap_or_else(|p| p.into_inner());
        match reason {
            SegmentReason::NotOperational => {
                if !self.down.swap(true, Ordering::SeqCst) {
                    self.outages.fetch_add(1, Ordering::SeqCst);
                }
                let stops = std::mem::take(&mut *self.stops.lock().unwrap_or_else(|p| p.into_inner()));
                for s in stops.iter().filter_map(Weak::upgrade) {
                    s.stop();
                }
            }
            SegmentReason::Operational => self.down.store(false, Ordering::SeqCst),
            _ => return,
        }
        self.changed.1.notify_all();
    }

    /// Have `stop` stopped when the route next falls silent (kept only while its holder
    /// keeps it).
    pub(crate) fn stop_on_down(&self, stop: &Arc<FlowStop>) {
        // Under the lock `note` takes: a route that fell silent since the caller looked
        // (its stops already taken) stops this flow now.
        let _g = self.changed.0.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_down() {
            stop.stop();
            return;
        }
        let mut stops = self.stops.lock().unwrap_or_else(|p| p.into_inner());
        stops.retain(|w| w.strong_count() > 0);
        stops.push(Arc::downgrade(stop));
    }

    /// Whether the route is down now.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// How many times the route went down since the connection was made.
    pub(crate) fn outages(&self) -> u64 {
        self.outages.load(Ordering::SeqCst)
    }

    /// Wait up to `limit` for the route to come back; whether it is up.
    pub(crate) fn wait_up(&self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        let mut g = self.changed.0.lock().unwrap_or_else(|p| p.into_inner());
        while self.is_down() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self.changed.1.wait_timeout(g, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }
}

impl RemoteSegment {
    /// Whether the node has reported this connection lost (owner gone, forced disconnect),
    /// or the node daemon itself is gone.
    pub fn is_lost(&self) -> bool {
        self.gone().is_some()
    }

    /// Why the connection is gone for good, if it is: [`Error::NotConnected`] when the
    /// exporter forced a disconnect, [`Error::NodeNotResponding`] when the exporting
    /// process or its node went away, or this node's daemon did (the status the
    /// `SCI_CB_LOST` event carries).
    pub(crate) fn gone(&self) -> Option<Error> {
        let l = self.inner.link.get()?;
        if l.session.daemon_gone() {
            return Some(Error::NodeNotResponding);
        }
        match l.session.lost_seen(l.conn, &self.inner.lost_seen)? {
            LostReason::ForcedDisconnect => Some(Error::NotConnected),
            LostReason::OwnerGone | LostReason::NodeGone => Some(Error::NodeNotResponding),
        }
    }

    /// The connection's link events.
    pub(crate) fn watch(&self) -> &LinkWatch {
        &self.inner.watch
    }
}

/// The home of a map of another host's segment as its pager sees it: the requests of
/// [`SegmentRange`], and the route as the connection's link events tell it, so that a flow
/// that fails during an outage waits for the route instead of losing the map.
#[derive(Debug)]
pub(crate) struct HomeRoute {
    pub(crate) range: SegmentRange,
    /// The connection (the map holds it; gone, it is lost).
    pub(crate) conn: Weak<RemoteInner>,
}

impl remora_client::dsm::RemoteRange for HomeRoute {
    fn key(&self) -> u64 {
        self.range.key()
    }

    fn flow_request(&self) -> Request {
        self.range.flow_request()
    }

    fn read_request(&self, offset: u64, len: u32) -> Request {
        self.range.read_request(offset, len)
    }

    fn write_requests(&self, runs: Vec<(u64, Vec<u8>)>) -> Vec<Request> {
        self.range.write_requests(runs)
    }

    fn route(&self) -> Route {
        let Some(inner) = self.conn.upgrade() else { return Route::Lost };
        let seg = RemoteSegment::from_inner(inner);
        if seg.gone().is_some() {
            Route::Lost
        } else if seg.watch().is_down() {
            Route::Silent
        } else {
            Route::Up
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_count_once_per_down_and_wait_up_sees_the_return() {
        let w = std::sync::Arc::new(LinkWatch::default());
        assert!(!w.is_down());
        w.note(SegmentReason::NotOperational);
        w.note(SegmentReason::NotOperational);
        w.note(SegmentReason::Connect);
        assert!(w.is_down());
        assert_eq!(w.outages(), 1);
        assert!(!w.wait_up(Duration::from_millis(5)));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w2.note(SegmentReason::Operational);
        });
        assert!(w.wait_up(Duration::from_secs(5)));
        t.join().unwrap();
        w.note(SegmentReason::NotOperational);
        assert_eq!(w.outages(), 2);
    }
}
