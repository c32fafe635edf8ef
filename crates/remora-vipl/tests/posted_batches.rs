//! A VI that only receives tells its peer on another host of its reposted receives in
//! batches (`link/told.rs`): a stream whose receiver reposts every receive keeps going
//! with every message intact and in order, and a batch left untold when the sender stopped
//! (the receiver reposted while its peer still knew enough receives) is told by the NIC's
//! watcher, so a sender that needs those receives later finds them within its grace; a
//! receiver that posts a window and takes it whole tells the posts that waited as the
//! window's messages come, not by the watcher; a receiver behind its sender (messages
//! landed and not taken) keeps to its batches while it catches up. An unreliable VI tells
//! every post at once (its sender drops a message after a short grace).

mod common;
use common::pair::{bytes, pair, Side, SLOTS};

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

#[test]
fn a_receiver_that_posts_a_window_and_takes_it_whole_tells_the_waiting_posts_itself() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = (Side::new(&h, 4), Side::new(&h, 8));
    // The receiver's watcher looks once a second: a count left to it would keep the
    // sender waiting past its grace (500 ms), and the ticks it makes during the windows
    // are few enough to count.
    s.nic.set_watch_period(std::time::Duration::from_secs(1));
    common::connect(&s.nic, &s.vi, &c.nic, &c.vi, b"window");
    // Windows of 32: the first 16 posts of each are told at once, the other 16 wait (the
    // peer still knows 16 unused); the sender needs them once it used the first 16.
    const W: usize = 32;
    const ROUNDS: usize = 30;
    let start = std::time::Instant::now();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for k in 0..W * ROUNDS {
                c.send(k, &bytes(SIZE, k), None, None);
            }
        });
        for r in 0..ROUNDS {
            for i in 0..W {
                s.post(i);
            }
            for i in 0..W {
                s.take(i, &bytes(SIZE, r * W + i), None, &format!("round {r}, message {i}"));
            }
        }
    });
    // Left to the watcher, every window's last 16 posts were told by it (with its 10 ms
    // period, the sender waiting up to 10 ms each round: 30 of 30; with 1 s, the sender's
    // grace ran out and the VI broke); told by the receiver as the first message of a
    // window is taken, the watcher sends only a count it caught before that: at most one
    // per tick, one or two ticks in the whole run.
    let took = start.elapsed();
    let late = s.vi.posts_told_late();
    eprintln!("{ROUNDS} windows of {W} in {took:?}, {late} told by the watcher");
    assert!(late <= 1 + took.as_secs(), "{late} of {ROUNDS} windows' posts told by the NIC's watcher");
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
    c.vi.disconnect().unwrap();
    s.vi.disconnect().unwrap();
}

/// A receiver that fell behind (every receive its sender knew used, the messages landed
/// and not taken yet) tells the receives it posts again in batches while it works through
/// them, not one by one: told each at once, every repost cost it a socket write (and the
/// sender's node a wake-up), which kept a receiver behind a 64 KiB stream behind for good
/// (issue 15). The sender, that waits for them, gets them all the same.
#[test]
fn a_receiver_behind_its_sender_tells_its_reposts_in_batches() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = pair(&h, b"behind");
    // Every receive used, the messages left to land before the receiver looks (a sleep,
    // not a bound: messages still in flight when it looks only make fewer reposts wait).
    for k in 0..SLOTS {
        c.send(k, &bytes(SIZE, k), None, None);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = s.vi.posts_told_alone();
    // The sender sends the next ones as the reposts are told; the receiver takes the 48
    // that waited, then those.
    let n = SLOTS * 3;
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for k in SLOTS..n {
                c.send(k, &bytes(SIZE, k), None, None);
            }
        });
        for k in 0..SLOTS {
            s.expect(k % SLOTS, &bytes(SIZE, k), None, &format!("message {k}, taken late"));
        }
        let told = s.vi.posts_told_alone() - before;
        // Told one by one (before): 48 times. In batches of 24: twice, and a few more
        // where the sender's messages land between the looks.
        assert!(told <= 12, "{told} counts told for the {SLOTS} receives posted again while behind");
        for k in SLOTS..n {
            s.expect(k % SLOTS, &bytes(SIZE, k), None, &format!("message {k}"));
        }
    });
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
    c.vi.disconnect().unwrap();
    s.vi.disconnect().unwrap();
}

#[test]
fn an_unreliable_vi_tells_its_posts_at_once() {
    let h = Harness::with_cluster(&[4, 8], true);
    let (s, c) = (Side::with(&h, 4, UNRELIABLE), Side::with(&h, 8, UNRELIABLE));
    for i in 0..SLOTS {
        s.post(i);
    }
    common::connect(&s.nic, &s.vi, &c.nic, &c.vi, b"unreliable");
    // Twenty taken and reposted while the sender still knows 28 receives: a reliable VI's
    // reposts would wait for the watcher (this idle), an unreliable one's go at once.
    for k in 0..20 {
        c.send(k, &bytes(SIZE, k), None, None);
        s.take(k, &bytes(SIZE, k), None, &format!("message {k}"));
    }
    for i in 0..20 {
        s.post(i);
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(s.vi.posts_told_late(), 0, "reposts of an unreliable VI left to the NIC's watcher");
    for k in 20..20 + SLOTS {
        c.send(k, &bytes(SIZE, k), None, None);
    }
    for k in 20..20 + SLOTS {
        s.take(k % SLOTS, &bytes(SIZE, k), None, &format!("message {k} after the reposts"));
    }
    assert_eq!((s.vi.state(), c.vi.state()), (ViState::Connected, ViState::Connected));
    c.vi.disconnect().unwrap();
    s.vi.disconnect().unwrap();
}
