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
