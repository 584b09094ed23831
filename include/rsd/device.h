/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_device - Device drivers: what serves pinned host memory and CUDA devices
 *
 * A driver fills a struct rsd_device_ops, as a kernel driver fills
 * file_operations, and a manager calls it for every pinned or CUDA
 * allocation, copy, stream and event. Every op may be called from any
 * thread; ops used by lock-free readers (event_query, metrics) must be
 * thread-safe without the manager's lock. Streams and events are opaque
 * void pointers owned by the driver. Three drivers ship: the host driver
 * (page-locked memory, no devices), the CUDA runtime driver and the
 * simulated device (rsd_simdev(3)). See Documentation/drivers.md.
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

/**
 * struct rsd_device_ops - A device driver.
 * @name: the driver's name, for messages.
 * @device_count: the visible CUDA devices (0 when none).
 * @alloc: allocate nbytes at a pinned-host or CUDA location into *ptr.
 * @free: free what @alloc returned.
 * @copy: enqueue a copy of nbytes on stream (NULL: the driver's transfer
 *	stream of the device involved); either side may be any location.
 * @stream_device: -RSD_ETYPE when stream is not one of this driver's
 *	streams; else 0 and the stream's device in *device.
 * @default_stream: the stream a NULL stream stands for on a device.
 * @stream_sync: wait for everything enqueued on a stream.
 * @device_sync: wait for everything enqueued on a device.
 * @event_record: record an event on a stream into *event.
 * @event_query: 1 when the event completed, 0 while pending, <0 on error.
 * @event_sync: wait for an event.
 * @event_destroy: give an event back (to the driver's pool).
 * @metrics: the process-wide allocator counters of one device (best
 *	effort).
 *
 * device_count, alloc, free and copy are required; a manager refuses a
 * driver without them.
 */
struct rsd_device_ops {
	const char *name;
	int (*device_count)(void *ctx);
	int (*alloc)(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr);
	void (*free)(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes);
	int (*copy)(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		    struct rsd_location src_at, uint64_t nbytes, void *stream);
	int (*stream_device)(void *ctx, void *stream, int *device);
	void *(*default_stream)(void *ctx, int device);
	int (*stream_sync)(void *ctx, void *stream);
	int (*device_sync)(void *ctx, int device);
	int (*event_record)(void *ctx, void *stream, void **event);
	int (*event_query)(void *ctx, void *event);
	int (*event_sync)(void *ctx, void *event);
	void (*event_destroy)(void *ctx, void *event);
	int (*metrics)(void *ctx, int device, uint64_t *allocated, uint64_t *reserved);
};

/**
 * rsd_host_driver() - The host driver.
 *
 * Page-locked (mlock) pinned memory from a pool, no CUDA devices. Its ctx
 * is ignored (pass NULL).
 *
 * Context: Any thread.
 * Return: the driver's ops; never NULL.
 */
const struct rsd_device_ops *rsd_host_driver(void);

/**
 * rsd_cuda_driver() - The CUDA runtime driver.
 *
 * Device and pinned memory come from pools. Its ctx is ignored (pass
 * NULL). On a machine without a GPU, or in a build without CUDA, it reports
 * zero devices and every CUDA call fails cleanly.
 *
 * Context: Any thread.
 * Return: the driver's ops; never NULL.
 */
const struct rsd_device_ops *rsd_cuda_driver(void);

/**
 * rsd_cuda_built() - Whether librsd was built with the CUDA runtime.
 *
 * Context: Any thread.
 * Return: true for a CUDA build.
 */
bool rsd_cuda_built(void);

/**
 * DOC: rsd_simdev - The simulated device: CUDA devices and streams made of host memory
 *
 * Host memory posing as ndevices CUDA devices, page-locked pinned host
 * memory, streams whose events complete on command (or at once, with
 * auto-complete), and fault injection for every op. Pass rsd_simdev_ops()
 * as a manager's driver and the simulated device as its driver_ctx. It
 * lets tests, and users without a GPU, run the CUDA paths of librsd.
 */
struct rsd_simdev;

/**
 * struct rsd_simdev_config - How to build a simulated device.
 * @ndevices: the devices, cuda:0 .. cuda:ndevices-1 (0..128).
 * @auto_complete: events complete as soon as they are recorded.
 * @pooled: pinned and device allocations come from pools; false makes
 *	every allocation one counted alloc call.
 */
struct rsd_simdev_config {
	int ndevices;
	bool auto_complete;
	bool pooled;
};

/**
 * rsd_simdev_create() - Create a simulated device.
 * @cfg: the configuration.
 * @out: receives the device on success.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @cfg or @out is NULL.
 * * -RSD_EINVAL - @cfg->ndevices is outside 0..128.
 * * -RSD_ENOMEM - the device could not be allocated.
 */
int rsd_simdev_create(const struct rsd_simdev_config *cfg, struct rsd_simdev **out);

/**
 * rsd_simdev_destroy() - Destroy a simulated device.
 * @sd: the device; NULL is ignored.
 *
 * Every manager using it must be destroyed first.
 *
 * Context: Any thread, once nothing uses @sd.
 */
void rsd_simdev_destroy(struct rsd_simdev *sd);

/**
 * rsd_simdev_ops() - The simulated device's driver ops.
 *
 * Pass them as struct rsd_manager_config.driver with the device as
 * driver_ctx.
 *
 * Context: Any thread.
 * Return: the ops; never NULL.
 */
const struct rsd_device_ops *rsd_simdev_ops(void);

/**
 * rsd_simdev_stream_create() - Create a stream on a simulated device.
 * @sd: the simulated device.
 * @device: the device index.
 * @stream: receives the stream on success.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @sd or @stream is NULL.
 * * -RSD_EINVAL - @device is not one of the simulated devices.
 * * -RSD_ENOMEM - the stream could not be allocated.
 */
int rsd_simdev_stream_create(struct rsd_simdev *sd, int device, void **stream);

/**
 * rsd_simdev_stream_destroy() - Destroy a stream.
 * @sd: the simulated device.
 * @stream: the stream; its pending events complete.
 *
 * Context: Any thread.
 */
void rsd_simdev_stream_destroy(struct rsd_simdev *sd, void *stream);

/**
 * rsd_simdev_stream_complete() - Complete every event recorded on a stream so far.
 * @sd: the simulated device.
 * @stream: the stream.
 *
 * Context: Any thread.
 */
void rsd_simdev_stream_complete(struct rsd_simdev *sd, void *stream);

/**
 * rsd_simdev_complete_all() - Complete every event on every stream.
 * @sd: the simulated device.
 *
 * Context: Any thread.
 */
void rsd_simdev_complete_all(struct rsd_simdev *sd);

/**
 * rsd_simdev_set_auto_complete() - Switch auto-completion on or off.
 * @sd: the simulated device.
 * @on: events recorded from now on complete at once.
 *
 * Context: Any thread.
 */
void rsd_simdev_set_auto_complete(struct rsd_simdev *sd, bool on);

/**
 * rsd_simdev_pending_events() - Count incomplete events.
 * @sd: the simulated device.
 * @stream: the stream, or NULL for every stream.
 *
 * Context: Any thread.
 * Return: the number of recorded, incomplete events.
 */
unsigned rsd_simdev_pending_events(struct rsd_simdev *sd, void *stream);

/**
 * enum rsd_simdev_op - The simulated device's operations, for counting and fault injection.
 * @RSD_SIMDEV_ALLOC: alloc.
 * @RSD_SIMDEV_COPY: copy.
 * @RSD_SIMDEV_EVENT_RECORD: event_record.
 * @RSD_SIMDEV_EVENT_QUERY: event_query.
 * @RSD_SIMDEV_EVENT_SYNC: event_sync.
 * @RSD_SIMDEV_METRICS: metrics.
 * @RSD_SIMDEV_NOPS: the number of operations; not an operation.
 */
enum rsd_simdev_op {
	RSD_SIMDEV_ALLOC,
	RSD_SIMDEV_COPY,
	RSD_SIMDEV_EVENT_RECORD,
	RSD_SIMDEV_EVENT_QUERY,
	RSD_SIMDEV_EVENT_SYNC,
	RSD_SIMDEV_METRICS,
	RSD_SIMDEV_NOPS
};

/**
 * rsd_simdev_fail_nth() - Make the nth call of an operation fail.
 * @sd: the simulated device.
 * @op: the operation.
 * @n: which call from now (1-based); 0 disarms.
 * @err: the positive RSD_E* code the call fails with (returned negated).
 *
 * Context: Any thread.
 */
void rsd_simdev_fail_nth(struct rsd_simdev *sd, enum rsd_simdev_op op, unsigned n, int err);

/**
 * rsd_simdev_calls() - Count the calls of an operation.
 * @sd: the simulated device.
 * @op: the operation.
 *
 * Context: Any thread.
 * Return: the calls made since creation.
 */
unsigned long rsd_simdev_calls(struct rsd_simdev *sd, enum rsd_simdev_op op);

/**
 * rsd_simdev_fail_all() - Make every call of an operation fail.
 * @sd: the simulated device.
 * @op: the operation.
 * @err: the positive RSD_E* code; 0 disarms.
 *
 * Context: Any thread.
 */
void rsd_simdev_fail_all(struct rsd_simdev *sd, enum rsd_simdev_op op, int err);

/**
 * rsd_simdev_fail_location() - Make every allocation at one location fail.
 * @sd: the simulated device.
 * @at: the location.
 * @err: the positive RSD_E* code; 0 disarms.
 *
 * Context: Any thread.
 */
void rsd_simdev_fail_location(struct rsd_simdev *sd, struct rsd_location at, int err);

/**
 * rsd_simdev_allocated_bytes() - Bytes allocated on a simulated device.
 * @sd: the simulated device.
 * @device: the device index.
 *
 * Context: Any thread.
 * Return: the bytes currently allocated at cuda:@device (what metrics
 * reports).
 */
uint64_t rsd_simdev_allocated_bytes(struct rsd_simdev *sd, int device);

#ifdef __cplusplus
}
#endif
#endif
