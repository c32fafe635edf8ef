//! `SCIQuery` answers that do not depend on a handle.

use crate::{check_adapter, Error, Result, Sisci};

/// What `SCIQuery(SCI_Q_ADAPTER, …)` reports about adapter 0 of a Remora node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterInfo {
    /// The node id.
    pub node_id: u32,
    /// Required alignment of DMA sizes (Remora's engine copies bytes: 1).
    pub dma_size_alignment: u32,
    /// Required alignment of DMA offsets (1).
    pub dma_offset_alignment: u32,
    /// Largest single DMA transfer the engine moves in one step.
    pub dma_mtu: u32,
    /// The adapter is configured (a node id is set).
    pub configured: bool,
    /// The link works: the node daemon answers.
    pub link_operational: bool,
    /// Links of the adapter (one: the host's shared memory, later the network).
    pub number_of_links: u32,
}

impl Sisci {
    /// `SCIQuery(SCI_Q_ADAPTER, …)` for `adapter`.
    ///
    /// # Errors
    /// [`crate::Error::NoSuchAdapter`] for adapters other than 0.
    pub fn adapter_info(&self, adapter: u32) -> Result<AdapterInfo> {
        check_adapter(adapter)?;
        let link = remora_client::Session::open_control(self.config()).is_ok();
        Ok(AdapterInfo {
            node_id: self.local_node_id(),
            dma_size_alignment: 1,
            dma_offset_alignment: 1,
            dma_mtu: 1 << 20,
            configured: true,
            link_operational: link,
            number_of_links: 1,
        })
    }

    /// How long the adapter's link has been up, in seconds: the time since this node's
    /// daemon started (`SCI_Q_ADAPTER_LINK_UPTIME`); `None` when the daemon does not answer.
    pub fn node_uptime(&self) -> Option<u64> {
        let s = remora_client::Session::open_control(self.config()).ok()?;
        match s.request(remora_proto::Request::Status, &[]).ok()?.0 {
            remora_proto::Reply::Status(st) => Some(st.uptime_s),
            _ => None,
        }
    }

    /// `SCIQuery(SCI_Q_VENDORID)`.
    pub fn vendor_string(&self) -> &'static str {
        "Remora (software interconnect)"
    }

    /// `SCIQuery(SCI_Q_API)`.
    pub fn api_string(&self) -> String {
        format!("SISCI API version 2.0.0 (Remora {})", env!("CARGO_PKG_VERSION"))
    }

    /// `SCIQuery(SCI_Q_SYSTEM, SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE)`.
    pub fn cache_line_size(&self) -> u32 {
        remora_sys::cache_line_size() as u32
    }

    /// `SCIGetNodeIdByAdapterName`: the nodes of host `name`, sorted. This host's name
    /// (or `localhost`) gives this host's nodes: the configured node and every node with a
    /// socket in the runtime directory. Through the cluster file, a name gives the nodes
    /// whose `host` is that name (case aside; a short name matches its fully qualified
    /// form), or, when no entry names it, whose `host` resolves to one of its addresses.
    ///
    /// # Errors
    /// [`Error::IllegalParameter`] for an empty name or a malformed cluster file;
    /// [`Error::NoSuchNode`] when no node belongs to the name.
    pub fn nodes_of_host(&self, name: &str) -> Result<Vec<u32>> {
        let name = name.trim();
        if name.is_empty() {
            return Err(Error::IllegalParameter("empty host name".into()));
        }
        let cfg = self.config();
        let mut ids = Vec::new();
        let this = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        if same_host(name, this.trim()) || name.eq_ignore_ascii_case("localhost") {
            ids.push(cfg.node);
            ids.extend(remora_proto::paths::nodes_in(&cfg.runtime_dir));
        }
        let default = std::path::Path::new("/etc/remora/cluster.toml");
        let file = cfg.cluster.clone().or_else(|| default.exists().then(|| default.to_path_buf()));
        let cluster = file.map(|f| remora_config::cluster::Cluster::load(&f)).transpose();
        let cluster = cluster.map_err(Error::IllegalParameter)?;
        if let Some(c) = cluster {
            let named: Vec<u32> = c.nodes.iter().filter(|n| same_host(&n.host, name)).map(|n| n.id).collect();
            if named.is_empty() {
                let wanted = addresses(name);
                if !wanted.is_empty() {
                    ids.extend(
                        c.nodes
                            .iter()
                            .filter(|n| addresses(&n.host).iter().any(|a| wanted.contains(a)))
                            .map(|n| n.id),
                    );
                }
            }
            ids.extend(named);
        }
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Err(Error::NoSuchNode);
        }
        Ok(ids)
    }
}

/// Whether two host names name the same host: equal but for case, or one is the short form
/// (the part before the first dot) of the other.
fn same_host(a: &str, b: &str) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    a.eq_ignore_ascii_case(b)
        || (!a.contains('.') && short(b) == a.to_ascii_lowercase())
        || (!b.contains('.') && short(a) == b.to_ascii_lowercase())
}

/// The addresses a host name or address resolves to (none when it does not resolve).
fn addresses(host: &str) -> Vec<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    (host, 0).to_socket_addrs().map(|it| it.map(|a| a.ip()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::same_host;

    #[test]
    fn host_names_match_case_and_short_forms() {
        assert!(same_host("Node1", "node1"));
        assert!(same_host("node1", "node1.example.org"));
        assert!(same_host("node1.example.org", "NODE1"));
        assert!(!same_host("node1.a.org", "node1.b.org"));
        assert!(!same_host("node1", "node10"));
        assert!(!same_host("", "x"));
    }
}
