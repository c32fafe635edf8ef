//! The `SCIQuery` sub-commands that describe a Dolphin card's hardware, answered for
//! Remora's software adapter: a value where the question has a meaning without the card,
//! `SCI_ERR_NOT_SUPPORTED` where only the card could answer (clock frequencies, the PCIe
//! address and link, the host bridge).

use crate::consts::*;
use crate::errors::{Fail, Outcome};
use remora_sisci::{AdapterInfo, Sisci};

/// The `SCI_Q_ADAPTER` sub-commands `query::adapter_answer` leaves to this module, for
/// link `port`:
///
/// * `NUMBER_OF_STREAMS` 1 and `STREAM_BUFFER_SIZE` the cache line size: stores reach the
///   memory one cache line at a time, through one path;
/// * `LOCAL_SWITCH_TYPE` and `LOCAL_SWITCH_PORT_NUMBER` 0 (no switch, as
///   `CONNECTED_TO_SWITCH` says), `CONNECTED_TO_EXPECTED_SWITCH_PORT` 1 (nothing is cabled
///   otherwise than configured);
/// * `ATT_PAGE_SIZE` the page size, `ATT_NUMBER_OF_ENTRIES` and `ATT_AVAILABLE_ENTRIES`
///   the pages of this host's memory in all and available (`/proc/meminfo`: what maps can
///   reach), at most `u32::MAX`;
/// * `PHYS_MEM_NODEID`, `PHYS_MBX_NODEID`, `PHYS_LINK_PORT_NODEID` the node id (memory,
///   mailbox and link port are all the node's);
/// * per link: `LINK_UPTIME` the seconds since the node's daemon started (0 when it does
///   not answer), `LINK_DOWNTIME` 0 (the daemon's link does not go down while it runs),
///   `LINK_PARTNER_PORT_NO` 0;
/// * `SCI_LINK_FREQUENCY`, `B_LINK_FREQUENCY`, `IO_BUS_FREQUENCY`, `BDF`, `LINK_WIDTH`,
///   `LINK_SPEED`: `SCI_ERR_NOT_SUPPORTED`.
///
/// # Errors
/// `SCI_ERR_NOT_SUPPORTED` as above; `SCI_ERR_ILLEGAL_PARAMETER` for a `portNo` past the
/// last link; `SCI_ERR_ILLEGAL_QUERY` for any other sub-command.
pub(crate) fn adapter_fact(sci: &Sisci, info: &AdapterInfo, sub: u32, port: u32) -> Outcome<u32> {
    let link =
        |v: u32| if port < info.number_of_links { Ok(v) } else { Err(Fail(SCI_ERR_ILLEGAL_PARAMETER)) };
    Ok(match sub {
        SCI_Q_ADAPTER_NUMBER_OF_STREAMS => 1,
        SCI_Q_ADAPTER_STREAM_BUFFER_SIZE => sci.cache_line_size(),
        SCI_Q_ADAPTER_LOCAL_SWITCH_TYPE | SCI_Q_ADAPTER_LOCAL_SWITCH_PORT_NUMBER => 0,
        SCI_Q_ADAPTER_CONNECTED_TO_EXPECTED_SWITCH_PORT => 1,
        SCI_Q_ADAPTER_ATT_PAGE_SIZE => u32::try_from(remora_sys::page_size()).unwrap_or(4096),
        SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES => memory_pages("MemTotal:"),
        SCI_Q_ADAPTER_ATT_AVAILABLE_ENTRIES => memory_pages("MemAvailable:"),
        SCI_Q_ADAPTER_PHYS_MEM_NODEID
        | SCI_Q_ADAPTER_PHYS_MBX_NODEID
        | SCI_Q_ADAPTER_PHYS_LINK_PORT_NODEID => info.node_id,
        SCI_Q_ADAPTER_LINK_UPTIME => {
            link(0)?;
            sci.node_uptime().map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX))
        }
        SCI_Q_ADAPTER_LINK_DOWNTIME | SCI_Q_ADAPTER_LINK_PARTNER_PORT_NO => link(0)?,
        SCI_Q_ADAPTER_SCI_LINK_FREQUENCY
        | SCI_Q_ADAPTER_B_LINK_FREQUENCY
        | SCI_Q_ADAPTER_IO_BUS_FREQUENCY
        | SCI_Q_ADAPTER_BDF => return Err(Fail(SCI_ERR_NOT_SUPPORTED)),
        SCI_Q_ADAPTER_LINK_WIDTH | SCI_Q_ADAPTER_LINK_SPEED => {
            link(0)?;
            return Err(Fail(SCI_ERR_NOT_SUPPORTED));
        }
        _ => return Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
    })
}

/// The `SCI_Q_SYSTEM` sub-commands other than `CPU_CACHE_LINE_SIZE`: `WRITE_POSTING_ENABLED`
/// 1 (a store does not wait for the memory), `WRITE_COMBINING_ENABLED` 1 (stores between
/// two flushes may reach another host's memory combined and in any order, as through the
/// cards' write-combining buffers: `SCIFlush` orders them).
///
/// # Errors
/// `SCI_ERR_NOT_SUPPORTED` for `HOSTBRIDGE` (a PCI fact); `SCI_ERR_ILLEGAL_QUERY` for any
/// other sub-command.
pub(crate) fn system_fact(sub: u32) -> Outcome<u32> {
    match sub {
        SCI_Q_SYSTEM_WRITE_POSTING_ENABLED | SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED => Ok(1),
        SCI_Q_SYSTEM_HOSTBRIDGE => Err(Fail(SCI_ERR_NOT_SUPPORTED)),
        _ => Err(Fail(SCI_ERR_ILLEGAL_QUERY)),
    }
}

/// This host's memory line `key` of `/proc/meminfo` in pages (at most `u32::MAX`; 0 when
/// it cannot be read).
fn memory_pages(key: &str) -> u32 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let pages = kib * 1024 / remora_sys::page_size().max(1) as u64;
    u32::try_from(pages).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_pages_reads_meminfo() {
        let total = memory_pages("MemTotal:");
        assert!(total > 0);
        assert!(memory_pages("MemAvailable:") <= total);
        assert_eq!(memory_pages("NoSuchLine:"), 0);
    }

    #[test]
    fn system_facts() {
        assert_eq!(system_fact(SCI_Q_SYSTEM_WRITE_POSTING_ENABLED).ok(), Some(1));
        assert_eq!(system_fact(SCI_Q_SYSTEM_WRITE_COMBINING_ENABLED).ok(), Some(1));
        assert!(system_fact(SCI_Q_SYSTEM_HOSTBRIDGE).is_err());
        assert!(system_fact(99).is_err());
    }
}
