//! A map's path home failed (its pager flow gave no answer for the flow's patience, or was
//! closed; or this node's daemon could not reach the home): whether that loses the home.
//!
//! Only a lost connection does. While the route to the home is down for now
//! ([`Route::Silent`]: a cable cut, which the link reports within a second and gives up
//! only after its own budget, ~30–60 s), the pager waits for it; once the route is back it
//! opens a new flow (the home's side of the old one may have been closed meanwhile), which
//! every holder of the map's flow uses from then on, and the failed step is done again. A
//! program's access to the map waits meanwhile, as it would behind a slow link; its
//! sequences answer PENDING, then RETRIABLE (the outage is counted by the connection).

use super::super::flow::{shared_flow, Flow};
use super::super::Route;
use super::*;

/// How often the route is looked at while it is down.
const LOOK: Duration = Duration::from_millis(50);
/// How long a route that works may keep refusing a new flow before the home is given up
/// (a link just back may take a moment to bind flows again).
const REDIAL: Duration = Duration::from_secs(5);
/// How many times one step is done again after its path failed over a route that works
/// (each time a new flow was opened): a home that keeps failing flows is given up.
pub(super) const TRIES: u32 = 4;
/// How long the pager waits in all for a route that stays down before it gives the home
/// up, whatever the route says: the node declares a silent peer lost within its link's
/// budget (150 heartbeats, 30 s by default, lost by 60 s); a route that is never seen to
/// change (the thread that takes in link events is held up, as in a callback of the
/// program's that waits on this map) must not hold the pager for ever.
const SILENT_AT_MOST: Duration = Duration::from_secs(90);

impl PMap {
    /// The map's path home failed: wait while the route is only down, then, for a map with
    /// a pager flow, open a new one. `true` when the failed step is worth doing again;
    /// `false` when the home is lost (the caller marks it so).
    pub(super) fn revive(&mut self) -> bool {
        if self.fan.is_some() {
            return false;
        }
        // What the failed path carried unanswered is in doubt from now on.
        self.doubtful |= self.unanswered;
        if self.leaving {
            // Being unmapped: its stores are given up rather than waited for.
            return false;
        }
        let start = Instant::now();
        let mut up_since: Option<Instant> = None;
        loop {
            match self.home.route() {
                Route::Lost => return false,
                Route::Silent if start.elapsed() >= SILENT_AT_MOST => return false,
                Route::Silent => {
                    up_since = None;
                    std::thread::sleep(LOOK);
                }
                Route::Up => {
                    let since = *up_since.get_or_insert_with(Instant::now);
                    // Through this node's daemon: nothing to open again.
                    let Some(old) = self.direct.peek().flatten() else { return true };
                    if let Some(new) = self.fresh_flow(&old) {
                        tracing::info!("DSM: the map's pager flow failed; a new one reaches the home");
                        self.direct.replace(new);
                        return true;
                    }
                    if since.elapsed() >= REDIAL {
                        return false;
                    }
                    std::thread::sleep(LOOK * 4);
                }
            }
        }
    }

    /// A sound flow to the home other than `old`: one another map opened already, or a new
    /// one.
    fn fresh_flow(&self, old: &Flow) -> Option<Flow> {
        let f = shared_flow(&self.session, &self.home)?;
        (!Arc::ptr_eq(&f, old)).then_some(f)
    }
}
