//! `hosts`: Remora between two hosts, each path beside raw TCP between the same two
//! endpoints in the same run (see [`super::hosts_rows`] for the rows).
//!
//! The hosts are two network namespaces joined by veth and a bridge when this runs as root
//! with iproute2 (as between machines), else two nodes of this host joined over TCP on
//! loopback; every row says which. Two processes do the work, one on each host: the
//! *active* one (host 1) measures, the *peer* (host 2) answers. The peer serves raw TCP
//! connections that say what they want in a header (echo, sink, source), and a control
//! connection over which the active process asks it to echo interrupts, data interrupts
//! and SCIF messages, and to check or fill its segments. The active process prints its
//! rows as tab-separated lines, which the parent (this process) prints and keeps. Where
//! `ucx_perftest` is installed, the parent also sets the SCIF message row beside UCX's
//! tagged-message latency over TCP between the same two hosts (before and after the rows);
//! where iperf3 is, it keeps iperf3's server on host 2, and the active process sets two
//! bulk rows beside iperf3's streams in rounds of its own ([`super::iperf`]).

use super::common::*;
use super::tcp::TcpNodes;
use remora_sisci::{
    CreateFlags, DataInterrupt, Descriptor, Interrupt, LocalSegment, Map, MapFlags, RemoteDataInterrupt,
    RemoteInterrupt, Sisci,
};
use std::io::{BufRead as _, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

/// The peer's bulk segment (DMA target), its `SCIMemCpy` target and its small segment
/// (connect + map).
pub(crate) const SEG_BULK: u32 = 0x7e10_0001;
pub(crate) const SEG_COPY: u32 = 0x7e10_0002;
pub(crate) const SEG_SMALL: u32 = 0x7e10_0003;
pub(crate) const BULK: usize = 64 << 20;
pub(crate) const COPY: usize = 16 << 20;
/// Interrupt numbers: the peer's, and the active process's (where echoes come back).
pub(crate) const PEER_INT: u32 = 0x7e11;
pub(crate) const PEER_DATA: u32 = 0x7e12;
pub(crate) const ACTIVE_INT: u32 = 0x7e13;
pub(crate) const ACTIVE_DATA: u32 = 0x7e14;
/// A wait that ends a dead run.
pub(crate) const LONG: Option<Duration> = Some(Duration::from_secs(20));

/// Data connection modes (the first word of the header a connection starts with).
pub(crate) const D_ECHO: u64 = 1;
pub(crate) const D_SINK: u64 = 2;
pub(crate) const D_SOURCE: u64 = 3;
/// A data connection served as [`D_ECHO`], by a thread kept on one CPU (the first it may use).
pub(crate) const D_ECHO_ONE_CORE: u64 = 4;
/// A data connection served as [`D_ECHO`], by a thread kept on the last CPU it may use (the
/// measuring thread keeps to the first: the two-core row).
pub(crate) const D_ECHO_OTHER_CORE: u64 = 5;
/// Control operations (the first word of a control frame).
pub(crate) const OP_CHECK: u64 = 1;
pub(crate) const OP_FILL: u64 = 2;
pub(crate) const OP_INTR: u64 = 3;
pub(crate) const OP_DATA: u64 = 4;
pub(crate) const OP_SCIF: u64 = 5;
pub(crate) const OP_QUIT: u64 = 6;
pub(crate) const OP_RMA: u64 = 7;
pub(crate) const OP_RMA_CHECK: u64 = 8;

/// The pattern byte of transfer `i` of a stream whose pattern is `pat`: streams alternate
/// between two, so a path that skipped bytes equal to what is already there is caught.
pub(crate) fn pattern(pat: u8, i: u64) -> u8 {
    if i.is_multiple_of(2) {
        pat
    } else {
        !pat
    }
}

/// Hosts for a benchmark: namespace hosts when they can be made, else nodes joined over
/// TCP on loopback. Host `k` (from 1) is node `4 * k` either way.
pub(crate) enum Hosts {
    Netns(remora_netns::NetCluster),
    Loopback(TcpNodes),
}

impl Hosts {
    /// `n` hosts: namespace hosts when `netns` and root and iproute2 allow (else says why
    /// and falls back), nodes joined over TCP on loopback otherwise.
    pub(crate) fn start(n: usize, netns: bool) -> Result<Hosts, String> {
        if netns {
            match netns_hosts(n) {
                Ok(c) => return Ok(Hosts::Netns(c)),
                Err(why) => println!("(namespace hosts unavailable: {why}; loopback TCP instead)"),
            }
        }
        Ok(Hosts::Loopback(TcpNodes::new(n as u32)?))
    }

    /// Whether these are namespace hosts.
    pub(crate) fn is_netns(&self) -> bool {
        matches!(self, Hosts::Netns(_))
    }

    /// How the rows name these hosts.
    pub(crate) fn label(&self) -> &'static str {
        if self.is_netns() {
            "netns hosts"
        } else {
            "loopback TCP"
        }
    }

    /// The address of host `k`.
    pub(crate) fn addr(&self, k: usize) -> String {
        match self {
            Hosts::Netns(c) => c.addr(k).to_string(),
            Hosts::Loopback(_) => "127.0.0.1".into(),
        }
    }

    /// `program` as a process of host `k` (with the environment of its node).
    pub(crate) fn command(&self, k: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match self {
            Hosts::Netns(c) => c.command(k, program),
            Hosts::Loopback(t) => {
                let mut cmd = Command::new(program);
                cmd.envs(t.env(4 * k as u32));
                cmd
            }
        }
    }

    /// `remora bench hosts-child <args>` as a process of host `k`.
    pub(crate) fn child(&self, k: usize, args: &[&str]) -> Result<Command, String> {
        let mut cmd = self.command(k, std::env::current_exe().map_err(e)?);
        cmd.args(["bench", "hosts-child"]).args(args);
        Ok(cmd)
    }

    /// UCX's 8-byte tagged-message latency over TCP from host 1 to host 2 (`ucx_perftest
    /// -t tag_lat`, typical one-way, ns); `None` when it is not installed or fails.
    fn ucx_tcp(&self) -> Option<f64> {
        let dev = if self.is_netns() { "eth0" } else { "lo" };
        let side = |k| {
            let mut c = self.command(k, "ucx_perftest");
            c.env("UCX_TLS", "tcp").env("UCX_NET_DEVICES", dev);
            c
        };
        super::scif::ucx_tag_lat_with(side, &self.addr(2), 20_000)
    }
}

/// `remora bench hosts`: start two hosts (namespace hosts if `netns` and they can be
/// made), the peer on host 2 and the active process on host 1, and print (and keep) the
/// rows the latter measures (only the groups named in `only` when it is not empty: latency,
/// bulk, copy, connect, concurrent).
pub(crate) fn hosts(reps: u32, netns: bool, only: &[String]) -> Result<(), String> {
    let h = Hosts::start(2, netns)?;
    let (mut peer, line) = spawn_ready(h.child(2, &["peer", &h.addr(2)])?)?;
    // UCX's latency is set beside the SCIF row, which only the latency group measures.
    let latency = only.is_empty() || only.iter().any(|g| g == "latency");
    let ucx_before = if latency { h.ucx_tcp() } else { None };
    // iperf3's server for the bulk rows the measuring process sets beside it.
    let bulk = only.is_empty() || only.iter().any(|g| g == "bulk" || g == "concurrent");
    let iperf = bulk.then(|| super::iperf::Server::start(&h));
    let iperf_at = iperf.as_ref().map_or_else(|| "-".into(), super::iperf::Server::arg);
    let reps = reps.to_string();
    let rows = if only.is_empty() { "all".to_string() } else { only.join(",") };
    let (tport, sport) = line.split_once(' ').ok_or_else(|| format!("peer said {line:?}"))?;
    let to = format!("{}:{tport}", h.addr(2));
    let run = (|| -> Result<(), String> {
        let (mut active, lines, _) =
            spawn_lines(h.child(1, &["active", &to, sport, &reps, &rows, &iperf_at, h.label()])?)?;
        header();
        let relayed = relay(lines);
        let status = active.wait().map_err(e)?;
        relayed?;
        if !status.success() {
            return Err(format!("the measuring process on host 1 failed ({status})"));
        }
        Ok(())
    })();
    if run.is_err() {
        let _ = peer.kill();
    }
    let _ = peer.wait();
    drop(iperf);
    run?;
    if latency {
        ucx_row(&h, ucx_before)?;
    }
    Ok(())
}

/// The SCIF 8-byte one-way row beside UCX's tagged-message latency over TCP between the
/// same two hosts, measured before and after the rows (their mean).
fn ucx_row(h: &Hosts, before: Option<f64>) -> Result<(), String> {
    let (Some(before), Some(after)) = (before, h.ucx_tcp()) else {
        println!("(ucx_perftest over tcp unavailable: apt-get install ucx-utils for the UCX reference)");
        return Ok(());
    };
    let ucx = (before + after) / 2.0;
    let l = h.label();
    let rows = super::verdict::rows();
    // This run's row between the hosts (`bench all` has printed `bench scif`'s one-host row
    // of the same name before it, in nanoseconds).
    let scif = rows.iter().rev().find(|r| r.name == format!("scif_send→recv 8 B one-way ({l})"));
    let Some(ours) = scif.and_then(|r| r.ours.strip_suffix(" µs")?.parse::<f64>().ok()) else {
        return Err("no SCIF 8-byte row to set beside UCX".into());
    };
    row_us(
        &format!("scif 8 B one-way vs UCX tag_lat tcp ({l})"),
        ours * 1e3,
        ucx,
        &format!("≤ 1.30 (ucx_perftest over tcp before and after, {l})"),
    );
    Ok(())
}

/// Print the lines a measuring child prints; a row (`row\tname\tours\ttheirs\tratio\ttarget`)
/// is printed and kept as one of ours.
pub(crate) fn relay(lines: Lines) -> Result<(), String> {
    for line in lines.lines() {
        let line = line.map_err(e)?;
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["row", name, ours, theirs, ratio, target] => {
                row(name, ours.to_string(), theirs.to_string(), ratio.parse().unwrap_or(f64::NAN), target)
            }
            _ => println!("{line}"),
        }
    }
    Ok(())
}

/// A row, as a measuring child hands it to its parent (see [`relay`]).
pub(crate) fn emit(name: &str, ours: String, theirs: String, ratio: f64, target: &str) {
    println!("row\t{name}\t{ours}\t{theirs}\t{ratio}\t{target}");
    let _ = std::io::stdout().flush();
}

fn read_words<const N: usize>(s: &mut impl Read) -> std::io::Result<[u64; N]> {
    let mut b = vec![0u8; 8 * N];
    s.read_exact(&mut b)?;
    let mut w = [0u64; N];
    for (i, c) in b.chunks_exact(8).enumerate() {
        w[i] = u64::from_le_bytes(c.try_into().unwrap_or_default());
    }
    Ok(w)
}

pub(crate) fn write_words(s: &mut impl Write, w: &[u64]) -> std::io::Result<()> {
    let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    s.write_all(&b)
}

/// Serve one raw TCP data connection as its header (mode, length, count, pattern) says.
fn serve_data(mut s: TcpStream, [mode, len, iters, pat]: [u64; 4]) -> std::io::Result<()> {
    let (len, pat) = (len as usize, pat as u8);
    match mode {
        D_ECHO => super::tcp::echo_loop(s, len, iters as u32),
        D_ECHO_ONE_CORE => {
            let _pin = remora_sys::sync::pin_thread()?;
            super::tcp::echo_loop(s, len, iters as u32)
        }
        D_ECHO_OTHER_CORE => {
            let _pin = remora_sys::sync::pin_thread_last()?;
            super::tcp::echo_loop(s, len, iters as u32)
        }
        D_SINK => {
            let mut buf = vec![0u8; len];
            for i in 0..iters {
                s.read_exact(&mut buf)?;
                // The last transfer is checked: the sender learns of lost bytes.
                let good = i + 1 < iters || buf.iter().all(|&b| b == pattern(pat, i));
                s.write_all(if good { b"k" } else { b"x" })?;
            }
            Ok(())
        }
        D_SOURCE => {
            let bufs = [vec![pattern(pat, 0); len], vec![pattern(pat, 1); len]];
            let mut g = [0u8; 1];
            for i in 0..iters {
                s.read_exact(&mut g)?;
                for c in bufs[(i % 2) as usize].chunks(1 << 20) {
                    s.write_all(c)?;
                }
            }
            Ok(())
        }
        _ => Err(std::io::ErrorKind::InvalidInput.into()),
    }
}

/// What the peer holds.
struct Peer {
    dev: Descriptor,
    bulk: Map,
    copy: Map,
    intr: Interrupt,
    data: DataInterrupt,
    scif_listen: remora_scif::Endpoint,
    scif: Option<remora_scif::Endpoint>,
    /// Endpoints accepted for RMA, each with its registered window's memory.
    rma: Vec<(remora_scif::Endpoint, remora_scif::UserRegion)>,
    back: Option<(RemoteInterrupt, RemoteDataInterrupt)>,
}

fn segment(dev: &Descriptor, id: u32, size: usize) -> Result<(LocalSegment, Map), String> {
    let s = LocalSegment::create(dev, Some(id), size, CreateFlags::default()).map_err(e)?;
    let m = s.map(0, size, None, MapFlags::default()).map_err(e)?;
    s.prepare(0).map_err(e)?;
    s.set_available(0).map_err(e)?;
    Ok((s, m))
}

/// The peer: segments, interrupts, a SCIF listener and a TCP listener on `bind`; prints
/// `ready <tcp port> <scif port>`, takes the first connection as the control connection
/// and serves every later one as a data connection.
pub(crate) fn peer(bind: &str) -> Result<(), String> {
    let sci = Sisci::initialize().map_err(e)?;
    let dev = Descriptor::open(&sci).map_err(e)?;
    let (_b, bulk) = segment(&dev, SEG_BULK, BULK)?;
    let (_c, copy) = segment(&dev, SEG_COPY, COPY)?;
    let (_s, _small) = segment(&dev, SEG_SMALL, 1 << 20)?;
    let intr = Interrupt::create(&dev, 0, Some(PEER_INT), true, None).map_err(e)?;
    let data = DataInterrupt::create(&dev, 0, Some(PEER_DATA), None).map_err(e)?;
    let scif_listen = remora_scif::Endpoint::open(&remora_scif::Scif::new().map_err(e)?).map_err(e)?;
    let sport = scif_listen.bind(0).map_err(e)?;
    scif_listen.listen(8).map_err(e)?;
    let l = TcpListener::bind(format!("{bind}:0")).map_err(e)?;
    println!("ready {} {sport}", l.local_addr().map_err(e)?.port());
    std::io::stdout().flush().map_err(e)?;
    let (mut ctl, _) = l.accept().map_err(e)?;
    ctl.set_nodelay(true).map_err(e)?;
    std::thread::spawn(move || {
        // A lone round trip (the connect reference) is answered here, so no thread start
        // is in its time; longer exchanges get a thread each.
        for mut s in l.incoming().flatten() {
            like_links(&s);
            let Ok(h) = s.set_nodelay(true).and_then(|()| read_words::<4>(&mut s)) else { continue };
            if h[0] == D_ECHO && h[2] == 1 {
                let _ = serve_data(s, h);
            } else {
                std::thread::spawn(move || serve_data(s, h));
            }
        }
    });
    let mut p = Peer { dev, bulk, copy, intr, data, scif_listen, scif: None, rma: vec![], back: None };
    loop {
        let [op, a, b, c, d] = read_words::<5>(&mut ctl).map_err(e)?;
        let answer = p.serve(op, a, b, c, d)?;
        write_words(&mut ctl, &[answer]).map_err(e)?;
        if op == OP_QUIT {
            return Ok(());
        }
    }
}

impl Peer {
    fn map(&self, which: u64) -> &Map {
        if which == 0 {
            &self.bulk
        } else {
            &self.copy
        }
    }

    fn back(&mut self, node: u32) -> Result<&(RemoteInterrupt, RemoteDataInterrupt), String> {
        if self.back.is_none() {
            let i = RemoteInterrupt::connect(&self.dev, node, 0, ACTIVE_INT, LONG).map_err(e)?;
            let d = RemoteDataInterrupt::connect(&self.dev, node, 0, ACTIVE_DATA, LONG).map_err(e)?;
            self.back = Some((i, d));
        }
        self.back.as_ref().ok_or_else(|| "no interrupts back".into())
    }

    /// One control operation; its answer (1: the check held).
    fn serve(&mut self, op: u64, a: u64, b: u64, c: u64, d: u64) -> Result<u64, String> {
        match op {
            OP_CHECK => {
                let mut buf = vec![0u8; c as usize];
                self.map(a).read(b as usize, &mut buf).map_err(e)?;
                Ok(buf.iter().all(|&x| x == d as u8) as u64)
            }
            OP_FILL => {
                self.map(a).write(b as usize, &vec![d as u8; c as usize]).map_err(e)?;
                Ok(1)
            }
            OP_INTR => {
                let (back, intr) = (self.back(b as u32)?.0.clone(), self.intr.clone());
                // Served by a thread made for it, as raw TCP's echo is (`serve_data`): the
                // sample starts from the placement a new thread gets, not from the one the
                // rows before (the SCIF echo's receive spins) left this thread in. A
                // ping-pong of blocked waits keeps the placement it starts in: on a machine
                // whose idle cores halt, split over two cores every wake-up goes to a halted
                // one (24 µs one-way here against 9.5 on one core; raw TCP's 23 and 7.6).
                // `d`: the thread kept on the first CPU (1, the one-core row) or the last (2,
                // the two-core row) meanwhile.
                let echo = std::thread::spawn(move || -> Result<u64, String> {
                    let _held = match d {
                        0 => None,
                        1 => Some(remora_sys::sync::pin_thread().map_err(e)?),
                        _ => Some(remora_sys::sync::pin_thread_last().map_err(e)?),
                    };
                    for _ in 0..a {
                        intr.wait_with_spin(LONG, Duration::ZERO).map_err(e)?;
                        back.trigger().map_err(e)?;
                    }
                    Ok(a)
                });
                echo.join().map_err(|_| "the interrupt echo thread panicked".to_string())?
            }
            OP_DATA => {
                // On a thread made for it, as the plain interrupt's echo (`OP_INTR`).
                let (back, data) = (self.back(b as u32)?.1.clone(), self.data.clone());
                let echo = std::thread::spawn(move || -> Result<u64, String> {
                    let mut buf = [0u8; 64];
                    for _ in 0..a {
                        let n = data.wait(&mut buf, LONG).map_err(e)?;
                        back.trigger(&buf[..n]).map_err(e)?;
                    }
                    Ok(a)
                });
                echo.join().map_err(|_| "the data interrupt echo thread panicked".to_string())?
            }
            OP_SCIF => {
                if self.scif.is_none() {
                    self.scif = Some(self.scif_listen.accept(true).map_err(e)?.0);
                }
                let ep = self.scif.as_ref().ok_or("no SCIF endpoint")?;
                let mut m = [0u8; 8];
                for _ in 0..a {
                    if ep.recv(&mut m, true).map_err(e)? != 8 || ep.send(&m, true).map_err(e)? != 8 {
                        return Err("SCIF message cut short".into());
                    }
                }
                Ok(a)
            }
            OP_RMA => {
                for _ in 0..a {
                    let (ep, _) = self.scif_listen.accept(true).map_err(e)?;
                    let mem = super::scif::leak(b as usize);
                    ep.register(mem.sub(0, mem.len()), 0, remora_scif::Prot::RW, true).map_err(e)?;
                    self.rma.push((ep, mem));
                }
                Ok(a)
            }
            OP_RMA_CHECK => {
                let mem = &self.rma.get(a as usize).ok_or("no such RMA endpoint")?.1;
                let mut buf = vec![0u8; mem.len()];
                mem.read(0, &mut buf).map_err(e)?;
                Ok(buf.iter().all(|&x| x == b as u8) as u64)
            }
            OP_QUIT => Ok(0),
            _ => Err(format!("unknown control operation {op}")),
        }
    }
}

impl super::iperf::Hosts for Hosts {
    fn command(&self, k: usize, program: &str) -> Command {
        Hosts::command(self, k, program)
    }

    fn addr(&self, k: usize) -> String {
        Hosts::addr(self, k)
    }
}
