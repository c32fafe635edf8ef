//! `multicast` across hosts: members of one reflective-memory group on two hosts of a
//! namespace cluster (veth and a bridge between them, as between machines). The writer, a
//! process of the first host, stores one word through the group's multicast map and calls
//! `SCIFlush`; a round ends when the member of the other host holds it. The reference is
//! what a program without multicast does: the same word stored into an ordinary map of each
//! member (`SCI_FLAG_ALLOW_UNICAST`: a shared mapping on its own host, a DSM map of the
//! other), then `SCIFlush`, until the other host's member holds it. Needs root and
//! iproute2; says why and returns otherwise.

use super::common::*;
use remora_sisci::{Descriptor, LocalSegment, Map, MapFlags, RemoteSegment, Sisci};
use std::time::{Duration, Instant};

const GROUP: u32 = 5;
const SIZE: usize = 4096;

fn word(m: &Map) -> Result<u64, String> {
    let mut b = [0u8; 8];
    m.read(0, &mut b).map_err(e)?;
    Ok(u64::from_le_bytes(b))
}

/// Nanoseconds from the stores of `v` into `maps` (then `SCIFlush`) until `far` holds it.
fn round(maps: &[Map], far: &Map, v: u64) -> Result<f64, String> {
    let t = Instant::now();
    for m in maps {
        m.write(0, &v.to_le_bytes()).map_err(e)?;
    }
    remora_sisci::flush();
    while word(far)? != v {
        if t.elapsed() > Duration::from_secs(5) {
            return Err(format!("the other host's member never saw {v}"));
        }
        std::hint::spin_loop();
    }
    Ok(t.elapsed().as_nanos() as f64)
}

pub(crate) fn multicast_across_hosts(rounds: u32) -> Result<(), String> {
    let c = match netns_hosts(2) {
        Ok(c) => c,
        Err(why) => {
            println!("(multicast across namespace hosts skipped: {why})");
            return Ok(());
        }
    };
    let t = Some(Duration::from_secs(10));
    let scis: Vec<Sisci> = (1..=2).map(|k| Sisci::with_config(c.client_config(k))).collect();
    let devs: Vec<Descriptor> =
        scis.iter().map(|s| Descriptor::open(s).map_err(e)).collect::<Result<_, _>>()?;
    let (mut members, mut locals) = (vec![], vec![]);
    for d in &devs {
        let s = LocalSegment::create_broadcast(d, GROUP, SIZE, true, None).map_err(e)?;
        s.prepare(0).map_err(e)?;
        s.set_available(0).map_err(e)?;
        locals.push(s.map(0, SIZE, None, MapFlags::default()).map_err(e)?);
        members.push(s);
    }
    let cast = RemoteSegment::connect_group(&devs[0], GROUP, 0, t).map_err(e)?;
    let cast_map = vec![cast.map(0, SIZE, None, MapFlags::default()).map_err(e)?];
    let unis: Vec<RemoteSegment> = [c.node(1), c.node(2)]
        .iter()
        .map(|&n| RemoteSegment::connect(&devs[0], n, GROUP, 0, t).map_err(e))
        .collect::<Result<_, _>>()?;
    let uni_maps: Vec<Map> = unis
        .iter()
        .map(|u| u.map(0, SIZE, None, MapFlags::default()).map_err(e))
        .collect::<Result<_, _>>()?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut v = 0u64;
    // Alternating, after a warm-up round of each (faults, flows).
    for r in 0..=rounds.max(1) * 20 {
        for kind in [r % 2, 1 - r % 2] {
            v += 1;
            let (maps, into) = if kind == 0 { (&cast_map, &mut ours) } else { (&uni_maps, &mut theirs) };
            let ns = round(maps, &locals[1], v)?;
            if r > 0 {
                into.push(ns);
            }
        }
    }
    if word(&locals[0])? != v {
        return Err("this host's member missed a store".into());
    }
    let (o, th) = (median(&mut ours), median(&mut theirs));
    row_us("multicast store to 2 hosts, seen", o, th, "≤ 1.10 (a store per member + flush)");
    drop((cast_map, uni_maps, locals));
    for u in unis {
        u.disconnect().map_err(e)?;
    }
    cast.disconnect().map_err(e)?;
    for s in members {
        s.remove().map_err(e)?;
    }
    Ok(())
}
