//! `tests/c/sequence_states.c` built against the installed headers: sequence statuses in
//! each state of a connection (live, forced disconnect; over TCP: a silent peer, its return,
//! its death) and the flush flags, read as the guide's loops read them.

mod c_support;
use c_support::*;
use remora_sisci::{CreateFlags, Descriptor, LocalSegment, Sisci};
use std::process::Stdio;
use std::time::Duration;

/// Run a built program to its end (killed after a minute) and return its output.
fn finish(cmd: &mut std::process::Command) -> (std::process::ExitStatus, String) {
    let mut child = Reap(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let status = wait_with_timeout(&mut child, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    use std::io::Read as _;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, out + &err)
}

#[test]
fn sequences_on_one_node_flush_flags_and_a_forced_disconnect() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/sequence_states.c"), &[]);
    let (status, out) = finish(env.run(&exe, 4).arg("local"));
    assert!(status.success() && out.contains("passed"), "sequence_states local ({status:?}): {out}");
}

#[test]
fn sequences_over_tcp_pending_retriable_and_lost() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/sequence_states.c"), &[]);
    // Nodes 4 and 8 of this host joined over TCP (as two hosts are); the test exports the
    // segment from node 4 and hands the program node 4's daemon to stop and kill.
    let h = remora_testkit::Harness::with_cluster(&[4, 8], true);
    let sci = Sisci::with_config(h.config(4));
    let dev = Descriptor::open(&sci).unwrap();
    let seg = LocalSegment::create(&dev, Some(0x5e02), 8192, CreateFlags::default()).unwrap();
    seg.prepare(0).unwrap();
    seg.set_available(0).unwrap();
    let _node8 = Descriptor::open(&Sisci::with_config(h.config(8))).unwrap();
    let s = remora_client::Session::open_control(&h.config(4)).unwrap();
    let pid = match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("{other:?}"),
    };
    drop(s);
    let mut cmd = env.run(&exe, 8);
    cmd.env("REMORA_RUNTIME_DIR", h.runtime_dir()).env("REMORA_CLUSTER", h.cluster.as_ref().unwrap()).args([
        "link",
        "4",
        &0x5e02.to_string(),
        &pid.to_string(),
    ]);
    let (status, out) = finish(&mut cmd);
    assert!(status.success() && out.contains("passed"), "sequence_states link ({status:?}): {out}");
}
