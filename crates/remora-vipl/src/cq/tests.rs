//! Waiting on a completion queue's doorbell with several threads: every completion reaches
//! the waiter that needs it at once (no ring taken by another thread that had nothing to
//! do with it, leaving the right one asleep to its slice's end), and a waiter that takes
//! in its own completion does not ring the bell for itself.

use crate::testing::{connect, nics, post_recv, post_send, reliable, Mem, T};
use crate::{CompletionQueue, Nic, Vi};
use remora_testkit::Harness;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// VIs connected in pairs, the server's receive queues all feeding `cq`.
struct Pairs {
    snic: Nic,
    cnic: Nic,
    cq: CompletionQueue,
    servers: Vec<Vi>,
    clients: Vec<Vi>,
    cbuf: Mem,
    cdesc: Mem,
}

/// Receives posted on each server VI (one message per round).
const POSTED: usize = 16;

fn pairs(h: &Harness, n: usize, disc: &str) -> Pairs {
    let (snic, cnic) = nics(h);
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let cq = CompletionQueue::create(&snic, 1024).unwrap();
    let (sbuf, sdesc) = (Mem::new(&snic, 64 * POSTED * n, sp), Mem::new(&snic, 64 * POSTED * n, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 64 * n, cp), Mem::new(&cnic, 64 * n, cp));
    let (mut servers, mut clients) = (Vec::new(), Vec::new());
    for i in 0..n {
        let server = Vi::create(&snic, reliable(sp, false), None, Some(&cq)).unwrap();
        let client = Vi::create(&cnic, reliable(cp, false), None, None).unwrap();
        for j in 0..POSTED {
            let at = 64 * (POSTED * i + j);
            post_recv(&snic, &server, &sdesc, at, &sbuf, at, 64);
        }
        connect(&snic, &server, &cnic, &client, format!("{disc}-{i}").as_bytes());
        servers.push(server);
        clients.push(client);
    }
    Pairs { snic, cnic, cq, servers, clients, cbuf, cdesc }
}

impl Pairs {
    /// The clients `which` send one 8-byte message each, back to back; when the last send
    /// completed.
    fn send(&self, which: impl IntoIterator<Item = usize>) -> Instant {
        let which: Vec<usize> = which.into_iter().collect();
        for &i in &which {
            let c = &self.clients[i];
            post_send(&self.cnic, c, &self.cdesc, 64 * i, &self.cbuf, 64 * i, &[i as u8; 8]);
        }
        for &i in &which {
            self.clients[i].send_wait(T).unwrap();
        }
        Instant::now()
    }
}

/// Rounds of each multi-waiter test, and how long after its completion a waiter must be
/// back: a ring taken by another thread left it asleep to the end of its slice
/// ([`crate::cq::SLICE`], 2 s in tests), where a loaded machine's late thread takes tens of
/// milliseconds.
const ROUNDS: usize = 8;
const PROMPT: Duration = Duration::from_millis(500);

/// Wait until `n` threads sleep on `cq`'s doorbell.
fn until_asleep(cq: &CompletionQueue, n: usize) {
    let end = Instant::now() + Duration::from_secs(20);
    while cq.asleep() != n {
        assert!(Instant::now() < end, "{} of {n} waiters asleep", cq.asleep());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Run `ROUNDS` rounds: `n` threads each wait once per round (`wait(i)`); once they sleep,
/// the clients `first(round)` send one message each, and when every thread of `first` is
/// back, the others. How many rounds saw every thread of `first` back within `PROMPT` of
/// the last of those messages.
fn prompt_rounds(
    p: &Pairs,
    n: usize,
    first: impl Fn(usize) -> Vec<usize>,
    wait: impl Fn(usize) + Sync,
) -> usize {
    let mut prompt = 0;
    for round in 0..ROUNDS {
        let first = first(round);
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            for i in 0..n {
                let (tx, wait) = (tx.clone(), &wait);
                s.spawn(move || {
                    wait(i);
                    tx.send((i, Instant::now())).unwrap();
                });
            }
            until_asleep(&p.cq, n);
            let last = p.send(first.iter().copied());
            let mut worst = Duration::ZERO;
            for _ in 0..first.len() {
                let (_, back) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
                worst = worst.max(back.saturating_duration_since(last));
            }
            if worst < PROMPT {
                prompt += 1;
            } else {
                eprintln!("round {round}: a waiter came back {worst:?} after its completion");
            }
            p.send((0..n).filter(|i| !first.contains(i)));
        });
    }
    prompt
}

/// Several `VipRecvWait`s, each on its own VI, whose receive queues feed one completion
/// queue (so each sleeps on its doorbell, which the peers ring); one message comes, to
/// one of them, and its waiter is back at once. Before, the thread that took the peer's
/// ring took in every VI's completion and rang again; a thread with nothing of its own
/// that took the ring again left the message's waiter asleep to the end of its slice.
/// Nor does a waiter ring the bell for the others once it takes its message in (each
/// message is the peer's ring, which woke them all).
#[test]
fn every_receive_waiter_on_a_completion_queue_wakes_for_its_own_message() {
    let h = Harness::with_cluster(&[4, 8], false);
    let n = 4;
    let p = pairs(&h, n, "cq-recv-waiters");
    let servers = &p.servers;
    let prompt = prompt_rounds(
        &p,
        n,
        |round| vec![round % n],
        |i| {
            servers[i].recv_wait(T).unwrap();
        },
    );
    assert!(prompt >= ROUNDS - 1, "only {prompt} of {ROUNDS} rounds had the receive waiter back at once");
    assert_eq!(p.cq.rung(), 0, "receive waiters rang the bell for each other");
}

/// Several `VipCQWait`s on one queue, as many completions: each waiter takes one, at once.
#[test]
fn every_completion_queue_waiter_takes_a_completion_at_once() {
    let h = Harness::with_cluster(&[4, 8], false);
    let n = 4;
    let p = pairs(&h, n, "cq-waiters");
    let prompt = prompt_rounds(
        &p,
        n,
        |_| (0..n).collect(),
        |_| {
            let (vi, recv) = p.cq.wait(T).unwrap();
            assert!(recv);
            vi.recv_done().unwrap();
        },
    );
    assert!(prompt >= ROUNDS - 1, "only {prompt} of {ROUNDS} rounds had every CQ waiter back at once");
}

/// A `VipRecvWait` asleep on its completion queue's doorbell, woken by the peer's ring:
/// taking its message in rings the bell for nobody (before, it rang it once more for
/// itself, so its next wait woke once for nothing). Each message is one ring, the peer's.
#[test]
fn a_receive_waiter_does_not_ring_its_completion_queue_for_itself() {
    let h = Harness::with_cluster(&[4, 8], false);
    let p = pairs(&h, 1, "cq-self-ring");
    for round in 0..4u32 {
        let before = p.cq.rings();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| p.servers[0].recv_wait(T).unwrap());
            until_asleep(&p.cq, 1);
            p.send([0]);
            waiter.join().unwrap();
        });
        assert_eq!(p.cq.rung(), 0, "round {round}: this process rang the bell");
        assert_eq!(p.cq.rings().wrapping_sub(before), 1, "round {round}: rings besides the peer's");
        // The queue's entry, taken so that it never fills.
        assert!(p.cq.done().is_ok());
    }
    let _ = &p.snic;
}

/// A `VipCQWait` asleep on a queue that a VI's sends feed: a send completes in this process
/// (no peer rings for it), and the thread that takes it in rings the bell for the waiter,
/// which is back at once.
#[test]
fn a_send_completion_rings_for_a_completion_queue_waiter() {
    let h = Harness::with_cluster(&[4, 8], false);
    let (snic, cnic) = nics(&h);
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let cq = CompletionQueue::create(&cnic, 16).unwrap();
    let server = Vi::create(&snic, reliable(sp, false), None, None).unwrap();
    let client = Vi::create(&cnic, reliable(cp, false), Some(&cq), None).unwrap();
    let (sbuf, sdesc) = (Mem::new(&snic, 64 * 4, sp), Mem::new(&snic, 64 * 4, sp));
    let (cbuf, cdesc) = (Mem::new(&cnic, 64, cp), Mem::new(&cnic, 64, cp));
    for j in 0..4 {
        post_recv(&snic, &server, &sdesc, 64 * j, &sbuf, 64 * j, 64);
    }
    connect(&snic, &server, &cnic, &client, b"cq-send-waiter");
    for round in 0..4 {
        let before = cq.rung();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let (vi, recv) = cq.wait(T).unwrap();
                assert!(!recv && vi.id() == client.id());
                vi.send_done().unwrap();
                Instant::now()
            });
            until_asleep(&cq, 1);
            let posted = Instant::now();
            post_send(&cnic, &client, &cdesc, 0, &cbuf, 0, &[round as u8; 8]);
            let late = waiter.join().unwrap().saturating_duration_since(posted);
            assert!(late < PROMPT, "round {round}: the waiter came back {late:?} after the send");
        });
        assert_eq!(cq.rung() - before, 1, "round {round}: rings for the waiter");
    }
}

/// Who rings the doorbell: a completion taken in rings it for the `VipCQWait`s other than
/// the taker, an error (`wake`) for every sleeper other than the caller. A `VipRecvWait`
/// is rung for errors only (the peer rings for its messages).
#[test]
fn completions_ring_for_other_completion_queue_waiters_and_errors_for_every_sleeper() {
    let h = Harness::with_cluster(&[4, 8], false);
    let (nic, _) = nics(&h);
    let cq = CompletionQueue::create(&nic, 64).unwrap();
    let elsewhere = |f: &(dyn Fn() + Sync)| std::thread::scope(|s| s.spawn(f).join().unwrap());
    let rung = |what: &(dyn Fn() + Sync)| {
        let before = cq.rung();
        what();
        cq.rung() - before
    };
    let (push, wake) = (|| cq.push(0, true, 0), || cq.wake());
    assert_eq!((rung(&push), rung(&wake)), (0, 0), "nobody sleeps");
    let w = cq.waiter(true);
    assert_eq!((rung(&push), rung(&wake)), (0, 0), "a VipCQWait rang for itself");
    assert_eq!((rung(&|| elsewhere(&push)), rung(&|| elsewhere(&wake))), (1, 1), "for a VipCQWait");
    drop(w);
    let w = cq.waiter(false);
    assert_eq!((rung(&push), rung(&wake)), (0, 0), "a VipRecvWait rang for itself");
    assert_eq!((rung(&|| elsewhere(&push)), rung(&|| elsewhere(&wake))), (0, 1), "for a VipRecvWait");
    drop(w);
}
