//! Reading a session's event socket from inside a handler (a callback on the event
//! thread): a wait there for the events of one resource takes them off the socket itself,
//! since the session's own handler reads it again only after the running one returns.

use crate::{events, ClientError, Session};
use remora_proto::{decode, Event, ServerMsg, MAX_FRAME};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

impl Session {
    /// On the event thread, inside a handler: deliver to the sink now, in the order they
    /// came, the events of this session that `pick` chooses, first those read already and
    /// not yet delivered, then what the event socket brings, until at least one was
    /// delivered or `timeout` passed (`None`: no limit). The others wait, in their order,
    /// for the session's handler, which delivers them after the running handler returns
    /// (it is run then even if the socket has nothing more). The sink must run no callback
    /// for a picked event (the caller is inside one). Returns whether one was delivered.
    ///
    /// # Errors
    /// [`ClientError::DaemonGone`] when the daemon closed the session (the handler reports
    /// it too when it runs), [`ClientError::Protocol`] for a message that does not decode,
    /// the I/O error of the socket.
    pub fn pump_events(
        &self,
        pick: &dyn Fn(&Event) -> bool,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let pumped = self.pump(pick, timeout);
        let left_over = !self.state.pending.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        let token = *self.token.lock().unwrap_or_else(|p| p.into_inner());
        if let (true, Some(token)) = (left_over, token) {
            events::event_loop()?.run_soon(token);
        }
        pumped
    }

    fn pump(&self, pick: &dyn Fn(&Event) -> bool, timeout: Option<Duration>) -> Result<bool, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut buf = Vec::new();
        loop {
            let mut picked = Vec::new();
            self.state.pending.lock().unwrap_or_else(|p| p.into_inner()).retain(|e| {
                let take = pick(e);
                if take {
                    picked.push(e.clone());
                }
                !take
            });
            if !picked.is_empty() {
                for ev in picked {
                    self.state.deliver(ev);
                }
                return Ok(true);
            }
            // No event socket: events come with the replies to requests, delivered there.
            let Some(sock) = self.ev_out.get() else { return Ok(false) };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            // An interrupted wait answers "nothing ready": look at the clock again.
            if remora_sys::poller::wait_ready(&[sock.as_fd()], left)? == 0 {
                if left.is_some_and(|l| l.is_zero()) {
                    return Ok(false);
                }
                continue;
            }
            if buf.is_empty() {
                buf = vec![0u8; MAX_FRAME];
            }
            match remora_sys::seqpacket::recv(sock.as_fd(), &mut buf) {
                Ok((n, _)) if n > 0 => {
                    match decode::<ServerMsg>(&buf[..n]).map_err(|e| self.undecodable(e))? {
                        ServerMsg::Event(e) => self.state.read(vec![e]),
                        ServerMsg::Events(evs) => self.state.read(evs),
                        other => tracing::warn!("unexpected message on the event socket: {other:?}"),
                    }
                }
                // Non-blocking: the readiness was for nothing after all.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The daemon went away; the handler, run on the hang-up, tells the sink.
                _ => return Err(ClientError::DaemonGone),
            }
        }
    }
}
