//! The tcp transport's pager-flow threads kept on the core their frames come in on
//! (`transport/tcp/follow.rs`), seen from outside: through `flow_threads_held` and the
//! threads' allowed cores.

use super::{answer, frame, tcp_env, wait, Near, HANDLE};
use remora_node::transport::LinkState;
use remora_proto::link::{BulkOp, RangeRef};
use remora_testkit::{free_port, pattern};
use std::io::Write;
use std::time::Duration;

/// The threads of this process (other than the caller) allowed on `core` alone.
fn threads_held_to(core: usize) -> usize {
    let me = std::fs::read_link("/proc/thread-self").unwrap_or_default();
    let me = me.file_name().map(|n| n.to_os_string());
    let want = format!("Cpus_allowed_list:\t{core}");
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter(|t| Some(t.file_name()) != me)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("status"))
                        .is_ok_and(|s| s.lines().any(|l| l == want))
                })
                .count()
        })
        .unwrap_or(0)
}

/// A pager flow's serving thread is held to the core its short frames come in on (a
/// loopback stream's: the sender's), let go after a long frame, held again after many
/// short ones, and its place freed when the flow ends (`tcp/follow.rs`, called from
/// `tcp/pager.rs`): fails if the serving loop never reports its frames. The count is the
/// process's: no other test of this binary may hold a flow thread (their flows send a long
/// frame first, or fewer than two short ones).
#[test]
fn tcp_pager_flow_thread_follows_its_frames() {
    use remora_node::transport::tcp::flow_threads_held;
    use remora_sys::sched::{hold_thread_to, thread_cpus, MAX_CPUS};
    let cores: Vec<usize> =
        thread_cpus().map(|c| (0..MAX_CPUS).filter(|&k| c.has(k)).collect()).unwrap_or_default();
    if cores.len() < 2 {
        eprintln!("SKIP tcp_pager_flow_thread_follows_its_frames: fewer than two cores allowed");
        return;
    }
    let core = cores[1];
    let dir = tempfile::tempdir().unwrap();
    let (p4, p8) = (free_port(), free_port());
    let far = Near::open(tcp_env(8, dir.path(), p4, p8));
    let near = Near::open(tcp_env(4, dir.path(), p4, p8));
    wait("the link to come up", || near.transports.link_state(8) == Some(LinkState::Up));
    let t = near.to8();
    let fd = near.rt.block_on(t.pager_flow(8, RangeRef::connection(HANDLE))).unwrap();
    let mut s = std::net::TcpStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    hold_thread_to(core).unwrap();
    let mut tag = 0;
    let mut store = |s: &mut std::net::TcpStream, len: usize| {
        tag += 1;
        s.write_all(zerocopy::IntoBytes::as_bytes(&frame(BulkOp::Write, tag, HANDLE, 64, len as u64, true)))
            .unwrap();
        s.write_all(&pattern(len, tag)).unwrap();
        let a = answer(s).unwrap();
        assert!(a.op == BulkOp::Ack && a.ok && a.tag == tag, "store {tag} answered");
    };
    for _ in 0..4 {
        store(&mut s, 8);
    }
    wait("the flow's thread held", || flow_threads_held() == 1 && threads_held_to(core) >= 1);
    store(&mut s, 8192);
    wait("the flow's thread let go after a long frame", || flow_threads_held() == 0);
    for _ in 0..70 {
        store(&mut s, 8);
    }
    wait("the flow's thread held again", || flow_threads_held() == 1);
    let mut seen = vec![0u8; 8];
    far.heard.mem.read(64, &mut seen).unwrap();
    assert_eq!(seen, pattern(8, tag), "the last store landed");
    drop(s);
    wait("the ended flow's place freed", || flow_threads_held() == 0);
}
