// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime double: start-up and configuration, devices, the
 * per-thread current device and last error, sticky errors, error strings,
 * and fault injection of any call (cudasim.h).
 *
 * Error state follows the runtime's documented model: every failing call
 * leaves its code as the calling thread's last error; cudaGetLastError()
 * returns it and resets it to cudaSuccess, cudaPeekAtLastError() returns
 * it and keeps it. A sticky error (one after which the runtime says the
 * process must be restarted) corrupts the context of the whole process:
 * every later call returns it, and the last error can no longer be reset.
 * A lost device (rsd_cudasim_lose_device) corrupts its own context only:
 * every later call working in it (its memory, streams, events, host
 * allocations and registrations made while it was current, or the
 * current device's context) returns its sticky error, and so does
 * cudaGetLastError on a thread whose current device it is; the other
 * devices' contexts work as before.
 * cudaErrorNotReady is a status, not an error, and is not recorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs.h"
#include "../../lib/drivers/cuda_sticky.h"

struct cs_state cs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t cs_once = PTHREAD_ONCE_INIT;
static int cfg_ndevices = -1; /* rsd_cudasim_configure; -1: environment */
static uint64_t cfg_memory;   /* rsd_cudasim_configure; 0: environment */
static bool started;	      /* protected by cs.lock */
static _Thread_local cudaError_t last_error;
static _Thread_local int current_device;
static _Thread_local bool in_host_func;

static const char *const call_names[CS_NCALLS] = {
#define CS_NAME(name) [CS_##name] = #name,
	CS_CALLS(CS_NAME)
#undef CS_NAME
};

#define DEFAULT_DEVICES 2
#define DEFAULT_MEMORY (4ull << 30)
#define DEFAULT_DELAY_NS 20000ull

static uint64_t env_bytes(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return dflt;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		end++;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || !v) {
		fprintf(stderr, "cudasim: %s=%s is not a byte count; using %llu\n", name, s,
			(unsigned long long)dflt);
		return dflt;
	}
	return v;
}

static enum rsd_simdev_progress env_progress(void)
{
	const char *s = getenv("RSD_CUDASIM_PROGRESS");

	if (!s || !*s || !strcmp(s, "background"))
		return RSD_SIMDEV_BACKGROUND;
	if (!strcmp(s, "immediate"))
		return RSD_SIMDEV_IMMEDIATE;
	if (!strcmp(s, "on-command"))
		return RSD_SIMDEV_ON_COMMAND;
	fprintf(stderr,
		"cudasim: RSD_CUDASIM_PROGRESS=%s is not background, immediate or "
		"on-command; using background\n",
		s);
	return RSD_SIMDEV_BACKGROUND;
}

static void cs_start(void)
{
	struct rsd_simdev_config sc = { 0 };
	const char *s = getenv("RSD_CUDASIM_DEVICES");
	int n = DEFAULT_DEVICES;

	if (cfg_ndevices >= 0)
		n = cfg_ndevices;
	else if (s && *s)
		n = atoi(s);
	if (n < 0 || n > RSD_CUDA_MAX_DEVICE + 1) {
		fprintf(stderr, "cudasim: RSD_CUDASIM_DEVICES=%s is outside 0..%d; using %d\n", s,
			RSD_CUDA_MAX_DEVICE + 1, DEFAULT_DEVICES);
		n = DEFAULT_DEVICES;
	}
	cs.memory = cfg_memory ? cfg_memory : env_bytes("RSD_CUDASIM_MEMORY", DEFAULT_MEMORY);
	/* Unpooled: each cudaMalloc and cudaHostAlloc is its own mapping,
	 * returned to the system by cudaFree, as the runtime does. */
	sc.ndevices = n;
	sc.pooled = false;
	/* Background progress is the double's own per-stream engines; the
	 * simulated device runs work on command (theirs) or immediately. */
	cs.mode = env_progress();
	cs.delay_ns = env_bytes("RSD_CUDASIM_DELAY_NS", DEFAULT_DELAY_NS);
	sc.progress = cs.mode == RSD_SIMDEV_IMMEDIATE ? RSD_SIMDEV_IMMEDIATE :
							RSD_SIMDEV_ON_COMMAND;
	cs.used = calloc((size_t)n + 1, sizeof(*cs.used));
	cs.default_lane = calloc((size_t)n + 1, sizeof(struct cs_lane *));
	cs.peer = calloc((size_t)n * (size_t)n + 1, sizeof(*cs.peer));
	cs.lost = calloc((size_t)n + 1, sizeof(*cs.lost));
	if (!cs.used || !cs.default_lane || !cs.peer || !cs.lost ||
	    rsd_simdev_create(&sc, &cs.sd)) {
		fprintf(stderr, "cudasim: cannot create the simulated device: %s\n",
			rsd_last_error()->message);
		cs.sd = NULL;
		return;
	}
	cs.ops = rsd_simdev_ops();
	/* As in a fresh CUDA context, no device has peer access until
	 * cudaDeviceEnablePeerAccess: peer copies bounce through host. */
	for (int d = 0; d < n; d++)
		for (int p = d + 1; p < n; p++)
			(void)rsd_simdev_peer_access(cs.sd, d, p, false);
	for (int d = 0; d < n; d++) {
		cs.default_lane[d] = cs_lane_new(cs.ops->default_stream(cs.sd, d), d);
		if (!cs.default_lane[d]) {
			fprintf(stderr, "cudasim: out of memory for device %d\n", d);
			cs.sd = NULL;
			return;
		}
	}
	cs.ndevices = n;
}

static void start(void)
{
	pthread_once(&cs_once, cs_start);
	pthread_mutex_lock(&cs.lock);
	started = true;
	pthread_mutex_unlock(&cs.lock);
}

cudaError_t cs_ret(cudaError_t e)
{
	if (e != cudaSuccess && e != cudaErrorNotReady)
		last_error = e;
	return e;
}

cudaError_t cs_enter(enum cs_call call)
{
	cudaError_t e = cudaSuccess;

	start();
	pthread_mutex_lock(&cs.lock);
	cs.calls[call]++;
	if (cs.fail_nth[call] && --cs.fail_nth[call] == 0) {
		e = cs.fail_err[call];
		if (rsd__cuda_is_sticky(e))
			cs.sticky = e;
	}
	if (e == cudaSuccess)
		e = cs.sticky;
	pthread_mutex_unlock(&cs.lock);
	/* A host function may run on any thread (here: whichever makes its
	 * stream progress, possibly the caller's); its refused calls are not
	 * that thread's errors. */
	if (e == cudaSuccess && in_host_func)
		return cudaErrorNotPermitted;
	if (e == cudaSuccess && !cs.sd)
		e = cudaErrorInitializationError;
	return cs_ret(e);
}

int cs_current_device(void)
{
	return current_device;
}

cudaError_t cs_ctx(int device)
{
	cudaError_t e = cudaSuccess;

	if (device < 0 || device >= cs.ndevices)
		return cudaSuccess;
	pthread_mutex_lock(&cs.lock);
	e = cs.lost[device];
	pthread_mutex_unlock(&cs.lock);
	return cs_ret(e);
}

/* What cudaGetLastError can no longer clear on this thread: the process's
 * corrupted context, else the current device's lost one. */
static cudaError_t sticky_here(void)
{
	cudaError_t e;

	pthread_mutex_lock(&cs.lock);
	e = cs.sticky;
	if (e == cudaSuccess && cs.lost && current_device < cs.ndevices)
		e = cs.lost[current_device];
	pthread_mutex_unlock(&cs.lock);
	return e;
}

void cs_set_in_host_func(bool on)
{
	in_host_func = on;
}

/* ---- the control interface (cudasim.h) ---- */

cudaError_t rsd_cudasim_configure(int ndevices, uint64_t memory_per_device)
{
	cudaError_t e = cudaSuccess;

	if (ndevices < 0 || ndevices > RSD_CUDA_MAX_DEVICE + 1)
		return cudaErrorInvalidValue;
	pthread_mutex_lock(&cs.lock);
	if (started) {
		e = cudaErrorSetOnActiveProcess;
	} else {
		cfg_ndevices = ndevices;
		cfg_memory = memory_per_device;
	}
	pthread_mutex_unlock(&cs.lock);
	return e;
}

static int call_index(const char *call)
{
	for (int i = 0; call && i < CS_NCALLS; i++)
		if (!strcmp(call, call_names[i]))
			return i;
	return -1;
}

cudaError_t rsd_cudasim_fail(const char *call, unsigned nth, cudaError_t err)
{
	bool any = call && !strcmp(call, "*");
	int i = call_index(call);

	if ((!any && i < 0) || (nth && err == cudaSuccess))
		return cudaErrorInvalidValue;
	pthread_mutex_lock(&cs.lock);
	for (int j = 0; j < CS_NCALLS; j++) {
		if (!any && j != i)
			continue;
		cs.fail_nth[j] = nth;
		cs.fail_err[j] = err;
	}
	pthread_mutex_unlock(&cs.lock);
	return cudaSuccess;
}

unsigned long rsd_cudasim_calls(const char *call)
{
	bool any = call && !strcmp(call, "*");
	int i = call_index(call);
	unsigned long n = 0;

	pthread_mutex_lock(&cs.lock);
	for (int j = 0; j < CS_NCALLS; j++)
		if (any || j == i)
			n += cs.calls[j];
	pthread_mutex_unlock(&cs.lock);
	return n;
}

void rsd_cudasim_set_unpinned_host(bool on)
{
	start();
	pthread_mutex_lock(&cs.lock);
	cs.unpinned_host = on;
	pthread_mutex_unlock(&cs.lock);
}

cudaError_t rsd_cudasim_lose_device(int device, cudaError_t err)
{
	start();
	if (!cs.sd)
		return cudaErrorInitializationError;
	if (device < 0 || device >= cs.ndevices || !rsd__cuda_is_sticky(err))
		return cudaErrorInvalidValue;
	pthread_mutex_lock(&cs.lock);
	if (cs.lost[device] == cudaSuccess)
		cs.lost[device] = err;
	pthread_mutex_unlock(&cs.lock);
	/* Its queued work never runs, its events never complete. */
	(void)rsd_simdev_lose_device(cs.sd, device);
	return cudaSuccess;
}

struct rsd_simdev *rsd_cudasim_simdev(void)
{
	start();
	return cs.sd;
}

/* ---- errors ---- */

static const struct {
	cudaError_t code;
	const char *name;
	const char *text;
} errors[] = {
#define E(code, text)             \
	{                         \
		code, #code, text \
	}
	E(cudaSuccess, "no error"),
	E(cudaErrorInvalidValue, "invalid argument"),
	E(cudaErrorMemoryAllocation, "out of memory"),
	E(cudaErrorInitializationError, "initialization error"),
	E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
	E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
	E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime "
				       "version"),
	E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
	E(cudaErrorInvalidDevice, "invalid device ordinal"),
	E(cudaErrorECCUncorrectable, "uncorrectable ECC error encountered"),
	E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
	E(cudaErrorNotReady, "device not ready"),
	E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
	E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
	E(cudaErrorPeerAccessNotEnabled, "peer access is not enabled"),
	E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
	E(cudaErrorPeerAccessUnsupported, "peer access is not supported between these two "
					  "devices"),
	E(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
	E(cudaErrorContextIsDestroyed, "context is destroyed"),
	E(cudaErrorAssert, "device-side assert triggered"),
	E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is "
						"already mapped"),
	E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory "
					    "region"),
	E(cudaErrorHardwareStackError, "hardware stack error"),
	E(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
	E(cudaErrorMisalignedAddress, "misaligned address"),
	E(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space"),
	E(cudaErrorInvalidPc, "invalid program counter"),
	E(cudaErrorLaunchFailure, "unspecified launch failure"),
	E(cudaErrorNotPermitted, "operation not permitted"),
	E(cudaErrorNotSupported, "operation not supported"),
	E(cudaErrorUnknown, "unknown error"),
#undef E
};

const char *cudaGetErrorName(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return errors[i].name;
	return "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return errors[i].text;
	return "unrecognized error code";
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error, sticky = sticky_here();

	/* A corrupted context cannot be cleared. */
	last_error = sticky;
	return e != cudaSuccess ? e : sticky;
}

cudaError_t cudaPeekAtLastError(void)
{
	cudaError_t sticky = sticky_here();

	return last_error != cudaSuccess ? last_error : sticky;
}

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
	cudaError_t e = cs_enter(CS_cudaGetDeviceCount);

	if (e)
		return e;
	if (!count)
		return cs_ret(cudaErrorInvalidValue);
	*count = cs.ndevices;
	return cs.ndevices ? cudaSuccess : cs_ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
	cudaError_t e = cs_enter(CS_cudaGetDevice);

	if (e)
		return e;
	if (!device)
		return cs_ret(cudaErrorInvalidValue);
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	*device = current_device;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	cudaError_t e = cs_enter(CS_cudaSetDevice);

	if (e)
		return e;
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	if (device < 0 || device >= cs.ndevices)
		return cs_ret(cudaErrorInvalidDevice);
	current_device = device;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t e = cs_enter(CS_cudaDeviceSynchronize);

	if (e)
		return e;
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	e = cs_ctx(current_device);
	if (e)
		return e;
	/* Every stream of the device, queued work run: the simulated
	 * device's device_sync blocks until then. */
	if (cs.ops->device_sync(cs.sd, current_device))
		return cs_ret(cudaErrorUnknown);
	return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	cudaError_t e = cs_enter(CS_cudaDeviceCanAccessPeer);

	if (e)
		return e;
	if (!can)
		return cs_ret(cudaErrorInvalidValue);
	if (device < 0 || device >= cs.ndevices || peer < 0 || peer >= cs.ndevices)
		return cs_ret(cudaErrorInvalidDevice);
	e = cs_ctx(device);
	if (!e)
		e = cs_ctx(peer);
	if (e)
		return e;
	*can = device != peer && rsd_simdev_peer_capable(cs.sd);
	return cudaSuccess;
}

/* Peer access from the current device to peer: the simulated pair takes
 * its peer link while either direction is enabled. */
static cudaError_t peer_set(int peer, unsigned flags, bool on)
{
	int dev = current_device, n = cs.ndevices;
	cudaError_t e = cudaSuccess;

	if (!n)
		return cs_ret(cudaErrorNoDevice);
	if (flags)
		return cs_ret(cudaErrorInvalidValue);
	if (peer < 0 || peer >= n || peer == dev)
		return cs_ret(cudaErrorInvalidDevice);
	if (on && !rsd_simdev_peer_capable(cs.sd))
		return cs_ret(cudaErrorPeerAccessUnsupported);
	e = cs_ctx(dev);
	if (!e)
		e = cs_ctx(peer);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	if (cs.peer[dev * n + peer] == on) {
		e = on ? cudaErrorPeerAccessAlreadyEnabled : cudaErrorPeerAccessNotEnabled;
	} else {
		cs.peer[dev * n + peer] = on;
		(void)rsd_simdev_peer_access(cs.sd, dev, peer, on || cs.peer[peer * n + dev]);
	}
	pthread_mutex_unlock(&cs.lock);
	return cs_ret(e);
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaDeviceEnablePeerAccess);

	return e ? e : peer_set(peerDevice, flags, true);
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
	cudaError_t e = cs_enter(CS_cudaDeviceDisablePeerAccess);

	return e ? e : peer_set(peerDevice, 0, false);
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	cudaError_t e = cs_enter(CS_cudaRuntimeGetVersion);

	if (e)
		return e;
	if (!version)
		return cs_ret(cudaErrorInvalidValue);
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	cudaError_t e = cs_enter(CS_cudaDriverGetVersion);

	if (e)
		return e;
	if (!version)
		return cs_ret(cudaErrorInvalidValue);
	*version = CUDART_VERSION;
	return cudaSuccess;
}
