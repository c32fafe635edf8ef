//! iperf3 beside the bulk rows of `remora bench hosts`: the TCP stream a network engineer
//! would measure between the same two hosts, one stream and four at once. Where iperf3 is
//! not installed the rows are left out with a note.
//!
//! What each side moves. iperf3 sends one buffer per stream (128 KiB, its default `-l`)
//! again and again, from cache, and refuses a block over 1 MiB. Four streams of it are set
//! beside four DMA queues moving what it moves: each queue writes its own 128 KiB piece of
//! the local segment into its own piece of the peer's, the same piece again and again, 16
//! times a post (a vector, so the post's round trip, some 7 µs, is spread over 2 MiB; one
//! 128 KiB post each time paid it every 128 KiB). That row has the target. In the same
//! rounds the four queues also write 16 MiB each, 64 MiB of segment memory through the
//! caches, a second row reported without a target: raw TCP with one thread a side moved
//! 5.8-7.6 GB/s cycling through 1 MiB but 3.2-4.9 GB/s through 64 MiB (remora-node's
//! `transport/tcp/bulk.rs`), so that ratio is the footprint's as much as the engine's; its
//! like-for-like reference is four raw TCP streams of 16 MiB each (the row beside it). In
//! the first quieter runs (2026-11-29) the cached pieces were no faster than the 16 MiB
//! (0.63-0.96 of iperf3 -P 4 beside 0.70-1.20): the engine's cost per 128 KiB chunk shows.
//! One stream is set beside one queue writing 16 MiB at a time, as before: that row met
//! (0.85-1.06) with the footprints unlike, so it was left as it is.
//!
//! iperf3 -P 4 alone swings 2.9–6.6 GB/s between runs minutes apart on the development VM,
//! so the two sides are measured alike in time: several rounds, each of iperf3 and of ours
//! back to back (which goes first alternates; of the four queues' two kinds, the cached
//! pieces go next to iperf3), the row's ratio the median of the rounds' ratios and its
//! figures each side's median, as the other noisy rows of the benches do.
//! Each side's round is one second of steady state after a warm-up that is not counted:
//! iperf3 `-t 1 -O 1` (new connections: the first second, slow start, is omitted), and
//! ours the same second of transfers after one transfer per queue (its connections are
//! warm, but idle while iperf3 ran). A second is what iperf3 counts at the least (`-t`
//! takes whole seconds); ours moves 1.2–3.6 GB in it on the VM, 70–210 transfers of 16 MiB
//! (or 600-1800 posts of 2 MiB), so a post's round trip and the end of the second (one
//! transfer late at most) weigh about 1 %. Before, ours was the few tens of milliseconds of
//! the rows beside raw TCP (2 transfers per queue), measured once between an iperf3 run
//! before all the rows and one after them.
//!
//! What the rounds do not remove: on a machine whose cores other work keeps busy, the
//! scheduler shares them out by thread, and ours runs more threads (a worker per queue and
//! a reader per lane in each daemon) than iperf3's one a side, so loaded runs favour ours
//! (six runs of 2026-11-28 with two cores busy elsewhere: iperf3 -P 4's medians 1.3–2.7
//! GB/s, about its own one stream; the queues' 16 MiB 2.0–3.6). Quote quiet runs for these
//! rows: in those iperf3 -P 4 read 5.0–6.3 GB/s in most rounds (now and then 1.2–3.1 in a
//! round), the queues' 16 MiB 3.3–3.9 (0.59–0.62 of it).
//!
//! The parent keeps iperf3's server on host 2 for the run ([`Server`]); the measuring
//! process on host 1 runs the client between its own rounds ([`Reference`]).

use std::process::{Child, Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Each side's figures, round by round: ours (GB/s, or several kinds of ours in a `T`),
/// then iperf3's (GB/s).
pub(crate) type Figures<T = f64> = (Vec<T>, Vec<f64>);

/// The two hosts iperf3 runs between (`bench hosts`' namespace or loopback hosts).
pub(crate) trait Hosts {
    /// `program` as a process of host `k` (1 or 2).
    fn command(&self, k: usize, program: &str) -> Command;
    /// The address of host `k`.
    fn addr(&self, k: usize) -> String;
}

/// Rounds of each side at most (fewer when the bench is asked for fewer samples).
pub(crate) const ROUNDS: u32 = 5;

/// The seconds each side's round counts (iperf3's `-t`; its `-O` omits as many before).
const SECONDS: u64 = 1;

/// What is printed where iperf3 is missing or fails.
const NOTE: &str =
    "(iperf3 unavailable, or it failed or outran its time: apt-get install iperf3 for the iperf3 reference)";

/// iperf3's server on host 2, kept by the parent for the whole run (killed when dropped).
pub(crate) struct Server(Option<(Child, String)>);

impl Server {
    /// Start it on a port free now (nothing when iperf3 is missing).
    pub(crate) fn start(h: &dyn Hosts) -> Server {
        // The namespace hosts have ports of their own; one free here is almost surely free
        // there too (if not, the server exits and the client's failure notes it).
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
        let Ok(port) = port else { return Server(None) };
        let child = h
            .command(2, "iperf3")
            .args(["-s", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        Server(child.ok().map(|c| (c, format!("{}:{port}", h.addr(2)))))
    }

    /// Where the client finds it (`address:port`), or `-` when there is none: the argument
    /// [`Reference::new`] takes.
    pub(crate) fn arg(&self) -> String {
        self.0.as_ref().map_or_else(|| "-".into(), |(_, at)| at.clone())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some((child, _)) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// iperf3's client on this host, to the server the parent keeps; notes once that it is
/// unavailable.
pub(crate) struct Reference {
    /// The server's address and port; `None` once iperf3 is known unavailable.
    to: Option<(String, String)>,
    noted: bool,
}

impl Reference {
    /// From [`Server::arg`]'s text.
    pub(crate) fn new(arg: &str) -> Reference {
        let to = arg.rsplit_once(':').map(|(a, p)| (a.to_string(), p.to_string()));
        Reference { to, noted: false }
    }

    /// `n` rounds of `ours` (its figures: GB/s, one or several) beside iperf3 with `streams`
    /// streams: each side's figures, round by round (see [`rounds`]); `None`, with the note
    /// printed the first time, when iperf3 is unavailable.
    pub(crate) fn rounds<T>(
        &mut self,
        n: u32,
        streams: u32,
        ours: impl FnMut(u32) -> Result<T, String>,
    ) -> Result<Option<Figures<T>>, String> {
        let got = match &self.to {
            Some(to) => rounds(n, ours, || stream(to, streams).map(|b| b / 1e9))?,
            None => None,
        };
        if got.is_none() {
            self.to = None;
            if !self.noted {
                println!("{NOTE}");
                self.noted = true;
            }
        }
        Ok(got)
    }
}

/// The rounds' figures under their row, in order (the reference's swing shows in them).
pub(crate) fn print_rounds((ours, theirs): &Figures) {
    let list = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ");
    println!("  (rounds, GB/s: ours {}; iperf3 {})", list(ours), list(theirs));
}

/// iperf3's TCP bandwidth to the server at `to` with `streams` streams at once, in bytes
/// per second (what the receiver got in the counted second); `None` when iperf3 is missing
/// or fails.
fn stream((addr, port): &(String, String), streams: u32) -> Option<f64> {
    let (p, t) = (streams.to_string(), SECONDS.to_string());
    let mut args =
        vec!["-c", addr, "-p", port, "-t", &t, "-O", &t, "-P", &p, "-J", "--connect-timeout", "2000"];
    // The congestion control Remora's links run here (`common::links_congestion`).
    if let Some(cc) = super::common::links_congestion() {
        args.extend(["-C", cc]);
    }
    // The server listens within a moment of its start, and takes the next test a moment
    // after the last: the client is tried again until it does.
    for _ in 0..20 {
        let mut client = Command::new("iperf3");
        client.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        match output_within(client, Duration::from_secs(2 * SECONDS + 8)) {
            Some((true, out)) => return received(&out),
            Some((false, _)) => std::thread::sleep(Duration::from_millis(100)),
            None => return None,
        }
    }
    None
}

/// Run `cmd` (its stdout piped) for at most `limit`: whether it succeeded, and what it
/// wrote; `None` when it could not start or outran the limit (then it is killed: a wedged
/// server or data connection never holds the bench).
fn output_within(mut cmd: Command, limit: Duration) -> Option<(bool, Vec<u8>)> {
    use std::io::Read;
    let mut child = cmd.spawn().ok()?;
    // Read while it runs: a report larger than the pipe's buffer must not stall it.
    let Some(mut pipe) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = pipe.read_to_end(&mut out);
        out
    });
    let status = remora_netns::wait_until(&mut child, Instant::now() + limit);
    let out = reader.join().unwrap_or_default();
    status.map(|s| (s.success(), out))
}

/// The receiver's bits per second in iperf3's JSON report, as bytes per second.
fn received(json: &[u8]) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let bits = v.get("end")?.get("sum_received")?.get("bits_per_second")?.as_f64()?;
    (bits > 0.0).then_some(bits / 8.0)
}

/// `n` rounds, each of `ours` and `theirs` back to back, iperf3 first in even rounds and
/// ours first in odd ones (a drift during a round favours neither side; `ours` is told the
/// round): each side's figures, round by round; `None` as soon as `theirs` fails.
pub(crate) fn rounds<T>(
    n: u32,
    mut ours: impl FnMut(u32) -> Result<T, String>,
    mut theirs: impl FnMut() -> Option<f64>,
) -> Result<Option<Figures<T>>, String> {
    let (mut o, mut t) = (vec![], vec![]);
    for r in 0..n {
        let (x, y) = if r % 2 == 0 {
            let Some(y) = theirs() else { return Ok(None) };
            (ours(r)?, y)
        } else {
            let x = ours(r)?;
            let Some(y) = theirs() else { return Ok(None) };
            (x, y)
        };
        o.push(x);
        t.push(y);
    }
    Ok(Some((o, t)))
}

/// One second of ours in steady state: `threads` threads each make one call of `f(k)` (it
/// moves `bytes`) untimed, the warm-up, then all repeat it until a second has passed since
/// they all were warm. The aggregate GB/s of the timed calls, over the time until the last
/// one ended.
pub(crate) fn steady(
    threads: usize,
    bytes: u64,
    f: impl Fn(usize) -> Result<(), String> + Sync,
) -> Result<f64, String> {
    let (f, warm) = (&f, &Barrier::new(threads + 1));
    let dur = Duration::from_secs(SECONDS);
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                sc.spawn(move || -> Result<u64, String> {
                    // A warm-up that panics still reaches the barrier (the others wait there).
                    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(k)))
                        .unwrap_or_else(|_| Err("transfer thread panicked".into()));
                    warm.wait();
                    first?;
                    let (t, mut calls) = (Instant::now(), 0u64);
                    while t.elapsed() < dur {
                        f(k)?;
                        calls += 1;
                    }
                    Ok(calls)
                })
            })
            .collect();
        warm.wait();
        let t = Instant::now();
        let mut calls = 0;
        for h in hs {
            calls += h.join().map_err(|_| "transfer thread panicked".to_string())??;
        }
        Ok((calls * bytes) as f64 / t.elapsed().as_secs_f64() / 1e9)
    })
}

#[cfg(test)]
mod tests {
    use super::super::common::{median, median_ratio};

    /// A client that hangs is killed at its limit (the bench goes on without the row); one
    /// that ends gives its status and all it wrote.
    #[test]
    fn a_command_is_held_to_its_time() {
        use std::process::{Command, Stdio};
        use std::time::{Duration, Instant};
        let mut slow = Command::new("sleep");
        slow.arg("30").stdout(Stdio::piped());
        let t = Instant::now();
        assert_eq!(super::output_within(slow, Duration::from_millis(200)), None);
        assert!(t.elapsed() < Duration::from_secs(20), "the hung command was not killed");
        let mut echo = Command::new("sh");
        echo.args(["-c", "head -c 200000 /dev/zero; exit 3"]).stdout(Stdio::piped());
        let (ok, out) = super::output_within(echo, Duration::from_secs(20)).expect("sh ran");
        assert!(!ok, "exit 3 is a failure");
        assert_eq!(out.len(), 200_000, "a report past the pipe's buffer arrives whole");
    }

    #[test]
    fn the_receivers_rate_is_read_from_the_report() {
        let json = br#"{"start":{},"end":{"sum_sent":{"bits_per_second":9e9},"sum_received":{"bits_per_second":8e9}}}"#;
        assert_eq!(super::received(json), Some(1e9));
        assert_eq!(super::received(b"{\"error\":\"unable to connect\"}"), None);
        assert_eq!(super::received(b"not json"), None);
    }

    #[test]
    fn rounds_alternate_which_side_goes_first() {
        let order = std::cell::RefCell::new(String::new());
        let got = super::rounds(
            4,
            |r| {
                // Ours is told its round (it orders its own kinds by which side went first).
                order.borrow_mut().push(char::from(b'0' + r as u8));
                order.borrow_mut().push('o');
                Ok(order.borrow().len() as f64)
            },
            || {
                order.borrow_mut().push('t');
                Some(order.borrow().len() as f64)
            },
        );
        assert_eq!(order.borrow().as_str(), "t0o1ott2o3ot");
        // Each round's two figures stay paired, whichever went first.
        assert_eq!(got, Ok(Some((vec![3.0, 5.0, 9.0, 11.0], vec![1.0, 6.0, 7.0, 12.0]))));
    }

    #[test]
    fn a_failed_reference_ends_the_rounds_without_figures() {
        let mut n = 0;
        let got = super::rounds(
            5,
            |_| Ok(1.0),
            || {
                n += 1;
                (n < 3).then_some(1.0)
            },
        );
        assert_eq!(got, Ok(None));
        assert_eq!(n, 3, "no round after the failed one");
        let failed: Result<Option<super::Figures>, String> = Err("DMA failed".into());
        assert_eq!(super::rounds(3, |_| Err("DMA failed".into()), || Some(1.0)), failed);
    }

    #[test]
    fn the_rows_ratio_is_the_median_of_the_rounds_ratios() {
        // The reference swings between rounds as iperf3 -P 4 does on the VM (2.9–6.6 GB/s);
        // ours follows it. The ratio of the medians (4/4.5) would blame ours for the swing.
        let ours = [2.8, 6.0, 4.0, 3.0, 5.0];
        let theirs = [3.0, 6.5, 4.5, 3.1, 5.3];
        let r = median_ratio(&ours, &theirs);
        assert!((r - 2.8 / 3.0).abs() < 1e-12, "{r}");
        assert_eq!(median(&mut ours.to_vec()), 4.0);
        assert_eq!(median(&mut theirs.to_vec()), 4.5);
    }

    #[test]
    fn a_steady_second_counts_only_the_timed_calls() {
        let calls = std::sync::atomic::AtomicU64::new(0);
        let t = std::time::Instant::now();
        let gbs = super::steady(2, 1_000_000_000, |_| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(100));
            Ok(())
        })
        .expect("no call fails");
        let all = calls.load(std::sync::atomic::Ordering::Relaxed);
        assert!(t.elapsed() >= std::time::Duration::from_secs(1));
        // Two warm-up calls are not counted: at most (all - 2) GB over at least a second.
        assert!(all > 2 && gbs > 0.0 && gbs <= (all - 2) as f64, "{gbs} GB/s of {all} calls");
        assert_eq!(
            super::steady(2, 1, |k| if k == 1 { Err("lost".into()) } else { Ok(()) }),
            Err("lost".into())
        );
    }
}
