//! `SCIQuery` commands and sub-commands.

// ---- `SCIQuery` major commands ---------------------------------------------

/// Sci_query_string_t: vendor name.
pub const SCI_Q_VENDORID: u32 = 1;
/// Sci_query_string_t: API version.
pub const SCI_Q_API: u32 = 2;
/// Sci_query_adapter_t.
pub const SCI_Q_ADAPTER: u32 = 3;
/// Sci_query_system_t.
pub const SCI_Q_SYSTEM: u32 = 4;
/// Sci_query_local_segment_t.
pub const SCI_Q_LOCAL_SEGMENT: u32 = 5;
/// Sci_query_remote_segment_t.
pub const SCI_Q_REMOTE_SEGMENT: u32 = 6;
/// Sci_query_map_t.
pub const SCI_Q_MAP: u32 = 7;
/// Sci_query_dma_t.
pub const SCI_Q_DMA: u32 = 8;
/// Sci_smartio_query_device_t.
pub const SCI_Q_DEVICE: u32 = 9;
/// Sci_query_string_t: driver version.
pub const SCI_Q_SISCI_DRIVER_VERSION: u32 = 10;

// ---- `SCI_Q_ADAPTER` sub-commands ------------------------------------------

/// Required DMA size alignment in bytes.
pub const SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT: u32 = 1;
/// Required DMA offset alignment in bytes.
pub const SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT: u32 = 2;
/// Largest DMA transfer unit in bytes.
pub const SCI_Q_ADAPTER_DMA_MTU: u32 = 3;
/// Smallest transfer for which DMA beats PIO.
pub const SCI_Q_ADAPTER_SUGGESTED_MIN_DMA_SIZE: u32 = 4;
/// Smallest transfer for which block transfer pays off.
pub const SCI_Q_ADAPTER_SUGGESTED_MIN_BLOCK_SIZE: u32 = 5;
/// Node id of the adapter.
pub const SCI_Q_ADAPTER_NODEID: u32 = 6;
/// Alias of `SCI_Q_ADAPTER_NODEID` (user-guide spelling).
pub const SCI_Q_ADAPTER_NODE_ID: u32 = 6;
/// Adapter serial number.
pub const SCI_Q_ADAPTER_SERIAL_NUMBER: u32 = 7;
/// Adapter card type (see `SCIGetAdapterTypeString`).
pub const SCI_Q_ADAPTER_CARD_TYPE: u32 = 8;
/// Number of stream buffers.
pub const SCI_Q_ADAPTER_NUMBER_OF_STREAMS: u32 = 9;
/// Size of one stream buffer in bytes.
pub const SCI_Q_ADAPTER_STREAM_BUFFER_SIZE: u32 = 10;
/// Non-zero if the adapter is configured.
pub const SCI_Q_ADAPTER_CONFIGURED: u32 = 11;
/// Non-zero if the link (`portNo`) is operational.
pub const SCI_Q_ADAPTER_LINK_OPERATIONAL: u32 = 12;
/// Non-zero if the hardware reports a good link.
pub const SCI_Q_ADAPTER_HW_LINK_STATUS_IS_OK: u32 = 13;
/// Adapter number.
pub const SCI_Q_ADAPTER_NUMBER: u32 = 14;
/// Driver instance number of the adapter.
pub const SCI_Q_ADAPTER_INSTANCE_NUMBER: u32 = 15;
/// Non-zero if the adapter firmware is good.
pub const SCI_Q_ADAPTER_FIRMWARE_OK: u32 = 16;
/// Non-zero if the adapter is cabled to a switch.
pub const SCI_Q_ADAPTER_CONNECTED_TO_SWITCH: u32 = 17;
/// Type of the attached switch.
pub const SCI_Q_ADAPTER_LOCAL_SWITCH_TYPE: u32 = 18;
/// Switch port the adapter is attached to.
pub const SCI_Q_ADAPTER_LOCAL_SWITCH_PORT_NUMBER: u32 = 19;
/// Non-zero if cabled to the configured switch port.
pub const SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT: u32 = 20;
/// Address-translation page size.
pub const SCI_Q_ADAPTER_ATT_PAGE_SIZE: u32 = 21;
/// Total address-translation entries.
pub const SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES: u32 = 22;
/// Free address-translation entries.
pub const SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES: u32 = 23;
/// Physical memory node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_MEM_NODEID: u32 = 24;
/// Physical mailbox node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_MBX_NODEID: u32 = 25;
/// Physical link port node id (SCI era).
pub const SCI_Q_ADAPTER_PHYS_LINK_PORT_NODEID: u32 = 26;
/// SCI link frequency.
pub const SCI_Q_ADAPTER_SCI_LINK_FREQUENCY: u32 = 27;
/// B-link frequency.
pub const SCI_Q_ADAPTER_B_LINK_FREQUENCY: u32 = 28;
/// I/O bus frequency.
pub const SCI_Q_ADAPTER_IO_BUS_FREQUENCY: u32 = 29;
/// Number of multicast groups supported.
pub const SCI_Q_ADAPTER_MCAST_MAX_GROUPS: u32 = 30;
/// PCI address packed as bus << 8 | dev << 3 | fn.
pub const SCI_Q_ADAPTER_BDF: u32 = 31;
/// Number of links on the adapter.
pub const SCI_Q_ADAPTER_NUMBER_OF_LINKS: u32 = 32;
/// Lane width of the link (`portNo`).
pub const SCI_Q_ADAPTER_LINK_WIDTH: u32 = 33;
/// PCIe generation of the link (`portNo`).
pub const SCI_Q_ADAPTER_LINK_SPEED: u32 = 34;
/// Time the link (`portNo`) has been up.
pub const SCI_Q_ADAPTER_LINK_UPTIME: u32 = 35;
/// Time the link (`portNo`) has been down.
pub const SCI_Q_ADAPTER_LINK_DOWNTIME: u32 = 36;
/// Non-zero if a cable is inserted in link `portNo`.
pub const SCI_Q_ADAPTER_LINK_CABLE_INSERTED: u32 = 37;
/// Non-zero if link `portNo` is enabled.
pub const SCI_Q_ADAPTER_LINK_ENABLED: u32 = 38;
/// Port number at the far end of link `portNo`.
pub const SCI_Q_ADAPTER_LINK_PARTNER_PORT_NO: u32 = 39;

// ---- `SCI_Q_SYSTEM` sub-commands -------------------------------------------

/// Host bridge type.
pub const SCI_Q_SYSTEM_HOSTBRIDGE: u32 = 1;
/// Non-zero if write posting is enabled.
pub const SCI_Q_SYSTEM_WRITE_POSTING_ENABLED: u32 = 2;
/// Non-zero if write combining is enabled.
pub const SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED: u32 = 3;
/// CPU cache line size in bytes.
pub const SCI_Q_SYSTEM_CPU_CACHE_LINE_SIZE: u32 = 4;

// ---- Segment and map sub-commands (no overlap across the three majors) -----

/// Bus address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_IOADDR: u32 = 1;
/// Kernel virtual address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_VIRTUAL_KERNEL_ADDR: u32 = 2;
/// Physical address of a local segment.
pub const SCI_Q_LOCAL_SEGMENT_PHYS_ADDR: u32 = 3;
/// Local bus address through which a remote segment is reached.
pub const SCI_Q_REMOTE_SEGMENT_IOADDR: u32 = 4;
/// Non-zero if the map points at memory on this host.
pub const SCI_Q_MAP_MAPPED_TO_LOCAL_TARGET: u32 = 5;
/// Non-zero if a remote map loops back to this host.
pub const SCI_Q_MAP_QUERY_REMOTE_MAPPED_TO_LOCAL_TARGET: u32 = 6;
/// Bus address behind a map.
pub const SCI_Q_MAP_IOADDR: u32 = 7;
/// Physical address behind a map.
pub const SCI_Q_MAP_PHYS_ADDR: u32 = 8;

// ---- `SCI_Q_DMA` and `SCI_Q_DEVICE` sub-commands ---------------------------

/// Data: unsigned int.
pub const SCI_Q_DMA_AVAILABLE: u32 = 1;
/// Data: sci_dma_capabilities_t.
pub const SCI_Q_DMA_CAPABILITIES: u32 = 2;
/// Data: sci_smartio_device_info_t.
pub const SCI_Q_DEVICE_INFO: u32 = 1;
