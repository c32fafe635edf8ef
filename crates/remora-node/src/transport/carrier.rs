//! Which of the two link transports carries a node of another host: `tcp`, or the fabric
//! (`ofi`) when both nodes name the same `ofi+` transport in the cluster file and this
//! node's endpoint opened. Kept apart from both transports so that neither has to know the
//! other: the fabric says here when its endpoint opened; tcp asks here which nodes to leave
//! to it, and why a node that dialed it over tcp is not one of its peers.

use crate::transport::Env;
use remora_config::cluster::LinkKind;
use std::sync::Mutex;

/// Daemon starts (node, incarnation) whose fabric endpoint opened.
static OPENED: Mutex<Vec<(u32, u64)>> = Mutex::new(Vec::new());

/// The fabric endpoint of `env`'s daemon start opened: the nodes naming its transport are
/// carried over the fabric from now on.
pub fn fabric_opened(env: &Env) {
    OPENED.lock().unwrap_or_else(|p| p.into_inner()).push((env.node, env.incarnation));
}

/// Whether this node's traffic to `node` goes over the fabric: both name the same `ofi+`
/// transport and this node's endpoint opened.
pub fn over_fabric(env: &Env, node: u32) -> bool {
    let Some(c) = env.cluster.as_ref() else { return false };
    node != env.node
        && matches!(c.kind(env.node), Some(LinkKind::Ofi(_)))
        && c.kind(node) == c.kind(env.node)
        && OPENED.lock().unwrap_or_else(|p| p.into_inner()).contains(&(env.node, env.incarnation))
}

/// Why `node`, which reached this node over tcp, is not linked with it: this node reaches
/// it over the fabric only (both name the same `ofi+` transport), so it must have fallen
/// back to tcp. `None` when the fabric does not carry `node`.
pub fn refusal(env: &Env, node: u32) -> Option<String> {
    let kind = env.cluster.as_ref()?.kind(node)?.name();
    over_fabric(env, node).then(|| {
        format!(
            "node {node} dialed over tcp, but the cluster file names {kind} for it and for node {} \
             (this node), which reaches it over {kind} only: node {node} must have fallen back to \
             tcp (its provider is missing there); a fallback is for the whole cluster",
            env.node
        )
    })
}
