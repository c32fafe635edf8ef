//! Streams across hosts whose receiver keeps few receives posted: every send waits for a
//! receive the receiver posts again, told to the sender by the receiver's channel (issue
//! 15: a sender short of receives slept in slices of 100 µs, nothing woke it).

use super::*;

/// Receives the receiver keeps posted.
const FEW: usize = 1;
/// Messages of one round.
const MESSAGES: u32 = 300;
/// The receiver's work per message in the slow row (a busy loop: it takes a core): past
/// the millisecond after which the sender slept in slices of 100 µs before issue 15.
const WORK: Duration = Duration::from_micros(1500);

/// `n` 8-byte sends from `a` to `b`, `b` doing `work` (busy) after each receive before it
/// posts the receive again; messages per second from the first send to the last receive.
fn stream(a: &Side, b: &Side, n: u32, work: Duration) -> Result<f64, String> {
    a.prepare_send(8, None)?;
    let go = Barrier::new(2);
    std::thread::scope(|sc| -> Result<f64, String> {
        let rx = sc.spawn(|| -> Result<Instant, String> {
            go.wait();
            for _ in 0..n {
                let (addr, _) = b.vi.recv_wait(Some(Duration::from_secs(10))).map_err(e)?;
                let t = Instant::now();
                while t.elapsed() < work {
                    std::hint::spin_loop();
                }
                b.repost(addr)?;
            }
            Ok(Instant::now())
        });
        go.wait();
        let t = Instant::now();
        for _ in 0..n {
            a.send()?;
        }
        let end = rx.join().map_err(|_| "receiver panicked")??;
        intact(a, b)?;
        Ok(n as f64 / end.duration_since(t).as_secs_f64())
    })
}

/// The rows: 8-byte messages to a receiver that keeps [`FEW`] receives posted, at once or
/// after [`WORK`] each, beside the raw TCP 8-byte round trips per second (each message
/// waits for a receive posted again, told across the link) and the rate the work allows.
pub(super) fn rows(tp: &super::super::tcp::TcpPair, rounds: u32) -> Result<(), String> {
    let (a, b) = pair_with(&tp.a, &tp.b, true, FEW)?;
    let rate = |x: f64| format!("{x:.0} msg/s");
    for work in [Duration::ZERO, WORK] {
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..rounds.max(5) {
            raw.push(1e9 / (2.0 * super::super::tcp::raw_tcp(8, 200)?));
            ours.push(stream(&a, &b, MESSAGES, work)?);
        }
        let ratio = median_ratio(&ours, &raw);
        let (o, r) = (median(&mut ours), median(&mut raw));
        let what = if work.is_zero() {
            format!("vipl 8 B, {FEW} posted, across hosts")
        } else {
            format!("vipl 8 B, {FEW} posted, {} ms work", work.as_secs_f64() * 1e3)
        };
        let bound = if work.is_zero() {
            "reported (raw TCP round trips)".to_string()
        } else {
            format!("reported (work allows {:.0})", 1.0 / work.as_secs_f64())
        };
        row(&what, rate(o), rate(r), ratio, &bound);
    }
    Ok(())
}
