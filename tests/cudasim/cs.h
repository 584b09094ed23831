/* SPDX-License-Identifier: MIT */
/*
 * Private layout of the CUDA runtime double (cudasim.h), shared by
 * cs_core.c (start-up, devices, errors, fault injection), cs_memory.c
 * (allocations, pointer attributes, copies) and cs_stream.c (streams,
 * events, host functions, synchronization).
 */
#ifndef RSD_CUDASIM_CS_H
#define RSD_CUDASIM_CS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rsd/device.h>
#include <rsd/error.h>
#include <rsd/location.h>

#include "cudasim.h"

/* Every runtime function of the double, for fault injection and counts. */
#define CS_CALLS(X)                    \
	X(cudaGetDeviceCount)          \
	X(cudaGetDevice)               \
	X(cudaSetDevice)               \
	X(cudaDeviceSynchronize)       \
	X(cudaDeviceCanAccessPeer)     \
	X(cudaDeviceEnablePeerAccess)  \
	X(cudaDeviceDisablePeerAccess) \
	X(cudaRuntimeGetVersion)       \
	X(cudaDriverGetVersion)        \
	X(cudaMalloc)                  \
	X(cudaFree)                    \
	X(cudaHostAlloc)               \
	X(cudaMallocHost)              \
	X(cudaFreeHost)                \
	X(cudaHostRegister)            \
	X(cudaHostUnregister)          \
	X(cudaPointerGetAttributes)    \
	X(cudaMemGetInfo)              \
	X(cudaMemcpy)                  \
	X(cudaMemcpyAsync)             \
	X(cudaMemcpyPeer)              \
	X(cudaMemcpyPeerAsync)         \
	X(cudaStreamCreate)            \
	X(cudaStreamCreateWithFlags)   \
	X(cudaStreamDestroy)           \
	X(cudaStreamQuery)             \
	X(cudaStreamSynchronize)       \
	X(cudaStreamGetDevice)         \
	X(cudaStreamGetFlags)          \
	X(cudaStreamGetId)             \
	X(cudaStreamWaitEvent)         \
	X(cudaEventCreate)             \
	X(cudaEventCreateWithFlags)    \
	X(cudaEventRecord)             \
	X(cudaEventQuery)              \
	X(cudaEventSynchronize)        \
	X(cudaEventDestroy)            \
	X(cudaEventElapsedTime)        \
	X(cudaLaunchHostFunc)

enum cs_call {
#define CS_ENUM(name) CS_##name,
	CS_CALLS(CS_ENUM)
#undef CS_ENUM
	CS_NCALLS
};

/* What kind of memory a registered allocation is. */
enum cs_mem {
	CS_MEM_DEVICE,	   /* cudaMalloc */
	CS_MEM_PINNED,	   /* cudaHostAlloc, page-locked */
	CS_MEM_UNPINNED,   /* cudaHostAlloc while unpinned_host is on: pageable */
	CS_MEM_REGISTERED, /* the caller's memory, page-locked by cudaHostRegister */
};

struct cs_alloc {
	char *base;
	uint64_t nbytes;
	enum cs_mem mem;
	int device; /* the device it is on (device) or whose context was
		     * current (host): a host allocation or registration is
		     * that context's, and dies with it */
	struct cs_alloc *next;
};

/*
 * A stream's progress lane (cs_progress.c). In background mode each stream
 * has its own engine thread that runs the stream's queued work delay_ns
 * after it became runnable, so streams progress independently, as on a
 * GPU: a host function blocking one stream does not hold up another. The
 * simulated device itself stays in on-command mode then, and the engines
 * are the "other thread" that completes its streams.
 */
struct cs_lane {
	void *sim;	       /* the simulated stream */
	int device;	       /* its device */
	void *tail;	       /* protected by cs.lock: event behind its last work */
	uint64_t queued, done; /* protected by cs.lock: work marks queued, run */
	uint64_t ready_ns;     /* protected by cs.lock: when queued passed done */
	bool engine;	       /* protected by cs.lock: engine thread started */
	bool retired;	       /* protected by cs.lock: its stream was destroyed */
	pthread_cond_t cond;   /* new work, a mode change or retirement */
	struct cs_lane *next;  /* cs.lanes */
};

/*
 * The process-wide state. Set once by cs_start (under pthread_once):
 * ndevices, memory, sd, ops. lock protects the rest; it is never held
 * while a call waits for stream work, and the simulated device is entered
 * with it held only by calls that do not wait (lock order: cs.lock, then
 * the simulated device's own lock).
 */
struct cs_state {
	int ndevices;
	uint64_t memory;		  /* bytes per device */
	struct rsd_simdev *sd;		  /* NULL: start-up failed */
	const struct rsd_device_ops *ops; /* rsd_simdev_ops() */

	pthread_mutex_t lock;
	bool unpinned_host;		 /* protected by lock */
	cudaError_t sticky;		 /* protected by lock; cudaSuccess: context sound */
	cudaError_t *lost;		 /* protected by lock; per device: its context's
					  * sticky error (rsd_cudasim_lose_device) */
	uint64_t *used;			 /* protected by lock; bytes per device */
	struct cs_lane **default_lane;	 /* per device: its default stream's lane */
	struct cs_lane *lanes;		 /* protected by lock: every lane not yet freed */
	enum rsd_simdev_progress mode;	 /* protected by lock */
	uint64_t delay_ns;		 /* protected by lock: background delay per batch */
	bool *peer;			 /* protected by lock: [dev * n + peer] enabled */
	struct cs_alloc *allocs;	 /* protected by lock */
	struct cs_stream *streams;	 /* protected by lock */
	struct cs_event *events;	 /* protected by lock */
	unsigned long calls[CS_NCALLS];	 /* protected by lock */
	unsigned fail_nth[CS_NCALLS];	 /* protected by lock; 0 disarmed */
	cudaError_t fail_err[CS_NCALLS]; /* protected by lock */
};

extern struct cs_state cs;

/*
 * Start of every runtime function: start the double, count the call, fire
 * an armed fault, refuse calls from a host function (the runtime forbids
 * them) and report a corrupted context. Returns cudaSuccess to proceed, or
 * the error the call must return (already recorded as last error).
 */
cudaError_t cs_enter(enum cs_call call);
/* Record e as the calling thread's last error (unless cudaSuccess); returns e. */
cudaError_t cs_ret(cudaError_t e);
/* The calling thread's current device. */
int cs_current_device(void);
/*
 * The context of device (any int; others are sound) is lost: its sticky
 * error, recorded as the calling thread's last error; else cudaSuccess.
 * Every call that works in a device's context (its memory, streams, events,
 * or the current device's) checks it after cs_enter. Takes cs.lock.
 */
cudaError_t cs_ctx(int device);
/* cs_ctx of a resolved stream's device. Takes cs.lock. */
cudaError_t cs_stream_ctx(void *stream);
/* Mark the calling thread as running a host function (calls refused). */
void cs_set_in_host_func(bool on);

/* With cs.lock held: the allocation containing p, or NULL. */
struct cs_alloc *cs_find_alloc(const void *p);

/* cudaStream_t -> the simulated stream it stands for (0, cudaStreamLegacy
 * and cudaStreamPerThread: the current device's default stream); NULL when
 * it is no stream of the double. Takes cs.lock. */
void *cs_stream_resolve(cudaStream_t s);
/* Queue fn(arg) on a resolved stream (runs with runtime calls refused). */
cudaError_t cs_queue_host_func(void *stream, void (*fn)(void *), void *arg);
/* With cs.lock held: the lane of a resolved stream, or NULL. */
struct cs_lane *cs_lane_of(void *stream);
/* A new lane for a simulated stream of device (linked into cs.lanes);
 * NULL: no memory. */
struct cs_lane *cs_lane_new(void *sim, int device);
/* Its stream is destroyed: the lane goes once its queued work has run. */
void cs_lane_retire(struct cs_lane *l);
/*
 * After queueing work on a resolved stream: record a simulated-device event
 * behind it (the lane's tail, so cudaStreamQuery can tell when all the
 * stream's work has run) and wake its engine. Takes cs.lock.
 */
void cs_stream_mark(void *stream);
/* 1 when every item queued on a resolved stream has run, 0 if not, <0 error. */
int cs_stream_idle(void *stream);
/* Wait until a resolved stream's queued work has run. */
cudaError_t cs_stream_wait(void *stream);

#endif
