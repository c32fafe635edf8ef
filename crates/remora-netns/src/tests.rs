//! Unit tests of the cluster builder (the cluster tests need root and skip without it).

use super::*;

#[test]
fn names_of_our_namespaces_are_recognised() {
    assert_eq!(owner_pid("rmr1234x0sw"), Some(1234));
    assert_eq!(owner_pid("rmr1234x17h3"), Some(1234));
    assert_eq!(owner_pid("rmr1234x17h"), None);
    assert_eq!(owner_pid("rmr1234xsw"), None);
    assert_eq!(owner_pid("rmrx1h1"), None);
    assert_eq!(owner_pid("remora-h1"), None);
    assert_eq!(owner_pid("rmr12a4x1h1"), None);
    assert_eq!(owner_pid("rmr1234x1h1extra"), None);
}

#[test]
fn listening_sockets_are_found_by_path() {
    let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
        0000000000000000: 00000002 00000000 00010000 0005 01 12345 /tmp/x/node-4.sock\n\
        0000000000000000: 00000002 00000000 00000000 0005 03 12346 /tmp/x/node-8.sock\n";
    assert!(listening(table, "/tmp/x/node-4.sock"));
    assert!(!listening(table, "/tmp/x/node-8.sock"));
    assert!(!listening(table, "/tmp/y/node-4.sock"));
}

#[test]
fn secrets_are_32_hex_characters() {
    let s = random_hex(16);
    assert_eq!(s.len(), 32);
    assert!(s.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(s, random_hex(16));
}

fn namespaces() -> String {
    let ip = find_ip().expect("ip");
    String::from_utf8_lossy(&Command::new(ip).args(["netns", "list"]).output().unwrap().stdout).into_owned()
}

#[test]
fn two_clusters_can_exist_at_once() {
    let daemon = match find_daemon() {
        Ok(d) => d,
        Err(skip) => return eprintln!("{skip}"),
    };
    let a = match NetCluster::start(2, &daemon) {
        Ok(c) => c,
        Err(skip) => return eprintln!("{skip}"),
    };
    let b = NetCluster::start(1, &daemon).expect("a second cluster");
    assert_ne!(a.namespace(1), b.namespace(1));
    assert_ne!(a.switch_namespace(), b.switch_namespace());
    assert_ne!(a.secret(), b.secret());
    assert_ne!(a.cluster_file(), b.cluster_file());
    for (c, k) in [(&a, 1), (&a, 2), (&b, 1)] {
        assert!(c.runtime_dir(k).join(format!("node-{}.sock", c.node(k))).exists());
        assert!(c.daemon_pid(k).is_some());
    }
    let listed = namespaces();
    let names: Vec<String> =
        [a.namespace(1), a.namespace(2), a.switch_namespace(), b.namespace(1), b.switch_namespace()]
            .map(str::to_string)
            .to_vec();
    for n in &names {
        assert!(listed.lines().any(|l| l.split_whitespace().next() == Some(n)), "{n} missing");
    }
    drop(a);
    drop(b);
    let listed = namespaces();
    for n in &names {
        assert!(!listed.lines().any(|l| l.split_whitespace().next() == Some(n)), "{n} left behind");
    }
}

#[test]
fn left_shm_regions_go_unless_a_process_maps_them() {
    if !Path::new("/dev/shm").is_dir() {
        return eprintln!("skipped: no /dev/shm here");
    }
    // Names no cluster uses (the subnet field is above 255).
    let prefix = format!("10.77.300.{}", std::process::id() % 200);
    let (gone, kept) = (format!("/dev/shm/{prefix}:0:0"), format!("/dev/shm/{prefix}:0:1"));
    for p in [&gone, &kept] {
        fs::write(p, [0u8; 4096]).unwrap();
    }
    let file = fs::File::open(&kept).unwrap();
    let opts = remora_sys::mapping::MapOptions { readonly: true, fixed_addr: None };
    let map = remora_sys::mapping::Mapping::new(std::os::fd::AsFd::as_fd(&file), 0, 4096, opts).unwrap();
    remove_shm_regions(&prefix);
    assert!(!Path::new(&gone).exists(), "a region nobody maps was left");
    assert!(Path::new(&kept).exists(), "a region a live process maps was removed");
    drop(map);
    remove_shm_regions(&prefix);
    assert!(!Path::new(&kept).exists());
}
