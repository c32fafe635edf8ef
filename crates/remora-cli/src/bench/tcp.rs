//! Raw TCP references: ping-pongs and echoes on loopback and between namespace hosts, and
//! two nodes of this host joined over TCP.

use super::common::*;
use remora_sisci::Sisci;
use std::time::{Duration, Instant};

/// Nodes 4, 8, …, 4n of this host joined over TCP on loopback (as if on n hosts), in a
/// private runtime directory with its cluster file; daemons are started by the library on
/// first use and stopped when this is dropped.
pub(crate) struct TcpNodes {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) file: std::path::PathBuf,
    base: remora_client::Config,
    n: u32,
}

impl TcpNodes {
    pub(crate) fn new(n: u32) -> Result<TcpNodes, String> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("remora-bench-tcp-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(e)?;
        let mut text = "secret = \"remora-bench-secret-0123456789\"\nforce_tcp = true\n".to_string();
        for i in 1..=n {
            let port =
                std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(e)?.port();
            text += &format!("[[node]]\nid = {}\nhost = \"127.0.0.1\"\nport = {port}\n", 4 * i);
        }
        let file = dir.join("cluster.toml");
        std::fs::write(&file, text).map_err(e)?;
        let base = Sisci::initialize().map_err(e)?.config().clone();
        Ok(TcpNodes { dir, file, base, n })
    }

    /// The client configuration of node `node` of these.
    pub(crate) fn config(&self, node: u32) -> remora_client::Config {
        let mut c = self.base.clone();
        c.node = node;
        c.runtime_dir = self.dir.clone();
        c.cluster = Some(self.file.clone());
        c
    }

    /// The environment a program of node `node` needs (it may start the node's daemon).
    pub(crate) fn env(&self, node: u32) -> Vec<(String, String)> {
        vec![
            ("REMORA_RUNTIME_DIR".into(), self.dir.to_string_lossy().into_owned()),
            ("REMORA_NODE".into(), node.to_string()),
            ("REMORA_CLUSTER".into(), self.file.to_string_lossy().into_owned()),
        ]
    }
}

impl Drop for TcpNodes {
    fn drop(&mut self) {
        for n in 1..=self.n {
            if let Ok(s) = remora_client::Session::open_control(&self.config(4 * n)) {
                let _ = s.request(remora_proto::Request::Shutdown, &[]);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two nodes of this host joined over TCP on loopback (as if on two hosts), in a private
/// runtime directory; daemons are started by the library and stopped at the end.
pub(crate) struct TcpPair {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) a: Sisci,
    pub(crate) b: Sisci,
    _nodes: TcpNodes,
}

impl TcpPair {
    pub(crate) fn new() -> Result<TcpPair, String> {
        let nodes = TcpNodes::new(2)?;
        let (a, b) = (Sisci::with_config(nodes.config(4)), Sisci::with_config(nodes.config(8)));
        Ok(TcpPair { dir: nodes.dir.clone(), a, b, _nodes: nodes })
    }
}

/// Raw TCP ping-pong on loopback between two threads: median one-way time of `size`-byte
/// messages, and (for page-sized ones) the round trip.
pub(crate) fn raw_tcp(size: usize, rounds: u32) -> Result<f64, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let addr = l.local_addr().map_err(e)?;
    let echo = std::thread::spawn(move || echo_loop(l.accept()?.0, size, rounds));
    let out = ping_loop(std::net::TcpStream::connect(addr).map_err(e)?, size, rounds)?;
    echo.join().map_err(|_| "echo thread")?.map_err(e)?;
    Ok(out)
}

/// Echo `rounds` messages of `size` bytes back on `s`.
pub(crate) fn echo_loop(mut s: std::net::TcpStream, size: usize, rounds: u32) -> std::io::Result<()> {
    use std::io::{Read as _, Write as _};
    s.set_nodelay(true)?;
    like_links(&s);
    let mut buf = vec![0u8; size];
    for _ in 0..rounds {
        s.read_exact(&mut buf)?;
        s.write_all(&buf)?;
    }
    Ok(())
}

/// Send `rounds` messages of `size` bytes on `s`, each answered before the next: the median
/// one-way time in ns.
pub(crate) fn ping_loop(mut s: std::net::TcpStream, size: usize, rounds: u32) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    s.set_nodelay(true).map_err(e)?;
    like_links(&s);
    let mut buf = vec![0u8; size];
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&buf).map_err(e)?;
        s.read_exact(&mut buf).map_err(e)?;
        v.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    Ok(median(&mut v))
}

/// Raw TCP ping-pong on loopback between two processes' worth of threads that poll their
/// sockets without blocking, giving way between looks as the DSM ping-pong's pollers do
/// (`common::give_way`: a yield, or a short sleep beside CPU-bound work): median one-way
/// time of `size`-byte messages.
pub(crate) fn raw_tcp_polling(size: usize, rounds: u32) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    fn read_polling(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
        let mut got = 0;
        let t = Instant::now();
        while got < buf.len() {
            match s.read(&mut buf[got..]) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if t.elapsed() > Duration::from_secs(10) {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                    super::common::give_way();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let addr = l.local_addr().map_err(e)?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        like_links(&s);
        s.set_nonblocking(true)?;
        let mut buf = vec![0u8; size];
        super::common::fresh_looks();
        for _ in 0..rounds {
            read_polling(&mut s, &mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut s = std::net::TcpStream::connect(addr).map_err(e)?;
    s.set_nodelay(true).map_err(e)?;
    like_links(&s);
    s.set_nonblocking(true).map_err(e)?;
    let mut buf = vec![0u8; size];
    let mut v = Vec::new();
    super::common::fresh_looks();
    for _ in 0..rounds {
        let t = Instant::now();
        s.write_all(&buf).map_err(e)?;
        read_polling(&mut s, &mut buf).map_err(e)?;
        v.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    echo.join().map_err(|_| "echo thread")?.map_err(e)?;
    Ok(median(&mut v))
}

/// The echo half of the raw TCP reference across hosts: bind `bind`, print the port, echo
/// `rounds` messages of `size` bytes.
pub(crate) fn tcp_echo(bind: &str, size: usize, rounds: u32) -> Result<(), String> {
    use std::io::Write as _;
    let l = std::net::TcpListener::bind(bind).map_err(e)?;
    println!("{}", l.local_addr().map_err(e)?.port());
    std::io::stdout().flush().map_err(e)?;
    echo_loop(l.accept().map_err(e)?.0, size, rounds).map_err(e)
}

/// The ping half of the raw TCP reference across hosts: prints the median one-way in ns.
pub(crate) fn tcp_ping(to: &str, size: usize, rounds: u32) -> Result<(), String> {
    println!("{}", ping_loop(std::net::TcpStream::connect(to).map_err(e)?, size, rounds)?);
    Ok(())
}

/// One raw TCP transfer of `len` bytes between two threads on loopback: GB/s. A steady
/// stream, as the flows it is compared with are: both buffers are touched and the
/// connection carries one transfer of the same size before the clock starts, so the figure
/// is the stream's, not the page faults of a fresh receive buffer or a new connection's
/// slow start; the sender writes at most 1 MiB at a time (on loopback one `write` of many
/// megabytes is markedly slower than a stream of 1 MiB writes).
pub(crate) fn raw_tcp_bulk(len: usize) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    let mut buf = vec![0x11u8; len];
    let data = vec![0x3cu8; len];
    let secs = second_pass(
        move |s| s.read_exact(&mut buf),
        |s| data.chunks(1 << 20).try_for_each(|chunk| s.write_all(chunk)),
    )?;
    Ok(len as f64 / secs / 1e9)
}

/// Seconds of the second of two passes over one loopback TCP connection: each pass the
/// sender runs `send`, the receiver (a thread of its own) `recv`, then acknowledges with a
/// byte the sender waits for. The first pass warms the connection and the buffers.
fn second_pass(
    mut recv: impl FnMut(&mut std::net::TcpStream) -> std::io::Result<()> + Send + 'static,
    mut send: impl FnMut(&mut std::net::TcpStream) -> std::io::Result<()>,
) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(e)?;
    let addr = l.local_addr().map_err(e)?;
    let rx = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        like_links(&s);
        for _ in 0..2 {
            recv(&mut s)?;
            s.write_all(b"k")?;
        }
        Ok(())
    });
    let mut s = std::net::TcpStream::connect(addr).map_err(e)?;
    like_links(&s);
    let mut k = [0u8; 1];
    let mut pass = |s: &mut std::net::TcpStream| -> Result<(), String> {
        send(s).map_err(e)?;
        s.read_exact(&mut k).map_err(e)
    };
    pass(&mut s)?;
    let t = Instant::now();
    pass(&mut s)?;
    let secs = t.elapsed().as_secs_f64();
    rx.join().map_err(|_| "receiver")?.map_err(e)?;
    Ok(secs)
}

/// A raw TCP stream of `n` messages of `size` bytes between two threads on loopback, shaped
/// as a message-passing program moves them: GB/s. Each message is one `write_all` of one of
/// three sources in turn and one `read_exact` into slot `i % slots` of the receiver's buffer
/// (`slots` 1: every message into the same place), as VIPL's streams use three send sources
/// and a receive buffer per posted receive (or one RDMA target). Both buffers are touched
/// and the connection carries the whole stream once before the clock starts, as in
/// [`raw_tcp_bulk`].
pub(crate) fn raw_tcp_messages(size: usize, n: usize, slots: usize) -> Result<f64, String> {
    use std::io::{Read as _, Write as _};
    let slots = slots.max(1);
    let mut buf = vec![0x11u8; size * slots];
    let data = vec![0x3cu8; size * 3];
    let secs = second_pass(
        move |s| (0..n).try_for_each(|i| s.read_exact(&mut buf[(i % slots) * size..][..size])),
        |s| (0..n).try_for_each(|i| s.write_all(&data[(i % 3) * size..][..size])),
    )?;
    Ok((n * size) as f64 / secs / 1e9)
}
