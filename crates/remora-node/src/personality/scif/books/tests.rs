//! Tests of the books: a connection's relay, its far end's record.

use super::*;

#[test]
fn only_the_far_node_reaches_a_connections_relay() {
    let null = || OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let mut b = Books::default();
    let (conn, _region, _fd, mut rx) = b.connect_out(7, null(), null()).unwrap();
    // A moment after the connect its far end is not recorded yet: news is taken.
    b.to_relay(conn, 12, RelayIn::Credit(1)).unwrap();
    assert!(matches!(rx.try_recv(), Ok(RelayIn::Credit(1))));
    b.set_far(conn, 8, 99);
    // Then another node's data, credit or close is refused and reaches nothing.
    assert_eq!(b.to_relay(conn, 12, RelayIn::Data(vec![1])).unwrap_err(), Error::NotConnected);
    assert_eq!(b.to_relay(conn, 12, RelayIn::PeerClosed).unwrap_err(), Error::NotConnected);
    assert!(rx.try_recv().is_err());
    b.to_relay(conn, 8, RelayIn::Data(vec![2])).unwrap();
    assert!(matches!(rx.try_recv(), Ok(RelayIn::Data(d)) if d == [2]));
}
