//! The interconnect topology (`rsm_get_interconnect_topology`) and the segment-id
//! reservations (`rsm_get_segmentid_range`).

use crate::{Controller, Error, Result};
use remora_proto::{Reply, Request, ScifRequest};

/// A node this node reaches (`rsm_remote_cntlr_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Its id.
    pub node: u32,
    /// Its controller's name.
    pub controller: String,
    /// Reachable now (`RSM_CONNECTION_ACTIVE`).
    pub active: bool,
}

/// What this node's controller reaches (`rsm_topology_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// This node.
    pub local_node: u32,
    /// This node's controller.
    pub controller: String,
    /// Every other node it reaches: the nodes of this host and the nodes of other hosts
    /// whose links are up.
    pub neighbours: Vec<Neighbour>,
}

impl Topology {
    /// `rsm_get_interconnect_topology`.
    ///
    /// # Errors
    /// [`Error::Unreachable`] when the node's daemon is gone.
    pub fn get(ctl: &Controller) -> Result<Topology> {
        let me = ctl.local_node_id();
        let (reply, _) = ctl.session().request(Request::Scif(ScifRequest::Nodes), &[])?;
        let Reply::ScifNodes(nodes) = reply else {
            return Err(Error::Internal(format!("unexpected reply {reply:?}")));
        };
        Ok(Topology {
            local_node: me,
            controller: "remora0".into(),
            neighbours: nodes
                .into_iter()
                .filter(|n| *n != me)
                .map(|node| Neighbour { node, controller: "remora0".into(), active: true })
                .collect(),
        })
    }
}

/// `rsm_get_segmentid_range`: the ids reserved for application `appid` in the
/// segment-id file (`REMORA_RSM_SEGMENTID_FILE`, default `/etc/rsm/rsm.segmentid`): lines
/// `reserve <appid> <base, hex> <count>`, comments starting with `#`. Returns (base, count).
///
/// # Errors
/// [`Error::BadConf`] when the file is missing, unreadable or has a malformed line;
/// [`Error::BadAppId`] when it reserves nothing for `appid`.
pub fn segment_id_range(cfg: &remora_config::Config, appid: &str) -> Result<(u32, u32)> {
    let path = &cfg.rsm_segmentid_file;
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::BadConf(format!("{}: {e}", path.display())))?;
    parse_reservations(&text, appid).map_err(|e| match e {
        Error::BadConf(m) => Error::BadConf(format!("{}: {m}", path.display())),
        other => other,
    })
}

fn parse_reservations(text: &str, appid: &str) -> Result<(u32, u32)> {
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad =
            || Error::BadConf(format!("line {}: expected `reserve <appid> <base, hex> <count>`", n + 1));
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            return Err(bad());
        }
        // As Solaris's library: application ids and the keyword compare without case.
        if f[1].eq_ignore_ascii_case(appid) {
            if !f[0].eq_ignore_ascii_case("reserve") {
                return Err(bad());
            }
            let base = u32::from_str_radix(f[2].trim_start_matches("0x").trim_start_matches("0X"), 16)
                .map_err(|_| bad())?;
            let count: u32 = f[3].parse().map_err(|_| bad())?;
            return Ok((base, count));
        }
    }
    Err(Error::BadAppId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_read_as_the_guide_writes_them() {
        let text = "#keyword appid baseid length\nreserve SUNWfoo 0x600000 100\nreserve other 700000 5\n";
        assert_eq!(parse_reservations(text, "SUNWfoo"), Ok((0x600000, 100)));
        assert_eq!(parse_reservations(text, "other"), Ok((0x700000, 5)));
        assert_eq!(parse_reservations(text, "nope"), Err(Error::BadAppId));
        assert_eq!(parse_reservations(text, "sunwfoo"), Ok((0x600000, 100)), "ids compare without case");
        assert!(matches!(parse_reservations("reserve x", "x"), Err(Error::BadConf(_))));
        assert!(matches!(parse_reservations("reserve x zz 1", "x"), Err(Error::BadConf(_))));
    }
}
