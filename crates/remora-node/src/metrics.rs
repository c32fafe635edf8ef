//! The node's Prometheus metrics (`REMORA_METRICS_ADDR`, `remorad --metrics ADDR`): a
//! plain HTTP endpoint, `GET /metrics`, answering in the text exposition format with what
//! `remora status` shows (sessions, segments by state, connections, maps, interrupts, DMA
//! queues, SCIF ports, listeners and connections) and, per peer node of another host, the
//! link's state, heartbeat round trip and bytes each way. Each scrape reads the books afresh.
//!
//! Traffic counters count what passes through this daemon: DMA jobs; SCIF RMA and DSM
//! traffic of other hosts into (and out of) this node's memory, as its pager flows and link
//! requests serve it; the pager flows it dialed and served. RMA and DSM maps between nodes
//! of one host are plain loads and stores of shared memory, which no daemon sees.

use crate::Node;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use remora_proto::{NodeStatus, Role};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Labels = Vec<(String, String)>;

fn gauge(reg: &mut Registry, name: &str, help: &str, v: i64) {
    let g = Gauge::<i64>::default();
    g.set(v);
    reg.register(name, help, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    reg.register(name, help, c);
}

/// The metrics of `st` and the node's traffic counters in the text exposition format.
pub fn render(st: &NodeStatus, stats: &crate::Stats) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let mut reg = Registry::with_prefix("remora");
    counter(&mut reg, "dma_jobs", "DMA jobs (posts) completed", stats.dma_jobs.load(Relaxed));
    counter(
        &mut reg,
        "dma_failed_jobs",
        "DMA jobs that ended in error or were aborted",
        stats.dma_failed.load(Relaxed),
    );
    counter(&mut reg, "dma_bytes", "Bytes the DMA engine moved", stats.dma_bytes.load(Relaxed));
    counter(
        &mut reg,
        "sessions_opened",
        "Sessions opened since the start",
        stats.sessions_opened.load(Relaxed),
    );
    let ops = Family::<Labels, Counter>::default();
    let bytes = Family::<Labels, Counter>::default();
    for (op, n, b) in [
        ("read", &stats.scif_rma_reads, &stats.scif_rma_read_bytes),
        ("write", &stats.scif_rma_writes, &stats.scif_rma_written_bytes),
    ] {
        let l = vec![("op".into(), op.to_string())];
        ops.get_or_create(&l).inc_by(n.load(Relaxed));
        bytes.get_or_create(&l).inc_by(b.load(Relaxed));
    }
    reg.register(
        "scif_rma_operations",
        "SCIF RMA frames and requests of peers on other hosts served on this node's registered \
         windows, by op (reads include pages that scif_mmap maps of those windows fetch)",
        ops,
    );
    reg.register("scif_rma_bytes", "Bytes of remora_scif_rma_operations, by op", bytes);
    counter(
        &mut reg,
        "dsm_page_fetches",
        "Pages that DSM pagers of other hosts fetched from this node's segments",
        stats.dsm_page_fetches.load(Relaxed),
    );
    counter(
        &mut reg,
        "dsm_fetched_bytes",
        "Bytes of remora_dsm_page_fetches",
        stats.dsm_fetched_bytes.load(Relaxed),
    );
    counter(
        &mut reg,
        "dsm_flush_runs",
        "Runs of changed bytes that DSM pagers of other hosts flushed into this node's memory",
        stats.dsm_flush_runs.load(Relaxed),
    );
    counter(
        &mut reg,
        "dsm_flushed_bytes",
        "Bytes of remora_dsm_flush_runs",
        stats.dsm_flushed_bytes.load(Relaxed),
    );
    counter(
        &mut reg,
        "pager_flows_dialed",
        "Pager flows (DSM maps, SCIF RMA) this node dialed to other hosts for its processes",
        stats.pager_flows_dialed.load(Relaxed),
    );
    counter(
        &mut reg,
        "pager_flows_served",
        "Pager flows of other hosts bound to this node's memory",
        stats.pager_flows_served.load(Relaxed),
    );
    gauge(
        &mut reg,
        "flow_threads_held",
        "Pager-flow threads of this daemon process held to the core their short frames come in on",
        i64::from(crate::transport::tcp::flow_threads_held()),
    );
    let clients = st.sessions.iter().filter(|s| s.role != Role::Control).count() as i64;
    gauge(&mut reg, "node", "This daemon's node id", i64::from(st.node));
    gauge(&mut reg, "uptime_seconds", "Seconds since the daemon started", st.uptime_s as i64);
    gauge(&mut reg, "sessions", "Sessions of processes, endpoints and peer daemons", clients);
    let segments = Family::<Labels, Gauge>::default();
    for s in &st.segments {
        segments.get_or_create(&vec![("state".into(), s.state.clone())]).inc();
    }
    reg.register("segments", "Segments exported by this node, by state", segments);
    let importers: i64 = st.segments.iter().map(|s| i64::from(s.importers)).sum();
    gauge(&mut reg, "segment_importers", "Connections importing this node's segments", importers);
    let conns = Family::<Labels, Gauge>::default();
    for c in &st.connections {
        conns.get_or_create(&vec![("alive".into(), c.alive.to_string())]).inc();
    }
    reg.register("connections", "Connections of this node's sessions to segments", conns);
    gauge(&mut reg, "maps", "Maps processes noted", st.maps.len() as i64);
    gauge(&mut reg, "interrupts", "Interrupts created on this node", st.interrupts.len() as i64);
    gauge(&mut reg, "dma_queues", "DMA queues the engine serves", st.dma_queues.len() as i64);
    gauge(&mut reg, "scif_ports", "Bound SCIF ports", i64::from(st.scif.0));
    gauge(&mut reg, "scif_listeners", "SCIF listeners", i64::from(st.scif.1));
    gauge(&mut reg, "scif_connections", "SCIF connections held here", i64::from(st.scif.2));
    let up = Family::<Labels, Gauge>::default();
    let rtt = Family::<Labels, Gauge>::default();
    let rx = Family::<Labels, Counter>::default();
    let tx = Family::<Labels, Counter>::default();
    for p in &st.peers {
        let l = vec![("peer".into(), p.node.to_string())];
        up.get_or_create(&l).set(i64::from(p.state == "up"));
        rtt.get_or_create(&l).set(p.rtt_us as i64);
        rx.get_or_create(&l).inc_by(p.bytes_in);
        tx.get_or_create(&l).inc_by(p.bytes_out);
    }
    reg.register("peer_up", "Whether the link to a node of another host is up", up);
    reg.register("peer_rtt_microseconds", "The last heartbeat round trip to a peer", rtt);
    reg.register("peer_received_bytes", "Bytes received from a peer", rx);
    reg.register("peer_sent_bytes", "Bytes sent to a peer", tx);
    let mut out = String::new();
    // Encoding into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// Serve `GET /metrics` on `addr` until the daemon stops. A bad request gets an error
/// answer and its connection closes; the daemon goes on.
pub(crate) async fn serve(node: Arc<Node>, addr: SocketAddr) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(%addr, "metrics endpoint not started: {e}");
            return;
        }
    };
    tracing::info!(%addr, "metrics at http://{addr}/metrics");
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            // Out of descriptors, say: wait a little rather than spin on it.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let node = node.clone();
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            let read = tokio::time::timeout(Duration::from_secs(5), async {
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
            })
            .await;
            let (status, body) = if read.is_err() {
                return;
            } else if req.starts_with(b"GET /metrics ") || req.starts_with(b"GET /metrics?") {
                ("200 OK", render(&crate::serve::snapshot(&node), &node.stats))
            } else {
                ("404 Not Found", "only GET /metrics is served here\n".to_string())
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        });
    }
}
