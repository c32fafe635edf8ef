//! The safe Rust API of Remora's RSM personality: Sun's Remote Shared Memory API
//! (`librsm`, `<rsmapi.h>`) in idiomatic Rust.
//!
//! A [`Controller`] is the interconnect adapter (`rsm_get_controller`). An exporter turns
//! its own memory into an [`ExportSegment`] and publishes it under an id with an access
//! list; an importer on any node connects an [`ImportSegment`] to it, maps it or moves data
//! with `put`/`get`, brackets accesses with a [`Barrier`] to learn whether they all
//! completed, and exchanges signals with the exporter. [`LocalMemory`] names local memory
//! for the scatter/gather calls. Under the hood an export is a core export of the node in
//! RSM's own id space, an import is a core connection (a map of another host's export is
//! served by the DSM pager), and signals are core interrupts.
//!
//! ```no_run
//! use remora_rsm::{Controller, ExportSegment, ImportSegment, Permission, MapAttr};
//! let ctl = Controller::get("remora0").unwrap();
//! let mem: &'static mut [u8] = Box::leak(vec![0u8; 2 * 4096 + 4095].into_boxed_slice());
//! let page = (4096 - mem.as_ptr() as usize % 4096) % 4096;
//! let mem = &mut mem[page..page + 2 * 4096];
//! let export = ExportSegment::create(&ctl, mem, Default::default()).unwrap();
//! let id = export.publish(0x40_0001, None).unwrap();
//! // Any process of any node can now connect:
//! let import = ImportSegment::connect(&ctl, ctl.local_node_id(), id, Permission::READ_WRITE).unwrap();
//! import.put(0, b"hello").unwrap();
//! let mut back = [0u8; 5];
//! import.get(0, &mut back).unwrap();
//! assert_eq!(&back, b"hello");
//! import.map(None, MapAttr::None, Permission::READ, 0, 4096).unwrap();
//! ```

mod access;
mod barrier;
mod error;
mod export;
mod import;
mod signal;
mod topology;

pub use access::{IoVec, LocalMemory, LocalSide, MAX_SGIOREQS};
pub use barrier::{Barrier, BarrierType};
pub use error::{Error, Result};
pub use export::{CreateFlags, ExportSegment};
pub use import::{BarrierMode, ImportSegment, MapAttr, Placement};
pub use remora_proto::AccessEntry;
pub use remora_sys::user_memory::UserRegion;
pub use topology::{segment_id_range, Neighbour, Topology};

use remora_client::Session;
use std::sync::Arc;

/// The library version programs ask for (`RSM_VERSION`).
pub const VERSION: u32 = 5;
/// Where the ids a publish with id 0 picks begin (`RSM_USER_APP_ID_BASE`).
pub const AUTO_ID_BASE: u32 = 0x8000_0000;

/// Access an importer asks for, or an access-list entry grants, in the Unix octal form
/// (`RSM_PERM_READ` 0o400, `RSM_PERM_WRITE` 0o200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission(pub u32);

impl Permission {
    /// `RSM_PERM_NONE`.
    pub const NONE: Permission = Permission(0);
    /// `RSM_PERM_READ`.
    pub const READ: Permission = Permission(0o400);
    /// `RSM_PERM_WRITE`.
    pub const WRITE: Permission = Permission(0o200);
    /// `RSM_PERM_RDWR`.
    pub const READ_WRITE: Permission = Permission(0o600);

    /// Whether it holds nothing but read and write (what connect and map accept; none at
    /// all is allowed too, and gives no access).
    pub fn is_valid(self) -> bool {
        self.0 & !0o600 == 0
    }

    /// Whether it includes reading.
    pub fn reads(self) -> bool {
        self.0 & 0o400 != 0
    }

    /// Whether it includes writing.
    pub fn writes(self) -> bool {
        self.0 & 0o200 != 0
    }
}

/// The names real programs give the controller; each opens the node's one adapter.
const CONTROLLER_TYPES: &[&str] = &["remora", "sci", "wrsm", "loopback", "rsmpi", "ibd"];

/// The attributes of a controller (`rsmapi_controller_attr_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerAttr {
    /// Sizes of direct accesses, as `RSM_DAS*` bits.
    pub direct_access_sizes: u32,
    /// Sizes of atomic accesses.
    pub atomic_sizes: u32,
    /// The page size.
    pub page_size: usize,
    /// The largest export.
    pub max_export_segment_size: usize,
    /// All exports together.
    pub tot_export_segment_size: usize,
    /// How many exports.
    pub max_export_segments: u64,
    /// The largest import map.
    pub max_import_map_size: usize,
    /// All import maps together.
    pub tot_import_map_size: usize,
    /// How many imports.
    pub max_import_segments: u64,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) name: String,
    /// Keeps the library initialised while the controller lives.
    pub(crate) _sisci: remora_sisci::Sisci,
    pub(crate) desc: remora_sisci::Descriptor,
}

/// The node's interconnect controller (`rsmapi_controller_handle_t`).
#[derive(Debug, Clone)]
pub struct Controller {
    pub(crate) inner: Arc<Inner>,
}

impl Controller {
    /// `rsm_get_controller`: `name` is a type and a unit, as on Solaris: `remora0`, and
    /// the names programs hard-code (`sci0`, `wrsm0`, `loopback0`, plain `loopback`) all
    /// open the node's adapter. The library starts the node's daemon if none runs.
    ///
    /// # Errors
    /// [`Error::ControllerNotPresent`] for another name or unit; [`Error::Unreachable`]
    /// when no daemon could be reached or started.
    pub fn get(name: &str) -> Result<Controller> {
        Controller::check_name(name)?;
        let sisci = remora_sisci::Sisci::initialize().map_err(|e| Error::Internal(e.to_string()))?;
        Controller::open(name, sisci)
    }

    /// [`Controller::get`] for a process of the node `cfg` names (tests, programs that
    /// play several nodes).
    ///
    /// # Errors
    /// As [`Controller::get`].
    pub fn with_config(name: &str, cfg: remora_client::Config) -> Result<Controller> {
        Controller::check_name(name)?;
        Controller::open(name, remora_sisci::Sisci::with_config(cfg))
    }

    fn check_name(name: &str) -> Result<()> {
        let known = name == "loopback" || CONTROLLER_TYPES.iter().any(|t| name.strip_prefix(t) == Some("0"));
        if known {
            Ok(())
        } else {
            Err(Error::ControllerNotPresent)
        }
    }

    fn open(name: &str, sisci: remora_sisci::Sisci) -> Result<Controller> {
        let desc = remora_sisci::Descriptor::open(&sisci).map_err(|e| match e {
            remora_sisci::Error::IllegalParameter(m) => Error::Internal(m),
            _ => Error::Unreachable,
        })?;
        Ok(Controller { inner: Arc::new(Inner { name: name.to_string(), _sisci: sisci, desc }) })
    }

    /// The name it was opened with.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// This node's id (`local_nodeid` of the topology).
    pub fn local_node_id(&self) -> u32 {
        self.inner.desc.node()
    }

    /// `rsm_get_controller_attr`.
    pub fn attr(&self) -> ControllerAttr {
        let page = remora_sys::page_size();
        ControllerAttr {
            direct_access_sizes: 1 | 2 | 4 | 8,
            atomic_sizes: 0,
            page_size: page,
            max_export_segment_size: 1 << 40,
            tot_export_segment_size: 1 << 40,
            max_export_segments: u32::MAX as u64,
            max_import_map_size: 1 << 40,
            tot_import_map_size: 1 << 40,
            max_import_segments: u32::MAX as u64,
        }
    }

    pub(crate) fn session(&self) -> &Arc<Session> {
        self.inner.desc.raw_session()
    }
}
