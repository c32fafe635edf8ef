//! The fabric's progress thread: it reads the endpoint's completions, without spinning,
//! until the fabric is dropped; hands each message received to the link whose token it
//! carries (`deliver`), each RMA completion to whoever waits for it, and a send that failed
//! to the link of its connection, which goes down ([`Fabric::broke`]); after each read it
//! tries again the answers that found the send queue full (`send.rs`).
//!
//! A malformed message is dropped and said at most once every ten seconds, with how many
//! since (anyone who reaches the endpoint can send them: one line each would flood the log).
//!
//! A receive that failed (truncated: a message larger than any frame, which only a sender
//! that does not speak this protocol sends; or lost on its way in) has its buffer posted
//! again and is logged, at most once every ten seconds with how many failed since (those
//! of the last ten seconds are said when the failures stop too). It takes no link down: its sender
//! is not known (the providers here do not give the source of a failed receive,
//! `FI_SOURCE_ERR`, and the buffer holds none of the message), and a stranger's junk must
//! not close the cluster's links. A message of a peer lost on a connection that broke
//! fails the peer's own send, which takes that link down on the peer's side, and so here
//! too (its bootstrap connection closes).
//!
//! A receive buffer whose posting failed is posted again at each read of completions
//! (`remora-ofi-sys`, `recv.rs`); meanwhile those reads wait briefly at first, then twice as
//! long at each read that posted none of them, up to 200 ms (10 ms again once one is posted,
//! and always while answers wait to be sent), and buffers left unposted over a second are
//! said, at most every ten seconds, until they are posted again.

use super::{deliver, Fabric, Waiting, RECVS, SWEEP};
use remora_ofi_sys::Endpoint;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often failed receives, and receive buffers left unposted, are said, at most.
const SAY_EVERY: Duration = Duration::from_secs(10);
/// How long receive buffers stay unposted before it is said.
const UNPOSTED_SAY_AFTER: Duration = Duration::from_secs(1);
/// How long a read of completions waits while something waits for the next read (an answer
/// to send, a receive buffer to post): briefly, so that it is tried again soon.
const RETRY_SOON: Duration = Duration::from_millis(10);
/// How long a read of completions waits when nothing waits for it; also the longest wait
/// between tries of receive buffers whose posting keeps failing.
const IDLE: Duration = Duration::from_millis(200);

/// The wait of the next read of completions: [`RETRY_SOON`] while answers wait (`unsent`),
/// [`IDLE`] when nothing waits; while receive buffers are unposted (`unposted`, `before` at
/// the read before), `backoff`, which starts at [`RETRY_SOON`] and doubles (up to [`IDLE`])
/// at each read that posted none of them (a failing `fi_recv` is not tried every 10 ms for
/// ever).
fn next_wait(backoff: &mut Duration, unposted: usize, before: usize, unsent: bool) -> Duration {
    *backoff = match unposted == 0 || before == 0 || unposted < before {
        true => RETRY_SOON,
        false => (*backoff * 2).min(IDLE),
    };
    match (unsent, unposted) {
        (true, _) => RETRY_SOON,
        (false, 0) => IDLE,
        (false, _) => *backoff,
    }
}

/// Something said at most once every [`SAY_EVERY`], with how often it happened since.
#[derive(Default)]
struct Throttled {
    said: Option<Instant>,
    unsaid: u64,
}

impl Throttled {
    /// It happened once more at `now`: how often to say it happened, if now is the time.
    fn note(&mut self, now: Instant) -> Option<u64> {
        self.unsaid += 1;
        self.due(now)
    }

    /// How often it happened since it was last said, if it did and the time has come
    /// (asked when nothing new happens too, so that the last ones are said).
    fn due(&mut self, now: Instant) -> Option<u64> {
        if self.unsaid == 0 || self.said.is_some_and(|t| now.saturating_duration_since(t) < SAY_EVERY) {
            return None;
        }
        self.said = Some(now);
        Some(std::mem::take(&mut self.unsaid))
    }
}

/// What the progress thread says about the receive path, at most every [`SAY_EVERY`].
#[derive(Default)]
struct Said {
    /// Malformed messages dropped, and the last one's length.
    malformed: Throttled,
    malformed_len: usize,
    /// Failed receives, and the last one's error.
    failed_in: Throttled,
    last: String,
    /// Since when receive buffers are left unposted, and that it was said.
    unposted_since: Option<Instant>,
    unposted: Throttled,
}

impl Said {
    /// A malformed message of `len` bytes was dropped: whether it was said now.
    fn malformed(&mut self, len: usize, now: Instant) -> bool {
        self.malformed_len = len;
        let said = self.malformed.note(now);
        if let Some(n) = said {
            tracing::warn!("{n} malformed ofi message(s) dropped, the last of {len} bytes");
        }
        said.is_some()
    }

    fn failed_in(&mut self, e: &remora_ofi_sys::Error, now: Instant) {
        self.last = e.to_string();
        if let Some(n) = self.failed_in.note(now) {
            tracing::warn!(
                "{n} ofi receive(s) failed, the last: {e} (a message lost on its way in; its sender is \
                 not known, so no link is closed for it)"
            );
        }
    }

    /// After each read of completions: the failed receives not said yet, and receive
    /// buffers left unposted (`unposted` of them now).
    fn tick(&mut self, unposted: usize, now: Instant) {
        if let Some(n) = self.failed_in.due(now) {
            tracing::warn!("{n} more ofi receive(s) failed, the last: {}", self.last);
        }
        if let Some(n) = self.malformed.due(now) {
            tracing::warn!(
                "{n} more malformed ofi message(s) dropped, the last of {} bytes",
                self.malformed_len
            );
        }
        match (unposted, self.unposted_since) {
            (0, None) => {}
            (0, Some(_)) => {
                if self.unposted.said.is_some() {
                    tracing::info!("every ofi receive buffer is posted again");
                }
                (self.unposted_since, self.unposted) = (None, Throttled::default());
            }
            (n, Some(since)) if now.saturating_duration_since(since) > UNPOSTED_SAY_AFTER => {
                if self.unposted.note(now).is_some() {
                    tracing::warn!(
                        "{n} of the endpoint's {RECVS} ofi receive buffers are not posted (fi_recv \
                         keeps failing; tried again at each read of completions): fewer messages \
                         can arrive at once"
                    );
                }
            }
            (_, Some(_)) => {}
            (_, None) => self.unposted_since = Some(now),
        }
    }
}

/// The progress thread: completions until the fabric is dropped.
pub(super) fn progress(ep: Arc<Endpoint>, fabric: std::sync::Weak<Fabric>) {
    let mut swept = Instant::now();
    let mut said = Said::default();
    let mut wait = IDLE;
    let (mut backoff, mut before) = (RETRY_SOON, 0);
    loop {
        let got = match ep.completions(wait) {
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
                        None => {
                            if !deliver(&f, &bytes) {
                                said.malformed(bytes.len(), Instant::now());
                            }
                        }
                        Some(e) => said.failed_in(&e, Instant::now()),
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
        // Completions read: room for answers that waited for it, in order.
        f.retry_unsent();
        let unposted = ep.unposted();
        said.tick(unposted, Instant::now());
        wait = next_wait(&mut backoff, unposted, before, f.has_unsent());
        before = unposted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Said at the first time, then not until ten seconds passed, then with how many came
    /// meanwhile — also when none came since (the last ones were never said before).
    #[test]
    fn failures_are_said_at_most_every_ten_seconds_and_the_last_ones_too() {
        let (mut t, t0) = (Throttled::default(), Instant::now());
        assert_eq!(t.due(t0), None, "nothing happened");
        assert_eq!(t.note(t0), Some(1), "the first is said at once");
        assert_eq!(t.note(t0 + Duration::from_secs(1)), None);
        assert_eq!(t.note(t0 + Duration::from_secs(2)), None);
        assert_eq!(t.due(t0 + Duration::from_secs(5)), None, "not yet");
        assert_eq!(t.due(t0 + Duration::from_secs(11)), Some(2), "the two unsaid, though none came since");
        assert_eq!(t.due(t0 + Duration::from_secs(30)), None, "each said once");
        assert_eq!(t.note(t0 + Duration::from_secs(31)), Some(1));
    }

    /// Malformed messages, however many, are said at most once every ten seconds (with how
    /// many came since), not one line each.
    #[test]
    fn malformed_messages_are_said_at_most_every_ten_seconds() {
        let (mut said, t0) = (Said::default(), Instant::now());
        let lines = (0..1000u64).filter(|i| said.malformed(13, t0 + Duration::from_millis(9 * i))).count();
        assert_eq!(lines, 1, "a thousand in nine seconds: one line");
        assert_eq!(said.malformed.due(t0 + Duration::from_secs(10)), Some(999), "the rest said together");
        assert!(!said.malformed(13, t0 + Duration::from_secs(11)), "not again before ten seconds");
    }

    /// Receive buffers whose posting keeps failing are tried again at a doubling wait, up
    /// to 200 ms; at 10 ms again once one is posted; at 10 ms while answers wait anyway.
    #[test]
    fn unposted_buffers_are_retried_with_back_off_and_answers_soon() {
        let ms = Duration::from_millis;
        let mut backoff = RETRY_SOON;
        assert_eq!(next_wait(&mut backoff, 0, 0, false), IDLE, "nothing waits");
        assert_eq!(next_wait(&mut backoff, 0, 0, true), RETRY_SOON, "an answer waits");
        assert_eq!(next_wait(&mut backoff, 4, 0, false), ms(10), "a buffer just left unposted: soon");
        let waits: Vec<_> = (0..6).map(|_| next_wait(&mut backoff, 4, 4, false)).collect();
        assert_eq!(waits, [ms(20), ms(40), ms(80), ms(160), ms(200), ms(200)], "none posted: backing off");
        assert_eq!(next_wait(&mut backoff, 4, 4, true), RETRY_SOON, "answers wait: soon anyway");
        assert_eq!(next_wait(&mut backoff, 3, 4, false), ms(10), "one was posted: soon again");
        assert_eq!(next_wait(&mut backoff, 3, 3, false), ms(20));
        assert_eq!(next_wait(&mut backoff, 0, 3, false), IDLE, "all posted");
    }
}
