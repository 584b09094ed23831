/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime double: a test-only stand-in for libcudart, built as
 * $(O)/cudasim/librsd-cudasim.so when librsd is built with CUDA=sim. It
 * implements the part of the CUDA runtime API that librsd's CUDA driver and
 * the CUDA tests call, with the runtime's own signatures (it is compiled
 * against the toolkit's cuda_runtime_api.h), on top of librsd's simulated
 * device: device memory and pinned host memory are simulated-device
 * allocations, cudaStream_t is a simulated-device stream, and copies, event
 * records and host functions are work items that run in stream order when
 * the stream makes progress (by default an engine thread per stream, as a
 * GPU runs its streams asynchronously and independently).
 *
 * Configuration, read once at the first runtime call (or set before it
 * with rsd_cudasim_configure()):
 *   RSD_CUDASIM_DEVICES   number of devices (default 2; 0 makes
 *                         cudaGetDeviceCount fail with cudaErrorNoDevice)
 *   RSD_CUDASIM_MEMORY    bytes of memory per device, with an optional
 *                         K, M or G suffix (default 4G)
 *   RSD_CUDASIM_PROGRESS  background (default), immediate or on-command
 *   RSD_CUDASIM_DELAY_NS  background mode's delay per work item (default
 *                         20000)
 *
 * This header declares the double's own control interface, for tests only.
 * It is never installed, and nothing here exists in a real CUDA runtime.
 */
#ifndef RSD_CUDASIM_H
#define RSD_CUDASIM_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <rsd/device.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * rsd_cudasim_configure() - set the double's devices before it starts
 * @ndevices: number of simulated CUDA devices (0 ... 128)
 * @memory_per_device: bytes each device has (what cudaMemGetInfo reports
 *	as total); 0 keeps the default or RSD_CUDASIM_MEMORY
 *
 * Overrides RSD_CUDASIM_DEVICES and RSD_CUDASIM_MEMORY. Only effective
 * before the first runtime call of the process: the real runtime fixes its
 * devices at initialization too.
 *
 * Context: any thread, before any other CUDA call.
 * Return: cudaSuccess; cudaErrorInvalidValue when @ndevices is outside
 * 0 ... 128; cudaErrorSetOnActiveProcess when the double already started.
 */
cudaError_t rsd_cudasim_configure(int ndevices, uint64_t memory_per_device);

/**
 * rsd_cudasim_fail() - make the nth call of one runtime function fail
 * @call: the function's name, e.g. "cudaMalloc", or "*" for any function
 * @nth: which call from now fails (1 = the next one); 0 disarms @call
 * @err: what it returns; a sticky error (cudaErrorIllegalAddress,
 *	cudaErrorLaunchFailure and the other "the process must be restarted"
 *	codes) also corrupts the context: every later runtime call returns it
 *	and cudaGetLastError() can no longer clear it
 *
 * The failing call does nothing but record @err as the calling thread's
 * last error, as a real failure does. Error-query functions
 * (cudaGetLastError, cudaPeekAtLastError, cudaGetErrorString,
 * cudaGetErrorName) cannot be made to fail.
 *
 * Context: any thread.
 * Return: cudaSuccess; cudaErrorInvalidValue when @call names no function
 * of the double or @err is cudaSuccess with @nth non-zero.
 */
cudaError_t rsd_cudasim_fail(const char *call, unsigned nth, cudaError_t err);

/**
 * rsd_cudasim_lose_device() - make one device's context fail for good
 * @device: the device, 0 ... ndevices-1
 * @err: its sticky error: cudaErrorIllegalAddress, cudaErrorECCUncorrectable,
 *	cudaErrorLaunchFailure or another "the process must be restarted"
 *	code
 *
 * What an uncorrectable ECC error or an illegal address in a kernel does to
 * a real context: from now on every runtime call working in @device's
 * context returns @err and records it as the calling thread's last error,
 * which cudaGetLastError() can no longer clear while @device is current.
 * That is every call on its memory (cudaFree, cudaPointerGetAttributes,
 * copies from or to it), its streams and events (queries and syncs return
 * at once: its pending work never completes), host memory allocated by
 * cudaHostAlloc while it was current (cudaFreeHost fails, nothing is
 * freed: that memory dies with the context) and registrations made while it
 * was current (cudaHostUnregister fails but drops the registration: the
 * caller's memory stays its own), and every call made while it is the
 * current device (cudaMalloc, cudaHostAlloc, cudaHostRegister,
 * cudaStreamCreate, cudaEventCreate, cudaMemGetInfo,
 * cudaDeviceSynchronize). cudaSetDevice, cudaGetDevice, cudaGetDeviceCount
 * and the version queries still work. The other devices' contexts work as
 * before; a copy queued on their streams earlier that reads or writes the
 * lost device's memory fails when it runs (their events after it return
 * cudaErrorUnknown). Under it the simulated device loses the device too
 * (rsd_simdev_lose_device()).
 *
 * Context: any thread.
 * Return: cudaSuccess; cudaErrorInvalidValue for a @device that is not one
 * of the double's or an @err that is not sticky; cudaErrorInitializationError
 * when the double could not start.
 */
cudaError_t rsd_cudasim_lose_device(int device, cudaError_t err);

/**
 * rsd_cudasim_calls() - how many times a runtime function was called
 * @call: the function's name, or "*" for the total of all
 *
 * Counts every call, failed or not, since the process started.
 *
 * Context: any thread.
 * Return: the count; 0 for a name the double does not know.
 */
unsigned long rsd_cudasim_calls(const char *call);

/**
 * rsd_cudasim_set_unpinned_host() - hand back pageable memory as "pinned"
 * @on: true: cudaHostAlloc succeeds but returns memory that is not
 *	page-locked and that cudaPointerGetAttributes reports as
 *	cudaMemoryTypeUnregistered, and cudaHostRegister succeeds without
 *	locking or registering anything; false: back to real pinned memory
 *
 * Lets a test check that a caller verifies its pinned allocations.
 *
 * Context: any thread.
 */
void rsd_cudasim_set_unpinned_host(bool on);

/**
 * rsd_cudasim_set_progress() - how the double's stream work makes progress
 * @mode: RSD_SIMDEV_BACKGROUND (the default): each stream has an engine
 *	thread that runs its queued work @delay_ns after it became runnable,
 *	independently of other streams; RSD_SIMDEV_ON_COMMAND: only the
 *	test's rsd_simdev_stream_complete() or rsd_simdev_complete_all() runs
 *	work; RSD_SIMDEV_IMMEDIATE: work runs as it is queued, a host
 *	function inside cudaLaunchHostFunc (unlike a real runtime), so one
 *	that waits for its caller's later work hangs there: librsd's CUDA
 *	driver's staging gates do, so a manager on the CUDA driver cannot
 *	stage pageable copies in this mode
 * @delay_ns: background mode's delay
 *
 * Overrides RSD_CUDASIM_PROGRESS and RSD_CUDASIM_DELAY_NS. Work already
 * queued proceeds in the new mode. Use this, not rsd_simdev_set_progress()
 * on rsd_cudasim_simdev(): the double's engines are not the simulated
 * device's workers.
 *
 * Context: any thread, not from a host function.
 * Return: cudaSuccess; cudaErrorInvalidValue for an unknown @mode;
 * cudaErrorInitializationError when the double could not start.
 */
cudaError_t rsd_cudasim_set_progress(enum rsd_simdev_progress mode, uint64_t delay_ns);

/**
 * rsd_cudasim_simdev() - the simulated device under the double
 *
 * Starts the double if it has not started. Its streams are the
 * cudaStream_t values the double hands out, so a test may pass a
 * cudaStream_t to rsd_simdev_stream_complete() (in on-command mode, see
 * rsd_cudasim_set_progress()). The double owns it: never destroy it.
 *
 * Context: any thread.
 * Return: the simulated device; NULL when it could not be created (then
 * every runtime call fails with cudaErrorInitializationError).
 */
struct rsd_simdev *rsd_cudasim_simdev(void);

#ifdef __cplusplus
}
#endif
#endif
