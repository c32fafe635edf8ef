//! The name service (`VipNSGetHostByName` / `ByAddr`): node ids by decimal number, by
//! `localhost` or this machine's host name, and by the host names of the cluster file.
//!
//! Several nodes may share a host in the cluster file (nodes of one machine). Its host name
//! then stands for the first of them the file lists; that node's name is the host name,
//! every other node's name is its decimal id. So a name turns into an address and back into
//! the same name, and an address into a name and back into the same address.

use crate::{Error, Nic, Result};
use remora_config::cluster::Cluster;

fn this_host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())
}

fn cluster() -> Option<Cluster> {
    Cluster::find(remora_config::Config::get()).ok().flatten()
}

/// The node a host name of the cluster file stands for: the first node listed there.
fn by_host(c: &Cluster, host: &str) -> Option<u32> {
    c.nodes.iter().find(|n| n.host == host).map(|n| n.id)
}

/// The node `name` stands for.
pub(crate) fn resolve(nic: &Nic, name: &str) -> Result<u32> {
    let name = name.trim_end_matches('\0');
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        return match name.parse::<u32>() {
            Ok(n) if (1..=remora_config::MAX_NODE).contains(&n) => Ok(n),
            _ => Err(Error::NameService(format!("no node {name}"))),
        };
    }
    if name == "localhost" || this_host().is_some_and(|h| h == name) {
        return Ok(nic.node());
    }
    if let Some(n) = cluster().and_then(|c| by_host(&c, name)) {
        return Ok(n);
    }
    Err(Error::NameService(format!("no node named {name:?}")))
}

/// The name of `node` in cluster file `c`: its host when the host stands for it, else its
/// decimal id.
fn name_in(c: Option<&Cluster>, node: u32) -> String {
    c.and_then(|c| c.nodes.iter().find(|n| n.id == node).filter(|n| by_host(c, &n.host) == Some(node)))
        .map_or_else(|| node.to_string(), |n| n.host.clone())
}

/// A name for node `node` (see the module's doc).
pub(crate) fn name_of(node: u32) -> String {
    name_in(cluster().as_ref(), node)
}

/// This node and the nodes of the cluster file.
pub(crate) fn known(nic: &Nic) -> Vec<u32> {
    let mut v = vec![nic.node()];
    if let Some(c) = cluster() {
        v.extend(c.nodes.iter().map(|n| n.id).filter(|n| *n != nic.node()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(nodes: &[(u32, &str)]) -> Cluster {
        let mut t = String::from("secret = \"0123456789abcdef0123\"\n");
        for (i, (id, host)) in nodes.iter().enumerate() {
            t += &format!("[[node]]\nid = {id}\nhost = \"{host}\"\nport = {}\n", 7400 + i);
        }
        Cluster::parse(&t, std::path::Path::new("/")).unwrap()
    }

    #[test]
    fn a_shared_host_stands_for_its_first_node_and_names_round_trip() {
        let c = file(&[(8, "10.0.0.1"), (4, "10.0.0.1"), (12, "10.0.0.2")]);
        assert_eq!(by_host(&c, "10.0.0.1"), Some(8));
        assert_eq!(by_host(&c, "10.0.0.2"), Some(12));
        assert_eq!(by_host(&c, "10.0.0.3"), None);
        assert_eq!(name_in(Some(&c), 8), "10.0.0.1");
        assert_eq!(name_in(Some(&c), 4), "4");
        assert_eq!(name_in(Some(&c), 12), "10.0.0.2");
        assert_eq!(name_in(Some(&c), 16), "16");
        assert_eq!(name_in(None, 8), "8");
        // name -> node -> name, and node -> name -> node.
        for host in ["10.0.0.1", "10.0.0.2"] {
            assert_eq!(name_in(Some(&c), by_host(&c, host).unwrap()), host);
        }
        for node in [4u32, 8, 12] {
            let name = name_in(Some(&c), node);
            let back = by_host(&c, &name).unwrap_or_else(|| name.parse().unwrap());
            assert_eq!(back, node);
        }
    }
}
