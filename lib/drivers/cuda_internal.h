/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime driver's shared state, private to lib/drivers/cuda*.c:
 * the per-device records, the driver-wide record (cuda) and the calls the
 * driver's files make of each other. The driver is split by concept:
 *   cuda.c         devices and their contexts (start-up, lost devices,
 *                  failures), memory (the pools), the ops table
 *   cuda_stream.c  driver streams, peer access, syncs, events
 *   cuda_gate.c    gates (cudaLaunchHostFunc) and their failure records
 *   cuda_copy.c    copies and their timing for rsd:copy_start/end
 *
 * Locking: cuda.lock protects the driver streams (struct cuda_stream), the
 * peer states (cuda.peer) and the event free lists; a device's pool has its
 * own lock; a device's lost flag is atomic; cuda_gate.c's gates.lock and
 * cuda_copy.c's timed.lock are each taken alone, never with cuda.lock.
 * Everything in struct cuda_state but lock is set once by start-up
 * (cuda_ndevices()) and read without a lock after it.
 */
#ifndef RSD_DRIVERS_CUDA_INTERNAL_H
#define RSD_DRIVERS_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"
#include "pool.h"

#ifndef RSD_HAVE_CUDA
#define RSD_HAVE_CUDA 0
#endif

#if RSD_HAVE_CUDA
#include <cuda_runtime_api.h>

#define CUDA_CHUNK_SIZE (64ull << 20)
/* cudaMalloc aligns to 256 bytes; keep carved blocks at least that aligned. */
#define CUDA_GRANULE 512ull
#define CUDA_EVENT_MAGIC 0x7273642d63657674ull /* "rsd-cevt" */
#define CUDA_EVENT_FREE 0x7273642d63667265ull  /* "rsd-cfre" */

struct gate_line; /* cuda_gate.c */

struct cuda_event {
	uint64_t magic; /* CUDA_EVENT_MAGIC while handed out */
	int device;
	cudaEvent_t ev;
	struct cuda_event *next; /* its device's free list */
	/* The gates queued on its stream before its record (cuda_gate.c):
	 * line is NULL when that stream never had one. Set by event_record. */
	struct gate_line *line;
	uint64_t gates;
};

/* A driver stream, created on first use (both fields protected by
 * cuda.lock; never destroyed). */
struct cuda_stream {
	cudaStream_t s;
	bool made;
};

enum peer_state {
	PEER_UNKNOWN = 0,
	PEER_ON,  /* cudaDeviceEnablePeerAccess done (or already enabled) */
	PEER_OFF, /* cudaDeviceCanAccessPeer says no, or enabling failed */
};

struct cuda_dev {
	int index;
	struct rsd__pool pool;		/* cudaMalloc chunks; own lock */
	struct cuda_stream transfer;	/* what a NULL stream stands for */
	struct cuda_stream h2d, d2h;	/* transfer_stream per direction */
	struct cuda_stream *peer;	/* [src]: peer copies src -> this device */
	struct cuda_event *free_events; /* protected by cuda.lock */
	/* Its context had a sticky error: set once, never cleared. From then
	 * on no op calls the runtime for it (no cudaFree in a dead context:
	 * its memory is leaked on purpose). */
	atomic_bool lost;
};

struct cuda_state {
	pthread_once_t once;
	int ndevices;	    /* set once by cuda_init */
	char why_none[200]; /* set once: why there are no devices */
	struct rsd__pool pinned;
	struct cuda_dev *dev;
	unsigned char *peer;  /* [a * ndevices + b]: enum peer_state, by cuda.lock */
	pthread_mutex_t lock; /* driver streams, peer states, event free lists */
};

extern struct cuda_state cuda;

/* cuda.c: devices, their contexts and their failures */
bool cuda_dev_lost(int device);
int cuda_fail(const char *call, cudaError_t e);
int cuda_check_lost(const char *op, int device);
int cuda_check_lost_at(const char *op, struct rsd_location at);
int cuda_device_enter(int device, int *prev);
void cuda_device_leave(int device, int prev);
int cuda_ndevices(void);
int cuda_no_device(const char *op, int device);
int cuda_check_location(const char *op, struct rsd_location at, bool host_ok);

/* cuda_stream.c: driver streams, peer access, syncs and events */
int cuda_transfer_stream(int device, cudaStream_t *out);
void cuda_peer_enable(int a, int b);
int cuda_stream_sound_device(void *ctx, const char *op, void *stream, int *dev);
/* ops of cuda_ops (cuda.c), as are the cu_* below */
void *cu_transfer_stream(void *ctx, struct rsd_location dst, struct rsd_location src);
int cu_stream_device(void *ctx, void *stream, int *device);
void *cu_default_stream(void *ctx, int device);
int cu_stream_sync(void *ctx, void *stream);
int cu_device_sync(void *ctx, int device);
int cu_event_record(void *ctx, void *stream, void **event);
int cu_event_query(void *ctx, void *event);
int cu_event_sync(void *ctx, void *event);
void cu_event_destroy(void *ctx, void *event);
int cu_stream_wait_event(void *ctx, void *stream, void *event);

/* cuda_gate.c: gates and the failures they record */
void cuda_event_gates(struct cuda_event *ev, cudaStream_t s);
int cuda_event_gate_failed(const struct cuda_event *ev, const char *op);
void cuda_event_ungate(struct cuda_event *ev);
int cu_gate_queue(void *ctx, void *stream, void **gate);
void cu_gate_open(void *ctx, void *gate, int err);

/* cuda_copy.c: copies, and their timing */
void cuda_timed_reap(void);
int cu_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
	    struct rsd_location src_at, uint64_t nbytes, void *stream);

#endif /* RSD_HAVE_CUDA */

#endif /* RSD_DRIVERS_CUDA_INTERNAL_H */
