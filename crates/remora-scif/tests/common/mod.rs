//! What the SCIF integration tests share: a node's library, connected pairs, clusters
//! over TCP.
#![allow(dead_code)] // each test binary uses its own part

use remora_scif::*;
use remora_testkit::Harness;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The library of node `node` of a test harness.
pub trait ScifOf {
    fn scif(&self, node: u32) -> Arc<Scif>;
}

impl ScifOf for Harness {
    fn scif(&self, node: u32) -> Arc<Scif> {
        Scif::with_config(self.config(node))
    }
}

/// A connected pair: (client on node `a`, server endpoint on node `b`).
pub fn pair(h: &Harness, a: u32, b: u32) -> (Endpoint, Endpoint) {
    let sb = h.scif(b);
    let l = Endpoint::open(&sb).unwrap();
    let port = l.bind(0).unwrap();
    assert!(port >= PORT_RSVD);
    l.listen(4).unwrap();
    let sa = h.scif(a);
    let c = Endpoint::open(&sa).unwrap();
    let t = std::thread::spawn(move || {
        let p = c.connect(PortId { node: b, port }).unwrap();
        assert_eq!(c.local_port().unwrap().port, p);
        c
    });
    let (s, peer) = l.accept(true).unwrap();
    let c = t.join().unwrap();
    assert_eq!(peer.node, a);
    assert_eq!(peer, c.local_port().unwrap());
    assert_eq!(c.peer().unwrap(), PortId { node: b, port });
    (c, s)
}

/// Nodes joined by a cluster file on loopback that forces TCP between them: the path
/// endpoints on two hosts take.
pub fn over_tcp(nodes: &[u32]) -> Harness {
    Harness::with_cluster(nodes, true)
}

/// Wait (at most 10 s) until node 4 of `h` sees node 8 (starting node 8's daemon first).
pub fn wait_for_link(h: &Harness) {
    assert!(h.scif(8).node_ids().unwrap().contains(&8));
    let t0 = Instant::now();
    while !h.scif(4).node_ids().unwrap().contains(&8) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the link between nodes 4 and 8 came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `rounds` 8-byte round trips from `c` to `s` and back, in order; then `big` bytes (more
/// than a ring's or a socket buffer's worth) both ways at once, intact.
pub fn exchange(c: &Endpoint, s: &Endpoint, rounds: u64, big: usize) {
    for i in 0..rounds {
        c.send(&i.to_le_bytes(), true).unwrap();
        let mut b = [0u8; 8];
        s.recv(&mut b, true).unwrap();
        assert_eq!(u64::from_le_bytes(b), i);
        s.send(&b, true).unwrap();
        c.recv(&mut b, true).unwrap();
        assert_eq!(u64::from_le_bytes(b), i);
    }
    let big: Vec<u8> = (0..big as u32).map(|i| (i % 251) as u8).collect();
    let (s2, big2) = (s.clone(), big.clone());
    let t = std::thread::spawn(move || {
        let mut got = vec![0u8; big2.len()];
        assert_eq!(s2.recv(&mut got, true).unwrap(), got.len());
        assert!(got == big2, "bytes intact and in order");
        s2.send(&big2, true).unwrap();
    });
    c.send(&big, true).unwrap();
    let mut back = vec![0u8; big.len()];
    assert_eq!(c.recv(&mut back, true).unwrap(), back.len());
    assert!(back == big, "bytes intact and in order on the way back");
    t.join().unwrap();
}

/// `c` sends its last words and closes: `s` receives them, then `ECONNRESET`, and its
/// descriptor reports hang-up.
pub fn last_words(c: &Endpoint, s: &Endpoint) {
    c.send(b"last words", true).unwrap();
    c.close().unwrap();
    let mut b = [0u8; 10];
    assert_eq!(s.recv(&mut b, true).unwrap(), 10);
    assert_eq!(&b, b"last words");
    assert_eq!(s.recv(&mut b, true).unwrap_err(), Error::Reset);
    let r = remora_sys::bell::wait(s.as_fd(), false, Some(Duration::from_secs(5))).unwrap();
    assert!(r.hung_up);
}

/// Page-aligned, private anonymous memory that lives for the rest of the test process.
pub fn anon(len: usize) -> UserRegion {
    let v = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
    UserRegion::from_static(&mut v[start..start + len])
}

/// What each call answered, in order, with when (since the test's reference instant).
pub type Seen = Vec<(Duration, &'static str, Result<()>)>;

/// One of each kind of call on connected endpoint `c`, whose window is at `local` and its
/// peer's at `remote`, added to `seen` (a receive that finds nothing answers `Ok` as
/// "recv", one that takes bytes received before as "recv bytes").
pub fn every_call(c: &Endpoint, local: u64, remote: u64, t0: Instant, seen: &mut Seen) {
    let sync = RmaFlags { sync: true, ..RmaFlags::default() };
    let mut b = [0u8; 8];
    let mut note = |what, r: Result<()>| seen.push((t0.elapsed(), what, r));
    match c.recv(&mut b, false) {
        Ok(n) if n > 0 => note("recv bytes", Ok(())),
        r => note("recv", r.map(|_| ())),
    }
    note("send", c.send(b"x", false).map(|_| ()));
    note("writeto", c.write_to(local, 4096, remote, sync));
    note("readfrom", c.read_from(local, 4096, remote, sync));
    note("vwriteto", c.vwrite_to(&[7u8; 64], remote, sync));
    note("vreadfrom", c.vread_from(&mut [0u8; 64], remote, sync));
    note("fence", c.fence_mark(FenceInit::SelfInit).and_then(|m| c.fence_wait(m)));
    note("register", c.register(anon(4096), 0, Prot::RW, false).map(|_| ()));
}

/// [`every_call`] every 20 ms for `secs` seconds from `t0`, added to `seen`.
pub fn every_call_for(c: &Endpoint, local: u64, remote: u64, t0: Instant, secs: u64, seen: &mut Seen) {
    while t0.elapsed() < Duration::from_secs(secs) {
        every_call(c, local, remote, t0, seen);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connected pair (client on node `a`, server on node `b`) with a window of a page on
/// each side, and every kind of call working on the client: the client, the server, the
/// client's window and the server's.
pub fn pair_with_windows(h: &Harness, a: u32, b: u32) -> (Endpoint, Endpoint, u64, u64) {
    let (c, s) = pair(h, a, b);
    let local = c.register(anon(4096), 0, Prot::RW, false).unwrap();
    let remote = s.register(anon(4096), 0, Prot::RW, false).unwrap();
    let mut seen = Seen::new();
    every_call(&c, local, remote, Instant::now(), &mut seen);
    let bad: Vec<_> = seen.iter().filter(|(_, _, r)| r.is_err()).collect();
    assert!(bad.is_empty(), "calls on a new connection: {bad:?}");
    (c, s, local, remote)
}

/// `seen` holds an ECONNRESET, and from the first on nothing else: the connection is lost
/// for good (no ENODEV, no success), save receives that take bytes received before.
pub fn reset_for_good(seen: &Seen) {
    let first = seen.iter().position(|(_, _, r)| matches!(r, Err(Error::Reset)));
    let first = first.unwrap_or_else(|| panic!("no ECONNRESET: {seen:?}"));
    let odd: Vec<_> = seen[first..]
        .iter()
        .filter(|(_, what, r)| *what != "recv bytes" && !matches!(r, Err(Error::Reset)))
        .collect();
    assert!(odd.is_empty(), "after the first ECONNRESET, at {:?}: {odd:?}", seen[first].0);
}
