/* SPDX-License-Identifier: BSD-3-Clause */
/* User-level DAT 2.0 API (uDAPL): the header applications include. */

#ifndef _UDAT_H_
#define _UDAT_H_

#include <dat2/udat_config.h>
#include <dat2/dat_platform_specific.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The definitions up to the inclusion of dat.h are needed by prototypes
 * in dat.h, so they have to come first.
 */

/* Kind of memory an LMR is created from. */
typedef enum dat_mem_type {
    DAT_MEM_TYPE_VIRTUAL        = 0x00,
    DAT_MEM_TYPE_LMR            = 0x01,
    DAT_MEM_TYPE_SHARED_VIRTUAL = 0x02      /* user API only */
} DAT_MEM_TYPE;

/* Answer of dat_get_handle_type(). */
typedef enum dat_handle_type {
    DAT_HANDLE_TYPE_CR,
    DAT_HANDLE_TYPE_EP,
    DAT_HANDLE_TYPE_EVD,
    DAT_HANDLE_TYPE_IA,
    DAT_HANDLE_TYPE_LMR,
    DAT_HANDLE_TYPE_PSP,
    DAT_HANDLE_TYPE_PZ,
    DAT_HANDLE_TYPE_RMR,
    DAT_HANDLE_TYPE_RSP,
    DAT_HANDLE_TYPE_CNO,
    DAT_HANDLE_TYPE_SRQ,
    DAT_HANDLE_TYPE_CSP
#ifdef DAT_EXTENSIONS
    , DAT_HANDLE_TYPE_EXTENSION_BASE
#endif
} DAT_HANDLE_TYPE;

/*
 * EVD state is three independent facets (enabled?, waitable?, how waiters
 * are notified); each facet takes exactly one of its values.
 */
typedef enum dat_evd_state {
    DAT_EVD_STATE_ENABLED           = 0x01,
    DAT_EVD_STATE_DISABLED          = 0x02,
    DAT_EVD_STATE_WAITABLE          = 0x04,
    DAT_EVD_STATE_UNWAITABLE        = 0x08,
    DAT_EVD_STATE_CONFIG_NOTIFY     = 0x10,
    DAT_EVD_STATE_CONFIG_SOLICITED  = 0x20,
    DAT_EVD_STATE_CONFIG_THRESHOLD  = 0x30
} DAT_EVD_STATE;

typedef enum dat_evd_param_mask {
    DAT_EVD_FIELD_IA_HANDLE     = 0x01,
    DAT_EVD_FIELD_EVD_QLEN      = 0x02,
    DAT_EVD_FIELD_EVD_STATE     = 0x04,
    DAT_EVD_FIELD_CNO           = 0x08,
    DAT_EVD_FIELD_EVD_FLAGS     = 0x10,
    DAT_EVD_FIELD_ALL           = 0x1F
} DAT_EVD_PARAM_MASK;

/* Selects struct dat_provider_attr members for dat_ia_query(). */
typedef DAT_UINT64 DAT_PROVIDER_ATTR_MASK;

/* dat.h supplies the DAT_LMR_PARAM_MASK typedef for this enum. */
enum dat_lmr_param_mask {
    DAT_LMR_FIELD_IA_HANDLE             = 0x001,
    DAT_LMR_FIELD_MEM_TYPE              = 0x002,
    DAT_LMR_FIELD_REGION_DESC           = 0x004,
    DAT_LMR_FIELD_LENGTH                = 0x008,
    DAT_LMR_FIELD_PZ_HANDLE             = 0x010,
    DAT_LMR_FIELD_MEM_PRIV              = 0x020,
    DAT_LMR_FIELD_VA_TYPE               = 0x040,
    DAT_LMR_FIELD_LMR_CONTEXT           = 0x080,
    DAT_LMR_FIELD_RMR_CONTEXT           = 0x100,
    DAT_LMR_FIELD_REGISTERED_SIZE       = 0x200,
    DAT_LMR_FIELD_REGISTERED_ADDRESS    = 0x400,
    DAT_LMR_FIELD_ALL                   = 0x7FF
};

#include <dat2/dat.h>

/* ------------------------------------------------------------------ */
/* Consumer notification objects and EVDs                              */
/* ------------------------------------------------------------------ */

typedef DAT_HANDLE DAT_CNO_HANDLE;

struct dat_evd_param {
    DAT_IA_HANDLE   ia_handle;
    DAT_COUNT       evd_qlen;
    DAT_EVD_STATE   evd_state;
    DAT_CNO_HANDLE  cno_handle;
    DAT_EVD_FLAGS   evd_flags;
};

/* Key naming a shared memory region; an array of this many bytes. */
#define DAT_LMR_COOKIE_SIZE 40
typedef char (*DAT_LMR_COOKIE)[DAT_LMR_COOKIE_SIZE];

/* Callback a CNO invokes instead of waking a waiter: (instance, evd). */
typedef void (DAT_API *DAT_AGENT_FUNC)(DAT_PVOID, DAT_EVD_HANDLE);

typedef struct dat_os_wait_proxy_agent {
    DAT_PVOID       instance_data;
    DAT_AGENT_FUNC  proxy_agent_func;
} DAT_OS_WAIT_PROXY_AGENT;

/* "No agent"; a C99 compound literal. */
#define DAT_OS_WAIT_PROXY_AGENT_NULL \
    (DAT_OS_WAIT_PROXY_AGENT) { (DAT_PVOID) NULL, (DAT_AGENT_FUNC) NULL }

/*
 * Pseudo EVD handles.  dat_ia_open() accepts DAT_EVD_ASYNC_EXISTS to reuse
 * the async EVD of an earlier open of the same IA; dat_ia_query() then
 * reports DAT_EVD_OUT_OF_SCOPE for this instance.
 */
#define DAT_EVD_ASYNC_EXISTS    (DAT_EVD_HANDLE) 0x1
#define DAT_EVD_OUT_OF_SCOPE    (DAT_EVD_HANDLE) 0x2

/* ------------------------------------------------------------------ */
/* Local memory regions                                                */
/* ------------------------------------------------------------------ */

typedef struct dat_shared_memory {
    DAT_PVOID       virtual_address;
    DAT_LMR_COOKIE  shared_memory_id;
} DAT_SHARED_MEMORY;

/* Interpretation follows DAT_MEM_TYPE. */
typedef union dat_region_description {
    DAT_PVOID           for_va;
    DAT_LMR_HANDLE      for_lmr_handle;
    DAT_SHARED_MEMORY   for_shared_memory;
} DAT_REGION_DESCRIPTION;

struct dat_lmr_param {
    DAT_IA_HANDLE           ia_handle;
    DAT_MEM_TYPE            mem_type;
    DAT_REGION_DESCRIPTION  region_desc;
    DAT_VLEN                length;
    DAT_PZ_HANDLE           pz_handle;
    DAT_MEM_PRIV_FLAGS      mem_priv;
    DAT_VA_TYPE             va_type;
    DAT_LMR_CONTEXT         lmr_context;
    DAT_RMR_CONTEXT         rmr_context;
    DAT_VLEN                registered_size;
    DAT_VADDR               registered_address;
};

/* How a CNO signals: not at all, via an agent callback, or via an fd. */
typedef enum dat_proxy_type {
    DAT_PROXY_TYPE_NONE     = 0x0,
    DAT_PROXY_TYPE_AGENT    = 0x1,
    DAT_PROXY_TYPE_FD       = 0x2
} DAT_PROXY_TYPE;

typedef struct dat_cno_param {
    DAT_IA_HANDLE   ia_handle;
    DAT_PROXY_TYPE  proxy_type;
    union {                         /* selected by proxy_type */
        DAT_OS_WAIT_PROXY_AGENT agent;
        DAT_FD                  fd;
        DAT_PVOID               none;
    } proxy;
} DAT_CNO_PARAM;

/* Note: these are plain values, not independent bits. */
typedef enum dat_cno_param_mask {
    DAT_CNO_FIELD_IA_HANDLE     = 0x1,
    DAT_CNO_FIELD_PROXY_TYPE    = 0x2,
    DAT_CNO_FIELD_PROXY         = 0x3,
    DAT_CNO_FIELD_ALL           = 0x4
} DAT_CNO_PARAM_MASK;

/* ------------------------------------------------------------------ */
/* Interface adapter attributes                                        */
/* ------------------------------------------------------------------ */

struct dat_ia_attr {
    char                adapter_name[DAT_NAME_MAX_LENGTH];
    char                vendor_name[DAT_NAME_MAX_LENGTH];
    DAT_UINT32          hardware_version_major;
    DAT_UINT32          hardware_version_minor;
    DAT_UINT32          firmware_version_major;
    DAT_UINT32          firmware_version_minor;
    DAT_IA_ADDRESS_PTR  ia_address_ptr;
    DAT_COUNT           max_eps;
    DAT_COUNT           max_dto_per_ep;
    DAT_COUNT           max_rdma_read_per_ep_in;
    DAT_COUNT           max_rdma_read_per_ep_out;
    DAT_COUNT           max_evds;
    DAT_COUNT           max_evd_qlen;
    DAT_COUNT           max_iov_segments_per_dto;
    DAT_COUNT           max_lmrs;
    DAT_SEG_LENGTH      max_lmr_block_size;
    DAT_VADDR           max_lmr_virtual_address;
    DAT_COUNT           max_pzs;
    DAT_SEG_LENGTH      max_message_size;
    DAT_SEG_LENGTH      max_rdma_size;
    DAT_COUNT           max_rmrs;
    DAT_VADDR           max_rmr_target_address;
    DAT_COUNT           max_srqs;
    DAT_COUNT           max_ep_per_srq;
    DAT_COUNT           max_recv_per_srq;
    DAT_COUNT           max_iov_segments_per_rdma_read;
    DAT_COUNT           max_iov_segments_per_rdma_write;
    DAT_COUNT           max_rdma_read_in;
    DAT_COUNT           max_rdma_read_out;
    DAT_BOOLEAN         max_rdma_read_per_ep_in_guaranteed;
    DAT_BOOLEAN         max_rdma_read_per_ep_out_guaranteed;
    DAT_BOOLEAN         zb_supported;
    DAT_EXTENSION       extension_supported;
    DAT_COUNT           extension_version;
    DAT_COUNT           num_transport_attr;
    DAT_NAMED_ATTR *    transport_attr;
    DAT_COUNT           num_vendor_attr;
    DAT_NAMED_ATTR *    vendor_attr;
};

/*
 * Mask bits beyond those in dat.h.  DAT_IA_FIELD_IA_EXTENSION has the same
 * value as DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED; both stand for the
 * extension_supported member.
 */
#define DAT_IA_FIELD_IA_EXTENSION           UINT64_C(0x100000000)
#define DAT_IA_FIELD_IA_EXTENSION_VERSION   UINT64_C(0x200000000)
#define DAT_IA_FIELD_IA_NUM_TRANSPORT_ATTR  UINT64_C(0x400000000)
#define DAT_IA_FIELD_IA_TRANSPORT_ATTR      UINT64_C(0x800000000)
#define DAT_IA_FIELD_IA_NUM_VENDOR_ATTR     UINT64_C(0x1000000000)
#define DAT_IA_FIELD_IA_VENDOR_ATTR         UINT64_C(0x2000000000)
#define DAT_IA_FIELD_ALL                    UINT64_C(0x3FFFFFFFFF)

/* ------------------------------------------------------------------ */
/* Provider attributes                                                 */
/* ------------------------------------------------------------------ */

typedef enum dat_pz_support {
    DAT_PZ_UNIQUE,
    DAT_PZ_SHAREABLE
} DAT_PZ_SUPPORT;

#include <dat2/udat_vendor_specific.h>

/*
 * evd_stream_merging_supported[i][j] says whether streams i and j may feed
 * one EVD.  Index order: software, connection request, DTO, connection,
 * RMR bind, async -- the order of the DAT_EVD_*_FLAG bits.
 */
struct dat_provider_attr {
    char                    provider_name[DAT_NAME_MAX_LENGTH];
    DAT_UINT32              provider_version_major;
    DAT_UINT32              provider_version_minor;
    DAT_UINT32              dapl_version_major;
    DAT_UINT32              dapl_version_minor;
    DAT_MEM_TYPE            lmr_mem_types_supported;
    DAT_IOV_OWNERSHIP       iov_ownership_on_return;
    DAT_QOS                 dat_qos_supported;
    DAT_COMPLETION_FLAGS    completion_flags_supported;
    DAT_BOOLEAN             is_thread_safe;
    DAT_COUNT               max_private_data_size;
    DAT_BOOLEAN             supports_multipath;
    DAT_EP_CREATOR_FOR_PSP  ep_creator;
    DAT_PZ_SUPPORT          pz_support;
    DAT_UINT32              optimal_buffer_alignment;
    const DAT_BOOLEAN       evd_stream_merging_supported[6][6];
    DAT_BOOLEAN             srq_supported;
    DAT_COUNT               srq_watermarks_supported;
    DAT_BOOLEAN             srq_ep_pz_difference_supported;
    DAT_COUNT               srq_info_supported;
    DAT_COUNT               ep_recv_info_supported;
    DAT_BOOLEAN             lmr_sync_req;
    DAT_BOOLEAN             dto_async_return_guaranteed;
    DAT_BOOLEAN             rdma_write_for_rdma_read_req;
    DAT_BOOLEAN             rdma_read_lmr_rmr_context_exposure;
    DAT_RMR_SCOPE           rmr_scope_supported;
    DAT_BOOLEAN             is_signal_safe;
    DAT_BOOLEAN             ha_supported;
    DAT_HA_LB               ha_loadbalancing;
    DAT_COUNT               num_provider_specific_attr;
    DAT_NAMED_ATTR *        provider_specific_attr;
};

#define DAT_PROVIDER_FIELD_PROVIDER_NAME                        UINT64_C(0x00000001)
#define DAT_PROVIDER_FIELD_PROVIDER_VERSION_MAJOR               UINT64_C(0x00000002)
#define DAT_PROVIDER_FIELD_PROVIDER_VERSION_MINOR               UINT64_C(0x00000004)
#define DAT_PROVIDER_FIELD_DAPL_VERSION_MAJOR                   UINT64_C(0x00000008)
#define DAT_PROVIDER_FIELD_DAPL_VERSION_MINOR                   UINT64_C(0x00000010)
#define DAT_PROVIDER_FIELD_LMR_MEM_TYPE_SUPPORTED               UINT64_C(0x00000020)
#define DAT_PROVIDER_FIELD_IOV_OWNERSHIP                        UINT64_C(0x00000040)
#define DAT_PROVIDER_FIELD_DAT_QOS_SUPPORTED                    UINT64_C(0x00000080)
#define DAT_PROVIDER_FIELD_COMPLETION_FLAGS_SUPPORTED           UINT64_C(0x00000100)
#define DAT_PROVIDER_FIELD_IS_THREAD_SAFE                       UINT64_C(0x00000200)
#define DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE                UINT64_C(0x00000400)
#define DAT_PROVIDER_FIELD_SUPPORTS_MULTIPATH                   UINT64_C(0x00000800)
#define DAT_PROVIDER_FIELD_EP_CREATOR                           UINT64_C(0x00001000)
#define DAT_PROVIDER_FIELD_PZ_SUPPORT                           UINT64_C(0x00002000)
#define DAT_PROVIDER_FIELD_OPTIMAL_BUFFER_ALIGNMENT             UINT64_C(0x00004000)
#define DAT_PROVIDER_FIELD_EVD_STREAM_MERGING_SUPPORTED         UINT64_C(0x00008000)
#define DAT_PROVIDER_FIELD_SRQ_SUPPORTED                        UINT64_C(0x00010000)
#define DAT_PROVIDER_FIELD_SRQ_WATERMARKS_SUPPORTED             UINT64_C(0x00020000)
#define DAT_PROVIDER_FIELD_SRQ_EP_PZ_DIFFERENCE_SUPPORTED       UINT64_C(0x00040000)
#define DAT_PROVIDER_FIELD_SRQ_INFO_SUPPORTED                   UINT64_C(0x00080000)
#define DAT_PROVIDER_FIELD_EP_RECV_INFO_SUPPORTED               UINT64_C(0x00100000)
#define DAT_PROVIDER_FIELD_LMR_SYNC_REQ                         UINT64_C(0x00200000)
#define DAT_PROVIDER_FIELD_DTO_ASYNC_RETURN_GUARANTEED          UINT64_C(0x00400000)
#define DAT_PROVIDER_FIELD_RDMA_WRITE_FOR_RDMA_READ_REQ         UINT64_C(0x00800000)
#define DAT_PROVIDER_FIELD_RDMA_READ_LMR_RMR_CONTEXT_EXPOSURE   UINT64_C(0x01000000)
#define DAT_PROVIDER_FIELD_RMR_SCOPE_SUPPORTED                  UINT64_C(0x02000000)
#define DAT_PROVIDER_FIELD_IS_SIGNAL_SAFE                       UINT64_C(0x04000000)
#define DAT_PROVIDER_FIELD_HA_SUPPORTED                         UINT64_C(0x08000000)
#define DAT_PROVIDER_FIELD_HA_LB                                UINT64_C(0x10000000)
#define DAT_PROVIDER_FIELD_NUM_PROVIDER_SPECIFIC_ATTR           UINT64_C(0x20000000)
#define DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR               UINT64_C(0x40000000)
#define DAT_PROVIDER_FIELD_ALL                                  UINT64_C(0x7FFFFFFF)
#define DAT_PROVIDER_FIELD_NONE                                 UINT64_C(0x0)

/* ------------------------------------------------------------------ */
/* User-level calls                                                    */
/* ------------------------------------------------------------------ */

/*
 * (ia, mem_type, region, length, pz, privileges, va_type,
 *  lmr, lmr_context, rmr_context, registered_length, registered_address)
 */
extern DAT_RETURN DAT_API dat_lmr_create(
    IN DAT_IA_HANDLE, IN DAT_MEM_TYPE, IN DAT_REGION_DESCRIPTION, IN DAT_VLEN,
    IN DAT_PZ_HANDLE, IN DAT_MEM_PRIV_FLAGS, IN DAT_VA_TYPE,
    OUT DAT_LMR_HANDLE *, OUT DAT_LMR_CONTEXT *, OUT DAT_RMR_CONTEXT *,
    OUT DAT_VLEN *, OUT DAT_VADDR *);

extern DAT_RETURN DAT_API dat_lmr_query(
    IN DAT_LMR_HANDLE, IN DAT_LMR_PARAM_MASK, OUT DAT_LMR_PARAM *);

/* (ia, min_qlen, cno, flags, evd) */
extern DAT_RETURN DAT_API dat_evd_create(
    IN DAT_IA_HANDLE, IN DAT_COUNT, IN DAT_CNO_HANDLE, IN DAT_EVD_FLAGS,
    OUT DAT_EVD_HANDLE *);

extern DAT_RETURN DAT_API dat_evd_modify_cno(IN DAT_EVD_HANDLE, IN DAT_CNO_HANDLE);

extern DAT_RETURN DAT_API dat_cno_create(
    IN DAT_IA_HANDLE, IN DAT_OS_WAIT_PROXY_AGENT, OUT DAT_CNO_HANDLE *);

extern DAT_RETURN DAT_API dat_cno_modify_agent(
    IN DAT_CNO_HANDLE, IN DAT_OS_WAIT_PROXY_AGENT);

extern DAT_RETURN DAT_API dat_cno_query(
    IN DAT_CNO_HANDLE, IN DAT_CNO_PARAM_MASK, OUT DAT_CNO_PARAM *);

extern DAT_RETURN DAT_API dat_cno_free(IN DAT_CNO_HANDLE);

/* (cno, timeout, evd_that_fired) */
extern DAT_RETURN DAT_API dat_cno_wait(
    IN DAT_CNO_HANDLE, IN DAT_TIMEOUT, OUT DAT_EVD_HANDLE *);

extern DAT_RETURN DAT_API dat_evd_enable(IN DAT_EVD_HANDLE);

/* (evd, timeout, threshold, event, n_more_events) */
extern DAT_RETURN DAT_API dat_evd_wait(
    IN DAT_EVD_HANDLE, IN DAT_TIMEOUT, IN DAT_COUNT, OUT DAT_EVENT *,
    OUT DAT_COUNT *);

extern DAT_RETURN DAT_API dat_evd_disable(IN DAT_EVD_HANDLE);
extern DAT_RETURN DAT_API dat_evd_set_unwaitable(IN DAT_EVD_HANDLE);
extern DAT_RETURN DAT_API dat_evd_clear_unwaitable(IN DAT_EVD_HANDLE);

/* (ia, fd, cno): a CNO that signals through a pollable descriptor */
extern DAT_RETURN DAT_API dat_cno_fd_create(
    IN DAT_IA_HANDLE, OUT DAT_FD *, OUT DAT_CNO_HANDLE *);

/* (cno, evd_that_fired) */
extern DAT_RETURN DAT_API dat_cno_trigger(IN DAT_CNO_HANDLE, OUT DAT_EVD_HANDLE *);

#ifdef __cplusplus
}
#endif

#endif /* _UDAT_H_ */
