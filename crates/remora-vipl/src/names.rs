//! The name service (`VipNSGetHostByName` / `ByAddr`): node ids by decimal number, by
//! `localhost` or this machine's host name, and by the host names of the cluster file.
//!
//! Several nodes may share a host in the cluster file (nodes of one machine). Its host name
//! then stands for the first of them the file lists; `localhost` and this machine's host
//! name stand for this node, whatever the file lists with them. A node whose host stands
//! for it is named by that host, every other node by its decimal id. So a name turns into
//! an address and back into the same name, and an address into a name and back into the
//! same address.

use crate::{Error, Nic, Result};
use remora_config::cluster::Cluster;

fn this_host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())
}

fn cluster() -> Option<Cluster> {
    Cluster::find(remora_config::Config::get()).ok().flatten()
}

/// Where names are looked up: the cluster file (if any), this node, this machine's host
/// name (if known).
struct Names<'a> {
    cluster: Option<&'a Cluster>,
    me: u32,
    host: Option<&'a str>,
}

impl Names<'_> {
    /// The node a (non-numeric) name stands for: this node for `localhost` and this
    /// machine's host name, else the first node the cluster file lists with that host.
    fn node(&self, name: &str) -> Option<u32> {
        if name == "localhost" || self.host == Some(name) {
            return Some(self.me);
        }
        self.cluster.and_then(|c| c.nodes.iter().find(|n| n.host == name)).map(|n| n.id)
    }

    /// The name of `node`: its host in the cluster file when that host stands for it,
    /// else its decimal id.
    fn name(&self, node: u32) -> String {
        self.cluster
            .and_then(|c| c.nodes.iter().find(|n| n.id == node))
            .filter(|n| self.node(&n.host) == Some(node))
            .map_or_else(|| node.to_string(), |n| n.host.clone())
    }
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
    let (c, host) = (cluster(), this_host());
    let names = Names { cluster: c.as_ref(), me: nic.node(), host: host.as_deref() };
    names.node(name).ok_or_else(|| Error::NameService(format!("no node named {name:?}")))
}

/// A name for node `node`, as `nic` resolves it back (see the module's doc).
pub(crate) fn name_of(nic: &Nic, node: u32) -> String {
    let (c, host) = (cluster(), this_host());
    Names { cluster: c.as_ref(), me: nic.node(), host: host.as_deref() }.name(node)
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

    /// name -> node -> name for `names` (names the service gives: not an alias such as
    /// `localhost` for a node it names otherwise), and node -> name -> node for `nodes`.
    fn round_trips(n: &Names, names: &[&str], nodes: &[u32]) {
        for name in names {
            assert_eq!(n.name(n.node(name).unwrap()), *name, "the name {name}");
        }
        for node in nodes {
            let name = n.name(*node);
            let back = n.node(&name).unwrap_or_else(|| name.parse().unwrap());
            assert_eq!(back, *node, "node {node}, named {name}");
        }
    }

    #[test]
    fn a_shared_host_stands_for_its_first_node_and_names_round_trip() {
        let c = file(&[(8, "10.0.0.1"), (4, "10.0.0.1"), (12, "10.0.0.2")]);
        let n = Names { cluster: Some(&c), me: 12, host: Some("elsewhere") };
        assert_eq!(n.node("10.0.0.1"), Some(8));
        assert_eq!(n.node("10.0.0.2"), Some(12));
        assert_eq!(n.node("10.0.0.3"), None);
        assert_eq!(n.name(8), "10.0.0.1");
        assert_eq!(n.name(4), "4");
        assert_eq!(n.name(12), "10.0.0.2");
        assert_eq!(n.name(16), "16");
        assert_eq!(Names { cluster: None, me: 12, host: None }.name(8), "8");
        round_trips(&n, &["10.0.0.1", "10.0.0.2"], &[4, 8, 12]);
    }

    /// A host of the cluster file that is `localhost` or this machine's own name stands for
    /// this node (as `VipNSGetHostByName("localhost")` gives this node), though the file
    /// lists another node with it first: that node is named by its decimal id.
    #[test]
    fn localhost_and_this_machine_s_name_stand_for_this_node_in_both_directions() {
        let c = file(&[(2, "myhost"), (4, "myhost"), (6, "localhost"), (10, "localhost"), (8, "10.0.0.1")]);
        let n = Names { cluster: Some(&c), me: 4, host: Some("myhost") };
        assert_eq!(n.node("myhost"), Some(4));
        assert_eq!(n.node("localhost"), Some(4));
        assert_eq!(n.name(2), "2");
        assert_eq!(n.name(4), "myhost");
        assert_eq!(n.name(6), "6");
        assert_eq!(n.name(10), "10");
        assert_eq!(n.name(8), "10.0.0.1");
        round_trips(&n, &["myhost", "10.0.0.1"], &[2, 4, 6, 8, 10]);
        // This node listed with `localhost` is named so.
        let n = Names { cluster: Some(&c), me: 10, host: Some("myhost") };
        assert_eq!(n.name(10), "localhost");
        assert_eq!(n.name(2), "2");
        round_trips(&n, &["localhost", "10.0.0.1"], &[2, 4, 6, 8, 10]);
        // This machine's name unknown: the file's first node with it stands for it.
        let n = Names { cluster: Some(&c), me: 4, host: None };
        assert_eq!((n.node("myhost"), n.name(2), n.name(4)), (Some(2), "myhost".into(), "4".into()));
        round_trips(&n, &["myhost", "10.0.0.1"], &[2, 4, 6, 8, 10]);
    }
}
