//! `remora status`, `remora probe`, `remora shutdown`.

use remora_client::{Config, Session};
use remora_proto::{paths, MapTarget, Reply, Request, Role};
use std::io::Write as _;

fn config() -> Result<Config, String> {
    Config::from_env().map_err(|e| e.to_string())
}

/// `remora status --json`: every node's status as one JSON array (for scripts).
pub fn status_json() -> Result<(), String> {
    let cfg = config()?;
    let mut all = Vec::new();
    for node in paths::nodes_in(&cfg.runtime_dir) {
        if let Ok((Reply::Status(st), _)) =
            Session::open_control(&cfg.with_node(node)).and_then(|s| s.request(Request::Status, &[]))
        {
            all.push(*st);
        }
    }
    let text = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
    // A reader that stops early (`| head`) is not an error.
    let _ = writeln!(std::io::stdout(), "{text}");
    Ok(())
}

pub fn status() -> Result<(), String> {
    let cfg = config()?;
    let nodes = paths::nodes_in(&cfg.runtime_dir);
    println!("runtime directory: {}", cfg.runtime_dir.display());
    if nodes.is_empty() {
        println!("no nodes running on this host (a program starts its node by itself)");
        return Ok(());
    }
    for node in nodes {
        let st =
            match Session::open_control(&cfg.with_node(node)).and_then(|s| s.request(Request::Status, &[])) {
                Ok((Reply::Status(st), _)) => st,
                Ok(_) => return Err(format!("node {node}: unexpected answer")),
                Err(e) => {
                    println!("\nnode {node}: not answering ({e}); stale socket?");
                    continue;
                }
            };
        println!(
            "\nnode {}  pid {}  up {}s  {}",
            st.node,
            st.pid,
            st.uptime_s,
            if st.auto_started { "started by the library (exits when idle)" } else { "started by hand" }
        );
        let clients: Vec<_> = st.sessions.iter().filter(|s| s.role != Role::Control).collect();
        println!("  sessions: {}", clients.len());
        for s in clients {
            let role = match s.role {
                Role::Client => "process".to_string(),
                Role::Peer { node } => format!("node {node}"),
                Role::Control => "control".into(),
                Role::Scif => "scif endpoint".into(),
            };
            println!("    #{:<5} pid {:<8} {}", s.session, s.pid, role);
        }
        println!("  segments: {}", st.segments.len());
        for s in &st.segments {
            println!(
                "    id {:<12} {:>12} bytes  {:<10} owner #{:<5} importers {}{}",
                s.id.map(|i| i.to_string()).unwrap_or_else(|| "private".into()),
                s.size,
                s.state,
                s.owner,
                s.importers,
                if s.shared { "  shared" } else { "" }
            );
        }
        println!("  connections: {}", st.connections.len());
        for c in &st.connections {
            println!(
                "    #{:<5} session #{:<5} -> node {} segment {} ({} bytes){}",
                c.conn,
                c.session,
                c.node,
                c.id,
                c.size,
                if c.alive { "" } else { "  LOST" }
            );
        }
        if !st.peers.is_empty() {
            println!("  peers (other hosts): {}", st.peers.len());
            for p in &st.peers {
                println!(
                    "    node {:<5} {:<22} {:<16} rtt {:>6} µs  in {:>12} B  out {:>12} B",
                    p.node, p.addr, p.state, p.rtt_us, p.bytes_in, p.bytes_out
                );
            }
        }
        println!("  interrupts: {}", st.interrupts.len());
        for (session, intno, data, conns) in &st.interrupts {
            println!(
                "    {} {:<10} owner #{:<5} connections {}",
                if *data { "data" } else { "    " },
                intno,
                session,
                conns
            );
        }
        println!("  DMA queues: {}", st.dma_queues.len());
        let (ports, listeners, conns) = st.scif;
        println!("  SCIF: {ports} ports bound, {listeners} listening, {conns} connections");
        for (session, q, max) in &st.dma_queues {
            println!("    #{q:<5} session #{session:<5} entries {max}");
        }
        println!("  maps: {}", st.maps.len());
        for m in &st.maps {
            let t = match m.target {
                MapTarget::Local { seg } => format!("local segment #{seg}"),
                MapTarget::Remote { conn } => format!("connection #{conn}"),
            };
            println!(
                "    session #{:<5} map {:<4} {} offset {} size {}{}",
                m.session,
                m.map,
                t,
                m.offset,
                m.size,
                if m.readonly { " read-only" } else { "" }
            );
        }
    }
    Ok(())
}

pub fn probe(node: u32) -> Result<(), String> {
    let cfg = config()?;
    let s = Session::open(&cfg).map_err(|e| e.to_string())?;
    match s.request(Request::Probe { node }, &[]) {
        Ok((Reply::Probe { reachable: true }, _)) => {
            println!("node {node} is reachable from node {}", cfg.node);
            Ok(())
        }
        Err(remora_client::ClientError::Daemon(remora_proto::Error::NodeNotResponding)) => Err(format!(
            "node {node} is known to node {} but does not answer (SCI_ERR_NODE_NOT_RESPONDING)",
            cfg.node
        )),
        _ => Err(format!("node {node} is not reachable from node {} (SCI_ERR_NO_SUCH_NODEID)", cfg.node)),
    }
}

pub fn shutdown(node: Option<u32>, all: bool) -> Result<(), String> {
    let cfg = config()?;
    let nodes = if all { paths::nodes_in(&cfg.runtime_dir) } else { vec![node.unwrap_or(cfg.node)] };
    if nodes.is_empty() {
        println!("no nodes running");
    }
    let mut failed = false;
    for n in nodes {
        match Session::open_control(&cfg.with_node(n)).and_then(|s| s.request(Request::Shutdown, &[])) {
            Ok(_) => println!("node {n}: shutting down"),
            Err(e) => {
                eprintln!("node {n}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        Err("some nodes could not be stopped".into())
    } else {
        Ok(())
    }
}
