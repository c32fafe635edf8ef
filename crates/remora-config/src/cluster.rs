//! The cluster file: every node of the cluster, where it listens, and the shared secret.
//!
//! ```toml
//! secret = "..."                 # or: secret_file = "/etc/remora/secret"
//! heartbeat_ms = 200             # optional: heartbeat period (default 200 ms)
//! force_tcp = false              # optional: reach even same-host nodes over TCP
//! transport = "tcp"              # optional: "tcp" (default), "ofi+tcp", "ofi+shm", "ofi+<provider>"
//! fallback = "tcp"               # optional: a node whose ofi provider is missing uses tcp
//! intr_pair = true               # optional: a process pair's plain interrupt triggers share
//!                                #   one TCP connection both ways (default true; see below)
//! [[node]]
//! id = 4
//! host = "10.0.0.1"
//! port = 7400
//! transport = "ofi+verbs"        # optional: this node's own transport
//! ofi_port = 7401                # optional: its ofi bootstrap port (default port + 1)
//! ```
//!
//! Two nodes of different hosts talk over libfabric when both name the same `ofi+`
//! transport, over TCP otherwise.
//!
//! `intr_pair` (default true) lets the higher node's process send its plain interrupt
//! triggers back on the flow the lower node's process dialed to it (issue 19: one TCP
//! connection per process pair, not two one-way ones); `intr_pair = false` gives each
//! direction its own flow. Every daemon reads it from its cluster file and says it to each
//! peer in the link handshake: two nodes pair only when both say yes (a node with
//! `false` beside others with `true` pairs with none of them, and loses nothing).
//!
//! Found at `REMORA_CLUSTER`, else `/etc/remora/cluster.toml`; with neither, a node knows only
//! the nodes of its own host.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAddr {
    /// The node id.
    pub id: u32,
    /// Host name or address it listens on.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// This node's transport (`tcp`, `ofi+<provider>`), else the cluster's.
    #[serde(default)]
    pub transport: Option<String>,
    /// The TCP port of its libfabric transport's bootstrap (default: `port + 1`).
    #[serde(default)]
    pub ofi_port: Option<u16>,
}

/// How two nodes of different hosts talk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// Remora's TCP transport.
    Tcp,
    /// libfabric, with this provider string for `fi_getinfo` (`"tcp;ofi_rxm"`, `"shm"`,
    /// `"verbs;ofi_rxm"`; empty: the first provider libfabric offers).
    Ofi(String),
}

impl LinkKind {
    /// Parse a `transport` value: `tcp`, `ofi` (libfabric's first provider), `ofi+tcp`
    /// (`tcp;ofi_rxm`), `ofi+verbs` (`verbs;ofi_rxm`), `ofi+<provider>` (as written, e.g.
    /// `ofi+shm`, `ofi+efa`, `ofi+verbs;ofi_rxm`).
    ///
    /// # Errors
    /// Any other word, named with what is allowed.
    pub fn parse(s: &str) -> Result<LinkKind, String> {
        match s.trim() {
            "tcp" => Ok(LinkKind::Tcp),
            "ofi" => Ok(LinkKind::Ofi(String::new())),
            "ofi+tcp" => Ok(LinkKind::Ofi("tcp;ofi_rxm".into())),
            "ofi+verbs" => Ok(LinkKind::Ofi("verbs;ofi_rxm".into())),
            w => match w.strip_prefix("ofi+") {
                Some(p) if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "_;-".contains(c)) => {
                    Ok(LinkKind::Ofi(p.into()))
                }
                _ => Err(format!(
                    "transport = \"{w}\" (allowed: \"tcp\", \"ofi\", \"ofi+tcp\", \"ofi+shm\", \"ofi+<provider>\")"
                )),
            },
        }
    }

    /// The word configuration and status use for it.
    pub fn name(&self) -> String {
        match self {
            LinkKind::Tcp => "tcp".into(),
            LinkKind::Ofi(p) if p.is_empty() => "ofi".into(),
            LinkKind::Ofi(p) => match p.strip_suffix(";ofi_rxm") {
                Some(base @ ("tcp" | "verbs")) => format!("ofi+{base}"),
                _ => format!("ofi+{p}"),
            },
        }
    }
}

#[derive(Debug, Deserialize)]
struct File {
    secret: Option<String>,
    secret_file: Option<PathBuf>,
    heartbeat_ms: Option<u64>,
    force_tcp: Option<bool>,
    transport: Option<String>,
    fallback: Option<String>,
    intr_pair: Option<bool>,
    #[serde(default)]
    node: Vec<NodeAddr>,
}

/// A parsed cluster file. Its `Debug` form never shows the secret (a log line that
/// prints a configuration must not carry it).
#[derive(Clone)]
pub struct Cluster {
    /// The shared secret that authenticates daemons to each other.
    pub secret: Vec<u8>,
    /// Every node.
    pub nodes: Vec<NodeAddr>,
    /// The heartbeat period.
    pub heartbeat: Duration,
    /// Use TCP even to nodes that share this host's runtime directory.
    pub force_tcp: bool,
    /// The transport of nodes that do not name their own.
    pub transport: LinkKind,
    /// A node whose libfabric provider is missing falls back to TCP (`fallback = "tcp"`);
    /// otherwise it refuses to start.
    pub fallback_tcp: bool,
    /// `intr_pair`: a process pair's plain interrupt triggers share one TCP connection both
    /// ways (see the module's documentation; default on).
    pub intr_pair: bool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("secret", &format_args!("<{} bytes, not shown>", self.secret.len()))
            .field("nodes", &self.nodes)
            .field("heartbeat", &self.heartbeat)
            .field("force_tcp", &self.force_tcp)
            .field("transport", &self.transport)
            .field("fallback_tcp", &self.fallback_tcp)
            .field("intr_pair", &self.intr_pair)
            .finish()
    }
}

impl Cluster {
    /// Parse a cluster file.
    ///
    /// # Errors
    /// A message naming what is wrong: unreadable file, bad TOML, no secret, a secret
    /// shorter than 16 bytes, duplicate node ids.
    pub fn load(path: &Path) -> Result<Cluster, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Cluster::parse(&text, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parse cluster-file text (`base` resolves a relative `secret_file`).
    ///
    /// # Errors
    /// As [`Cluster::load`].
    pub fn parse(text: &str, base: &Path) -> Result<Cluster, String> {
        Cluster::parse_with(text, base, |p| std::fs::read(p))
    }

    /// [`Cluster::parse`], reading a `secret_file` with `read` (the fuzz targets read no
    /// files).
    ///
    /// # Errors
    /// As [`Cluster::load`].
    pub fn parse_with(
        text: &str,
        base: &Path,
        read: impl FnOnce(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Cluster, String> {
        let f: File = toml::from_str(text).map_err(|e| format!("cluster file: {e}"))?;
        let secret = match (f.secret, f.secret_file) {
            (Some(s), None) => s.into_bytes(),
            (None, Some(p)) => {
                let p = if p.is_absolute() { p } else { base.join(p) };
                let s = read(&p).map_err(|e| format!("secret_file {}: {e}", p.display()))?;
                String::from_utf8_lossy(&s).trim().as_bytes().to_vec()
            }
            (Some(_), Some(_)) => {
                return Err("cluster file: give either secret or secret_file, not both".into())
            }
            (None, None) => return Err("cluster file: no secret (secret or secret_file)".into()),
        };
        if secret.len() < 16 {
            return Err("cluster file: the secret must have at least 16 bytes".into());
        }
        for n in &f.node {
            if n.id == 0 || n.id > crate::MAX_NODE {
                return Err(format!("cluster file: node id {} (allowed: 1..={})", n.id, crate::MAX_NODE));
            }
            if n.port == 0 {
                return Err(format!("cluster file: node {} has port 0 (allowed: 1..=65535)", n.id));
            }
            if n.host.trim().is_empty() {
                return Err(format!("cluster file: node {} has an empty host", n.id));
            }
            if let Some(t) = &n.transport {
                LinkKind::parse(t).map_err(|e| format!("cluster file: node {}: {e}", n.id))?;
            }
            if n.ofi_port == Some(0) || (n.ofi_port.is_none() && n.port == u16::MAX) {
                return Err(format!("cluster file: node {} has no ofi_port (allowed: 1..=65535)", n.id));
            }
        }
        let transport = match &f.transport {
            Some(t) => LinkKind::parse(t).map_err(|e| format!("cluster file: {e}"))?,
            None => LinkKind::Tcp,
        };
        let fallback_tcp = match f.fallback.as_deref() {
            None | Some("none") => false,
            Some("tcp") => true,
            Some(w) => return Err(format!("cluster file: fallback = \"{w}\" (allowed: \"tcp\", \"none\")")),
        };
        if let Some(h) = f.heartbeat_ms.filter(|h| !(10..=60_000).contains(h)) {
            return Err(format!("cluster file: heartbeat_ms = {h} (allowed: 10..=60000)"));
        }
        let mut ids: Vec<u32> = f.node.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err("cluster file: a node id appears twice".into());
        }
        Ok(Cluster {
            secret,
            nodes: f.node,
            heartbeat: Duration::from_millis(f.heartbeat_ms.unwrap_or(200)),
            force_tcp: f.force_tcp.unwrap_or(false),
            transport,
            fallback_tcp,
            intr_pair: f.intr_pair.unwrap_or(true),
        })
    }

    /// The cluster file the configuration names (`REMORA_CLUSTER`), else
    /// `/etc/remora/cluster.toml` if it exists; `None` without either.
    ///
    /// # Errors
    /// As [`Cluster::load`], for a file that is named or exists but is malformed.
    pub fn find(cfg: &crate::Config) -> Result<Option<Cluster>, String> {
        if let Some(p) = &cfg.cluster_file {
            return Cluster::load(p).map(Some);
        }
        let default = Path::new("/etc/remora/cluster.toml");
        if default.exists() {
            return Cluster::load(default).map(Some);
        }
        Ok(None)
    }

    /// The address of `node`.
    pub fn addr(&self, node: u32) -> Option<&NodeAddr> {
        self.nodes.iter().find(|n| n.id == node)
    }

    /// The transport `node` names (its own `transport`, else the cluster's); `None` for a
    /// node not in the file.
    pub fn kind(&self, node: u32) -> Option<LinkKind> {
        let n = self.addr(node)?;
        Some(match &n.transport {
            Some(t) => LinkKind::parse(t).unwrap_or(LinkKind::Tcp),
            None => self.transport.clone(),
        })
    }

    /// The port of `node`'s libfabric bootstrap: `ofi_port`, else `port + 1`.
    pub fn ofi_port(&self, node: u32) -> Option<u16> {
        let n = self.addr(node)?;
        n.ofi_port.or(n.port.checked_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_form_and_rejects_bad_ones() {
        let c = Cluster::parse(
            "secret = \"0123456789abcdef\"\n[[node]]\nid = 4\nhost = \"10.0.0.1\"\nport = 7400\n[[node]]\nid = 8\nhost = \"10.0.0.2\"\nport = 7400\n",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.addr(8).unwrap().host, "10.0.0.2");
        assert_eq!(c.heartbeat, Duration::from_millis(200));
        assert!(c.intr_pair, "the interrupt pairing is on unless the file turns it off");
        let off =
            Cluster::parse("secret = \"0123456789abcdef\"\nintr_pair = false\n", Path::new("/")).unwrap();
        assert!(!off.intr_pair);
        let bad =
            Cluster::parse("secret = \"0123456789abcdef\"\nintr_pair = 1\n", Path::new("/")).unwrap_err();
        assert!(bad.contains("intr_pair"), "{bad}");
        assert!(Cluster::parse("[[node]]\nid=1\nhost=\"a\"\nport=1\n", Path::new("/")).is_err());
        assert!(Cluster::parse("secret=\"short\"\n", Path::new("/")).is_err());
        let shown = format!("{c:?}");
        assert!(!shown.contains("0123456789abcdef") && !shown.contains("48, 49, 50"), "{shown}");
        assert!(Cluster::parse(
            "secret=\"0123456789abcdef\"\n[[node]]\nid=1\nhost=\"a\"\nport=1\n[[node]]\nid=1\nhost=\"b\"\nport=2\n",
            Path::new("/")
        )
        .is_err());
        let dir = std::env::temp_dir().join(format!("remora-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s"), "abcdefghijklmnopqrstuvwxyz\n").unwrap();
        let c = Cluster::parse("secret_file = \"s\"\n", &dir).unwrap();
        for bad in ["id = 0", "id = 70000"] {
            let text = format!("secret=\"0123456789abcdef\"\n[[node]]\n{bad}\nhost=\"a\"\nport=1\n");
            assert!(Cluster::parse(&text, Path::new("/")).unwrap_err().contains("node id"));
        }
        let zero_port = "secret=\"0123456789abcdef\"\n[[node]]\nid=4\nhost=\"a\"\nport=0\n";
        assert!(Cluster::parse(zero_port, Path::new("/")).unwrap_err().contains("port 0"));
        let hb = "secret=\"0123456789abcdef\"\nheartbeat_ms = 1\n";
        assert!(Cluster::parse(hb, Path::new("/")).unwrap_err().contains("heartbeat_ms = 1"));
        assert_eq!(c.secret, b"abcdefghijklmnopqrstuvwxyz");
    }

    #[test]
    fn transports_per_node_and_for_all() {
        let text = "secret = \"0123456789abcdef\"\ntransport = \"ofi+tcp\"\nfallback = \"tcp\"\n\
                    [[node]]\nid = 4\nhost = \"a\"\nport = 7400\n\
                    [[node]]\nid = 8\nhost = \"b\"\nport = 7400\ntransport = \"ofi+shm\"\nofi_port = 9000\n\
                    [[node]]\nid = 12\nhost = \"c\"\nport = 7400\ntransport = \"tcp\"\n";
        let c = Cluster::parse(text, Path::new("/")).unwrap();
        assert!(c.fallback_tcp);
        assert_eq!(c.kind(4), Some(LinkKind::Ofi("tcp;ofi_rxm".into())));
        assert_eq!(c.kind(8), Some(LinkKind::Ofi("shm".into())));
        assert_eq!(c.kind(12), Some(LinkKind::Tcp));
        assert_eq!((c.ofi_port(4), c.ofi_port(8)), (Some(7401), Some(9000)));
        assert_eq!(LinkKind::parse("ofi+verbs;ofi_rxm").unwrap().name(), "ofi+verbs");
        for w in ["tcp", "ofi", "ofi+tcp", "ofi+shm", "ofi+efa", "ofi+net;ofi_rxm"] {
            assert_eq!(LinkKind::parse(w).unwrap().name(), w, "name() gives back what parse() took");
        }
        for bad in ["transport = \"udp\"", "transport = \"ofi+\"", "fallback = \"udp\""] {
            let t = format!("secret = \"0123456789abcdef\"\n{bad}\n");
            assert!(Cluster::parse(&t, Path::new("/")).unwrap_err().contains(bad.split(' ').next().unwrap()));
        }
        let plain = Cluster::parse("secret = \"0123456789abcdef\"\n", Path::new("/")).unwrap();
        assert!(plain.transport == LinkKind::Tcp && !plain.fallback_tcp);
    }
}
