//! `scale`: all-to-all traffic between 2, 4 and 8 nodes, aggregate bandwidth beside the
//! raw TCP aggregate of the same pattern between the same processes.
//!
//! One process per node (nodes joined over TCP on loopback, then, where namespaces can be
//! made, one namespace host per node). Each sends `mib` MiB in all, in 1 MiB transfers
//! spread evenly over the other nodes, one thread per destination: with Remora, DMA into
//! its own slot of each other node's segment, each transfer waited for; the reference, a
//! raw TCP connection to each other node, each transfer acknowledged by the receiver. The
//! parent starts every node's round at once and the round ends when every node has seen
//! all its transfers complete; the aggregate is all bytes over that time. Rounds of the two
//! kinds alternate after a warm-up round of each. The data is checked: every receiving
//! TCP connection checks its first transfer, and after the rounds every node checks each
//! slot of its segment holds its sender's bytes.

use super::common::*;
use super::hosts::{write_words, Hosts, LONG};
use remora_sisci::{
    CreateFlags, Descriptor, DmaFlags, DmaQueue, LocalSegment, MapFlags, RemoteSegment, Sisci,
};
use std::io::{BufRead as _, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Stdio};
use std::time::Instant;

const SEG: u32 = 0x7e20_0001;
const CHUNK: usize = 1 << 20;
const ROUNDS: usize = 7;

fn pat(node_k: u32) -> u8 {
    0x10 + node_k as u8
}

/// The node processes of one run; killed if still running when dropped.
struct Nodes(Vec<(Child, Lines, ChildStdin)>);

impl Nodes {
    fn tell(&mut self, what: &str) -> Result<(), String> {
        for (_, _, i) in &mut self.0 {
            writeln!(i, "{what}").map_err(e)?;
            i.flush().map_err(e)?;
        }
        Ok(())
    }

    /// Wait until every node has said `want`.
    fn expect(&mut self, want: &str) -> Result<(), String> {
        for (k, (_, o, _)) in self.0.iter_mut().enumerate() {
            let mut line = String::new();
            o.read_line(&mut line).map_err(e)?;
            if line.trim() != want {
                return Err(format!("node process {} said {line:?}, not {want:?}", k + 1));
            }
        }
        Ok(())
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // A process still running now is killed; every one is reaped.
        for (c, _, _) in &mut self.0 {
            remora_netns::wait_until(c, Instant::now());
        }
    }
}

pub(crate) fn scale(mib: u32) -> Result<(), String> {
    header();
    for netns in [false, true] {
        for n in [2usize, 4, 8] {
            let h = Hosts::start(n, netns)?;
            if netns && !h.is_netns() {
                return Ok(());
            }
            run(&h, n, mib)?;
        }
    }
    Ok(())
}

fn run(h: &Hosts, n: usize, mib: u32) -> Result<(), String> {
    let mut nodes = Nodes(Vec::new());
    let mut addrs = Vec::new();
    for k in 1..=n {
        let (ks, ns, ms, bind) = (k.to_string(), n.to_string(), mib.to_string(), h.addr(k));
        let mut cmd = h.child(k, &["scale-node", &ks, &ns, &ms, &bind])?;
        cmd.stdin(Stdio::piped());
        let (mut c, lines, port) = spawn_lines(cmd)?;
        let Some(stdin) = c.stdin.take() else {
            let _ = c.kill();
            let _ = c.wait();
            return Err("no stdin for a node process".into());
        };
        nodes.0.push((c, lines, stdin));
        addrs.push(format!("{bind}:{port}"));
    }
    nodes.tell(&addrs.join(","))?;
    nodes.expect("connected")?;
    let per = (mib as usize / (n - 1)).max(2);
    let bytes = (n * (n - 1) * per * CHUNK) as f64;
    let (mut ours, mut raw) = (vec![], vec![]);
    for r in 0..=ROUNDS {
        for kind in if r % 2 == 0 { ["tcp", "dma"] } else { ["dma", "tcp"] } {
            let t = Instant::now();
            nodes.tell(kind)?;
            nodes.expect("done")?;
            let gb = bytes / t.elapsed().as_secs_f64() / 1e9;
            if r > 0 {
                if kind == "dma" { &mut ours } else { &mut raw }.push(gb);
            }
        }
    }
    nodes.tell("check")?;
    nodes.expect("ok")?;
    nodes.tell("quit")?;
    for (c, _, _) in &mut nodes.0 {
        let _ = c.wait();
    }
    let ratio = median_ratio(&ours, &raw);
    let (o, t) = (median(&mut ours), median(&mut raw));
    let l = h.label();
    row(
        &format!("all-to-all DMA, {n} nodes ({l})"),
        format!("{o:.2} GB/s"),
        format!("{t:.2} GB/s"),
        ratio,
        &format!("≥ 0.80 (raw TCP all-to-all, {l})"),
    );
    Ok(())
}

/// Receive 1 MiB transfers from node `from` on `s` until it closes, acknowledging each;
/// the first is checked.
fn receive(mut s: TcpStream, from: u32) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut first = true;
    loop {
        match s.read_exact(&mut buf) {
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            r => r?,
        }
        if first && buf.iter().any(|&b| b != pat(from)) {
            s.write_all(b"x")?;
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        first = false;
        s.write_all(b"k")?;
    }
}

/// One node of the scaling run: node `4k` of `n`; `bind` is its host's address.
pub(crate) fn node(k: u32, n: u32, mib: u32, bind: &str) -> Result<(), String> {
    let sci = Sisci::initialize().map_err(e)?;
    let dev = Descriptor::open(&sci).map_err(e)?;
    let seg = LocalSegment::create(&dev, Some(SEG), n as usize * CHUNK, CreateFlags::default()).map_err(e)?;
    let own = seg.map(0, n as usize * CHUNK, None, MapFlags::default()).map_err(e)?;
    seg.prepare(0).map_err(e)?;
    seg.set_available(0).map_err(e)?;
    let src = LocalSegment::create(&dev, None, CHUNK, CreateFlags::default()).map_err(e)?;
    src.map(0, CHUNK, None, MapFlags::default()).map_err(e)?.write(0, &vec![pat(k); CHUNK]).map_err(e)?;
    src.prepare(0).map_err(e)?;
    let l = TcpListener::bind(format!("{bind}:0")).map_err(e)?;
    println!("ready {}", l.local_addr().map_err(e)?.port());
    std::io::stdout().flush().map_err(e)?;
    let mut input = std::io::stdin().lock();
    let mut line = String::new();
    input.read_line(&mut line).map_err(e)?;
    let addrs: Vec<String> = line.trim().split(',').map(str::to_string).collect();
    let others: Vec<u32> = (1..=n).filter(|&j| j != k).collect();
    let mut outs = Vec::new();
    for &j in &others {
        let mut s = TcpStream::connect(&addrs[j as usize - 1]).map_err(e)?;
        s.set_nodelay(true).map_err(e)?;
        like_links(&s);
        write_words(&mut s, &[k as u64]).map_err(e)?;
        outs.push(s);
    }
    for _ in &others {
        let (mut s, _) = l.accept().map_err(e)?;
        s.set_nodelay(true).map_err(e)?;
        like_links(&s);
        let mut b = [0u8; 8];
        s.read_exact(&mut b).map_err(e)?;
        std::thread::spawn(move || receive(s, u64::from_le_bytes(b) as u32));
    }
    let remotes: Vec<(RemoteSegment, DmaQueue)> = others
        .iter()
        .map(|&j| {
            let r = RemoteSegment::connect(&dev, 4 * j, SEG, 0, LONG).map_err(e)?;
            Ok((r, DmaQueue::create(&dev, 0, 16).map_err(e)?))
        })
        .collect::<Result<_, String>>()?;
    println!("connected");
    std::io::stdout().flush().map_err(e)?;
    let per = (mib as usize / (n as usize - 1)).max(2);
    let data = vec![pat(k); CHUNK];
    let slot = (k as usize - 1) * CHUNK;
    let w = DmaFlags { read: false, wait: true };
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(e)? == 0 {
            return Ok(());
        }
        let answer = match line.trim() {
            "tcp" => std::thread::scope(|sc| {
                let hs: Vec<_> = outs
                    .iter_mut()
                    .map(|s| {
                        sc.spawn(|| -> Result<(), String> {
                            let mut ack = [0u8; 1];
                            for _ in 0..per {
                                s.write_all(&data).map_err(e)?;
                                s.read_exact(&mut ack).map_err(e)?;
                                if ack[0] != b'k' {
                                    return Err("raw TCP: the receiver got other bytes".into());
                                }
                            }
                            Ok(())
                        })
                    })
                    .collect();
                hs.into_iter().try_for_each(|h| h.join().map_err(|_| "sender".to_string())?)
            })
            .map(|()| "done"),
            "dma" => std::thread::scope(|sc| {
                let hs: Vec<_> = remotes
                    .iter()
                    .map(|(r, q)| {
                        sc.spawn(|| -> Result<(), String> {
                            for _ in 0..per {
                                q.start(&src, r, 0, CHUNK, slot, w, None).map_err(e)?;
                            }
                            Ok(())
                        })
                    })
                    .collect();
                hs.into_iter().try_for_each(|h| h.join().map_err(|_| "DMA thread".to_string())?)
            })
            .map(|()| "done"),
            "check" => {
                let mut buf = vec![0u8; CHUNK];
                let mut good = true;
                for &j in &others {
                    own.read((j as usize - 1) * CHUNK, &mut buf).map_err(e)?;
                    good &= buf.iter().all(|&b| b == pat(j));
                }
                Ok(if good { "ok" } else { "bad" })
            }
            "quit" => return Ok(()),
            other => Err(format!("scale-node: unknown command {other:?}")),
        }?;
        println!("{answer}");
        std::io::stdout().flush().map_err(e)?;
    }
}
