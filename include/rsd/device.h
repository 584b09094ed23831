/* SPDX-License-Identifier: MIT */
/*
 * Device drivers: what serves pinned host memory and CUDA devices. A driver
 * fills a struct rsd_device_ops, as a kernel driver fills file_operations.
 * Every op may be called from any thread; ops used by lock-free readers
 * (event_query, metrics) must be thread-safe without the manager's lock.
 * Streams and events are opaque void pointers owned by the driver.
 */
#ifndef RSD_DEVICE_H
#define RSD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/location.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_device_ops {
	const char *name;
	/* Visible CUDA devices (0 when none). */
	int (*device_count)(void *ctx);
	/* Allocate/free nbytes at a pinned-host or cuda location. */
	int (*alloc)(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr);
	void (*free)(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes);
	/* Enqueue a copy on stream (NULL: the driver's transfer stream of the
	 * device involved). Either side may be any location. */
	int (*copy)(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		    struct rsd_location src_at, uint64_t nbytes, void *stream);
	/* -RSD_ETYPE when stream is not one of this driver's streams; else 0
	 * and the stream's device. */
	int (*stream_device)(void *ctx, void *stream, int *device);
	/* The stream a NULL stream stands for on a device. */
	void *(*default_stream)(void *ctx, int device);
	int (*stream_sync)(void *ctx, void *stream);
	int (*device_sync)(void *ctx, int device);
	/* Events: record on a stream, query (1 complete, 0 pending, <0 error),
	 * synchronize, destroy (back to the pool). */
	int (*event_record)(void *ctx, void *stream, void **event);
	int (*event_query)(void *ctx, void *event);
	int (*event_sync)(void *ctx, void *event);
	void (*event_destroy)(void *ctx, void *event);
	/* Process-wide allocator counters of one device (best effort). */
	int (*metrics)(void *ctx, int device, uint64_t *allocated, uint64_t *reserved);
};

/* The host driver: page-locked (mlock) pinned memory from a pool, no CUDA
 * devices. ctx is ignored (pass NULL). */
const struct rsd_device_ops *rsd_host_driver(void);

/* The CUDA runtime driver; ctx is ignored (pass NULL). On a machine without
 * a GPU it reports zero devices and every CUDA call fails cleanly. */
const struct rsd_device_ops *rsd_cuda_driver(void);
/* True when librsd was built with the CUDA runtime. */
bool rsd_cuda_built(void);

/*
 * The simulated device: host memory posing as ndevices CUDA devices,
 * page-locked pinned host memory, streams whose events complete on command,
 * fault injection.
 */
struct rsd_simdev;
struct rsd_simdev_config {
	int ndevices;       /* cuda:0 .. cuda:ndevices-1 */
	bool auto_complete; /* events complete as soon as they are recorded */
	bool pooled;        /* false: every device or pinned allocation is one alloc call */
};
int rsd_simdev_create(const struct rsd_simdev_config *cfg, struct rsd_simdev **out);
void rsd_simdev_destroy(struct rsd_simdev *sd);
const struct rsd_device_ops *rsd_simdev_ops(void); /* pass with sd as driver_ctx */
int rsd_simdev_stream_create(struct rsd_simdev *sd, int device, void **stream);
void rsd_simdev_stream_destroy(struct rsd_simdev *sd, void *stream);
/* Completes every event recorded on that stream so far. */
void rsd_simdev_stream_complete(struct rsd_simdev *sd, void *stream);
void rsd_simdev_complete_all(struct rsd_simdev *sd);
void rsd_simdev_set_auto_complete(struct rsd_simdev *sd, bool on);
/* Incomplete events on a stream (NULL: on every stream). */
unsigned rsd_simdev_pending_events(struct rsd_simdev *sd, void *stream);
enum rsd_simdev_op {
	RSD_SIMDEV_ALLOC,
	RSD_SIMDEV_COPY,
	RSD_SIMDEV_EVENT_RECORD,
	RSD_SIMDEV_EVENT_QUERY,
	RSD_SIMDEV_EVENT_SYNC,
	RSD_SIMDEV_METRICS,
	RSD_SIMDEV_NOPS
};
/* The nth call of op from now (1-based) fails with -err; n = 0 disarms. */
void rsd_simdev_fail_nth(struct rsd_simdev *sd, enum rsd_simdev_op op, unsigned n, int err);
unsigned long rsd_simdev_calls(struct rsd_simdev *sd, enum rsd_simdev_op op);
/* Every call of op fails with -err until disarmed with err = 0. */
void rsd_simdev_fail_all(struct rsd_simdev *sd, enum rsd_simdev_op op, int err);
/* Every allocation at location at fails with -err until disarmed with err = 0. */
void rsd_simdev_fail_location(struct rsd_simdev *sd, struct rsd_location at, int err);
/* Bytes currently allocated at cuda:device (what metrics reports). */
uint64_t rsd_simdev_allocated_bytes(struct rsd_simdev *sd, int device);

#ifdef __cplusplus
}
#endif
#endif
