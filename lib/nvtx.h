/* SPDX-License-Identifier: MIT */
/*
 * NVTX ranges, so that Nsight Systems (and any NVTX tool) shows librsd's
 * copies and plans on the calling thread's row, above the CUDA calls they
 * make and beside the job's own kernels.
 *
 * Only CUDA builds (make CUDA=1 or sim) have them, when the toolkit has the
 * header-only NVTX 3 (RSD_NVTX=1), which needs no library. With
 * no tool attached each call is a load and a predicted branch (NVTX's
 * injection pointer is unset); the messages are static strings and the
 * byte count a payload, so nothing is formatted. Other builds, or a
 * toolkit without nvtx3/, get empty functions.
 *
 * A range is pushed and popped on one thread, as NVTX requires: every
 * rsd__nvtx_push() is paired with rsd__nvtx_pop() before the function that
 * pushed returns.
 */
#ifndef RSD_NVTX_H
#define RSD_NVTX_H
#include <stdint.h>

/* RSD_NVTX: set by the build (tools/build/config.mk) for CUDA builds whose
 * toolkit has nvtx3/. */
#if defined(RSD_NVTX) && RSD_NVTX
#include <nvtx3/nvToolsExt.h>

/* msg: a string that outlives the call (NVTX copies it only when a tool
 * records); payload: bytes, or 0. */
static inline void rsd__nvtx_push(const char *msg, uint64_t payload)
{
	nvtxEventAttributes_t a = { 0 };

	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = msg ? msg : "rsd";
	a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
	a.payload.ullValue = payload;
	nvtxRangePushEx(&a);
}

static inline void rsd__nvtx_pop(void)
{
	nvtxRangePop();
}
#else
static inline void rsd__nvtx_push(const char *msg, uint64_t payload)
{
	(void)msg, (void)payload;
}

static inline void rsd__nvtx_pop(void)
{
}
#endif
#endif /* RSD_NVTX_H */
