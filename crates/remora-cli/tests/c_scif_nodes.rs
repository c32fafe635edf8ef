//! `scif_get_nodeIDs` from C: whole node ids up to the largest Remora allows (65535),
//! never ids cut to SCIF's 16 bits.

mod c_support;
use c_support::*;

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
