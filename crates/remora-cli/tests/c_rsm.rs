//! RSMAPI C programs built against the installed `<rsmapi.h>` and `librsm.so`, run as real
//! clients: every family in one process, a server and a client on two nodes of this host
//! and on two hosts (network namespaces), another user refused or admitted by the access
//! list, and the library's exported symbols.

mod c_support;
use c_support::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Start `server`, run `client`, and check both print `RSM OK`.
fn both_ok(server: Command, client: Command) {
    both_ok_after(server, client, || {})
}

/// [`both_ok`], running `ready` between starting the server and the client.
fn both_ok_after(mut server: Command, mut client: Command, ready: impl FnOnce()) {
    let mut server = Reap(server.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    ready();
    let client = client.output().unwrap();
    let status = wait_with_timeout(&mut server, Duration::from_secs(60));
    let (mut out, mut err) = (String::new(), String::new());
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).unwrap();
    let cout = String::from_utf8_lossy(&client.stdout);
    let cerr = String::from_utf8_lossy(&client.stderr);
    assert!(client.status.success() && cout.contains("RSM OK"), "client: {cout}{cerr}\nserver: {out}{err}");
    assert!(status.success() && out.contains("RSM OK"), "server: {out}{err}\nclient: {cout}{cerr}");
}

#[test]
fn every_rsm_family_in_one_process_with_exact_codes() {
    let env = Env::new();
    let exe = env.build_rsm(&root().join("tests/c/rsm/rsm_calls.c"));
    let segids = env.prefix.path().join("rsm.segmentid");
    std::fs::write(&segids, "# keyword appid baseid length\nreserve SUNWfoo 0x600000 100\n").unwrap();
    let out = env.run(&exe, 4).env("REMORA_RSM_SEGMENTID_FILE", &segids).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RSM OK"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn threads_cancelled_in_signal_waits_end_alone_and_the_library_goes_on() {
    let env = Env::new();
    env.passes(&env.build_rsm(&root().join("tests/c/rsm/rsm_cancel.c")), 4, "RSM OK");
}

#[test]
fn server_and_client_on_two_nodes_of_this_host() {
    let env = Env::new();
    let server = env.build_rsm(&root().join("tests/c/rsm/rsm_server.c"));
    let client = env.build_rsm(&root().join("tests/c/rsm/rsm_client.c"));
    let mut s = env.run(&server, 4);
    s.arg("500001");
    // The client is started at once: it waits for the export to be published.
    let mut c = env.run(&client, 8);
    c.args(["4", "500001"]);
    both_ok(s, c);
}

#[test]
fn server_and_client_on_two_hosts() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let server = env.build_rsm(&root().join("tests/c/rsm/rsm_server.c"));
    let client = env.build_rsm(&root().join("tests/c/rsm/rsm_client.c"));
    let mut s = cl.command(1, &server);
    s.arg("500002");
    let mut c = cl.command(2, &client);
    c.args([&cl.node(1).to_string(), "500002"]);
    both_ok(s, c);
}

#[test]
fn librsm_exports_every_call_with_the_solaris_symbol_version() {
    let env = Env::new();
    let lib = env.prefix.path().join("lib64/librsm.so.2");
    let out = Command::new("objdump").arg("-T").arg(&lib).output().expect("objdump (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let map = std::fs::read_to_string(root().join("capi/rsm/librsm.map")).unwrap();
    let names: Vec<&str> =
        map.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| w.starts_with("rsm_")).collect();
    assert!(names.len() >= 42, "the map lists every call");
    for f in names {
        assert!(
            text.lines().any(|l| l.contains("SUNWprivate_1.1") && l.split_whitespace().last() == Some(f)),
            "{f} is exported as {f}@@SUNWprivate_1.1"
        );
    }
    let d = Command::new("readelf").arg("-d").arg(&lib).output().unwrap();
    assert!(String::from_utf8_lossy(&d.stdout).contains("[librsm.so.2]"), "soname is librsm.so.2");
}

#[test]
fn another_user_reads_but_never_writes_under_an_access_list() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        return eprintln!("skipping the other-user RSM test: it needs root to run a program as another user");
    }
    let env = Env::new();
    let exe = env.build_rsm(&root().join("tests/c/rsm/rsm_acl.c"));
    // A runtime directory shared as /tmp is (world-writable, sticky): every user of the host
    // may use its nodes; the other user must reach the program and the daemon in the prefix.
    let shared = |p: &std::path::Path, mode| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    shared(env.runtime.path(), 0o1777);
    shared(env.prefix.path(), 0o755);
    let nobody = 65534;
    for (export_node, import_node) in [(4, 4), (4, 8)] {
        let id = format!("4000{export_node}{import_node}");
        let mut s = env.run(&exe, export_node);
        s.args(["export", &id, &import_node.to_string()]);
        let mut c = env.run(&exe, import_node);
        c.args(["import", &export_node.to_string(), &id]).uid(nobody).gid(nobody).env("HOME", "/");
        // The exporter's user starts the exporting node (the other user could not take
        // over a node whose lock file belongs to someone else).
        both_ok_after(s, c, || env.wait_node(export_node));
    }
}

/// Kill the exporter once the importer (`rsm_loss`) is connected; the importer must see
/// `RSMERR_CONN_ABORTED` on its next accesses and at its barrier's close.
fn importer_sees_the_exporter_die(mut server: Command, mut client: Command) {
    use std::io::BufRead as _;
    let mut server = Reap(server.stdout(Stdio::null()).spawn().unwrap());
    let mut client = Reap(client.stdout(Stdio::piped()).spawn().unwrap());
    let mut line = String::new();
    let mut out = std::io::BufReader::new(client.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "connected", "importer said {line:?}");
    server.kill().unwrap();
    let _ = server.wait();
    let status = wait_with_timeout(&mut client, Duration::from_secs(30));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(status.success() && rest.contains("RSM OK"), "importer: {rest}");
}

#[test]
fn importers_see_conn_aborted_when_the_exporter_dies() {
    let env = Env::new();
    let server = env.build_rsm(&root().join("tests/c/rsm/rsm_server.c"));
    let loss = env.build_rsm(&root().join("tests/c/rsm/rsm_loss.c"));
    for node in [4, 8] {
        let mut s = env.run(&server, 4);
        s.arg(format!("50000{node}"));
        let mut c = env.run(&loss, node);
        c.args(["4", &format!("50000{node}")]);
        importer_sees_the_exporter_die(s, c);
    }
}

#[test]
fn importers_on_another_host_see_conn_aborted_when_the_exporter_dies() {
    let cl = remora_testkit::cluster_or_skip!(2);
    let env = Env::new();
    let server = env.build_rsm(&root().join("tests/c/rsm/rsm_server.c"));
    let loss = env.build_rsm(&root().join("tests/c/rsm/rsm_loss.c"));
    let mut s = cl.command(1, &server);
    s.arg("500003");
    let mut c = cl.command(2, &loss);
    c.args([&cl.node(1).to_string(), "500003"]);
    importer_sees_the_exporter_die(s, c);
}

/// A program that prints `RSM OK` on success, run alone as a process of node 4.
fn alone_ok(src: &str) {
    let env = Env::new();
    let exe = env.build_rsm(&root().join(src));
    let out = env.run(&exe, 4).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RSM OK"),
        "{src}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn error_codes_follow_the_illumos_library_contract() {
    // Every argument check of every call, with the code and in the order Solaris's librsm
    // makes them.
    alone_ok("tests/c/rsm/rsm_errors.c");
}

/// Under a lowered `ulimit -f`, exporting memory past it is `RSMERR_INSUFFICIENT_MEM`;
/// `SIGXFSZ`, which ended the program, is never raised.
#[test]
fn an_export_past_the_file_size_limit_is_insufficient_mem_and_the_program_lives() {
    alone_ok("tests/c/rsm/rsm_fsize.c");
}

#[test]
fn stack_and_mmap_exports_and_rebind_snapshots() {
    alone_ok("tests/c/rsm/rsm_stack.c");
}

#[test]
fn export_and_import_pair_on_two_nodes() {
    let env = Env::new();
    let server = env.build_rsm(&root().join("tests/c/rsm/rsm_export.c"));
    let client = env.build_rsm(&root().join("tests/c/rsm/rsm_import.c"));
    let mut s = env.run(&server, 4);
    s.arg("500011");
    let mut c = env.run(&client, 8);
    c.args(["4", "500011"]);
    both_ok(s, c);
}

#[test]
fn scatter_gather_checks_each_range_before_touching_memory() {
    alone_ok("tests/c/rsm/rsm_sgio.c");
}

#[test]
fn signals_reach_only_the_segment_they_are_meant_for() {
    alone_ok("tests/c/rsm/rsm_sigroute.c");
}

#[test]
fn fixed_and_reserved_maps_replace_the_programs_range() {
    // RSM_MAP_FIXED and RSM_MAP_RESERVED over the program's own mappings (Solaris's
    // MAP_FIXED), and the reservation put back by the unmap of a reserved map.
    alone_ok("tests/c/rsm/rsm_mapfix.c");
}
