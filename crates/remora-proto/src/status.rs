//! What `remora status` shows of a node.

use crate::{MapTarget, Role};
use serde::{Deserialize, Serialize};

/// The state of a node, for `remora status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeStatus {
    /// Node id.
    pub node: u32,
    /// Process id of the daemon.
    pub pid: u32,
    /// Started by the library (exits when idle).
    pub auto_started: bool,
    /// Seconds since start.
    pub uptime_s: u64,
    /// Sessions.
    pub sessions: Vec<SessionStatus>,
    /// Segments.
    pub segments: Vec<SegmentStatus>,
    /// Connections (imports by this node's sessions).
    pub connections: Vec<ConnectionStatus>,
    /// Maps.
    pub maps: Vec<MapStatus>,
    /// Interrupts created on this node: (session, number, data?, connections).
    pub interrupts: Vec<(u64, u32, bool, u32)>,
    /// DMA queues: (session, handle, capacity).
    pub dma_queues: Vec<(u64, u64, u32)>,
    /// Links to nodes of other hosts.
    pub peers: Vec<PeerStatus>,
    /// SCIF: bound ports, listeners, connections held here.
    pub scif: (u32, u32, u32),
    /// Bytes the DMA engine moved since the daemon started.
    pub dma_bytes: u64,
    /// DMA jobs completed since the daemon started.
    pub dma_jobs: u64,
}

/// One link to a node of another host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The node.
    pub node: u32,
    /// Its address.
    pub addr: String,
    /// "up", "not operational", "down", "lost".
    pub state: String,
    /// The last heartbeat round trip, in microseconds.
    pub rtt_us: u64,
    /// Bytes received from it.
    pub bytes_in: u64,
    /// Bytes sent to it.
    pub bytes_out: u64,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Session number.
    pub session: u64,
    /// Peer process id.
    pub pid: u32,
    /// Role.
    pub role: Role,
}

/// One local segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentStatus {
    /// Handle.
    pub seg: u64,
    /// Id.
    pub id: Option<u32>,
    /// Size.
    pub size: u64,
    /// Owning session (0 once removed).
    pub owner: u64,
    /// "created", "prepared", "available", "removed".
    pub state: String,
    /// Importers connected now.
    pub importers: u32,
    /// Shared for attach.
    pub shared: bool,
}

/// One connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStatus {
    /// Handle.
    pub conn: u64,
    /// Importing session.
    pub session: u64,
    /// Node that owns the segment.
    pub node: u32,
    /// Segment id.
    pub id: u32,
    /// Size.
    pub size: u64,
    /// Still valid.
    pub alive: bool,
}

/// One map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapStatus {
    /// Session.
    pub session: u64,
    /// The process's map number.
    pub map: u64,
    /// Target.
    pub target: MapTarget,
    /// Offset.
    pub offset: u64,
    /// Size.
    pub size: u64,
    /// Read-only.
    pub readonly: bool,
}
