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
        slept: 0,
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

/// An answer the home wrote before it was asked for (the next tag's), as a prompt home's
/// answer is there by the time the wait starts.
fn ack_ahead(home: &mut std::net::TcpStream, tag: u64) {
    use std::io::Write as _;
    let h = BulkHeader { op: BulkOp::Ack, tag, conn: 1, offset: 0, len: 0, ok: true };
    home.write_all(BulkFrame::from_header(&h).as_bytes()).unwrap();
}

#[test]
fn a_flow_whose_answers_come_after_the_spin_stops_spinning_until_one_comes_within_it() {
    let (mut d, mut home) = flow();
    let spin = remora_config::Config::get().spin;
    let late = spin * 4 + Duration::from_millis(20);
    let long = vec![1u8; Direct::LONG];
    let home_thread = std::thread::spawn(move || {
        for _ in 0..3 {
            ack_one(&mut home, late);
        }
        home
    });
    // A short transfer's late answer marks nothing: its waits always spin first.
    d.write_now(0, Source::Buf(&[1u8; 64])).unwrap();
    assert!(!d.late, "a short transfer's late answer marked the flow late");
    d.write_now(0, Source::Buf(&long)).unwrap();
    assert!(d.late, "a long transfer's answer that came after twice the spin marks the flow late");
    d.write_now(0, Source::Buf(&long)).unwrap();
    assert!(d.late, "a late answer waited for asleep keeps it late");
    let mut home = home_thread.join().unwrap();
    // The next answer is there before the wait starts: asleep at once or not, it is read
    // at once, and the mark goes.
    ack_ahead(&mut home, d.tag + 1);
    d.write_now(0, Source::Buf(&long)).unwrap();
    assert!(!d.late, "an answer there at once left the flow marked late");
}
