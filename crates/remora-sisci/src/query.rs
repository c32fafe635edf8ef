//! `SCIQuery` answers that do not depend on a handle.

use crate::{check_adapter, Result, Sisci};

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
}
