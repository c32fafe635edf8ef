//! Unit tests of the pager flows.

use super::*;
use std::io::Read as _;

/// A flow over a loopback stream, and the stream's other end (the "home").
fn flow() -> (Direct, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (home, _) = l.accept().unwrap();
    let d = Direct {
        s,
        remote: 1,
        tag: 0,
        out: Vec::new(),
        broken: false,
        pid: std::process::id(),
        regions: Vec::new(),
        late: false,
    };
    (d, home)
}

#[test]
fn a_forked_child_never_writes_on_its_parents_flow() {
    let (mut d, mut home) = flow();
    // As a child made by fork sees it: opened by another process.
    d.pid = d.pid.wrapping_add(1);
    let e = d.write_now(0, Source::Buf(&[7u8; 64])).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    assert_eq!(d.try_send(true).unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    let mut page = [0u8; 64];
    assert_eq!(d.read(0, &mut page).unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    // Not a byte reached the home: the parent's stream is untouched.
    home.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(home.read(&mut b).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}

/// The home's side: read one write frame and its payload, answer it (`Ack`, in step) after
/// `delay`.
fn ack_one(home: &mut std::net::TcpStream, delay: Duration) {
    use std::io::Write as _;
    let mut raw = [0u8; BULK_FRAME];
    home.read_exact(&mut raw).unwrap();
    let h = BulkFrame::parse(&raw).unwrap();
    assert_eq!(h.op, BulkOp::Write);
    let mut payload = vec![0u8; h.len as usize];
    home.read_exact(&mut payload).unwrap();
    std::thread::sleep(delay);
    let a = BulkFrame::from_header(&BulkHeader { op: BulkOp::Ack, ok: true, len: 0, ..h });
    home.write_all(a.as_bytes()).unwrap();
}

#[test]
fn a_flow_whose_answers_come_after_the_spin_stops_spinning_until_one_comes_within_it() {
    let (mut d, mut home) = flow();
    let spin = remora_config::Config::get().spin;
    let home = std::thread::spawn(move || {
        // Late (far past any spin), late again, then at once, three times.
        for delay in [spin * 4 + Duration::from_millis(20), spin * 4 + Duration::from_millis(20)] {
            ack_one(&mut home, delay);
        }
        for _ in 0..3 {
            ack_one(&mut home, Duration::ZERO);
        }
        home
    });
    assert!(!d.late, "a new flow spins for its first answer");
    d.write_now(0, Source::Buf(&[1u8; 64])).unwrap();
    assert!(d.late, "an answer that came after the spin marks the flow late");
    d.write_now(64, Source::Buf(&[2u8; 64])).unwrap();
    assert!(d.late, "a late answer waited for asleep keeps it late");
    // An answer prompt enough (the home acks at once; given ~10 ms of grace on a loaded
    // machine by the first, which may still wait asleep) clears it.
    let mut cleared = false;
    for k in 0..3u64 {
        d.write_now(128 + 64 * k, Source::Buf(&[3u8; 64])).unwrap();
        cleared |= !d.late;
    }
    assert!(cleared || spin < Duration::from_micros(20), "prompt answers never cleared the mark");
    drop(home.join().unwrap());
}
