//! Two endpoints of one provider in this process: messages, registrations, RMA writes and
//! reads with every byte checked, an access outside a region refused. Skips with a message
//! where libfabric (or the provider) is absent.

use remora_ofi_sys::{Access, Completion, Endpoint, Remote};
use remora_sys::{AsFd, Mapping, Memfd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::Duration;

fn mapping(len: usize) -> Arc<Mapping> {
    let fd = Memfd::create("ofi-test", len as u64).unwrap();
    Arc::new(Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap())
}

/// A thread that reads an endpoint's completions (receives copied out) until stopped.
struct Pump {
    rx: Receiver<(Completion, Vec<u8>)>,
    stop: Arc<AtomicBool>,
}

impl Pump {
    fn start(ep: &Arc<Endpoint>) -> Pump {
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let (ep, s) = (ep.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for c in ep.completions(Duration::from_millis(50)).unwrap() {
                    let data = c.slot.map(|slot| ep.received(slot, c.len)).unwrap_or_default();
                    let _ = tx.send((c, data));
                }
            }
        });
        Pump { rx, stop }
    }

    fn next(&self) -> (Completion, Vec<u8>) {
        self.rx.recv_timeout(Duration::from_secs(20)).expect("a completion within 20 s")
    }

    fn message(&self) -> Vec<u8> {
        loop {
            let (c, data) = self.next();
            if c.slot.is_some() {
                assert!(c.error.is_none(), "{c:?}");
                return data;
            }
        }
    }

    fn done(&self, id: u64) {
        loop {
            let (c, _) = self.next();
            if c.id == id {
                assert!(c.error.is_none(), "{c:?}");
                return;
            }
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Send, again while the queue is full or the connection is being made.
fn send(ep: &Endpoint, dest: u64, msg: &[u8]) -> u64 {
    let id = ep.next_id();
    for _ in 0..20_000 {
        match ep.send(dest, msg, id) {
            Ok(()) => return id,
            Err(e) if e.code == 11 => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the send queue stayed full");
}

fn exercise(provider: &str) {
    let a = match Endpoint::open(provider, Some("127.0.0.1"), 8, 4096) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("SKIP {provider}: {e}");
            return;
        }
    };
    let b = Endpoint::open(provider, Some("127.0.0.1"), 8, 4096).unwrap();
    let ab = a.insert(&b.name().unwrap()).unwrap();
    let _ba = b.insert(&a.name().unwrap()).unwrap();
    let (pa, pb) = (Pump::start(&a), Pump::start(&b));
    let id = send(&a, ab, b"hello over ofi");
    assert_eq!(pb.message(), b"hello over ofi");
    pa.done(id);

    const N: usize = 1 << 20;
    let theirs = mapping(N);
    let mine = mapping(N);
    let data: Vec<u8> = (0..N).map(|i| (i * 7 + 3) as u8).collect();
    mine.write(0, &data).unwrap();
    let remote = b.register(&theirs, 4096, N - 4096, Access::RemoteWrite).unwrap();
    let local = a.register(&mine, 0, N, Access::Local).unwrap();
    let id = a.next_id();
    a.write(&local, 0, N - 4096, Remote { dest: ab, addr: remote.remote_addr(0), key: remote.key() }, id)
        .unwrap();
    pa.done(id);
    // A message after the write arrives after its bytes (FI_ORDER_SAW).
    send(&a, ab, b"done");
    assert_eq!(pb.message(), b"done");
    let mut seen = vec![0u8; N - 4096];
    theirs.read(4096, &mut seen).unwrap();
    assert!(seen == data[..N - 4096], "{provider}: bytes written arrive intact");

    let readable = b.register(&theirs, 0, N, Access::RemoteRead).unwrap();
    let back = mapping(N);
    let local = a.register(&back, 0, N, Access::Local).unwrap();
    let id = a.next_id();
    a.read(&local, 0, N, Remote { dest: ab, addr: readable.remote_addr(0), key: readable.key() }, id)
        .unwrap();
    pa.done(id);
    let mut got = vec![0u8; N];
    back.read(0, &mut got).unwrap();
    let mut want = vec![0u8; N];
    theirs.read(0, &mut want).unwrap();
    assert!(got == want, "{provider}: bytes read arrive intact");
    // Outside the local region: refused before anything is posted.
    assert!(a
        .read(&local, N - 10, 11, Remote { dest: ab, addr: 0, key: readable.key() }, a.next_id())
        .is_err());
    // A write under a key that was closed touches nothing (the provider may still report
    // the local completion as a success: the target drops it, and the tcp provider then
    // closes the connection, so nothing is sent after it here).
    let (key, addr) = (remote.key(), remote.remote_addr(0));
    drop(remote);
    let before = seen.clone();
    let _ = a.write(&local, 0, 4096, Remote { dest: ab, addr, key }, a.next_id());
    std::thread::sleep(Duration::from_millis(300));
    theirs.read(4096, &mut seen).unwrap();
    assert!(seen == before, "{provider}: nothing written under a closed key");
}

#[test]
fn tcp_provider() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    eprintln!("providers: {:?}", remora_ofi_sys::providers().unwrap());
    exercise("tcp;ofi_rxm");
}

#[test]
fn shm_provider() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    exercise("shm");
}

/// A source whose shm region name another live process holds (another node's daemon of
/// the host, another cluster's) is refused by the provider (`fi_enable`: `EBUSY`); the
/// open then takes the provider's own choice of a source and works.
#[test]
fn shm_source_taken_opens_with_the_providers_own() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    // A host name of this test alone, whose region a child process holds.
    let host = format!("127.{}.{}.7", 100 + std::process::id() % 100, std::process::id() / 100 % 250);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "shm_holder_child", "--nocapture", "--include-ignored"])
        .env("REMORA_OFI_HOLD", &host)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 && !line.contains("holding") {
        line.clear();
    }
    if !line.contains("holding") {
        let _ = child.wait();
        eprintln!("SKIP shm: the holder could not open an endpoint");
        return;
    }
    let opened = Endpoint::open("shm", Some(&host), 8, 4096);
    let a = opened.expect("an open whose source another process holds falls back to the provider's own");
    // And it works: a message to a second endpoint arrives.
    let b = Endpoint::open("shm", Some(&host), 8, 4096).unwrap();
    let ab = a.insert(&b.name().unwrap()).unwrap();
    let _ba = b.insert(&a.name().unwrap()).unwrap();
    let (pa, pb) = (Pump::start(&a), Pump::start(&b));
    let id = send(&a, ab, b"taken name, still talking");
    assert_eq!(pb.message(), b"taken name, still talking");
    pa.done(id);
    // The pumps' threads let go of the endpoints, whose drops remove their regions.
    drop((pa, pb));
    let t = std::time::Instant::now();
    while (Arc::strong_count(&a) > 1 || Arc::strong_count(&b) > 1) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop((a, b));
    drop(child.stdin.take());
    let _ = child.wait();
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&host))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "regions left behind: {left:?}");
}

/// The child of [`shm_source_taken_opens_with_the_providers_own`]: holds an shm endpoint
/// of the host `REMORA_OFI_HOLD` names until its stdin closes.
#[test]
#[ignore = "run by shm_source_taken_opens_with_the_providers_own"]
fn shm_holder_child() {
    let Ok(host) = std::env::var("REMORA_OFI_HOLD") else { return };
    let Ok(_ep) = Endpoint::open("shm", Some(&host), 8, 4096) else { return };
    println!("holding");
    let mut sink = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
}

/// A region under the host's name that its maker left empty (killed between creating and
/// sizing it) is not opened: the provider would read its header and the process die of
/// `SIGBUS`. The open takes the provider's own choice of a source, works, and leaves that
/// file alone.
#[test]
fn shm_short_region_under_the_hosts_name_is_passed_by() {
    if !remora_ofi_sys::installed() {
        eprintln!("SKIP: libfabric is not installed");
        return;
    }
    let host = format!("127.{}.{}.9", 100 + std::process::id() % 100, std::process::id() / 100 % 250);
    let left = format!("/dev/shm/{host}:0:0");
    if std::fs::write(&left, b"").is_err() {
        eprintln!("SKIP shm: /dev/shm cannot be written here");
        return;
    }
    let opened = Endpoint::open("shm", Some(&host), 8, 4096);
    let b = Endpoint::open("shm", Some("127.0.0.1"), 8, 4096);
    let (a, b) = match (opened, b) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            let _ = std::fs::remove_file(&left);
            panic!("opens failed: {:?} / {:?}", a.err(), b.err());
        }
    };
    let ab = a.insert(&b.name().unwrap()).unwrap();
    let _ba = b.insert(&a.name().unwrap()).unwrap();
    let (pa, pb) = (Pump::start(&a), Pump::start(&b));
    let id = send(&a, ab, b"past a short region");
    assert_eq!(pb.message(), b"past a short region");
    pa.done(id);
    drop((pa, pb));
    assert_eq!(std::fs::metadata(&left).map(|m| m.len()).ok(), Some(0), "the short file is left as it was");
    std::fs::remove_file(&left).unwrap();
}
