//! Dolphin's ABI names. DIS's `sisci_api.h` renames every function with a macro:
//! `SCIOpen` becomes `_SISCI_PUBLIC_FUNC_ST_SCIOpen` (`_MT_` under `_REENTRANT`). Remora's
//! headers keep the plain names; these aliases (same addresses, exported through
//! `libsisci.map`) let binaries built against Dolphin's headers, and programs that `dlsym`
//! those names, use this library as well.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
/// One tail-jump per name (arguments pass through untouched), versioned so that the
/// version script can export it.
#[cfg(target_arch = "x86_64")]
macro_rules! jump {
    ($alias:expr, $f:ident) => {
        concat!(
            ".globl ",
            $alias,
            "\n",
            ".type ",
            $alias,
            ", @function\n",
            $alias,
            ":\n",
            "    jmp ",
            stringify!($f),
            "@PLT\n",
            ".size ",
            $alias,
            ", . - ",
            $alias,
            "\n",
            ".symver ",
            $alias,
            ", ",
            $alias,
            "@@SISCI_ABI\n",
        )
    };
}

#[cfg(target_arch = "aarch64")]
macro_rules! jump {
    ($alias:expr, $f:ident) => {
        concat!(
            ".globl ",
            $alias,
            "\n",
            ".type ",
            $alias,
            ", %function\n",
            $alias,
            ":\n",
            "    b ",
            stringify!($f),
            "\n",
            ".size ",
            $alias,
            ", . - ",
            $alias,
            "\n",
            ".symver ",
            $alias,
            ", ",
            $alias,
            "@@SISCI_ABI\n",
        )
    };
}

macro_rules! dolphin_names {
    ($($f:ident),* $(,)?) => {
        $(std::arch::global_asm!(
            ".pushsection .text",
            jump!(concat!("_SISCI_PUBLIC_FUNC_ST_", stringify!($f)), $f),
            jump!(concat!("_SISCI_PUBLIC_FUNC_MT_", stringify!($f)), $f),
            ".popsection",
        );)*
    };
}

dolphin_names!(
    SCIAbortDMAQueue,
    SCIAttachLocalSegment,
    SCIAttachPhysicalMemory,
    SCIBorrowDevice,
    SCICacheSync,
    SCICheckSequence,
    SCIClose,
    SCIConnectDataInterrupt,
    SCIConnectDeviceMemory,
    SCIConnectDeviceSegment,
    SCIConnectDeviceSegmentPath,
    SCIConnectInterrupt,
    SCIConnectSCISpace,
    SCIConnectSegment,
    SCICreateDMAQueue,
    SCICreateDataInterrupt,
    SCICreateDeviceSegment,
    SCICreateInterrupt,
    SCICreateMapSequence,
    SCICreateSegment,
    SCIDMAQueueState,
    SCIDisconnectDataInterrupt,
    SCIDisconnectInterrupt,
    SCIDisconnectSegment,
    SCIEnqueueDMATransfer,
    SCIFlush,
    SCIFlushReadBuffers,
    SCIGetAdapterFamilyString,
    SCIGetAdapterTypeString,
    SCIGetCSRRegister,
    SCIGetDeviceList,
    SCIGetErrorString,
    SCIGetFabricDeviceId,
    SCIGetLocalCSR,
    SCIGetLocalNodeId,
    SCIGetLocalSegmentId,
    SCIGetLocalSegmentSize,
    SCIGetMapPhysAddr,
    SCIGetMapPointer,
    SCIGetNodeIdByAdapterName,
    SCIGetRemoteSegmentId,
    SCIGetRemoteSegmentNodeId,
    SCIGetRemoteSegmentSize,
    SCIInitialize,
    SCIMapLocalSegment,
    SCIMapLocalSegmentForDevice,
    SCIMapRemoteSegment,
    SCIMapRemoteSegmentForDevice,
    SCIMemCopy,
    SCIMemCpy,
    SCIMemWrite,
    SCIOpen,
    SCIPostDMAQueue,
    SCIPrepareSegment,
    SCIProbeNode,
    SCIQuery,
    SCIRegisterPCIeRequester,
    SCIRegisterSegmentMemory,
    SCIReleaseExclusiveBorrow,
    SCIRemoveDMAQueue,
    SCIRemoveDataInterrupt,
    SCIRemoveInterrupt,
    SCIRemoveSegment,
    SCIRemoveSequence,
    SCIResetDMAQueue,
    SCIReturnDevice,
    SCISetCSRRegister,
    SCISetLocalCSR,
    SCISetSegmentAvailable,
    SCISetSegmentUnavailable,
    SCIShareSegment,
    SCIStartDmaTransfer,
    SCIStartDmaTransferMem,
    SCIStartDmaTransferVec,
    SCIStartSequence,
    SCIStoreBarrier,
    SCITerminate,
    SCITriggerDataInterrupt,
    SCITriggerInterrupt,
    SCIUnmapLocalSegmentForDevice,
    SCIUnmapRemoteSegmentForDevice,
    SCIUnmapSegment,
    SCIUnregisterPCIeRequester,
    SCIWaitForDMAQueue,
    SCIWaitForDataInterrupt,
    SCIWaitForInterrupt,
    SCIWaitForLocalSegmentEvent,
    SCIWaitForRemoteSegmentEvent,
    SCIphDmaEnqueue,
    SCIphDmaStart,
);
