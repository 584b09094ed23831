// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime double: memory and copies.
 *
 * Device and pinned host memory are allocations of the simulated device,
 * registered here so that every pointer can be classified as the runtime
 * classifies it (cudaPointerGetAttributes, the direction of a copy) and so
 * that a copy reaching past the end of an allocation is refused. Each
 * device has a fixed amount of memory; cudaMalloc fails beyond it.
 *
 * Copies are work items on their stream, run when the stream progresses,
 * with the host-side synchronization the runtime documents for the async
 * copies: a copy from pageable memory to a device reads the source at the
 * call (staged) after the stream's earlier work; a copy to pageable memory
 * and a host-to-host copy return once done; copies between pinned memory
 * and devices, and between devices, return at once.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cs.h"

static struct rsd_location loc_of_mem(const struct cs_alloc *a)
{
	struct rsd_location l = RSD_LOC_PINNED_HOST;

	if (a->mem == CS_MEM_DEVICE) {
		l.kind = RSD_CUDA;
		l.device = a->device;
	}
	return l;
}

struct cs_alloc *cs_find_alloc(const void *p)
{
	const char *c = p;

	for (struct cs_alloc *a = cs.allocs; a; a = a->next)
		if (c >= a->base && c < a->base + a->nbytes)
			return a;
	return NULL;
}

/* Register what the simulated device returned; frees it on failure. */
static cudaError_t reg(void *p, uint64_t n, enum cs_mem mem, int device)
{
	struct cs_alloc *a = calloc(1, sizeof(*a));

	if (!a)
		return cudaErrorMemoryAllocation;
	a->base = p;
	a->nbytes = n;
	a->mem = mem;
	a->device = device;
	pthread_mutex_lock(&cs.lock);
	a->next = cs.allocs;
	cs.allocs = a;
	pthread_mutex_unlock(&cs.lock);
	return cudaSuccess;
}

/* Unregister the allocation starting at p of kind mem (or pinned/unpinned
 * when host); returns it, or NULL when p starts none. */
static struct cs_alloc *unreg(const void *p, bool host)
{
	struct cs_alloc **pp, *a = NULL;

	pthread_mutex_lock(&cs.lock);
	for (pp = &cs.allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == p && ((*pp)->mem != CS_MEM_DEVICE) == host &&
		    (*pp)->mem != CS_MEM_REGISTERED) {
			a = *pp;
			*pp = a->next;
			if (a->mem == CS_MEM_DEVICE)
				cs.used[a->device] -= a->nbytes;
			break;
		}
	}
	pthread_mutex_unlock(&cs.lock);
	return a;
}

/* The allocators' common checks: true to go on; false when the call is
 * over, with *e its result (a 0-byte request succeeds with NULL). */
static bool alloc_start(void **out, size_t size, cudaError_t *e)
{
	*e = cudaSuccess;
	if (!out)
		*e = cs_ret(cudaErrorInvalidValue);
	else if (!cs.ndevices)
		*e = cs_ret(cudaErrorNoDevice);
	else if (!size)
		*out = NULL;
	else
		return true;
	return false;
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	cudaError_t e = cs_enter(CS_cudaMalloc);
	struct rsd_location at = { RSD_CUDA, cs_current_device() };
	void *p = NULL;
	bool fits;

	if (!e)
		e = cs_ctx(at.device);
	if (e || !alloc_start(devPtr, size, &e))
		return e;
	pthread_mutex_lock(&cs.lock);
	fits = size <= cs.memory - cs.used[at.device];
	if (fits)
		cs.used[at.device] += size;
	pthread_mutex_unlock(&cs.lock);
	if (!fits)
		return cs_ret(cudaErrorMemoryAllocation);
	if (cs.ops->alloc(cs.sd, at, size, &p) == 0 &&
	    reg(p, size, CS_MEM_DEVICE, at.device) == cudaSuccess) {
		*devPtr = p;
		return cudaSuccess;
	}
	if (p)
		cs.ops->free(cs.sd, at, p, size);
	pthread_mutex_lock(&cs.lock);
	cs.used[at.device] -= size;
	pthread_mutex_unlock(&cs.lock);
	return cs_ret(cudaErrorMemoryAllocation);
}

/* cudaFree and cudaFreeHost: the runtime waits for the device first. In a
 * lost context nothing is freed: the allocation is the dead context's. */
static cudaError_t free_mem(void *ptr, bool host)
{
	struct cs_alloc *a;
	cudaError_t e;
	int dev = -1;

	if (!ptr)
		return cudaSuccess;
	pthread_mutex_lock(&cs.lock);
	a = cs_find_alloc(ptr);
	if (a && a->base == ptr)
		dev = a->device;
	pthread_mutex_unlock(&cs.lock);
	e = cs_ctx(dev);
	if (e)
		return e;
	a = unreg(ptr, host);
	if (!a)
		return cs_ret(cudaErrorInvalidValue);
	(void)cs.ops->device_sync(cs.sd, a->device);
	if (a->mem == CS_MEM_UNPINNED)
		munmap(a->base, (size_t)a->nbytes);
	else
		cs.ops->free(cs.sd, loc_of_mem(a), a->base, a->nbytes);
	free(a);
	return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
	cudaError_t e = cs_enter(CS_cudaFree);

	return e ? e : free_mem(devPtr, false);
}

static cudaError_t host_alloc(void **pHost, size_t size, unsigned flags)
{
	struct rsd_location at = RSD_LOC_PINNED_HOST;
	enum cs_mem mem;
	void *p = NULL;

	cudaError_t e;

	if (flags &
	    ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
		return cs_ret(cudaErrorInvalidValue);
	e = cs_ctx(cs_current_device());
	if (e || !alloc_start(pHost, size, &e))
		return e;
	pthread_mutex_lock(&cs.lock);
	mem = cs.unpinned_host ? CS_MEM_UNPINNED : CS_MEM_PINNED;
	pthread_mutex_unlock(&cs.lock);
	if (mem == CS_MEM_UNPINNED) {
		/* Plain pageable pages, never locked: what a broken pinning
		 * allocator hands back. */
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return cs_ret(cudaErrorMemoryAllocation);
	} else if (cs.ops->alloc(cs.sd, at, size, &p)) {
		return cs_ret(cudaErrorMemoryAllocation);
	}
	if (reg(p, size, mem, cs_current_device())) {
		if (mem == CS_MEM_UNPINNED)
			munmap(p, size);
		else
			cs.ops->free(cs.sd, at, p, size);
		return cs_ret(cudaErrorMemoryAllocation);
	}
	*pHost = p;
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaHostAlloc);

	return e ? e : host_alloc(pHost, size, flags);
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	cudaError_t e = cs_enter(CS_cudaMallocHost);

	return e ? e : host_alloc(ptr, size, 0);
}

cudaError_t cudaFreeHost(void *ptr)
{
	cudaError_t e = cs_enter(CS_cudaFreeHost);

	return e ? e : free_mem(ptr, true);
}

/*
 * cudaHostRegister page-locks the caller's own memory and registers it in
 * the current device's context (with cudaHostRegisterPortable, for every
 * device): copies treat it as pinned. Locking takes real time per page, as
 * the runtime's does. While unpinned_host is on it succeeds without
 * locking or registering anything (cudaPointerGetAttributes then reports
 * the range unregistered), as a broken pinning would.
 */
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaHostRegister);
	const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped |
			       cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
	const char *c = ptr;
	bool taken = false, unpinned;

	if (!e)
		e = cs_ctx(cs_current_device());
	if (e)
		return e;
	if (!ptr || !size || (flags & ~known))
		return cs_ret(cudaErrorInvalidValue);
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	pthread_mutex_lock(&cs.lock);
	for (struct cs_alloc *a = cs.allocs; a && !taken; a = a->next)
		taken = c < a->base + a->nbytes && a->base < c + size;
	unpinned = cs.unpinned_host;
	pthread_mutex_unlock(&cs.lock);
	if (taken)
		return cs_ret(cudaErrorHostMemoryAlreadyRegistered);
	if (unpinned)
		return cudaSuccess;
	if (mlock(ptr, size))
		return cs_ret(cudaErrorMemoryAllocation);
	if (reg(ptr, size, CS_MEM_REGISTERED, cs_current_device())) {
		munlock(ptr, size);
		return cs_ret(cudaErrorMemoryAllocation);
	}
	return cudaSuccess;
}

/*
 * The registration starting at ptr ends: the runtime waits for its
 * context's work first. In a lost context it fails with the sticky error,
 * but the registration is dropped all the same (the dead context's
 * mapping means nothing any more) and the pages unlocked: the memory stays
 * the caller's to unmap, unlike a cudaHostAlloc block, which dies with its
 * context.
 */
cudaError_t cudaHostUnregister(void *ptr)
{
	cudaError_t e = cs_enter(CS_cudaHostUnregister);
	struct cs_alloc **pp, *a = NULL;

	if (e)
		return e;
	if (!ptr)
		return cs_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&cs.lock);
	for (pp = &cs.allocs; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == ptr && (*pp)->mem == CS_MEM_REGISTERED) {
			a = *pp;
			*pp = a->next;
			break;
		}
	}
	pthread_mutex_unlock(&cs.lock);
	if (!a)
		return cs_ret(cudaErrorHostMemoryNotRegistered);
	e = cs_ctx(a->device);
	if (!e)
		(void)cs.ops->device_sync(cs.sd, a->device);
	munlock(a->base, (size_t)a->nbytes);
	free(a);
	return e;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
	cudaError_t e = cs_enter(CS_cudaPointerGetAttributes);
	struct cudaPointerAttributes at;
	struct cs_alloc *a;

	if (e)
		return e;
	if (!attributes)
		return cs_ret(cudaErrorInvalidValue);
	memset(&at, 0, sizeof(at));
	at.type = cudaMemoryTypeUnregistered;
	at.device = cudaInvalidDeviceId;
	pthread_mutex_lock(&cs.lock);
	a = cs_find_alloc(ptr);
	if (a && a->mem == CS_MEM_DEVICE && cs.lost[a->device]) {
		e = cs.lost[a->device];
		pthread_mutex_unlock(&cs.lock);
		return cs_ret(e);
	}
	if (a && a->mem == CS_MEM_DEVICE) {
		at.type = cudaMemoryTypeDevice;
		at.device = a->device;
		at.devicePointer = (void *)ptr;
	} else if (a && (a->mem == CS_MEM_PINNED || a->mem == CS_MEM_REGISTERED)) {
		/* Unified addressing: pinned memory is mapped at its host
		 * address on every device. */
		at.type = cudaMemoryTypeHost;
		at.device = a->device;
		at.devicePointer = (void *)ptr;
		at.hostPointer = (void *)ptr;
	}
	pthread_mutex_unlock(&cs.lock);
	*attributes = at;
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	cudaError_t e = cs_enter(CS_cudaMemGetInfo);

	if (e)
		return e;
	if (!free_bytes || !total)
		return cs_ret(cudaErrorInvalidValue);
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	e = cs_ctx(cs_current_device());
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	*free_bytes = (size_t)(cs.memory - cs.used[cs_current_device()]);
	pthread_mutex_unlock(&cs.lock);
	*total = (size_t)cs.memory;
	return cudaSuccess;
}

/* ---- copies ---- */

/*
 * Where [p, p + n) lies: in one registered allocation (cudaErrorInvalidValue
 * when it runs past its end) or in plain pageable memory.
 */
static cudaError_t classify(const void *p, size_t n, struct rsd_location *at, bool *pageable)
{
	const char *c = p;
	struct cs_alloc *a;
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&cs.lock);
	a = cs_find_alloc(p);
	*pageable = !a || a->mem == CS_MEM_UNPINNED;
	*at = a ? loc_of_mem(a) : RSD_LOC_PAGEABLE_HOST;
	if (a && a->mem == CS_MEM_UNPINNED)
		*at = RSD_LOC_PAGEABLE_HOST;
	if (a && (uint64_t)(c - a->base) + n > a->nbytes)
		e = cudaErrorInvalidValue;
	pthread_mutex_unlock(&cs.lock);
	return e;
}

static bool kind_matches(enum cudaMemcpyKind kind, bool dst_dev, bool src_dev)
{
	switch (kind) {
	case cudaMemcpyHostToHost:
		return !dst_dev && !src_dev;
	case cudaMemcpyHostToDevice:
		return dst_dev && !src_dev;
	case cudaMemcpyDeviceToHost:
		return !dst_dev && src_dev;
	case cudaMemcpyDeviceToDevice:
		return dst_dev && src_dev;
	case cudaMemcpyDefault:
		return true;
	default:
		return false;
	}
}

/* A staged source, freed by its stream once the copy from it has run. */
static void staging_free(void *arg)
{
	free(arg);
}

/*
 * Queue a copy of n bytes on the resolved stream st. peer_dst/peer_src are
 * the devices a peer copy names (-1: not a peer copy).
 */
static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, void *st,
			int peer_dst, int peer_src)
{
	struct rsd_location dat, sat;
	bool dpage, spage, ddev, sdev;
	void *staged = NULL;
	cudaError_t e;

	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	if (!n)
		return cudaSuccess;
	if (!dst || !src)
		return cs_ret(cudaErrorInvalidValue);
	e = classify(dst, n, &dat, &dpage);
	if (!e)
		e = classify(src, n, &sat, &spage);
	if (e)
		return cs_ret(e);
	ddev = dat.kind == RSD_CUDA;
	sdev = sat.kind == RSD_CUDA;
	/* Memory of a lost context, or a stream of one: its sticky error. */
	e = cs_ctx(ddev ? dat.device : -1);
	if (!e)
		e = cs_ctx(sdev ? sat.device : -1);
	if (!e)
		e = cs_stream_ctx(st);
	if (e)
		return e;
	if (peer_dst >= 0 && (!ddev || dat.device != peer_dst || !sdev || sat.device != peer_src))
		return cs_ret(cudaErrorInvalidValue);
	if (!kind_matches(kind, ddev, sdev))
		return cs_ret(kind > cudaMemcpyDefault ? cudaErrorInvalidMemcpyDirection :
							 cudaErrorInvalidValue);
	if (spage && ddev) {
		/* Staged: the source is read now, after the stream's work. */
		e = cs_stream_wait(st);
		if (e)
			return e;
		staged = malloc(n);
		if (!staged)
			return cs_ret(cudaErrorMemoryAllocation);
		memcpy(staged, src, n);
		src = staged;
	}
	if (cs.ops->copy(cs.sd, dst, dat, src, sat, n, st)) {
		free(staged);
		return cs_ret(cudaErrorUnknown);
	}
	cs_stream_mark(st);
	if (staged) {
		e = cs_queue_host_func(st, staging_free, staged);
		if (e) {
			/* Not queued: wait for the copy, then free it here. */
			(void)cs_stream_wait(st);
			free(staged);
		}
	}
	if ((dpage && (sdev || !ddev)) || (!ddev && !sdev))
		return cs_stream_wait(st);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaMemcpyAsync);

	return e ? e : copy(dst, src, count, kind, cs_stream_resolve(stream), -1, -1);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	cudaError_t e = cs_enter(CS_cudaMemcpy);
	void *st;

	if (e)
		return e;
	st = cs_stream_resolve(NULL);
	e = copy(dst, src, count, kind, st, -1, -1);
	return e ? e : cs_stream_wait(st);
}

static cudaError_t peer_check(int dstDevice, int srcDevice)
{
	if (dstDevice < 0 || dstDevice >= cs.ndevices || srcDevice < 0 || srcDevice >= cs.ndevices)
		return cs_ret(cudaErrorInvalidDevice);
	return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				size_t count, cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaMemcpyPeerAsync);

	if (!e)
		e = peer_check(dstDevice, srcDevice);
	return e ? e :
		   copy(dst, src, count, cudaMemcpyDeviceToDevice, cs_stream_resolve(stream),
			dstDevice, srcDevice);
}

cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	cudaError_t e = cs_enter(CS_cudaMemcpyPeer);
	void *st;

	if (!e)
		e = peer_check(dstDevice, srcDevice);
	if (e)
		return e;
	st = cs_stream_resolve(NULL);
	e = copy(dst, src, count, cudaMemcpyDeviceToDevice, st, dstDevice, srcDevice);
	return e ? e : cs_stream_wait(st);
}
