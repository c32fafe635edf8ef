//! The fabric's progress thread: it reads the endpoint's completions, without spinning,
//! until the fabric is dropped; hands each message received to the link whose token it
//! carries (`deliver`), each RMA completion to whoever waits for it, and a send that failed
//! to the link of its connection, which goes down ([`Fabric::broke`]).
//!
//! A receive that failed (truncated: a message larger than any frame, which only a sender
//! that does not speak this protocol sends; or lost on its way in) has its buffer posted
//! again and is logged, at most once every ten seconds. It takes no link down: its sender
//! is not known (the providers here do not give the source of a failed receive,
//! `FI_SOURCE_ERR`, and the buffer holds none of the message), and a stranger's junk must
//! not close the cluster's links. A message of a peer lost on a connection that broke
//! fails the peer's own send, which takes that link down on the peer's side, and so here
//! too (its bootstrap connection closes).

use super::{deliver, Fabric, Waiting, SWEEP};
use remora_ofi_sys::Endpoint;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often failed receives are said, at most.
const SAY_EVERY: Duration = Duration::from_secs(10);

/// Receives that failed since they were last said.
#[derive(Default)]
struct FailedIn {
    said: Option<Instant>,
    unsaid: u64,
}

impl FailedIn {
    fn note(&mut self, e: &remora_ofi_sys::Error) {
        self.unsaid += 1;
        if self.said.is_none_or(|t| t.elapsed() > SAY_EVERY) {
            tracing::warn!(
                "{} ofi receive(s) failed, the last: {e} (a message lost on its way in; its sender is \
                 not known, so no link is closed for it)",
                self.unsaid
            );
            *self = FailedIn { said: Some(Instant::now()), unsaid: 0 };
        }
    }
}

/// The progress thread: completions until the fabric is dropped.
pub(super) fn progress(ep: Arc<Endpoint>, fabric: std::sync::Weak<Fabric>) {
    let mut swept = Instant::now();
    let mut failed_in = FailedIn::default();
    loop {
        let got = match ep.completions(Duration::from_millis(200)) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!("ofi completion queue: {e}");
                std::thread::sleep(Duration::from_millis(100));
                Vec::new()
            }
        };
        let Some(f) = fabric.upgrade() else { return };
        if f.stop.load(Ordering::Relaxed) {
            return;
        }
        if swept.elapsed() > SWEEP {
            f.sweep();
            swept = Instant::now();
        }
        for c in got {
            match c.slot {
                Some(slot) => {
                    // The buffer is posted again whatever came (a failed receive took it too).
                    let bytes = ep.received(slot, if c.error.is_none() { c.len } else { 0 });
                    match c.error {
                        None => deliver(&f, &bytes),
                        Some(e) => failed_in.note(&e),
                    }
                }
                None => {
                    let waiter = f.ops.lock().unwrap_or_else(|p| p.into_inner()).remove(&c.id);
                    // Tests: a message the test lost completes with an error, as on a
                    // connection that broke under it.
                    #[cfg(test)]
                    let c = super::tests::fail_lost(waiter.as_ref(), c);
                    match (waiter, c.error) {
                        (Some(Waiting::Rma(op)), e) => {
                            op.window.give(op.bytes, op.gen);
                            let _ = op.done.send(e.map_or(Ok(()), |e| Err(e.what)));
                        }
                        // A message lost after it was posted (a request, an answer, a
                        // notice...): its connection goes, as a TCP link's on a write error.
                        (Some(Waiting::Send { to, .. }), Some(e)) => f.broke(to, &e.what),
                        (Some(Waiting::Send { .. }), None) | (None, None) => {}
                        (None, Some(e)) => tracing::debug!("an ofi operation nobody waits for failed: {e}"),
                    }
                }
            }
        }
    }
}
