//! VIPL C programs built against the installed `<vipl.h>` and `libvipl.so`, run as real
//! clients: every family in one process, the error paths with exact status bits, the
//! reliability levels' consequences between two processes (one node, two nodes, two
//! hosts), the calls each VI state refuses, completion queues' counts and notifications,
//! the name service, a rejected then accepted request, a server and a client on one node,
//! on two nodes of this host and on two hosts (network namespaces), every data family
//! between two processes on the same three footings (`vipl_pair`: `VIP_NO_MATCH` with
//! receives posted before it, a rejected then accepted request, immediate data, RDMA with
//! and without it, completion queues and notifications fired by the peer, the flush on
//! disconnect), the peer-to-peer model (with a timed-out request first; one node too), a
//! peer that dies, the DMA transfer mode, system management information, and the
//! library's exported symbols, and handles destroyed under data-path calls.

mod c_support;
use c_support::*;
use std::process::{Command, Stdio};
use std::time::Duration;

fn ok(out: std::process::Output) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("VIPL OK"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Start `a`, run `b` to its end, then wait for `a`: `a`'s status and its stdout and stderr
/// together, and `b`'s output.
fn run_pair(mut a: Command, mut b: Command) -> (std::process::ExitStatus, String, std::process::Output) {
    let mut a = Reap(a.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let bout = b.output().unwrap();
    let status = wait_with_timeout(&mut a, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(a.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(a.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status, out + &err, bout)
}

/// Start `a`, run `b`, and check both print `VIPL OK`.
fn both_ok(a: Command, b: Command) {
    let (status, out, bout) = run_pair(a, b);
    let (bo, be) = (String::from_utf8_lossy(&bout.stdout), String::from_utf8_lossy(&bout.stderr));
    assert!(bout.status.success() && bo.contains("VIPL OK"), "second: {bo}{be}\nfirst: {out}");
    assert!(status.success() && out.contains("VIPL OK"), "first: {out}\nsecond: {bo}{be}");
}

fn program(env: &Env, name: &str) -> std::path::PathBuf {
    env.build_vipl(&root().join(format!("tests/c/vipl/{name}.c")))
}

#[test]
fn every_vipl_family_in_one_process_with_exact_codes() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_calls"), 4).output().unwrap());
}

#[test]
fn error_paths_set_the_status_bits_the_state_and_call_the_callback() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_errors"), 4).output().unwrap());
}

/// A VI and a CQ destroyed while another thread calls the data path on their handles:
/// codes only, `VIP_INVALID_PARAMETER` from the destroy on, also after newer objects reuse
/// the table's slots.
#[test]
fn a_handle_destroyed_under_data_path_calls_is_invalid_parameter_and_stays_so() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_stale"), 4).output().unwrap());
}

/// The ping-pong callgrind measures the C entry points with runs intact (a short run).
#[test]
fn the_entry_point_ping_pong_runs() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_pingpong"), 4).arg("200").output().unwrap());
}

#[test]
fn signals_without_sa_restart_lose_nothing_and_a_cancelled_wait_ends_alone() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_signals"), 4).output().unwrap());
}

/// Under a lowered `ulimit -f`, registering memory past it is `VIP_ERROR_RESOURCE`;
/// `SIGXFSZ`, which ended the program, is never raised.
#[test]
fn registering_memory_past_the_file_size_limit_is_error_resource_and_the_program_lives() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_fsize"), 4).output().unwrap());
}

#[test]
fn a_rejected_request_then_an_accepted_one() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_reject"), 4).output().unwrap());
}

#[test]
fn a_receive_into_memory_deregistered_meanwhile_fails_and_the_memory_stays_untouched() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_dereg"), 4).output().unwrap());
}

#[test]
fn a_failed_accept_leaves_the_request_to_reject_or_accept_again() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_accept"), 4).output().unwrap());
}

#[test]
fn notifications_armed_before_anything_completes_fire_and_end_with_their_vi() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_notify"), 4).output().unwrap());
}

#[test]
fn server_and_client_on_one_node_and_on_two_nodes_of_this_host() {
    let env = Env::new();
    let (server, client) = (program(&env, "vipl_server"), program(&env, "vipl_client"));
    for (snode, cnode, disc) in [(4, 4, "same"), (4, 8, "other")] {
        let mut s = env.run(&server, snode);
        s.arg(disc);
        let mut c = env.run(&client, cnode);
        c.args([&snode.to_string(), disc]);
        both_ok(s, c);
    }
}

#[test]
fn server_and_client_on_two_hosts() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let (server, client) = (program(&env, "vipl_server"), program(&env, "vipl_client"));
    let mut s = cl.command(1, &server);
    s.arg("hosts");
    let mut c = cl.command(2, &client);
    c.args([&cl.node(1).to_string(), "hosts"]);
    both_ok(s, c);
}

#[test]
fn peer_to_peer_on_two_nodes_and_on_two_hosts() {
    let env = Env::new();
    let peer = program(&env, "vipl_peer");
    let mut a = env.run(&peer, 4);
    a.args(["8", "left", "right"]);
    let mut b = env.run(&peer, 8);
    b.args(["4", "right", "left"]);
    both_ok(a, b);
    let cl = remora_testkit::cluster_or_skip!(2);
    let (n1, n2) = (cl.node(1).to_string(), cl.node(2).to_string());
    let mut a = cl.command(1, &peer);
    a.args([n2.as_str(), "west", "east"]);
    let mut b = cl.command(2, &peer);
    b.args([n1.as_str(), "east", "west"]);
    both_ok(a, b);
}

/// Start the survivor `a`, run the dying peer `b` (it must connect, then die by SIGKILL),
/// and check the survivor saw the loss and printed `VIPL OK`.
fn survives(a: Command, b: Command) {
    use std::os::unix::process::ExitStatusExt;
    let (status, out, bout) = run_pair(a, b);
    let (bo, be) = (String::from_utf8_lossy(&bout.stdout), String::from_utf8_lossy(&bout.stderr));
    assert!(bout.status.signal() == Some(9) && bo.contains("dying"), "dying peer: {bo}{be}");
    assert!(status.success() && out.contains("VIPL OK"), "survivor ({status:?}): {out}\npeer: {bo}{be}");
}

/// On one node and on two nodes of this host.
#[test]
fn a_dead_peer_moves_the_vi_to_error_with_conn_lost_on_one_node_and_two_nodes() {
    let env = Env::new();
    let prog = program(&env, "vipl_loss");
    for (snode, cnode, disc) in [(4, 4, "l-same"), (4, 8, "l-other")] {
        let mut a = env.run(&prog, snode);
        a.args(["wait", disc]);
        let mut b = env.run(&prog, cnode);
        b.args(["die", &snode.to_string(), disc]);
        survives(a, b);
    }
}

/// Across two hosts (network namespaces). The survivor used to die of `SIGBUS` in about 2
/// of 40 runs, on a page of the dead peer's segment the DSM pager could no longer fetch;
/// a VI with a peer on another host no longer touches the peer's segments through a map
/// (its channel carries every store and load).
#[test]
fn a_dead_peer_on_another_host_moves_the_vi_to_error_with_conn_lost() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let prog = program(&env, "vipl_loss");
    let mut a = cl.command(1, &prog);
    a.args(["wait", "l-hosts"]);
    let mut b = cl.command(2, &prog);
    b.args(["die", &cl.node(1).to_string(), "l-hosts"]);
    survives(a, b);
}

#[test]
fn libvipl_exports_every_call_and_nothing_else() {
    let env = Env::new();
    let lib = env.prefix.path().join("lib64/libvipl.so.1");
    let out = Command::new("objdump").arg("-T").arg(&lib).output().expect("objdump (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let map = std::fs::read_to_string(root().join("capi/vipl/libvipl.map")).unwrap();
    let names: Vec<&str> =
        map.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| w.starts_with("Vip")).collect();
    assert_eq!(names.len(), 41, "VIA 1.0 has 41 calls");
    let header = std::fs::read_to_string(root().join("include/vipl.h")).unwrap();
    for n in &names {
        assert!(text.contains(&format!(" {n}\n")), "{n} exported");
        assert!(header.contains(&format!("{n}(")), "{n} declared in vipl.h");
    }
    let exported = text.lines().filter(|l| l.contains(" DF ") && l.contains(".text")).count();
    assert_eq!(exported, names.len(), "nothing but the Vip calls is exported:\n{text}");
    let d = Command::new("objdump").arg("-p").arg(&lib).output().unwrap();
    assert!(String::from_utf8_lossy(&d.stdout).contains("SONAME               libvipl.so.1"), "soname");
}

/// `vipl_reliability` as a server on `snode` and a client on `cnode` of this host.
fn reliability_pair(env: &Env, snode: u32, cnode: u32, disc: &str) {
    let prog = program(env, "vipl_reliability");
    let mut s = env.run(&prog, snode);
    s.args(["server", disc]);
    let mut c = env.run(&prog, cnode);
    c.args(["client", &snode.to_string(), disc]);
    both_ok(s, c);
}

/// The reliability levels' consequences with exact status words and callback codes: no
/// receive posted (reliable delivery and reception), a receive too short (both), RDMA read
/// of memory without EnableRdmaRead, RDMA write to a VI without EnableRdmaWrite, and an
/// unreliable send dropped; on one node and on two nodes of this host.
#[test]
fn reliability_levels_break_with_exact_status_and_callback_codes_on_one_and_two_nodes() {
    let env = Env::new();
    reliability_pair(&env, 4, 4, "r-same");
    reliability_pair(&env, 4, 8, "r-other");
}

/// As above, across two hosts (network namespaces).
#[test]
fn reliability_levels_break_with_exact_status_and_callback_codes_across_hosts() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let prog = program(&env, "vipl_reliability");
    let mut s = cl.command(1, &prog);
    s.args(["server", "r-hosts"]);
    let mut c = cl.command(2, &prog);
    c.args(["client", &cl.node(1).to_string(), "r-hosts"]);
    both_ok(s, c);
}

/// `VIP_INVALID_STATE` for VipDestroyVi, VipConnectRequest and VipSetViAttributes on a
/// connected VI and on one in ERROR, VipPostSend on an idle one; `VIP_INVALID_RDMAREAD`;
/// a send fenced behind an RDMA read carries the bytes read.
#[test]
fn calls_refused_by_the_vi_state_the_rdma_read_attribute_and_the_queue_fence() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_states"), 4).output().unwrap());
}

/// The name service: a name gives its node's address, which gives the name back. Without a
/// cluster file a node's name is its decimal id; across hosts the host of the cluster file
/// (a host shared by nodes of one machine names the first of them: `names.rs`'s test).
#[test]
fn names_go_to_addresses_and_back_on_one_host_and_across_hosts() {
    let env = Env::new();
    let prog = program(&env, "vipl_names");
    ok(env.run(&prog, 4).args(["localhost", "4", "4", "4", "4", "4", "8", "8", "8"]).output().unwrap());
    let cl = remora_testkit::cluster_or_skip!(2);
    let (n1, n2) = (cl.node(1).to_string(), cl.node(2).to_string());
    let (a1, a2) = (cl.addr(1).to_string(), cl.addr(2).to_string());
    let args = [&a1, &n1, &a1, &a2, &n2, &a2, &"localhost".to_string(), &n1, &a1, &n2, &n2, &a2];
    ok(cl.command(1, &prog).args(args).output().unwrap());
}

/// A completion queue holds the entries it was given: counts refused, a resize below what
/// it holds refused, a completion that finds it full not queued (its descriptor stays on
/// the VI) and told to the error callback; `VipCQNotify` fires with the VI and the queue.
#[test]
fn completion_queues_hold_their_count_and_notify_with_the_vi_and_queue() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_cq"), 4).output().unwrap());
}

/// Two processes of one node connect peer to peer, and two nodes of this host again, one
/// side of each pair blocking in `VipConnectPeerWait`. Each first asks for a peer nobody is
/// with a finite timeout: `VIP_TIMEOUT` (from `VipConnectPeerWait` too, which answered
/// `VIP_INVALID_STATE` once the timed-out outcome was taken), the VI idle, and the same VI
/// then connects.
#[test]
fn peer_to_peer_on_one_node_with_connect_peer_wait_and_a_timed_out_request_first() {
    let env = Env::new();
    let peer = program(&env, "vipl_peer");
    let mut a = env.run(&peer, 4);
    a.args(["4", "p-one", "p-two"]);
    let mut b = env.run(&peer, 4);
    b.args(["4", "p-two", "p-one", "wait"]);
    both_ok(a, b);
    let mut a = env.run(&peer, 4);
    a.args(["8", "w-left", "w-right", "wait"]);
    let mut b = env.run(&peer, 8);
    b.args(["4", "w-right", "w-left"]);
    both_ok(a, b);
}

/// How many `process_vm_readv` / `process_vm_writev` calls `cmd` made (its threads
/// included), counted by strace; `None` where strace cannot trace. The node's daemon must be
/// running already: one started under `--seccomp-bpf` would keep its filter (whose traced
/// calls fail with ENOSYS once strace is gone).
fn own_copies(cmd: &Command) -> Option<u64> {
    // Where strace cannot trace (not installed, or ptrace denied in a container) the count is
    // unknown. `--seccomp-bpf` (strace 5.3 on) stops the program only at the traced calls.
    let trace = ["-f", "-qq", "-e", "trace=process_vm_readv,process_vm_writev", "-o"];
    let works = |seccomp: bool| {
        let mut probe = Command::new("strace");
        probe.args(seccomp.then_some("--seccomp-bpf")).args(trace).args(["/dev/null", "true"]);
        probe.output().is_ok_and(|o| o.status.success())
    };
    let seccomp = works(true);
    if !seccomp && !works(false) {
        return None;
    }
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut st = Command::new("strace");
    st.args(seccomp.then_some("--seccomp-bpf")).args(trace).arg(log.path());
    st.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => st.env(k, v),
            None => st.env_remove(k),
        };
    }
    ok(st.output().unwrap());
    let text = std::fs::read_to_string(log.path()).unwrap();
    Some(text.lines().filter(|l| l.contains("process_vm_")).count() as u64)
}

/// The paper's second transfer mode, chosen by configuration: every family in one process,
/// and a server and a client on one node and on two nodes of this host, with
/// `REMORA_VIPL_TRANSFER=dma`, every byte checked as in the default mode; then the pair
/// across two hosts. On one host the DMA queue makes each transfer in the posting process
/// (`remora-sisci`'s `dma/here.rs`: the node's engine counts none of them), through the
/// kernel's `process_vm_readv`, which a memory copy does not call: strace (where installed)
/// tells that the mode was taken.
#[test]
fn dma_transfer_mode_moves_the_same_bytes() {
    let env = Env::new();
    let calls = program(&env, "vipl_calls");
    let mut dma = env.run(&calls, 4);
    // The daemon stays up for the traced run, which must not trace its start.
    dma.env("REMORA_VIPL_TRANSFER", "dma").env("REMORA_IDLE_EXIT", "60");
    ok(dma.output().unwrap());
    match (own_copies(&dma), own_copies(dma.env("REMORA_VIPL_TRANSFER", "copy"))) {
        (Some(d), Some(c)) => assert!(d > c, "kernel copies: {d} in DMA mode, {c} in copy mode"),
        _ => eprintln!(
            "SKIP (the check that DMA mode was taken): strace cannot trace here \
             (not installed, or ptrace denied)"
        ),
    }
    let (server, client) = (program(&env, "vipl_server"), program(&env, "vipl_client"));
    for (snode, cnode, disc) in [(4, 4, "dma-same"), (4, 8, "dma-other")] {
        let mut s = env.run(&server, snode);
        s.arg(disc).env("REMORA_VIPL_TRANSFER", "dma");
        let mut c = env.run(&client, cnode);
        c.args([&snode.to_string(), disc]).env("REMORA_VIPL_TRANSFER", "dma");
        both_ok(s, c);
    }
    // And across two hosts (network namespaces), where a transfer goes down the process's
    // own flow to the peer's node.
    let cl = remora_testkit::cluster_or_skip!(2);
    let mut s = cl.command(1, &server);
    s.arg("dma-hosts").env("REMORA_VIPL_TRANSFER", "dma");
    let mut c = cl.command(2, &client);
    c.args([&cl.node(1).to_string(), "dma-hosts"]).env("REMORA_VIPL_TRANSFER", "dma");
    both_ok(s, c);
}

/// `VipQuerySystemManagementInfo(VIP_SMI_AUTODISCOVERY)` as docs/vipl.md says: this node
/// alone without a cluster file, then this node and the cluster file's others in its
/// order; a short list the first ones; `VIP_INVALID_PARAMETER` for a bad type, list, array
/// or entry, nothing written.
#[test]
fn system_management_info_lists_the_known_nodes() {
    let env = Env::new();
    let prog = program(&env, "vipl_sysman");
    ok(env.run(&prog, 4).env_remove("REMORA_CLUSTER").output().unwrap());
    // Its own runtime directory: the node's daemon starts with the cluster file.
    let rt = env.runtime.path().join("sysman");
    let cluster = env.runtime.path().join("sysman.toml");
    let mut text = String::from("secret = \"a test secret of enough length\"\n");
    for id in [9, 4, 12] {
        let port = remora_testkit::free_port();
        text += &format!("[[node]]\nid = {id}\nhost = \"127.0.0.1\"\nport = {port}\n");
    }
    std::fs::write(&cluster, text).unwrap();
    let out = env
        .run(&prog, 4)
        .args(["4", "9", "12"])
        .env("REMORA_RUNTIME_DIR", &rt)
        .env("REMORA_CLUSTER", &cluster)
        .output()
        .unwrap();
    let _ = Command::new(env!("CARGO_BIN_EXE_remora"))
        .args(["shutdown", "--all"])
        .env("REMORA_RUNTIME_DIR", &rt)
        .output();
    ok(out);
}

/// Read `r`'s lines into `log` until one contains `marker`; whether one did (else EOF).
fn read_until(r: &mut impl std::io::BufRead, log: &mut String, marker: &str) -> bool {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        log.push_str(&line);
        if line.contains(marker) {
            return true;
        }
    }
}

/// Run a `vipl_pair` server and client in the order the program needs: the server until it
/// is ready (its NIC open, its receives posted), the client until a request of its got
/// `VIP_NO_MATCH`, then the server goes on (a line on its stdin) and both must end with
/// `VIPL OK`.
fn ordered_pair(mut server: Command, mut client: Command) {
    use std::io::{BufReader, Read, Write};
    let spawn = |c: &mut Command| {
        Reap(c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap())
    };
    let rest = |c: &mut Reap, r: &mut BufReader<std::process::ChildStdout>, log: &mut String| {
        r.read_to_string(log).unwrap();
        let status = wait_with_timeout(c, Duration::from_secs(60));
        c.stderr.take().unwrap().read_to_string(log).unwrap();
        status
    };
    let mut s = spawn(&mut server);
    let mut sr = BufReader::new(s.stdout.take().unwrap());
    let mut slog = String::new();
    if !read_until(&mut sr, &mut slog, "ready") {
        rest(&mut s, &mut sr, &mut slog);
        panic!("the server never got ready: {slog}");
    }
    let mut c = spawn(&mut client);
    let mut cr = BufReader::new(c.stdout.take().unwrap());
    let mut clog = String::new();
    let matched = read_until(&mut cr, &mut clog, "no match");
    if matched {
        s.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }
    drop(s.stdin.take());
    let cstatus = rest(&mut c, &mut cr, &mut clog);
    let sstatus = rest(&mut s, &mut sr, &mut slog);
    assert!(matched && cstatus.success() && clog.contains("VIPL OK"), "client: {clog}\nserver: {slog}");
    assert!(sstatus.success() && slog.contains("VIPL OK"), "server: {slog}\nclient: {clog}");
}

/// Every data family between two processes (`vipl_pair`): a request that finds nobody
/// waiting (`VIP_NO_MATCH`, made certain by holding the server back), rejected, then
/// accepted, the server's first sends landing in receives the client posted before its
/// first request; a send with immediate data and an RDMA write with immediate data, each
/// consuming a receive that the server's completion queue reports; an RDMA write and an
/// RDMA read; VipCQNotify, VipSendNotify and VipRecvNotify fired by the peer's traffic;
/// VipDisconnect completing posted receives `DONE|OP_RECEIVE|DESC_FLUSHED_ERROR` on both
/// sides. Exact status words and bytes, at reliable delivery and reliable reception. Two
/// processes of one node, and two nodes of this host either way round.
#[test]
fn every_family_between_two_processes_on_one_node_and_two_nodes() {
    let env = Env::new();
    let prog = program(&env, "vipl_pair");
    for level in ["delivery", "reception"] {
        for (snode, cnode) in [(4, 4), (4, 8), (8, 4)] {
            let disc = format!("p{snode}-{cnode}-{level}");
            let mut s = env.run(&prog, snode);
            s.args(["server", &disc, level]);
            let mut c = env.run(&prog, cnode);
            c.args(["client", &snode.to_string(), &disc, level]);
            ordered_pair(s, c);
        }
    }
}

/// As above, across two hosts (network namespaces), either way round.
#[test]
fn every_family_between_two_processes_across_hosts() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let prog = program(&env, "vipl_pair");
    for level in ["delivery", "reception"] {
        for (sh, ch) in [(1, 2), (2, 1)] {
            let mut s = cl.command(sh, &prog);
            s.args(["server", "pair-hosts", level]);
            let mut c = cl.command(ch, &prog);
            c.args(["client", &cl.node(sh).to_string(), "pair-hosts", level]);
            ordered_pair(s, c);
        }
    }
}

/// Requests for a prefix of the waited discriminator and for one it is a prefix of find
/// no match (the VI stays idle) while the server waits; the right one connects and the
/// server learns the requester's discriminator.
#[test]
fn a_waiter_on_another_discriminator_is_no_match_and_the_right_one_connects() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_match"), 4).output().unwrap());
}

/// A request the server took but answers after the requester's 300 ms: the requester gets
/// VIP_TIMEOUT with its VI idle; the late accept (and a late reject) is VIP_TIMEOUT and
/// leaves the server's VI idle.
#[test]
fn a_request_held_past_its_timeout_times_out_and_the_late_answer_is_timeout() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_late"), 4).output().unwrap());
}

/// Sends from memory of another protection tag or deregistered, with a reserved control
/// bit, opcode 0x3 or 253 segments: whole status words (PROTECTION_ERROR, FORMAT_ERROR);
/// a reliable VI goes to ERROR with one `VIP_ERROR_POST_DESC` naming the descriptor, an
/// unreliable one stays connected and carries a good send after them.
#[test]
fn send_side_errors_give_exact_status_words_and_break_only_a_reliable_vi() {
    let env = Env::new();
    ok(env.run(&program(&env, "vipl_send_errors"), 4).output().unwrap());
}
