//! The RSM personality's part of the client protocol and of the peer protocol.
//!
//! An RSM export is a core export in an id space of its own (an RSM id and a SISCI id of
//! the same number name different segments). What RSM adds is who may connect: the
//! exporter's user and group own the segment, an access list grants nodes permissions in
//! the Unix owner/group/other form, and an importer's user and group travel with its
//! connect so the exporting node decides.

use serde::{Deserialize, Serialize};

/// Read permission in one octal digit (`RSM_PERM_READ` is this in the owner position).
pub const PERM_READ: u32 = 0o4;
/// Write permission in one octal digit.
pub const PERM_WRITE: u32 = 0o2;

/// One entry of an access list (`rsmapi_access_entry_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessEntry {
    /// The node granted access.
    pub node: u32,
    /// Owner/group/other permission digits (`0o640`, …); only the 0o666 bits mean anything.
    pub perm: u32,
}

/// Who an importer is, as the exporting node checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// The requests of the RSM personality.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RsmRequest {
    /// `rsm_memseg_export_create`: the request carries the memfd that now backs the
    /// caller's memory. Answer: [`Reply::Segment`](crate::Reply::Segment) (no id yet).
    Create {
        /// The permission bits the exporter's umask leaves (`0o666 & !umask`): what every
        /// node gets when the segment is published without an access list.
        mode: u32,
        /// The caller's signal interrupt (an interrupt of its own, made beforehand):
        /// importers' posts trigger it.
        signal: u32,
    },
    /// `rsm_memseg_export_publish`. Answer: [`Reply::RsmPublished`](crate::Reply::RsmPublished).
    Publish {
        /// The segment handle.
        seg: u64,
        /// The id, or 0 to let the node pick one at or above `0x8000_0000`.
        id: u32,
        /// Nodes allowed and their permissions; `None` lets every node connect with the
        /// segment's mode.
        acl: Option<Vec<AccessEntry>>,
    },
    /// `rsm_memseg_export_republish`: a new access list for future connects.
    Republish {
        /// The segment handle.
        seg: u64,
        /// As in [`RsmRequest::Publish`].
        acl: Option<Vec<AccessEntry>>,
    },
    /// `rsm_memseg_export_unpublish`: the id is free again and every importer is cut off.
    Unpublish {
        /// The segment handle.
        seg: u64,
    },
    /// `rsm_memseg_export_destroy`: unpublish if published, then remove the segment.
    Destroy {
        /// The segment handle.
        seg: u64,
    },
    /// `rsm_memseg_import_connect`. Answer: [`Reply::RsmConnected`](crate::Reply::RsmConnected),
    /// with the memfd when the segment is on this host (read-only for a read-only import).
    Connect {
        /// The exporting node.
        node: u32,
        /// The segment id.
        id: u32,
        /// The access asked for: `RSM_PERM_READ` (0o400), `RSM_PERM_WRITE` (0o200) or both.
        perm: u32,
        /// The importer's signal interrupt on the importer's node (for a peer daemon's
        /// session: on that daemon's node): exporter posts trigger it.
        signal: u32,
        /// Who the importer is; honoured only from a daemon (a peer of this host) or root,
        /// else the socket's own credentials count.
        creds: Option<Credentials>,
    },
    /// The importers of an export, for a post that signals all of them. Answer:
    /// [`Reply::RsmSignals`](crate::Reply::RsmSignals).
    Importers {
        /// The segment handle.
        seg: u64,
    },
}

/// What the RSM personality of one node asks of another's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RsmPeerRequest {
    /// Connect an importer of the asking node to export `id` of the answering node.
    /// Answer: [`PeerReply::RsmConnected`](crate::link::PeerReply::RsmConnected).
    Connect {
        /// The segment id.
        id: u32,
        /// The access asked for.
        perm: u32,
        /// The importer's user and group.
        creds: Credentials,
        /// The importer's signal interrupt on the asking node.
        signal: u32,
    },
}
