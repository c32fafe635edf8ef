//! The name service (`VipNSGetHostByName` / `ByAddr`): node ids by decimal number, by
//! `localhost` or this machine's host name, and by the host names of the cluster file.

use crate::{Error, Nic, Result};

fn this_host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())
}

fn cluster() -> Option<remora_config::cluster::Cluster> {
    remora_config::cluster::Cluster::find(remora_config::Config::get()).ok().flatten()
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
    if let Some(c) = cluster() {
        if let Some(n) = c.nodes.iter().find(|n| n.host == name) {
            return Ok(n.id);
        }
    }
    Err(Error::NameService(format!("no node named {name:?}")))
}

/// A name for node `node`: its host in the cluster file, else its decimal id.
pub(crate) fn name_of(nic: &Nic, node: u32) -> String {
    if node != nic.node() {
        if let Some(n) = cluster().and_then(|c| c.addr(node).map(|a| a.host.clone())) {
            return n;
        }
    }
    node.to_string()
}

/// This node and the nodes of the cluster file.
pub(crate) fn known(nic: &Nic) -> Vec<u32> {
    let mut v = vec![nic.node()];
    if let Some(c) = cluster() {
        v.extend(c.nodes.iter().map(|n| n.id).filter(|n| *n != nic.node()));
    }
    v
}
