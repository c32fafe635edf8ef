//! A VI pair's own stream across hosts (two nodes joined over TCP): a short message after a
//! short one goes from the sending process straight to the receiving one, which reads it
//! itself. Short messages arrive while the receiver's node cannot run at all; short and long
//! messages, immediate data and RDMA writes mixed in any order land intact, in order, with
//! their exact statuses (an RDMA write's bytes before a later send's completion); and short
//! messages sent right before a disconnect all complete before the rest is flushed.

mod common;
use common::pair::{bytes, pair, Side, SLOT, SLOTS, T};

use remora_testkit::Harness;
use remora_vipl::layout::status;
use remora_vipl::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn daemon_pid(h: &Harness, node: u32) -> u32 {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("{other:?}"),
    }
}

/// A daemon stopped (`SIGSTOP`) until this is dropped.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        assert!(std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

/// While the server's node is stopped, short messages still go both ways: they travel
/// from process to process, not through the node's thread that serves the VI's channel.
/// (Before the pair's own stream every message waited for that thread: the server's first
/// wait here timed out.)
#[test]
fn short_messages_reach_the_receiving_process_while_its_node_is_stopped() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"stopped");
    let mut slot = 0;
    // A ping-pong from the client: the first message of each direction takes the channel
    // (the one before it was not short), the rest the stream.
    let mut round = |what: &str, s: &Side, c: &Side| {
        let (ping, pong) = (bytes(8, slot), bytes(8, slot + 1));
        c.send(slot, &ping, None, None);
        s.expect(slot % SLOTS, &ping, None, what);
        s.send(slot, &pong, Some(slot as u32), None);
        c.expect(slot % SLOTS, &pong, Some(slot as u32), what);
        slot += 1;
    };
    for _ in 0..2 {
        round("before the stop", &s, &c);
    }
    {
        let _stopped = Stopped::new(daemon_pid(&h, 4));
        // The client's reposts wait for the stopped node: fewer rounds than receives posted.
        for _ in 0..8 {
            round("while node 4 is stopped", &s, &c);
        }
    }
    for _ in 0..4 {
        round("after the stop", &s, &c);
    }
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
}

/// Short and long sends, immediate data, RDMA writes with and without immediate data, in
/// an order that switches between the stream and the channel every way, each message
/// taken as soon as it is sent and again with all of them in flight: every byte intact,
/// every status exact, and an RDMA write's bytes in place once a later send's completion is
/// taken.
#[test]
fn short_and_long_messages_in_any_order_land_intact_with_exact_statuses() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"mixed");
    // (length, immediate data, RDMA write into the server's spare slot): lengths around the
    // 40 bytes that ride inside a completion entry.
    let plan: Vec<(usize, Option<u32>, bool)> = vec![
        (8, None, false),
        (8, Some(1), false),
        (0, None, false),
        (40, Some(2), false),
        (41, None, false),
        (8, None, false),
        (65536, Some(3), false),
        (8, None, false),
        (8, None, false),
        (4096, None, true),
        (8, Some(4), false),
        (8, None, false),
        (16, Some(5), true),
        (8, None, false),
        (1, None, false),
        (40, None, false),
        (65536, None, false),
        (0, Some(6), false),
        (8, None, false),
    ];
    let spare = s.buf.seg(SLOTS * SLOT, 0);
    let mut next = 0usize;
    for all_in_flight in [false, true] {
        let mut expected = vec![];
        for (n, &(len, imm, rdma)) in plan.iter().enumerate() {
            let seed = n + 100 * usize::from(all_in_flight);
            let data = bytes(len, seed);
            if rdma {
                // An RDMA write without immediate data (no receive), then a short send: the
                // send's completion may come only once the write's bytes are in place.
                // Each write to a place of its own in the server's spare slot.
                let off = n * 4096;
                let target = DataSegment { addr: spare.addr + off as u64, handle: spare.handle, len: 0 };
                c.send(n, &data, None, Some(target));
                let note = bytes(8, seed + 50);
                c.send(n + 1, &note, imm, None);
                expected.push((note, imm, Some((off, data))));
            } else {
                c.send(n, &data, imm, None);
                expected.push((data, imm, None));
            }
            if !all_in_flight {
                let (data, imm, written) = expected.pop().unwrap();
                s.expect(next % SLOTS, &data, imm, &format!("message {n} taken at once"));
                if let Some((off, w)) = written {
                    assert!(
                        s.buf.get(SLOTS * SLOT + off, w.len()) == w,
                        "message {n}: the RDMA write before it"
                    );
                }
                next += 1;
            }
        }
        for (n, (data, imm, written)) in expected.into_iter().enumerate() {
            s.expect(next % SLOTS, &data, imm, &format!("message {n} of all in flight"));
            if let Some((off, w)) = written {
                assert!(
                    s.buf.get(SLOTS * SLOT + off, w.len()) == w,
                    "message {n} in flight: the RDMA write before it"
                );
            }
            next += 1;
        }
    }
    // An RDMA write with immediate data after short sends: it takes a receive, its bytes in
    // place when its completion is taken.
    for n in 0..3 {
        c.send(n, &bytes(8, n + 300), None, None);
    }
    let data = bytes(20000, 9);
    c.send(3, &data, Some(77), Some(DataSegment { addr: spare.addr, handle: spare.handle, len: 0 }));
    for n in 0..3 {
        s.expect(next % SLOTS, &bytes(8, n + 300), None, "short before the RDMA write");
        next += 1;
    }
    let (addr, _) = s.vi.recv_wait(T).unwrap();
    let d = s.nic.read_descriptor(addr, s.desc.handle).unwrap();
    assert_eq!(d.status, status::DONE | status::OP_REMOTE_RDMA_WRITE | status::IMMEDIATE);
    assert_eq!(d.immediate, 77);
    assert!(s.buf.get(SLOTS * SLOT, data.len()) == data, "the RDMA write with immediate data");
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
}

/// Short sends posted right before the sender disconnects all complete at the receiver,
/// intact and in order, before its other receives are flushed and its VI breaks with
/// `ConnLost`: the sender ends its stream after the last message, and the receiver reads
/// the stream to that end before it flushes.
#[test]
fn short_sends_right_before_a_disconnect_all_complete_before_the_flush() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"bye");
    let codes = Arc::new(Mutex::new(Vec::new()));
    let k = codes.clone();
    s.nic.set_error_handler(Some(Arc::new(move |e: &ErrorEvent| k.lock().unwrap().push(e.code))));
    // One message each way first: the client's next short sends take the stream.
    c.send(0, &bytes(8, 0), None, None);
    s.expect(0, &bytes(8, 0), None, "first");
    const N: usize = 20;
    for n in 1..=N {
        c.send(n, &bytes(8, n), Some(n as u32), None);
    }
    c.vi.disconnect().unwrap();
    for n in 1..=N {
        s.take(n, &bytes(8, n), Some(n as u32), &format!("short send {n} before the disconnect"));
    }
    // The rest of the receives: flushed, none of them with a message.
    let until = Instant::now() + Duration::from_secs(10);
    while s.vi.state() != ViState::Error && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(s.vi.state(), ViState::Error);
    let (addr, _) = s.vi.recv_wait(T).unwrap();
    let d = s.nic.read_descriptor(addr, s.desc.handle).unwrap();
    assert_eq!(d.status, status::DONE | status::OP_RECEIVE | status::DESC_FLUSHED_ERROR);
    let until = Instant::now() + Duration::from_secs(5);
    while codes.lock().unwrap().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(codes.lock().unwrap().first(), Some(&ErrorCode::ConnLost));
}
