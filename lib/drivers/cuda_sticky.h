/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime's sticky errors, shared by the CUDA driver (cuda.c),
 * which takes one for a lost device, and the runtime double
 * (tests/cudasim), which makes them stick as the runtime does. Include
 * after cuda_runtime_api.h.
 */
#ifndef RSD_DRIVERS_CUDA_STICKY_H
#define RSD_DRIVERS_CUDA_STICKY_H

#include <stdbool.h>

/* The errors after which a context is unusable for good ("the process must
 * be restarted"): every later call in that context returns the error. */
static inline bool rsd__cuda_is_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchTimeout:
	case cudaErrorAssert:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorLaunchFailure:
	case cudaErrorECCUncorrectable:
		return true;
	default:
		return false;
	}
}

#endif
