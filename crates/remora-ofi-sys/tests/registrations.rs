//! When registrations close: one an operation uses is held until the provider can no longer
//! touch it (its completion, or the endpoint's close), and no longer. Skips with a message
//! where libfabric is absent.

use remora_ofi_sys::{Access, Endpoint, Region, Remote};
use remora_sys::{AsFd, Mapping, Memfd};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn mapping(len: usize) -> Arc<Mapping> {
    let fd = Memfd::create("ofi-regs-test", len as u64).unwrap();
    Arc::new(Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap())
}

/// Two endpoints of the tcp provider on loopback, or `None` (said) where libfabric is absent.
fn two() -> Option<(Arc<Endpoint>, Arc<Endpoint>)> {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return None;
    }
    let open = || Endpoint::open("tcp;ofi_rxm", Some("127.0.0.1"), 8, 4096).unwrap();
    Some((open(), open()))
}

/// Drive both endpoints' progress until `a` has sent `b` a message, `b` received it and
/// `a` read the send's completion: the connection between them is made, and nothing of it
/// is in flight any more (the tests' `in_flight` counts start from 0). Returns `b`'s
/// address in `a`.
fn connect(a: &Endpoint, b: &Endpoint) -> u64 {
    let to = a.insert(&b.name().unwrap()).unwrap();
    let _ = b.insert(&a.name().unwrap()).unwrap();
    let t = Instant::now();
    let id = a.next_id();
    let (mut sent, mut done, mut got) = (false, false, false);
    while !(done && got) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no connection (sent: {sent}, completed: {done}, received: {got})"
        );
        if !sent {
            sent = a.send(to, b"hello", id).is_ok();
        }
        let mine = a.completions(Duration::from_millis(1)).unwrap().iter().any(|c| c.id == id);
        done |= sent && mine;
        got |= b.completions(Duration::from_millis(1)).unwrap().iter().any(|c| c.slot.is_some());
    }
    assert_eq!(a.in_flight(), 0, "the hello's completion was read");
    to
}

/// Post a write of `len` bytes of `local` to `at` from `a`, driving the progress of
/// `drive` while the queue is full; its id.
fn post_write(a: &Endpoint, drive: &[&Endpoint], local: &Arc<Region>, len: usize, at: Remote) -> u64 {
    let id = a.next_id();
    let t = Instant::now();
    while let Err(e) = a.write(local, 0, len, at, id) {
        assert!(e.is_full() && t.elapsed() < Duration::from_secs(10), "the write is posted: {e}");
        for ep in drive {
            let _ = ep.completions(Duration::from_millis(1));
        }
    }
    id
}

/// Drive `a` and `b` until `a`'s operation `id` completes, without error.
fn wait_done(a: &Endpoint, b: &Endpoint, id: u64) {
    let t = Instant::now();
    loop {
        assert!(t.elapsed() < Duration::from_secs(20), "the write never completed");
        let _ = b.completions(Duration::from_millis(1)).unwrap();
        if let Some(c) = a.completions(Duration::from_millis(1)).unwrap().into_iter().find(|c| c.id == id) {
            assert!(c.error.is_none(), "{c:?}");
            return;
        }
    }
}

/// An RMA write to a peer endpoint that no longer drives its progress (a peer stopped, or
/// its address removed under the operation): the write's completion never comes. The
/// endpoint kept the write's registration until that completion, and the registration
/// kept the endpoint, so neither was ever closed (a leak for the life of the process).
/// Now the registration is held until the endpoint is closed, and closed then; until
/// then, once the peer's address is removed, it is counted as stranded.
#[test]
fn a_registration_whose_operation_never_completes_is_closed_with_its_endpoint() {
    let Some((a, silent)) = two() else { return };
    let regs = a.registrations();
    let base = regs.open();
    let to = connect(&a, &silent);
    // Larger than the sockets' buffers: it cannot all leave before the peer reads.
    const N: usize = 64 << 20;
    let theirs = silent.register(&mapping(N), 0, N, Access::RemoteWrite).unwrap();
    let local = a.register(&mapping(N), 0, N, Access::Local).unwrap();
    assert_eq!(regs.open(), base + 1);
    let at = Remote { dest: to, addr: theirs.remote_addr(0), key: theirs.key() };
    let id = post_write(&a, &[&a], &local, N, at);
    // Its completion does not come: the peer endpoint never reads its queue now.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(500) {
        let done = a.completions(Duration::from_millis(20)).unwrap();
        assert!(done.iter().all(|c| c.id != id), "the write completed: {done:?}");
    }
    // The endpoint holds the write's registration, not its caller.
    drop(local);
    assert_eq!(regs.open(), base + 1, "a registration in use stays open");
    assert_eq!((a.in_flight(), a.stranded()), (1, 0));
    // The peer's address goes: the write is stranded, its registration still held.
    assert_eq!(a.remove(to), 1, "one operation in flight to the removed address");
    assert_eq!(a.remove(to), 0, "counted once");
    assert_eq!((a.in_flight(), a.stranded()), (1, 1));
    assert_eq!(regs.open(), base + 1, "a stranded registration stays open");
    drop(a);
    assert_eq!(regs.open(), 0, "the endpoint closed, its registrations are closed");
    drop((theirs, silent));
}

/// A registration an operation used is closed once that operation's completion is read
/// (its holder let go of it before); one its holder keeps outlives its endpoint (the
/// domain closes after it).
#[test]
fn a_registration_goes_after_its_completion_and_may_outlive_its_endpoint() {
    let Some((a, b)) = two() else { return };
    let (ra, rb) = (a.registrations(), b.registrations());
    let base = ra.open();
    let to = connect(&a, &b);
    let theirs = b.register(&mapping(1 << 16), 0, 1 << 16, Access::RemoteWrite).unwrap();
    let local = a.register(&mapping(1 << 16), 0, 1 << 16, Access::Local).unwrap();
    let at = Remote { dest: to, addr: theirs.remote_addr(0), key: theirs.key() };
    let id = post_write(&a, &[&a, &b], &local, 4096, at);
    drop(local);
    assert_eq!(ra.open(), base + 1, "held for the write");
    wait_done(&a, &b, id);
    assert_eq!(ra.open(), base, "the write's registration closed at its completion");
    drop(b);
    assert_eq!(rb.open(), 1, "the peer's registration outlives its endpoint");
    drop(theirs);
    assert_eq!(rb.open(), 0);
    drop(a);
    assert_eq!(ra.open(), 0);
}

/// An RMA's local region must be one of the endpoint's own (its key and descriptor belong to
/// its domain, which the operation holds open), and each operation in flight needs its own
/// id: a repeated one was let in, and replaced the first operation's hold on its
/// registration (closing it under the provider).
#[test]
fn an_rma_with_another_endpoints_region_or_a_repeated_id_is_refused() {
    let Some((a, b)) = two() else { return };
    let regs = a.registrations();
    let base = regs.open();
    let to = connect(&a, &b);
    let theirs = b.register(&mapping(1 << 16), 0, 1 << 16, Access::RemoteWrite).unwrap();
    let at = Remote { dest: to, addr: theirs.remote_addr(0), key: theirs.key() };
    let foreign = b.register(&mapping(4096), 0, 4096, Access::Local).unwrap();
    let e = a.write(&foreign, 0, 4096, at, a.next_id()).unwrap_err();
    assert!(e.code == 22 && e.what.contains("another endpoint"), "{e}");
    let e = a.read(&foreign, 0, 4096, at, a.next_id()).unwrap_err();
    assert!(e.code == 22 && e.what.contains("another endpoint"), "{e}");
    assert_eq!(a.in_flight(), 0);

    let first = a.register(&mapping(4096), 0, 4096, Access::Local).unwrap();
    let second = a.register(&mapping(4096), 0, 4096, Access::Local).unwrap();
    let id = post_write(&a, &[&a, &b], &first, 4096, at);
    let e = a.write(&second, 0, 4096, at, id).unwrap_err();
    assert_eq!(e.code, 17, "{e}");
    let e = a.send(to, b"x", id).unwrap_err();
    assert_eq!(e.code, 17, "{e}");
    let e = a.write(&second, 0, 4096, at, 1 << 62).unwrap_err();
    assert_eq!(e.code, 22, "a receive buffer's id: {e}");
    drop((first, second));
    assert_eq!(regs.open(), base + 1, "the first write's registration is still held");
    wait_done(&a, &b, id);
    assert_eq!((regs.open(), a.in_flight()), (base, 0), "released at its completion");
    drop((theirs, foreign));
}
