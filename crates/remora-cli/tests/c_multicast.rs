//! Reflective memory from C: `tests/c/reflective.c` built against the installed headers,
//! three members on three nodes of this host and a late member on a fourth.

mod c_support;
use c_support::*;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn every_member_sees_every_store_and_a_late_member_the_current_data() {
    let env = Env::new();
    let exe = env.build(&root().join("tests/c/reflective.c"), &[]);
    let nodes = [4u32, 8, 12];
    let mut members: Vec<Reap> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut c = env.run(&exe, *n);
            c.args([i.to_string(), nodes.len().to_string()]).stdout(Stdio::piped()).stderr(Stdio::piped());
            Reap(c.spawn().unwrap())
        })
        .collect();
    // Each member says when it has seen all the others' stores.
    let mut outs = Vec::new();
    for (i, m) in members.iter_mut().enumerate() {
        let mut lines = BufReader::new(m.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        if !first.contains("saw all 3 members") {
            let mut err = String::new();
            m.stderr.as_mut().unwrap().read_to_string(&mut err).unwrap();
            panic!("member {i}: {first}{err}");
        }
        outs.push(lines);
    }
    // Now a late member joins on a fourth node, checks the current data and stores.
    let late = env.run(&exe, 16).args(["late", "3"]).output().unwrap();
    let said = String::from_utf8_lossy(&late.stdout).to_string() + &String::from_utf8_lossy(&late.stderr);
    assert!(late.status.success() && said.contains("checks passed"), "late member: {said}");
    for ((i, m), mut lines) in members.iter_mut().enumerate().zip(outs) {
        let status = wait_with_timeout(m, Duration::from_secs(60));
        let (mut out, mut err) = (String::new(), String::new());
        lines.read_to_string(&mut out).unwrap();
        m.stderr.as_mut().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success() && out.contains("checks passed"), "member {i} ({status:?}): {out}{err}");
    }
}
