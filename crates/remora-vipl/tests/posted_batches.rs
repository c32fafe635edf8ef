//! A VI that only receives tells its peer on another host of its reposted receives in
//! batches (`link/told.rs`): a stream whose receiver reposts every receive keeps going
//! with every message intact and in order, and a batch left untold when the sender stopped
//! (the receiver reposted while its peer still knew enough receives) is told by the NIC's
//! watcher, so a sender that needs those receives later finds them within its grace.

mod common;
use common::pair::{bytes, pair, SLOTS};

use remora_testkit::Harness;
use remora_vipl::*;

const SIZE: usize = 4096;

#[test]
fn a_receiver_that_only_reposts_keeps_a_stream_going_and_its_untold_batch_is_told() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"batches");
    // A stream six times the receives posted, the receiver reposting each as it comes.
    let n = SLOTS * 6;
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for k in 0..n {
                c.send(k, &bytes(SIZE, k), None, None);
            }
        });
        for k in 0..n {
            s.expect(k % SLOTS, &bytes(SIZE, k), None, &format!("stream message {k}"));
        }
    });
    // Twenty taken and not reposted yet, then reposted while the sender is idle: the
    // sender still knows 28 receives, so these wait to be told.
    let taken = 20;
    for k in n..n + taken {
        c.send(k, &bytes(SIZE, k), None, None);
        s.take(k % SLOTS, &bytes(SIZE, k), None, &format!("message {k}"));
    }
    for i in 0..taken {
        s.post(i);
    }
    // All 48 back to back, none received meanwhile: the last 20 need the reposts told
    // (a sender that found none within its grace would break the VI).
    let m = n + taken;
    for k in m..m + SLOTS {
        c.send(k, &bytes(SIZE, k), None, None);
    }
    for k in m..m + SLOTS {
        s.take(k % SLOTS, &bytes(SIZE, k), None, &format!("message {k} after the reposts"));
    }
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
    c.vi.disconnect().unwrap();
    s.vi.disconnect().unwrap();
}
