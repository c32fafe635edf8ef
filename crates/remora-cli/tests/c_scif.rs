//! SCIF C programs built against the installed `scif.h` and `libscif.so.0`, run as real
//! clients: pairs on two nodes of this host and across two namespace hosts, the error
//! cases, the MPSS endpoint queue, the exported symbols and header constants, and whole
//! node ids up to 65535.

mod c_support;
use c_support::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Run a SCIF program as a server on node 4 and a client on node 8 (told the server's
/// node and the port); both must print PASS.
fn run_scif_pair(src: &str, port: u16) {
    let env = Env::new();
    let exe = env.build_scif(&root().join(src));
    let mut server = env.run(&exe, 4);
    server.args(["server", &port.to_string()]);
    let mut client = env.run(&exe, 8);
    client.args(["client", "4", &port.to_string()]);
    both_pass(src, server, client);
}

#[test]
fn scif_connect_messaging_poll_and_close_across_two_nodes() {
    run_scif_pair("tests/c/scif/scif_msg.c", 2050);
}

#[test]
fn scif_windows_rma_fences_mmap_and_fork_across_two_nodes() {
    run_scif_pair("tests/c/scif/scif_rma.c", 2060);
}

#[test]
fn scif_error_cases_get_documented_errno() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_errors.c")), 4, "PASS");
}

#[test]
fn scif_rma_given_bad_memory_fails_efault_and_fence_signal_needs_a_writable_window() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_rma_bad.c")), 4, "PASS");
}

#[test]
fn scif_one_page_backs_two_overlapping_windows() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_overlap.c")), 4, "PASS");
}

#[test]
fn scif_two_thousand_windows_under_a_1024_descriptor_limit() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_many.c")), 4, "PASS");
}

#[test]
fn scif_register_of_a_sealed_memfd_shares_it_and_other_shared_files_are_efault() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_shared.c")), 4, "PASS");
}

#[test]
fn scif_threads_cancelled_in_blocking_calls_end_alone_and_leave_the_library_usable() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_cancel.c")), 4, "PASS");
}

#[test]
fn scif_rmas_and_fences_go_on_after_a_child_is_killed_mid_rma() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_rma_killed.c")), 4, "PASS");
}

#[test]
fn scif_registered_memory_goes_back_after_unregister_unmap_and_close() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_release.c")), 4, "PASS");
}

#[test]
fn scif_send_queue_holds_mpss_4_kib_and_remora_scif_queue_bytes() {
    let env = Env::new();
    let exe = env.build_scif(&root().join("tests/c/scif/scif_queue.c"));
    // Each run starts its own node daemon (the one that sizes the queue) in a runtime
    // directory of its own, with the run's environment.
    for (queue, var) in [("4096", None), ("16384", Some("16384"))] {
        let rt = tempfile::Builder::new().prefix("remora-rt").tempdir().unwrap();
        let mut cmd = env.run(&exe, 4);
        cmd.env("REMORA_RUNTIME_DIR", rt.path()).arg(queue);
        match var {
            Some(v) => cmd.env("REMORA_SCIF_QUEUE_BYTES", v),
            None => cmd.env_remove("REMORA_SCIF_QUEUE_BYTES"),
        };
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("PASS"),
            "scif_queue {queue}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn libscif_exports_every_call_with_the_mpss_symbol_version() {
    let env = Env::new();
    let lib = env.prefix.path().join("lib64/libscif.so.0");
    assert!(lib.exists(), "libscif.so.0 (the soname link) is installed");
    let out = Command::new("objdump").arg("-T").arg(&lib).output();
    let Ok(out) = out else {
        eprintln!("SKIP: objdump is not installed (apt-get install binutils)");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    for f in [
        "scif_open",
        "scif_close",
        "scif_bind",
        "scif_listen",
        "scif_connect",
        "scif_accept",
        "scif_send",
        "scif_recv",
        "scif_register",
        "scif_unregister",
        "scif_mmap",
        "scif_munmap",
        "scif_readfrom",
        "scif_writeto",
        "scif_vreadfrom",
        "scif_vwriteto",
        "scif_fence_mark",
        "scif_fence_wait",
        "scif_fence_signal",
        "scif_get_nodeIDs",
        "scif_get_fd",
        "scif_poll",
    ] {
        assert!(
            text.lines().any(|l| l.contains("SCIF_0.0") && l.split_whitespace().last() == Some(f)),
            "{f} is exported as {f}@@SCIF_0.0"
        );
    }
    let d = Command::new("readelf").arg("-d").arg(&lib).output().unwrap();
    assert!(String::from_utf8_lossy(&d.stdout).contains("[libscif.so.0]"), "soname is libscif.so.0");
}

/// A SCIF program's server on host 1 and client on host 2 of a cluster of network
/// namespaces: messages and RMA go through the daemons over TCP.
fn run_scif_across_hosts(src: &str, port: u16, env_vars: &[(&str, &str)]) {
    let Some(c) = netns_hosts("multi-host SCIF") else { return };
    let env = Env::new();
    let exe = env.build_scif(&root().join(src));
    let mut server = c.command(1, &exe);
    server.args(["server", &port.to_string()]).envs(env_vars.iter().copied());
    let mut client = c.command(2, &exe);
    client.args(["client", &c.node(1).to_string(), &port.to_string()]).envs(env_vars.iter().copied());
    both_pass(src, server, client);
}

#[test]
fn scif_messaging_across_two_hosts() {
    run_scif_across_hosts("tests/c/scif/scif_msg.c", 2150, &[]);
}

#[test]
fn scif_rma_fences_and_fork_across_two_hosts() {
    run_scif_across_hosts("tests/c/scif/scif_rma.c", 2160, &[("SCIF_TEST_FAR", "1")]);
}

#[test]
fn scif_hello_example_pair_across_two_nodes() {
    let env = Env::new();
    let exe = env.build_scif(&root().join("examples/scif_hello.c"));
    let mut server = Reap(env.run(&exe, 4).args(["server", "2070"]).stdout(Stdio::piped()).spawn().unwrap());
    let client = env.run(&exe, 8).args(["client", "4", "2070"]).output().unwrap();
    assert!(client.status.success(), "client: {}", String::from_utf8_lossy(&client.stderr));
    let status = wait_with_timeout(&mut server, Duration::from_secs(30));
    let mut out = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(status.success(), "server: {out}");
    assert!(out.contains("message from node 8") && out.contains("Hello, World! (a message)"), "{out}");
    assert!(out.contains("written into my window: Hello, World! (an RMA)"), "{out}");
}

#[test]
fn scif_header_constants_match_the_library() {
    let env = Env::new();
    let consts: &[(&str, i64)] = &[
        ("SCIF_ACCEPT_SYNC", scif::SCIF_ACCEPT_SYNC as i64),
        ("SCIF_SEND_BLOCK", scif::SCIF_SEND_BLOCK as i64),
        ("SCIF_RECV_BLOCK", scif::SCIF_RECV_BLOCK as i64),
        ("SCIF_PROT_READ", scif::SCIF_PROT_READ as i64),
        ("SCIF_PROT_WRITE", scif::SCIF_PROT_WRITE as i64),
        ("SCIF_MAP_FIXED", scif::SCIF_MAP_FIXED as i64),
        ("SCIF_MAP_KERNEL", scif::SCIF_MAP_KERNEL as i64),
        ("SCIF_FENCE_INIT_SELF", scif::SCIF_FENCE_INIT_SELF as i64),
        ("SCIF_FENCE_INIT_PEER", scif::SCIF_FENCE_INIT_PEER as i64),
        ("SCIF_SIGNAL_LOCAL", scif::SCIF_SIGNAL_LOCAL as i64),
        ("SCIF_SIGNAL_REMOTE", scif::SCIF_SIGNAL_REMOTE as i64),
        ("SCIF_RMA_USECPU", scif::SCIF_RMA_USECPU as i64),
        ("SCIF_RMA_USECACHE", scif::SCIF_RMA_USECACHE as i64),
        ("SCIF_RMA_SYNC", scif::SCIF_RMA_SYNC as i64),
        ("SCIF_RMA_ORDERED", scif::SCIF_RMA_ORDERED as i64),
        ("SCIF_REGISTER_FAILED", scif::SCIF_REGISTER_FAILED),
        ("SCIF_PORT_RSVD", remora_scif::PORT_RSVD as i64),
    ];
    let mut src = String::from("#include <stdio.h>\n#include <scif.h>\nint main(void) {\n");
    for (name, _) in consts {
        src += &format!("    printf(\"{name} %lld\\n\", (long long)({name}));\n");
    }
    src += "    printf(\"sizeof_portID %zu\\n\", sizeof(struct scif_portID));\n";
    src += "    printf(\"sizeof_pollepd %zu\\n\", sizeof(struct scif_pollepd));\n    return 0;\n}\n";
    let c = env.prefix.path().join("scif_consts.c");
    std::fs::write(&c, src).unwrap();
    let exe = env.build_scif(&c);
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for (name, want) in consts {
        let line = format!("{name} {want}");
        assert!(text.lines().any(|l| l == line), "scif.h disagrees with libscif on {name}: {text}");
    }
    assert!(text.contains(&format!("sizeof_portID {}", std::mem::size_of::<scif::ScifPortId>())));
    assert!(text.contains(&format!("sizeof_pollepd {}", std::mem::size_of::<scif::ScifPollEpd>())));
}

#[test]
fn scif_node_ids_are_whole_up_to_65535() {
    let env = Env::new();
    let exe = env.build_scif(&root().join("tests/c/scif/scif_node_ids.c"));
    // Node 4's daemon first (it stays a while after the program), then node 65535 sees both.
    let first = env.run(&exe, 4).env("REMORA_IDLE_EXIT", "30").arg("4").output().unwrap();
    assert!(first.status.success(), "node 4: {}", String::from_utf8_lossy(&first.stderr));
    let out = env.run(&exe, 65_535).args(["65535", "4"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("PASS"),
        "node 65535: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scif_unregister_in_one_thread_never_gives_back_another_threads_buffer() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_prune_race.c")), 4, "PASS");
}

#[test]
fn scif_memory_of_windows_gone_keeps_its_bytes_where_mapped_and_churn_holds_little() {
    run_scif_pair("tests/c/scif/scif_keep.c", 2130);
}

#[test]
fn scif_windows_register_under_a_file_size_limit_and_larger_ones_are_enomem() {
    let env = Env::new();
    env.passes(&env.build_scif(&root().join("tests/c/scif/scif_fsize.c")), 4, "PASS");
}
