/*
 * dis_types.h - dis_* helper types (Remora).
 *
 * Some SISCI clients include this header to get dis_nodeId_list_t,
 * dis_virt_adapter_t and dis_dma_vec_t.  Remora keeps all of those in
 * sisci_types.h, so this header only forwards to it.
 */
#ifndef REMORA_DIS_TYPES_H
#define REMORA_DIS_TYPES_H

#include "sisci_types.h"

#endif /* REMORA_DIS_TYPES_H */
