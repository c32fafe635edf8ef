/*
 * sisci_error.h - SISCI error codes (Remora implementation).
 *
 * Remora is a software implementation of the SISCI remote-memory API.
 * This header defines sci_error_t, the status type that every SISCI
 * call reports through its trailing "sci_error_t *error" argument.
 *
 * Numbering scheme:
 *   - SCI_ERR_OK is zero.
 *   - Every other code has bit 30 set (SCI_ERR_MASK).
 *   - The low bits follow the historical SISCI numbering: 0x9xx for
 *     local/API errors, 0xAxx for node/link errors and 0xBxx for the
 *     "busy"-style codes introduced with API 2.0.
 *   - Some names intentionally share a value (for example
 *     SCI_ERR_NO_SUCH_INTNO and SCI_ERR_NO_SUCH_SEGMENT), so code must not
 *     use both names as labels of the same switch statement.
 *
 * Written for Remora; C89/C99 and C++ compatible.
 */
#ifndef REMORA_SISCI_ERROR_H
#define REMORA_SISCI_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Bit that is set in every SISCI error value other than SCI_ERR_OK. */
#define SCI_ERR_MASK        0x40000000
/* The same mask under the spelling used by API 2.0 headers and clients. */
#define SISCI_ERR_MASK      SCI_ERR_MASK
/* Bit 0 marks an error that was reported by the remote side. */
#define SCI_ERR_REMOTE_MASK 0x01
/* Strip the sign bit from a raw error value (kept for source compatibility). */
#define SCI_ERR(u)          ((u) & 0x7FFFFFFF)

typedef enum {
    /* Success. */
    SCI_ERR_OK                       = 0x000,

    /* ---- Local and API errors (0x9xx) ---------------------------------- */
    /* Resource is in use; retry later or release dependants first. */
    SCI_ERR_BUSY                     = (0x900 | SCI_ERR_MASK),
    /* A flag that is valid but not implemented by this library. */
    SCI_ERR_FLAG_NOT_IMPLEMENTED     = (0x901 | SCI_ERR_MASK),
    /* A flag that is not valid for this function. */
    SCI_ERR_ILLEGAL_FLAG             = (0x902 | SCI_ERR_MASK),
    /* Out of resources (generic). */
    SCI_ERR_NOSPC                    = (0x904 | SCI_ERR_MASK),
    /* Out of resources inside the API library. */
    SCI_ERR_API_NOSPC                = (0x905 | SCI_ERR_MASK),
    /* Out of hardware (or emulated hardware) resources. */
    SCI_ERR_HW_NOSPC                 = (0x906 | SCI_ERR_MASK),
    /* The requested function is not implemented. */
    SCI_ERR_NOT_IMPLEMENTED          = (0x907 | SCI_ERR_MASK),
    /* Adapter number is out of the valid range. */
    SCI_ERR_ILLEGAL_ADAPTERNO        = (0x908 | SCI_ERR_MASK),
    /* No adapter with this number exists. */
    SCI_ERR_NO_SUCH_ADAPTERNO        = (0x909 | SCI_ERR_MASK),
    /* The operation did not complete within the given timeout. */
    SCI_ERR_TIMEOUT                  = (0x90A | SCI_ERR_MASK),
    /* Offset and/or size exceed the bounds of the object. */
    SCI_ERR_OUT_OF_RANGE             = (0x90B | SCI_ERR_MASK),
    /* No segment with the given id exists on the target node. */
    SCI_ERR_NO_SUCH_SEGMENT          = (0x90C | SCI_ERR_MASK),
    /* Node id is not valid. */
    SCI_ERR_ILLEGAL_NODEID           = (0x90D | SCI_ERR_MASK),
    /* The remote side refused the connection. */
    SCI_ERR_CONNECTION_REFUSED       = (0x90E | SCI_ERR_MASK),
    /* The remote segment is not (or no longer) connected. */
    SCI_ERR_SEGMENT_NOT_CONNECTED    = (0x90F | SCI_ERR_MASK),
    /* Size does not meet the alignment requirement. */
    SCI_ERR_SIZE_ALIGNMENT           = (0x910 | SCI_ERR_MASK),
    /* Offset does not meet the alignment requirement. */
    SCI_ERR_OFFSET_ALIGNMENT         = (0x911 | SCI_ERR_MASK),
    /* A parameter has an invalid value. */
    SCI_ERR_ILLEGAL_PARAMETER        = (0x912 | SCI_ERR_MASK),
    /* A queue or table is full. */
    SCI_ERR_MAX_ENTRIES              = (0x913 | SCI_ERR_MASK),
    /* The local segment has not been prepared on the adapter. */
    SCI_ERR_SEGMENT_NOT_PREPARED     = (0x914 | SCI_ERR_MASK),
    /* An address argument is not valid. */
    SCI_ERR_ILLEGAL_ADDRESS          = (0x915 | SCI_ERR_MASK),
    /* The operation is not allowed in the current state. */
    SCI_ERR_ILLEGAL_OPERATION        = (0x916 | SCI_ERR_MASK),
    /* Unknown query command or sub-command. */
    SCI_ERR_ILLEGAL_QUERY            = (0x917 | SCI_ERR_MASK),
    /* The segment id is already in use on this node. */
    SCI_ERR_SEGMENTID_USED           = (0x918 | SCI_ERR_MASK),
    /* An operating-system call failed. */
    SCI_ERR_SYSTEM                   = (0x919 | SCI_ERR_MASK),
    /* The wait was cancelled because the object was removed. */
    SCI_ERR_CANCELLED                = (0x91A | SCI_ERR_MASK),
    /* The object is not connected. */
    SCI_ERR_NOT_CONNECTED            = (0x91B | SCI_ERR_MASK),
    /* The resource is currently not available. */
    SCI_ERR_NOT_AVAILABLE            = (0x91C | SCI_ERR_MASK),
    /* Library and driver (daemon) versions do not match. */
    SCI_ERR_INCONSISTENT_VERSIONS    = (0x91D | SCI_ERR_MASK),
    /* A conditional interrupt raced with its enable call. */
    SCI_ERR_COND_INT_RACE_PROBLEM    = (0x91E | SCI_ERR_MASK),
    /* A counter overflowed. */
    SCI_ERR_OVERFLOW                 = (0x91F | SCI_ERR_MASK),
    /* SCIInitialize() has not been called. */
    SCI_ERR_NOT_INITIALIZED          = (0x920 | SCI_ERR_MASK),
    /* Access denied. */
    SCI_ERR_ACCESS                   = (0x921 | SCI_ERR_MASK),

    /* ---- API 2.0 additions in the 0x9xx range (Remora-chosen values) --- */
    /* The call needs hardware that Remora does not emulate. */
    SCI_ERR_NOT_SUPPORTED            = (0x922 | SCI_ERR_MASK),
    /* The call or flag is deprecated. */
    SCI_ERR_DEPRECATED               = (0x923 | SCI_ERR_MASK),
    /* No DMA engine of the requested kind is available. */
    SCI_ERR_DMA_NOT_AVAILABLE        = (0x924 | SCI_ERR_MASK),
    /* DMA has been disabled. */
    SCI_ERR_DMA_DISABLED             = (0x925 | SCI_ERR_MASK),
    /* Interrupt number not found; shares its value with NO_SUCH_SEGMENT. */
    SCI_ERR_NO_SUCH_INTNO            = (0x90C | SCI_ERR_MASK),
    /* The fixed interrupt number is already in use. */
    SCI_ERR_INTNO_USED               = (0x926 | SCI_ERR_MASK),
    /* No SmartIO device with this fabric device id. */
    SCI_ERR_NO_SUCH_FDID             = (0x927 | SCI_ERR_MASK),

    /* ---- Node and link errors (0xAxx) --------------------------------- */
    /* No node with this id is known. */
    SCI_ERR_NO_SUCH_NODEID           = (0xA00 | SCI_ERR_MASK),
    /* The remote node does not answer. */
    SCI_ERR_NODE_NOT_RESPONDING      = (0xA02 | SCI_ERR_MASK),
    /* The remote node's link is down. */
    SCI_ERR_NO_REMOTE_LINK_ACCESS    = (0xA04 | SCI_ERR_MASK),
    /* The local link is down. */
    SCI_ERR_NO_LINK_ACCESS           = (0xA05 | SCI_ERR_MASK),
    /* A data transfer failed. */
    SCI_ERR_TRANSFER_FAILED          = (0xA06 | SCI_ERR_MASK),

    /* ---- Busy-style codes of API 2.0 (0xBxx, Remora-chosen values) ---- */
    /* The operation would block (not used by the SISCI calls themselves). */
    SCI_ERR_EWOULD_BLOCK             = (0xB00 | SCI_ERR_MASK),
    /* The remote side is busy; shares its value with EWOULD_BLOCK. */
    SCI_ERR_REMOTE_BUSY              = (0xB00 | SCI_ERR_MASK),
    /* A semaphore count limit was exceeded. */
    SCI_ERR_SEMAPHORE_COUNT_EXCEEDED = (0xB01 | SCI_ERR_MASK),
    /* Called at an illegal interrupt request level (kernel API only). */
    SCI_ERR_IRQL_ILLEGAL             = (0xB02 | SCI_ERR_MASK),
    /* The local side is busy. */
    SCI_ERR_LOCAL_BUSY               = (0xB03 | SCI_ERR_MASK),
    /* Both local and remote sides are busy. */
    SCI_ERR_ALL_BUSY                 = (0xB04 | SCI_ERR_MASK)
} sci_error_t;

#ifdef __cplusplus
}
#endif

#endif /* REMORA_SISCI_ERROR_H */
