//! Deterministic simulation of a link's liveness (`remora_node::transport::liveness`).
//!
//! The state machine every connection-keeping transport uses is driven here by a simulated
//! world — a peer that answers, pauses (SIGSTOP), dies and restarts with a new incarnation,
//! a connection that breaks and is dialled again or replaced by the peer's redial, sessions
//! that ask the peer for things and end — on a simulated clock, with ticks every heartbeat
//! period while connected. proptest draws the schedules (and shrinks a failing one to a
//! short story). After every step the world checks what the APIs promise:
//!
//! * every state change comes out in order, from the state the last one left; the events
//!   the node is told are exactly the reported transitions (NOT_OPERATIONAL only from up,
//!   OPERATIONAL only from not operational, LOST from anywhere);
//! * a connected link silent for more than three heartbeats is not up after the next tick,
//!   and is never reported not operational while frames come within three heartbeats;
//! * an answer makes it up again;
//! * LOST is reported when, and only when, the peer restarted (another incarnation), its
//!   daemon is gone (refused), or no connection came for 150 heartbeats;
//! * a request in flight fails when its connection breaks or is replaced, and none stays in
//!   flight past the give-up budget (it never hangs);
//! * the end of a session the peer holds reaches that start of the peer exactly once, and a
//!   restarted peer is never told of a session its new start does not hold.

use proptest::prelude::*;
use remora_node::transport::liveness::{Action, Liveness, GIVE_UP_PERIODS, SILENT_PERIODS};
use remora_node::transport::LinkState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const HB: Duration = Duration::from_millis(10);

#[derive(Debug, Clone)]
enum Step {
    /// Let time pass (ticks at every heartbeat boundary while connected).
    Advance(u64),
    /// The peer stops answering (SIGSTOP) / answers again (SIGCONT).
    Pause,
    Resume,
    /// The connection breaks (a cable, a reset).
    Break,
    /// Dial (or take the peer's connection) now.
    Dial,
    /// The peer's side redials while the current connection looks fine to us.
    Supersede,
    /// The peer's daemon dies / starts again (a new incarnation).
    Kill,
    Start,
    /// Session `n` asks the peer for something / ends.
    Ask(u64),
    End(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1u64..400).prop_map(Step::Advance),
        1 => Just(Step::Pause),
        2 => Just(Step::Resume),
        1 => Just(Step::Break),
        3 => Just(Step::Dial),
        1 => Just(Step::Supersede),
        1 => Just(Step::Kill),
        1 => Just(Step::Start),
        3 => (0u64..6).prop_map(Step::Ask),
        2 => (0u64..6).prop_map(Step::End),
    ]
}

/// The simulated peer and connection, and what the checks remember.
struct World {
    m: Liveness,
    t0: Instant,
    now: Duration,
    /// The peer's daemon: its start, whether it runs, whether it answers.
    incarnation: u64,
    alive: bool,
    paused: bool,
    /// Whether a connection is up (as the world sees it).
    connected: bool,
    /// When the current connection came up (ticks are at its heartbeat boundaries).
    since: Duration,
    /// When we last heard the peer (on this connection).
    heard: Duration,
    /// When the link last had a connection (for the 150-heartbeat give-up).
    down_at: Option<Duration>,
    /// The incarnation our side last connected to.
    known: u64,
    /// The state the reported changes left.
    seen: LinkState,
    /// What the peer's current start holds for our sessions.
    holds: BTreeSet<u64>,
    /// Session ends the peer's current start received, per session.
    told: BTreeMap<u64, u32>,
    /// Sessions that ended (and not asked again since).
    ended: BTreeSet<u64>,
    /// Requests in flight, with when they were sent.
    in_flight: Vec<Duration>,
    next_incarnation: u64,
}

impl World {
    fn new() -> World {
        World {
            m: Liveness::new(HB),
            t0: Instant::now(),
            now: Duration::ZERO,
            incarnation: 1,
            alive: true,
            paused: false,
            connected: false,
            since: Duration::ZERO,
            heard: Duration::ZERO,
            down_at: None,
            known: 0,
            seen: LinkState::Down,
            holds: BTreeSet::new(),
            told: BTreeMap::new(),
            ended: BTreeSet::new(),
            in_flight: Vec::new(),
            next_incarnation: 2,
        }
    }

    fn at(&self) -> Instant {
        self.t0 + self.now
    }

    fn answering(&self) -> bool {
        self.connected && self.alive && !self.paused
    }

    /// Carry out the machine's actions, checking each.
    fn run(&mut self, acts: Vec<Action>) -> Result<(), TestCaseError> {
        let mut last_changed: Option<(LinkState, LinkState)> = None;
        for a in acts {
            match a {
                Action::Changed { from, to } => {
                    prop_assert_eq!(from, self.seen, "a change from a state the last one did not leave");
                    prop_assert_ne!(from, to);
                    self.seen = to;
                    last_changed = Some((from, to));
                    if to == LinkState::Lost {
                        let restarted = self.known != 0 && self.incarnation != self.known;
                        let long = self.down_at.is_some_and(|d| self.now - d > HB * GIVE_UP_PERIODS);
                        prop_assert!(
                            restarted || !self.alive || long,
                            "lost, yet the peer runs the same start and the link was not down for long"
                        );
                    }
                }
                Action::Report(s) => {
                    let Some((from, to)) = last_changed else {
                        return Err(TestCaseError::fail("a report without a change"));
                    };
                    prop_assert_eq!(s, to, "a report of another state than the change");
                    match s {
                        LinkState::NotOperational => prop_assert_eq!(from, LinkState::Up),
                        LinkState::Up => prop_assert_eq!(from, LinkState::NotOperational),
                        LinkState::Lost => {}
                        LinkState::Down => prop_assert!(false, "down reported"),
                    }
                }
                Action::VoidPeerStart => prop_assert_eq!(last_changed.map(|c| c.1), Some(LinkState::Lost)),
                Action::FailRequests => self.in_flight.clear(),
                Action::ResetDataFlows => {}
                Action::Ping => {
                    prop_assert!(self.connected, "a ping without a connection");
                }
                Action::Close => {
                    prop_assert!(self.now - self.heard > HB * GIVE_UP_PERIODS, "closed a link that spoke");
                    self.disconnect()?;
                }
                Action::SendSessionEnd(o) => {
                    prop_assert!(self.connected, "a session end sent without a connection");
                    prop_assert!(self.ended.contains(&o), "the end of session {} that did not end", o);
                    prop_assert!(
                        self.holds.remove(&o),
                        "session {}'s end told to a start that does not hold it",
                        o
                    );
                    *self.told.entry(o).or_default() += 1;
                    prop_assert_eq!(self.told[&o], 1, "session {}'s end told twice", o);
                }
            }
        }
        prop_assert_eq!(self.seen, self.m.state());
        Ok(())
    }

    fn disconnect(&mut self) -> Result<(), TestCaseError> {
        if !self.connected {
            return Ok(());
        }
        self.connected = false;
        self.down_at = Some(self.now);
        let acts = self.m.disconnected(self.at());
        self.run(acts)?;
        prop_assert!(self.in_flight.is_empty(), "requests still in flight on a broken connection");
        prop_assert_ne!(self.m.state(), LinkState::Up, "up without a connection");
        Ok(())
    }

    fn connect(&mut self) -> Result<(), TestCaseError> {
        let restarted = self.known != 0 && self.known != self.incarnation;
        let lost_before = self.m.state() == LinkState::Lost;
        self.connected = true;
        self.since = self.now;
        self.heard = self.now;
        self.down_at = None;
        let acts = self.m.connected(self.incarnation, self.at());
        let reported_lost = acts.contains(&Action::Report(LinkState::Lost));
        self.run(acts)?;
        self.known = self.incarnation;
        prop_assert!(
            !restarted || lost_before || reported_lost,
            "the peer restarted and the link was not reported lost"
        );
        prop_assert_eq!(self.m.state(), LinkState::Up);
        // Everything this start holds for a session that ended was told now.
        let owed: Vec<_> = self.holds.intersection(&self.ended).collect();
        prop_assert!(owed.is_empty(), "session ends not told after reconnecting: {:?}", owed);
        Ok(())
    }

    fn hear(&mut self) -> Result<(), TestCaseError> {
        self.heard = self.now;
        self.in_flight.clear();
        let acts = self.m.heard(self.at());
        self.run(acts)?;
        prop_assert_eq!(self.m.state(), LinkState::Up, "not up after an answer");
        Ok(())
    }

    fn tick(&mut self) -> Result<(), TestCaseError> {
        let was = self.m.state();
        let acts = self.m.tick(self.at());
        let silent = self.now - self.heard;
        if acts.contains(&Action::Report(LinkState::NotOperational)) && was == LinkState::Up {
            prop_assert!(silent > HB * SILENT_PERIODS, "not operational after {:?} of silence", silent);
        }
        self.run(acts)?;
        if self.connected {
            if silent > HB * SILENT_PERIODS {
                prop_assert_ne!(self.m.state(), LinkState::Up, "up after {:?} of silence", silent);
            }
            for sent in &self.in_flight {
                prop_assert!(self.now - *sent <= HB * (GIVE_UP_PERIODS + 1), "a request hangs");
            }
            if self.answering() {
                self.hear()?;
            }
        }
        Ok(())
    }

    fn apply(&mut self, s: &Step) -> Result<(), TestCaseError> {
        match *s {
            Step::Advance(ms) => {
                let end = self.now + Duration::from_millis(ms);
                loop {
                    // The next tick of this connection, or the end of the advance.
                    let next = if self.connected {
                        let k = ((self.now - self.since).as_nanos() / HB.as_nanos()) as u32 + 1;
                        Some(self.since + HB * k)
                    } else {
                        None
                    };
                    match next {
                        Some(t) if t <= end => {
                            self.now = t;
                            self.tick()?;
                        }
                        _ => break,
                    }
                }
                self.now = end;
            }
            Step::Pause => self.paused = true,
            Step::Resume => {
                self.paused = false;
                if self.answering() {
                    self.hear()?;
                }
            }
            Step::Break => self.disconnect()?,
            Step::Dial => {
                if !self.connected {
                    if self.alive && !self.paused {
                        self.connect()?;
                    } else {
                        let since = *self.down_at.get_or_insert(self.now);
                        let acts = self.m.unreachable(!self.alive, self.at());
                        let lost = acts.contains(&Action::Report(LinkState::Lost));
                        self.run(acts)?;
                        if lost && self.alive {
                            prop_assert!(self.now - since > HB * GIVE_UP_PERIODS);
                        }
                    }
                }
            }
            Step::Supersede => {
                if self.answering() {
                    let acts = self.m.superseded();
                    self.run(acts)?;
                    prop_assert!(self.in_flight.is_empty(), "requests in flight on a replaced connection");
                    self.connect()?;
                }
            }
            Step::Kill => {
                self.alive = false;
                self.holds.clear();
                self.disconnect()?;
            }
            Step::Start => {
                if !self.alive {
                    self.alive = true;
                    self.paused = false;
                    self.incarnation = self.next_incarnation;
                    self.next_incarnation += 1;
                    self.told.clear();
                }
            }
            Step::Ask(o) => {
                // A session asks only over a connection (a request without one fails at once).
                if self.connected {
                    self.ended.remove(&o);
                    self.told.remove(&o);
                    self.m.holds(o);
                    if self.alive {
                        self.holds.insert(o);
                    }
                    if self.answering() {
                        self.hear()?;
                    } else {
                        self.in_flight.push(self.now);
                    }
                }
            }
            Step::End(o) => {
                self.ended.insert(o);
                let acts = self.m.session_ended(o);
                self.run(acts)?;
            }
        }
        Ok(())
    }
}

/// Schedules per run: `PROPTEST_CASES` (default 1000, a few seconds).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Random schedules of the peer, the connection and the sessions: every promise holds
    /// after every step, and a final reconnection to a running peer tells every end owed.
    #[test]
    fn random_schedules_keep_the_promises(steps in proptest::collection::vec(step(), 1..80)) {
        let mut w = World::new();
        for s in &steps {
            w.apply(s)?;
        }
        // The end of the story: the peer runs and answers, the link comes back.
        w.apply(&Step::Start)?;
        w.apply(&Step::Resume)?;
        w.apply(&Step::Dial)?;
        w.apply(&Step::Advance(1))?;
        prop_assert!(w.connected);
        prop_assert_eq!(w.m.state(), LinkState::Up);
        let owed: Vec<_> = w.holds.intersection(&w.ended).collect();
        prop_assert!(owed.is_empty(), "session ends never told: {:?}", owed);
    }
}

fn story(steps: &[Step]) -> World {
    let mut w = World::new();
    for s in steps {
        if let Err(e) = w.apply(s) {
            panic!("{e} after {s:?} in {steps:?}");
        }
    }
    w
}

/// A pause shorter than three heartbeats is no event; a longer one is NOT_OPERATIONAL, then
/// OPERATIONAL when the peer answers again — never LOST.
#[test]
fn a_pause_is_not_operational_then_up_never_lost() {
    use Step::*;
    let w = story(&[Dial, Advance(50), Pause, Advance(25), Resume]);
    assert_eq!(w.m.state(), LinkState::Up);
    let mut w = story(&[Dial, Advance(50), Pause, Advance(45)]);
    assert_eq!(w.m.state(), LinkState::NotOperational);
    w.apply(&Resume).unwrap();
    assert_eq!(w.m.state(), LinkState::Up);
    assert_eq!(w.m.incarnation(), 1);
}

/// A restarted peer is LOST at the reconnection, then up afresh; the ends remembered for its
/// old start are forgotten (its new start holds nothing of ours).
#[test]
fn a_restart_is_lost_and_forgets_the_old_start() {
    use Step::*;
    let mut w = story(&[Dial, Ask(1), Ask(2), Break, End(1)]);
    assert_eq!(w.m.remembered(), &[1]);
    for s in [Kill, Start] {
        w.apply(&s).unwrap();
    }
    let acts = w.m.connected(w.incarnation, w.at());
    assert!(acts.contains(&Action::Report(LinkState::Lost)));
    assert!(!acts.iter().any(|a| matches!(a, Action::SendSessionEnd(_))));
    assert_eq!(w.m.state(), LinkState::Up);
}

/// Ends of sessions that ended while the link was down are told once, at the reconnection
/// to the same start.
#[test]
fn ends_remembered_while_down_are_told_once() {
    use Step::*;
    let w = story(&[Dial, Ask(1), Ask(2), Ask(3), Break, End(1), End(2), Dial, End(3), Break, Dial]);
    assert_eq!(w.told.get(&1), Some(&1));
    assert_eq!(w.told.get(&2), Some(&1));
    assert_eq!(w.told.get(&3), Some(&1));
    assert!(w.holds.is_empty());
}

/// A request sent to a peer that stopped answering fails when the link gives up on the
/// silence (150 heartbeats), not later; the link is lost 150 heartbeats after that.
#[test]
fn a_request_to_a_silent_peer_fails_at_the_give_up() {
    use Step::*;
    let mut w = story(&[Dial, Pause, Ask(4)]);
    assert_eq!(w.in_flight.len(), 1);
    w.apply(&Advance(10 * u64::from(GIVE_UP_PERIODS) + 20)).unwrap();
    assert!(w.in_flight.is_empty() && !w.connected);
    assert_eq!(w.m.state(), LinkState::NotOperational);
    w.apply(&Advance(10 * u64::from(GIVE_UP_PERIODS) + 20)).unwrap();
    w.apply(&Dial).unwrap();
    assert_eq!(w.m.state(), LinkState::Lost);
}

/// Found by the random schedules: a link lost to 150 heartbeats without a connection, that
/// comes back to the *same* start of the peer, still tells the ends remembered meanwhile
/// (the peer still holds what those sessions asked for). The ends used to be forgotten at
/// the loss.
#[test]
fn ends_survive_a_loss_to_silence_when_the_same_start_comes_back() {
    use Step::*;
    let w = story(&[Dial, Ask(5), Break, Advance(900), End(5), Advance(300), Pause, Advance(301), Dial]);
    assert_eq!(w.m.state(), LinkState::Lost);
    assert_eq!(w.m.remembered(), &[5]);
    let w = story(&[
        Dial,
        Ask(5),
        Break,
        Advance(900),
        End(5),
        Advance(300),
        Pause,
        Advance(301),
        Dial,
        Resume,
        Dial,
    ]);
    assert_eq!(w.m.state(), LinkState::Up);
    assert_eq!(w.told.get(&5), Some(&1));
    assert!(w.holds.is_empty());
}
