//! iperf3 beside the bulk rows of `remora bench hosts`: the TCP stream a network engineer
//! would measure between the same two hosts, one stream and four at once, set beside the
//! DMA of 16 MiB and the four DMA queues. iperf3 runs before and after the rows (their
//! mean is the reference, as for UCX's latency row); where it is not installed the rows
//! are left out with a note.

use std::process::{Command, Stdio};
use std::time::Duration;

/// The two hosts iperf3 runs between (`bench hosts`' namespace or loopback hosts).
pub(crate) trait Hosts {
    /// `program` as a process of host `k` (1 or 2).
    fn command(&self, k: usize, program: &str) -> Command;
    /// The address of host `k`.
    fn addr(&self, k: usize) -> String;
    /// How the rows name these hosts.
    fn label(&self) -> &'static str;
}

/// How long each iperf3 run streams.
const SECONDS: &str = "2";

/// iperf3's TCP bandwidth from host 1 to host 2 with `streams` streams at once, in bytes
/// per second (what the receiver got); `None` when iperf3 is missing or fails.
pub(crate) fn stream(h: &dyn Hosts, streams: u32) -> Option<f64> {
    // A port free on this host now (the namespace hosts have ports of their own).
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port().to_string();
    let mut server = h
        .command(2, "iperf3")
        .args(["-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = streams.to_string();
    let args = ["-c", &h.addr(2), "-p", &port, "-t", SECONDS, "-P", &p, "-J"];
    // The server listens within a moment; the client is tried again until it does.
    let mut out = None;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        match h.command(1, "iperf3").args(args).stderr(Stdio::null()).output() {
            Ok(o) if o.status.success() => {
                out = Some(o.stdout);
                break;
            }
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    received(&out?)
}

/// The receiver's bits per second in iperf3's JSON report, as bytes per second.
fn received(json: &[u8]) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let bits = v.get("end")?.get("sum_received")?.get("bits_per_second")?.as_f64()?;
    (bits > 0.0).then_some(bits / 8.0)
}

/// iperf3 with one stream and with four, before the rows.
pub(crate) struct Before(Option<(f64, f64)>);

impl Before {
    /// Measure now (nothing when iperf3 is missing).
    pub(crate) fn measure(h: &dyn Hosts) -> Before {
        Before(stream(h, 1).zip(stream(h, 4)))
    }

    /// Measure again, after the rows, and set the bulk rows beside the mean of both runs.
    pub(crate) fn rows(self, h: &dyn Hosts) {
        let after = self.0.and_then(|_| stream(h, 1).zip(stream(h, 4)));
        let (Some((one0, four0)), Some((one1, four1))) = (self.0, after) else {
            println!("(iperf3 unavailable: apt-get install iperf3 for the iperf3 reference)");
            return;
        };
        let l = h.label();
        let rows = super::verdict::rows();
        let ours = |start: &str| {
            let r = rows.iter().find(|r| r.name.starts_with(start))?;
            super::verdict::figure(&r.ours)
        };
        for (start, name, reference, streams) in [
            ("DMA 16 MiB write (", "DMA 16 MiB write vs iperf3", (one0 + one1) / 2.0, "1 stream"),
            (
                "4 DMA queues × 16 MiB at once",
                "4 DMA queues vs iperf3 -P 4",
                (four0 + four1) / 2.0,
                "4 streams",
            ),
        ] {
            let Some(o) = ours(start) else { continue };
            super::common::row(
                &format!("{name} ({l})"),
                format!("{:.2} GB/s", o / 1e9),
                format!("{:.2} GB/s", reference / 1e9),
                o / reference,
                &format!("≥ 0.80 (iperf3, {streams}, before and after, {l})"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_receivers_rate_is_read_from_the_report() {
        let json = br#"{"start":{},"end":{"sum_sent":{"bits_per_second":9e9},"sum_received":{"bits_per_second":8e9}}}"#;
        assert_eq!(super::received(json), Some(1e9));
        assert_eq!(super::received(b"{\"error\":\"unable to connect\"}"), None);
        assert_eq!(super::received(b"not json"), None);
    }
}
