//! A peer connection whose thread cannot be started (`VipConnectPeerRequest` fails with
//! `VIP_ERROR_RESOURCE`): a `VipConnectPeerWait` that began meanwhile wakes with
//! `VIP_INVALID_STATE` (no request), and the VI, idle, connects afterwards. Nothing makes
//! a spawn fail on demand, so the test makes it fail here (`fail_peer_spawn`).

use crate::testing::{two, T};
use crate::{Error, NetAddress, Vi, ViState};
use remora_testkit::Harness;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// A step to run before the peer connection's thread fails to start.
type Fault = Box<dyn FnOnce() + Send>;

/// The faults set, by VI id (tests run in parallel: each names its own VI).
static FAULTS: Mutex<Vec<(u64, Fault)>> = Mutex::new(Vec::new());

/// The fault set for VI `vi`'s next peer connection, taken (`spawn_peer`).
pub(super) fn peer_spawn_fault(vi: u64) -> Option<Fault> {
    let mut faults = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    let i = faults.iter().position(|(v, _)| *v == vi)?;
    Some(faults.remove(i).1)
}

/// Make the thread of `vi`'s next peer connection fail to start, once `before` ran (with
/// the request under way: the VI pending, its outcome awaited).
fn fail_peer_spawn(vi: &Vi, before: impl FnOnce() + Send + 'static) {
    FAULTS.lock().unwrap_or_else(|p| p.into_inner()).push((vi.inner.id, Box::new(before)));
}

#[test]
fn a_peer_connection_without_its_thread_wakes_its_waiter_and_leaves_the_vi_usable() {
    let h = Harness::with_cluster(&[4, 8], false);
    let t = two(&h, None);
    let (la, lb) = (NetAddress::new(4, b"peer-spawn-a"), NetAddress::new(8, b"peer-spawn-b"));
    // A thread of the program waits for the outcome once the request is under way.
    let (go, started) = mpsc::channel::<()>();
    let (tell, outcome) = mpsc::channel();
    let vi = t.server.clone();
    std::thread::spawn(move || {
        started.recv().unwrap();
        let _ = tell.send(vi.connect_peer_wait());
    });
    let server = t.server.clone();
    fail_peer_spawn(&t.server, move || {
        go.send(()).unwrap();
        // Until it sleeps in its wait (counted under the lock the failure takes to wake it).
        let asleep = Instant::now() + Duration::from_secs(10);
        while server.inner.peer_sleepers.load(Ordering::SeqCst) != 1 {
            assert!(Instant::now() < asleep, "the waiter never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let asked = t.server.connect_peer_request(&la, &lb, T);
    assert!(matches!(asked, Err(Error::Resource(_))), "the request: {asked:?}");
    let woke = outcome.recv_timeout(Duration::from_secs(10)).expect("the waiter was not woken");
    assert_eq!(woke.err(), Some(Error::InvalidState));
    assert_eq!(t.server.state(), ViState::Idle);
    assert_eq!(t.server.connect_peer_done().err(), Some(Error::InvalidState));
    // The VI connects afterwards (node 4 waits for node 8's request).
    t.server.connect_peer_request(&la, &lb, T).unwrap();
    t.client.connect_peer_request(&lb, &la, T).unwrap();
    t.server.connect_peer_wait().unwrap();
    t.client.connect_peer_wait().unwrap();
    assert_eq!((t.server.state(), t.client.state()), (ViState::Connected, ViState::Connected));
}
