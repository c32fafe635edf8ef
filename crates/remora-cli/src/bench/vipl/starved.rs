//! Streams across hosts whose receiver keeps one receive posted and works a while after
//! each message: every send waits for the receive the receiver posts again, told to the
//! sender by the receiver's channel (issue 15: a sender short of receives slept in slices of
//! 100 µs, nothing woke it). Beside each, raw TCP between two threads shaped the same way: a
//! credit of one, the receiver doing the same work before it hands the credit back.

use super::*;

/// Receives the receiver keeps posted.
const FEW: usize = 1;
/// Messages of one round.
const MESSAGES: u32 = 300;
/// The receiver's work per message (a busy loop: it takes a core), short and long: both
/// past the 100 µs after which a sender short of receives sleeps until the posted count
/// lands; a missed wake would show as the sleep's 5 ms safety net, 25 times the short work.
const WORKS: [Duration; 2] = [Duration::from_micros(200), Duration::from_micros(1500)];

/// Keep this thread's core busy for `work`.
fn busy(work: Duration) {
    let t = Instant::now();
    while t.elapsed() < work {
        std::hint::spin_loop();
    }
}

/// `n` 8-byte sends from `a` to `b`, `b` doing `work` (busy) after each receive before it
/// posts the receive again; messages per second from the first send to the last repost.
fn stream(a: &Side, b: &Side, n: u32, work: Duration) -> Result<f64, String> {
    a.prepare_send(8, None)?;
    let took = timed_sends(a, b, n, || {
        let (addr, _) = b.vi.recv_wait(Some(Duration::from_secs(10))).map_err(e)?;
        busy(work);
        b.repost(addr)
    })?;
    Ok(n as f64 / took.as_secs_f64())
}

/// The reference of [`stream`]: `n` 8-byte messages over raw TCP on loopback between two
/// threads, with a credit of one. The receiver reads a message, does `work` (busy), then
/// writes a 1-byte credit; the sender waits for the credit before its next message.
/// Messages per second from the first send to the last credit written; the clock starts
/// once both threads run, on a connection that has carried one message and its credit.
fn raw_credit(n: u32, work: Duration) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let tx = std::net::TcpStream::connect(l.local_addr().map_err(e)?).map_err(e)?;
    let mut rx = l.accept().map_err(e)?.0;
    tx.set_nodelay(true).map_err(e)?;
    rx.set_nodelay(true).map_err(e)?;
    crate::bench::common::like_links(&tx);
    crate::bench::common::like_links(&rx);
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        // Nothing fails before the barrier; after it, an error on one side drops its end
        // of the connection and the other's read or write fails too.
        let receiver = sc.spawn(|| -> std::io::Result<Instant> {
            go.wait();
            let mut m = [0u8; 8];
            for _ in 0..=n {
                rx.read_exact(&mut m)?;
                busy(work);
                rx.write_all(b"c")?;
            }
            Ok(Instant::now())
        });
        go.wait();
        let send = |mut tx: std::net::TcpStream| -> Result<Instant, String> {
            let mut c = [0u8; 1];
            let mut t = Instant::now();
            for i in 0..=n {
                // The first message and credit warm the connection, before the clock.
                if i == 1 {
                    t = Instant::now();
                }
                tx.write_all(&u64::from(i).to_le_bytes()).map_err(e)?;
                tx.read_exact(&mut c).map_err(e)?;
            }
            Ok(t)
        };
        let t = send(tx);
        let end = receiver.join().map_err(|_| "raw receiver panicked")?.map_err(e)?;
        Ok(n as f64 / end.duration_since(t?).as_secs_f64())
    })
}

/// The rows: 8-byte messages to a receiver that keeps [`FEW`] receives posted and does
/// each of [`WORKS`] after every message, beside raw TCP with a credit of one and the same
/// work (each round runs the reference right before ours; the ratio is the median of the
/// rounds' own ratios). The work alone would allow `1 / work` messages a second.
pub(super) fn rows(tp: &super::super::tcp::TcpPair, rounds: u32) -> Result<(), String> {
    let (a, b) = pair_with(&tp.a, &tp.b, true, FEW)?;
    let rate = |x: f64| format!("{x:.0} msg/s");
    for work in WORKS {
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..rounds.max(5) {
            raw.push(raw_credit(MESSAGES, work)?);
            ours.push(stream(&a, &b, MESSAGES, work)?);
        }
        let ratio = median_ratio(&ours, &raw);
        let (o, r) = (median(&mut ours), median(&mut raw));
        let what = format!("vipl 8 B, {FEW} posted, {} µs work", work.as_micros());
        row(&what, rate(o), rate(r), ratio, "≥ 0.90 (raw TCP, same work)");
    }
    Ok(())
}
