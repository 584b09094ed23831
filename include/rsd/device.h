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
 * @transfer_stream: optional; the driver's own transfer stream for copies
 *	from src to dst: one per direction per device (host to cuda:N, cuda:N
 *	to host) and one per ordered pair of devices, created on first use and
 *	never destroyed by the caller. NULL when no device is involved, a
 *	location is bad, or the stream cannot be made (recorded). Not what a
 *	NULL stream stands for (that stays @default_stream).
 * @stream_wait_event: optional; later work queued on stream does not start
 *	before event (recorded on any stream of this driver) completes, as
 *	cudaStreamWaitEvent: the host does not wait. When the work before
 *	event failed, stream's later work fails too and its later events
 *	report the error (CUDA's errors are sticky): a not-waiting copy
 *	ordered after the copy filling its source fails with it.
 *	-RSD_ETYPE for a stream or event that is not this driver's.
 * @device_lost: optional; whether a device failed for good (a sticky
 *	error: its context is gone). Once true it stays true, and every op
 *	naming the device, one of its streams or events (or memory on it, as
 *	either end of a copy) fails with -RSD_EDEVLOST without waiting:
 *	event_query and event_sync of its events too, pending or complete,
 *	and its free gives nothing back (the driver never frees memory in a
 *	dead context; the bytes are leaked on purpose). An op that fails with
 *	-RSD_EDEVLOST lets the caller ask which device. A lost device never
 *	makes an op on another device fail, except a copy queued there
 *	earlier that reads or writes the lost device's memory (its stream's
 *	later events then report -RSD_EDEVLOST) and stream_sync of NULL,
 *	which waits for the sound devices' driver streams and then fails.
 * @event_wait: optional; @event_sync that can be told to give up: it calls
 *	stop(arg) before it blocks and at least once a millisecond while it
 *	waits, and returns 1 as soon as that returns true (nothing is known
 *	of the event then). Otherwise it answers as @event_sync does, and
 *	counts as one event_sync for the driver's fault injection. A manager
 *	waits with it so that a forced close can interrupt the wait; without
 *	it, it waits by @event_query in a loop that sleeps between queries.
 * @stream_wait: optional; @stream_sync that can be told to give up, as
 *	@event_wait. Without it, a manager's drain of a stream (after a
 *	failed wait) cannot be interrupted.
 * @gate_queue: optional; queue a closed gate on stream into *gate: work
 *	queued on stream after it does not start before the gate is opened,
 *	and the host does not wait (as a CUDA stream behind a host function
 *	that has not returned). librsd's staging workers queue one before each
 *	chunk of a pageable copy and open it once the chunk's bytes are in the
 *	pinned staging buffer, so that a copy's completion event exists before
 *	its bytes are staged. Without gate_queue and gate_open, librsd stages
 *	pageable copies on the calling thread. A driver that runs work as it
 *	is queued (the simulated device in immediate mode) returns 1 and
 *	queues nothing: librsd then stages on the calling thread too.
 * @gate_open: open a gate and give it back. err 0 lets the stream pass; a
 *	negative RSD_E* code fails the stream there, as a copy failing on the
 *	device would: its later copies do not run and its later events report
 *	err. Every gate is opened exactly once, from any thread, also when its
 *	device was lost; it never waits for the stream.
 *
 * device_count, alloc, free and copy are required; a manager refuses a
 * driver without them. Optional ops may be NULL: a caller checks.
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
	void *(*transfer_stream)(void *ctx, struct rsd_location dst, struct rsd_location src);
	int (*stream_wait_event)(void *ctx, void *stream, void *event);
	bool (*device_lost)(void *ctx, int device);
	int (*event_wait)(void *ctx, void *event, bool (*stop)(void *arg), void *arg);
	int (*stream_wait)(void *ctx, void *stream, bool (*stop)(void *arg), void *arg);
	int (*gate_queue)(void *ctx, void *stream, void **gate);
	void (*gate_open)(void *ctx, void *gate, int err);
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
 * memory, streams that are work queues progressing on command, at once or
 * in the background, and fault injection for every op. Pass
 * rsd_simdev_ops() as a manager's driver and the simulated device as its
 * driver_ctx. It lets tests, and users without a GPU, run the CUDA paths
 * of librsd.
 */
/*
 * The simulated device: host memory posing as ndevices CUDA devices,
 * page-locked pinned host memory, streams that are work queues, fault
 * injection.
 *
 * Stream model: copies, event records and host functions are work items
 * queued on their stream in order; a copy reads its source and writes its
 * destination when its item runs, not when it is queued, and an event is
 * complete when every item before it on its stream has run. How queued work
 * makes progress is the progress mode below. The driver's stream_sync,
 * device_sync and event_sync block (on a condition variable) until the
 * awaited work has run, by whatever makes progress; in on-command mode a sync
 * that nobody will complete (no other thread calling
 * rsd_simdev_stream_complete()) never returns: that is the caller's bug.
 * Freeing simulated memory that a queued copy or kernel still reads or
 * writes aborts the process with a message (a GPU would corrupt it
 * silently), and so does a copy or kernel that reads bytes a copy or kernel
 * queued before it (on any stream) has not finished writing, or writes bytes
 * one has not finished reading: it is not ordered after that work.
 */
struct rsd_simdev;

/**
 * enum rsd_simdev_progress - How a simulated device's queued stream work makes progress.
 * @RSD_SIMDEV_ON_COMMAND: only rsd_simdev_stream_complete() and
 *	rsd_simdev_complete_all() run queued work (the zeroed default).
 * @RSD_SIMDEV_IMMEDIATE: work runs as it is queued, before the queueing
 *	call returns (what auto_complete selects).
 * @RSD_SIMDEV_BACKGROUND: worker threads run each stream's queued work in
 *	order, each item delay_ns after it became runnable, as a GPU runs
 *	asynchronously: per device one for kernels and one per copy direction,
 *	so each engine progresses independently of the others.
 */
enum rsd_simdev_progress {
	RSD_SIMDEV_ON_COMMAND = 0,
	RSD_SIMDEV_IMMEDIATE,
	RSD_SIMDEV_BACKGROUND,
};

/**
 * struct rsd_simdev_config - How to build a simulated device.
 * @ndevices: the devices, cuda:0 .. cuda:ndevices-1 (0..128).
 * @auto_complete: true selects RSD_SIMDEV_IMMEDIATE whatever @progress says.
 * @pooled: pinned and device allocations come from pools; false makes
 *	every allocation one counted alloc call.
 * @progress: the progress mode; a zeroed config is RSD_SIMDEV_ON_COMMAND.
 * @delay_ns: RSD_SIMDEV_BACKGROUND's per-item delay.
 * @links: turn the link model on (also RSD_SIMDEV_LINKS=1): copies take
 *	modelled wall time on copy engines and peer links, pageable copies
 *	hold their caller, backing allocations take modelled time. Every
 *	field below is used only with the model on; 0 takes the environment
 *	variable named in Documentation/drivers.md, else the default (an
 *	H200 PCIe Gen5 node).
 * @time_scale: every modelled duration is multiplied by it (0: 1).
 * @h2d_bps: host (pinned) to device bandwidth, bytes/s, per device.
 * @d2h_bps: device to host (pinned) bandwidth, bytes/s, per device.
 * @pageable_bps: bandwidth of a copy whose host side is pageable.
 * @peer_bps: device to device bandwidth with peer access, per ordered pair.
 * @bounce_bps: device to device bandwidth without peer access (through
 *	host memory, on both devices' engines).
 * @pcie_latency_ns: latency of a host-device copy.
 * @peer_latency_ns: latency of a device to device copy.
 * @dev_alloc_ns: time of one backing device allocation (not a pool hit).
 * @pinned_alloc_ns: time of one backing pinned allocation.
 * @free_ns: time of one backing free.
 * @no_peer_access: devices cannot reach each other (also
 *	RSD_SIMDEV_NO_PEER_ACCESS=1): peer copies bounce through host.
 * @oversize_keep: bytes of freed oversize blocks (larger than a pool
 *	chunk), and of idle chunks beyond the first, each device pool keeps
 *	for reuse; 0: the environment, else 1 GiB with the model on and none
 *	without it.
 */
struct rsd_simdev_config {
	int ndevices;
	bool auto_complete;
	bool pooled;
	enum rsd_simdev_progress progress;
	uint64_t delay_ns;
	bool links;
	double time_scale;
	uint64_t h2d_bps;
	uint64_t d2h_bps;
	uint64_t pageable_bps;
	uint64_t peer_bps;
	uint64_t bounce_bps;
	uint64_t pcie_latency_ns;
	uint64_t peer_latency_ns;
	uint64_t dev_alloc_ns;
	uint64_t pinned_alloc_ns;
	uint64_t free_ns;
	bool no_peer_access;
	uint64_t oversize_keep;
};

/**
 * rsd_simdev_create() - Create a simulated device.
 * @cfg: devices, pooling and progress mode (auto_complete wins over progress).
 * @out: receives the simulated device; written only on success.
 *
 * In background mode three worker threads per device (compute, copies in,
 * copies out) are started here and joined by rsd_simdev_destroy().
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @cfg or @out is NULL.
 * * -RSD_EINVAL - ndevices is outside 0..128, or progress is not a mode.
 * * -RSD_ENOMEM - memory or a worker thread is unavailable.
 */
int rsd_simdev_create(const struct rsd_simdev_config *cfg, struct rsd_simdev **out);

/**
 * rsd_simdev_destroy() - Destroy a simulated device.
 * @sd: the device; NULL is ignored.
 *
 * Work still queued is dropped (it does not run), then everything is
 * freed. Every manager using the device must be destroyed first.
 *
 * Context: Any thread, once nothing uses @sd.
 */
void rsd_simdev_destroy(struct rsd_simdev *sd);

/**
 * rsd_simdev_ops() - The simulated device's driver ops.
 *
 * Pass them as struct rsd_manager_config.driver with the device as
 * driver_ctx. Their stream_sync, device_sync and event_sync block on a
 * condition variable until the awaited work has run, by whatever makes
 * progress; in on-command mode a sync that no other thread will complete
 * never returns, which is the caller's bug.
 *
 * Context: Any thread.
 * Return: the ops; never NULL.
 */
const struct rsd_device_ops *rsd_simdev_ops(void);

/**
 * rsd_simdev_stream_create() - Create a stream on a simulated device.
 * @sd: the simulated device.
 * @device: its device index, 0..ndevices-1.
 * @stream: receives the stream; written only on success.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @sd or @stream is NULL.
 * * -RSD_EINVAL - @device is not one of the simulated devices.
 * * -RSD_ENOMEM - the stream could not be allocated.
 */
int rsd_simdev_stream_create(struct rsd_simdev *sd, int device, void **stream);

/**
 * rsd_simdev_stream_destroy() - Destroy a stream, letting its queued work finish.
 * @sd: the simulated device.
 * @stream: the stream.
 *
 * As cudaStreamDestroy: the handle is invalid at once, its queued work
 * still runs (in on-command mode when someone completes it, with
 * rsd_simdev_complete_all() or by passing the old pointer to
 * rsd_simdev_stream_complete()), and events recorded on it stay valid.
 *
 * Context: Any thread.
 */
void rsd_simdev_stream_destroy(struct rsd_simdev *sd, void *stream);

/**
 * rsd_simdev_stream_complete() - Run the work queued on a stream so far.
 * @sd: the simulated device.
 * @stream: the stream; NULL for every device's transfer stream.
 *
 * Runs the work on the calling thread, waiting for items another thread
 * is running, so every event recorded on the stream so far is complete on
 * return. Works in every mode.
 *
 * Context: Any thread, but not from a host function of that stream.
 */
void rsd_simdev_stream_complete(struct rsd_simdev *sd, void *stream);

/**
 * rsd_simdev_complete_all() - Run the work queued on every stream so far.
 * @sd: the simulated device.
 *
 * Context: Any thread, but not from a host function of the device.
 */
void rsd_simdev_complete_all(struct rsd_simdev *sd);

/**
 * rsd_simdev_set_auto_complete() - Switch between immediate and on-command progress.
 * @sd: the simulated device.
 * @on: true is rsd_simdev_set_progress(@sd, RSD_SIMDEV_IMMEDIATE, 0), which
 *	runs the work already queued; false is RSD_SIMDEV_ON_COMMAND.
 *
 * Context: Any thread, but not from a host function of the device.
 */
void rsd_simdev_set_auto_complete(struct rsd_simdev *sd, bool on);

/**
 * rsd_simdev_set_progress() - Switch how queued stream work makes progress.
 * @sd: the simulated device (NULL: nothing happens).
 * @mode: RSD_SIMDEV_ON_COMMAND, RSD_SIMDEV_IMMEDIATE or RSD_SIMDEV_BACKGROUND
 *        (anything else: nothing happens).
 * @delay_ns: in background mode, how long each item waits after it became
 *            runnable (reached the front of its stream) before it runs.
 *
 * Switching to immediate runs the work already queued before returning;
 * switching to background hands it to the workers (started on first use).
 * When a worker thread cannot be started the mode is left as it was and a
 * message goes to stderr.
 *
 * Context: Any thread, but not from a host function of this simulator.
 */
void rsd_simdev_set_progress(struct rsd_simdev *sd, enum rsd_simdev_progress mode,
			     uint64_t delay_ns);
/**
 * rsd_simdev_launch_host_func() - Queue a host function on a stream.
 * @sd: the simulated device.
 * @stream: one of its live streams (not NULL).
 * @fn: called with @arg when the stream's work before it has run, on
 *      whichever thread makes progress (as cudaLaunchHostFunc). It must not
 *      wait for its own stream.
 * @arg: passed to @fn.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @sd or @fn is NULL, or @stream is not a live stream of @sd.
 * * -RSD_ENOMEM - the work item could not be allocated.
 */
int rsd_simdev_launch_host_func(struct rsd_simdev *sd, void *stream, void (*fn)(void *arg),
				void *arg);

/**
 * struct rsd_simdev_access - A byte range a simulated kernel reads or writes.
 * @ptr: its first byte, in any memory (simulated device, pinned, pageable).
 * @nbytes: its length; 0 names no byte.
 * @write: true: the kernel writes the range; false: it reads it.
 * @fill: with @write, the kernel fills the range with @pattern when it
 *	finishes; false leaves the bytes to the kernel's function.
 * @pattern: the byte @fill writes.
 */
struct rsd_simdev_access {
	void *ptr;
	uint64_t nbytes;
	bool write;
	bool fill;
	unsigned char pattern;
};

/**
 * rsd_simdev_launch_kernel() - Queue a kernel of known length on a stream.
 * @sd: the simulated device.
 * @stream: one of its live streams (not NULL); the kernel runs on that
 *	stream's device.
 * @duration_ns: how long the kernel occupies its device's compute engine,
 *	multiplied by the time scale when the link model is on.
 * @acc: the byte ranges the kernel reads and writes (copied: the array
 *	need not outlive the call); NULL when @nacc is 0.
 * @nacc: the number of ranges.
 * @fn: optional; called with @arg when the kernel finishes, after its fills,
 *	on whichever thread finishes it: the kernel's computation on its
 *	ranges. Like a host function it may call the simulator but must not
 *	wait for its own stream.
 * @arg: passed to @fn.
 *
 * A work item like a copy: it runs when the stream's work before it has
 * run. It then takes its device's compute engine from when the engine is
 * free for @duration_ns (kernels of one device follow one another, across
 * streams; kernels and copies, and kernels of different devices, overlap)
 * and finishes at that modelled end, with the link model on or off: a
 * background worker parks it meanwhile and runs the device's other streams,
 * a thread completing its stream (on-command or immediate mode) sleeps
 * until then. Its fills and @fn take effect when it finishes.
 *
 * When it starts, a copy or kernel queued before it (on any stream) that
 * has not finished and writes a byte the kernel reads, or reads a byte it
 * writes, is not ordered before it: the simulator prints both and aborts.
 * On a stream whose copy failed on the device (RSD_SIMDEV_COPY_EXEC) the
 * kernel is skipped: no fill, no @fn.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @sd is NULL, @stream is not a live stream of @sd, @acc is
 *   NULL with @nacc > 0, or a range of @nbytes > 0 has a NULL @ptr.
 * * -RSD_EINVAL - a range asks for a fill without @write, or runs past the
 *   end of the address space.
 * * -RSD_ENOMEM - the work item could not be allocated.
 */
int rsd_simdev_launch_kernel(struct rsd_simdev *sd, void *stream, uint64_t duration_ns,
			     const struct rsd_simdev_access *acc, size_t nacc,
			     void (*fn)(void *arg), void *arg);
/**
 * rsd_simdev_set_unpinned_host() - Make pinned-host allocations pageable.
 * @sd: the simulated device (NULL: nothing happens).
 * @on: while true, the simulator's pinned-host memory comes back pageable
 *      (never page-locked), so its driver's pinned check refuses it: the
 *      driver alloc fails with -RSD_EDEVICE ("pinned host storage is
 *      unavailable: ...").
 *
 * Context: Any thread.
 */
void rsd_simdev_set_unpinned_host(struct rsd_simdev *sd, bool on);
/**
 * rsd_simdev_pending_events() - Count incomplete events.
 * @sd: the simulated device.
 * @stream: the stream, or NULL for every stream.
 *
 * Context: Any thread.
 * Return: the number of recorded events whose record has not run yet.
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
 * @RSD_SIMDEV_BACKING_ALLOC: a backing allocation (a new pool chunk, or an
 *	unpooled allocation): what cudaMalloc or cudaHostAlloc would be; pool
 *	hits are not counted. Injected failures make the alloc fail.
 * @RSD_SIMDEV_BACKING_FREE: a backing free (cudaFree, cudaFreeHost).
 *	Counted only; an injection has no effect.
 * @RSD_SIMDEV_STREAM_WAIT: stream_wait_event.
 * @RSD_SIMDEV_COPY_EXEC: a copy running on its stream (not the copy call,
 *	which queues it). An injected failure makes the copy fail on the
 *	device: it writes nothing, the copies and kernels queued after it on
 *	its stream are skipped, and every event recorded on that stream after
 *	it (and on a stream that waits on such an event, after the wait)
 *	reports the failure from then on: event_query and event_sync return
 *	-err, as a CUDA stream's error does. The syncs and other streams are
 *	not affected. Skipped copies are not counted.
 * @RSD_SIMDEV_NOPS: the number of operations; not an operation.
 */
enum rsd_simdev_op {
	RSD_SIMDEV_ALLOC,
	RSD_SIMDEV_COPY,
	RSD_SIMDEV_EVENT_RECORD,
	RSD_SIMDEV_EVENT_QUERY,
	RSD_SIMDEV_EVENT_SYNC,
	RSD_SIMDEV_METRICS,
	RSD_SIMDEV_BACKING_ALLOC,
	RSD_SIMDEV_BACKING_FREE,
	RSD_SIMDEV_STREAM_WAIT,
	RSD_SIMDEV_COPY_EXEC,
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
 * rsd_simdev_lose_device() - Make one simulated device fail for good.
 * @sd: the simulated device.
 * @device: the device index, 0..ndevices-1.
 *
 * What an uncorrectable ECC error, an illegal address in a kernel or a
 * device falling off the bus does to a CUDA context: from this call on,
 * every op of rsd_simdev_ops() naming cuda:@device, memory there (either
 * end of a copy), one of its streams or events fails with -RSD_EDEVLOST and
 * a message naming the device, at once (nothing waits for it): alloc,
 * copy, transfer_stream (NULL), stream_device, stream_sync, device_sync,
 * event_record, event_query and event_sync (of every event recorded on
 * its streams, pending or complete: pending ones never complete),
 * stream_wait_event (on its stream, or for its event), metrics;
 * rsd_simdev_stream_create(), rsd_simdev_launch_host_func() and
 * rsd_simdev_launch_kernel() on it too. Its queued copies and kernels never
 * run (they no longer count as touching memory, so their other ends may be
 * freed); its memory is never given back (free does nothing, and
 * rsd_simdev_allocated_bytes() keeps counting it). A copy queued earlier on
 * another device's stream that reads or writes the lost device's memory
 * fails when it runs, leaving its stream's later events failed with
 * -RSD_EDEVLOST; a stream ordered after one of the device's pending
 * events (stream_wait_event) inherits the same. stream_sync of NULL waits
 * for the other devices' transfer streams and then fails. Every other
 * device, its streams, events and memory, and pinned host memory, work as
 * before; injected failures (rsd_simdev_fail_nth() ...) still fire first.
 * Losing a device twice does nothing more.
 *
 * Context: Any thread.
 * Return: 0, or
 * * -RSD_ETYPE - @sd is NULL.
 * * -RSD_EINVAL - @device is not one of @sd's devices.
 */
int rsd_simdev_lose_device(struct rsd_simdev *sd, int device);

/**
 * rsd_simdev_device_lost() - Whether a simulated device was lost.
 * @sd: the simulated device.
 * @device: the device index.
 *
 * What the driver's device_lost op answers.
 *
 * Context: Any thread.
 * Return: true once rsd_simdev_lose_device() ran for @device; false for a
 * NULL @sd or a device that is not one of @sd's.
 */
bool rsd_simdev_device_lost(struct rsd_simdev *sd, int device);

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

/**
 * rsd_simdev_peer_access() - Enable or disable peer access between two devices.
 * @sd: the simulated device.
 * @device: one device.
 * @peer: the other device (not @device).
 * @on: true: copies between the two use their peer link; false: they
 *	bounce through host memory.
 *
 * A new simulated device has every pair enabled unless no_peer_access
 * (then nothing can be enabled). Access is per unordered pair: either
 * device enabling it speeds copies both ways.
 *
 * Context: Any thread.
 * Return: 0, or
 * * -RSD_ETYPE - @sd is NULL.
 * * -RSD_EINVAL - a device is not one of @sd's, or they are the same.
 * * -RSD_EDEVICE - @on is true and the devices cannot reach each other.
 */
int rsd_simdev_peer_access(struct rsd_simdev *sd, int device, int peer, bool on);

/**
 * rsd_simdev_peer_capable() - Whether the simulated devices can reach each other.
 * @sd: the simulated device.
 *
 * Context: Any thread.
 * Return: false with no_peer_access (or a NULL @sd), else true.
 */
bool rsd_simdev_peer_capable(struct rsd_simdev *sd);

/**
 * rsd_simdev_links_on() - Whether the link model is on.
 * @sd: the simulated device.
 *
 * Context: Any thread.
 * Return: true when the config or RSD_SIMDEV_LINKS turned it on.
 */
bool rsd_simdev_links_on(struct rsd_simdev *sd);

/**
 * rsd_simdev_copy_ns() - The modelled duration of one copy.
 * @sd: the simulated device.
 * @dst: its destination location.
 * @src: its source location.
 * @nbytes: its size.
 *
 * What the model charges a copy on an idle engine: (latency + nbytes /
 * bandwidth) x time_scale, for the link the copy would use now (peer
 * access as it is now). Tests and benchmarks derive their bounds from it.
 *
 * Context: Any thread.
 * Return: nanoseconds; 0 with the model off, for a copy on no engine
 * (host to host, within one device) or a bad argument.
 */
uint64_t rsd_simdev_copy_ns(struct rsd_simdev *sd, struct rsd_location dst, struct rsd_location src,
			    uint64_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
