// SPDX-License-Identifier: MIT
/*
 * A run on the simulated device whose copies overlap a kernel, for
 * t_trace.sh's engines case to record: with the link model on and the
 * device's engines progressing by themselves, a kernel of KERNEL_NS is
 * queued on one stream and, while it runs, a host to device copy on
 * another (once the compute stream reached the kernel); then a peer copy
 * and a device to host copy. The recording must
 * show each copy's rsd:copy_start and rsd:copy_end on its engine (h2d, d2h,
 * peer) and the H2D copy inside the kernel's run.
 *
 * cuda_copies does the same copies through the CUDA driver, on the CUDA
 * runtime double (make CUDA=sim; skipped elsewhere): their rsd:copy_start
 * and rsd:copy_end come when a sync sees them complete, timed by the
 * runtime's events (clock "gpu").
 */
#include <atf-c.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#include "../check.h"

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif
#if RSD_CUDASIM
#include "../cudasim/cudasim.h"
#endif

#define KERNEL_NS 40000000ull /* 40 ms */
#define NBYTES (1ull << 20)
/* 1 MiB at 100 MB/s: about 10 ms on a copy engine. */
#define LINK_BPS 100000000ull

/* Run on the compute stream just before the kernel: the copy is queued
 * only once the compute engine got this far, so the kernel is running (or
 * about to) when the copy starts, however the workers are scheduled. */
static void reached(void *arg)
{
	atomic_store((atomic_bool *)arg, true);
}

ATF_TC_WITHOUT_HEAD(engines);
ATF_TC_BODY(engines, tc)
{
	struct rsd_simdev_config sc = { .ndevices = 2,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.links = true,
					.h2d_bps = LINK_BPS,
					.d2h_bps = LINK_BPS,
					.peer_bps = LINK_BPS };
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_location dev0 = { .kind = RSD_CUDA, .device = 0 };
	struct rsd_location dev1 = { .kind = RSD_CUDA, .device = 1 };
	struct rsd_simdev *sd = NULL;
	void *compute, *copies, *host, *d0, *d1;
	atomic_bool gate = false;
	const struct timespec tick = { 0, 100000 };

	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &compute));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &copies));
	RSD_REQUIRE_OK(ops->alloc(sd, RSD_LOC_PINNED_HOST, NBYTES, &host));
	RSD_REQUIRE_OK(ops->alloc(sd, dev0, NBYTES, &d0));
	RSD_REQUIRE_OK(ops->alloc(sd, dev1, NBYTES, &d1));
	memset(host, 0x5a, NBYTES);

	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, compute, reached, &gate));
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, compute, KERNEL_NS, NULL, 0, NULL, NULL));
	while (!atomic_load(&gate))
		nanosleep(&tick, NULL);
	RSD_REQUIRE_OK(ops->copy(sd, d0, dev0, host, RSD_LOC_PINNED_HOST, NBYTES, copies));
	RSD_REQUIRE_OK(ops->stream_sync(sd, copies));
	RSD_REQUIRE_OK(ops->copy(sd, d1, dev1, d0, dev0, NBYTES, copies));
	RSD_REQUIRE_OK(ops->copy(sd, host, RSD_LOC_PINNED_HOST, d1, dev1, NBYTES, copies));
	RSD_REQUIRE_OK(ops->stream_sync(sd, copies));
	RSD_REQUIRE_OK(ops->stream_sync(sd, compute));
	ATF_CHECK_EQ(((unsigned char *)host)[NBYTES - 1], 0x5a);

	ops->free(sd, dev1, d1, NBYTES);
	ops->free(sd, dev0, d0, NBYTES);
	ops->free(sd, RSD_LOC_PINNED_HOST, host, NBYTES);
	rsd_simdev_stream_destroy(sd, copies);
	rsd_simdev_stream_destroy(sd, compute);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(cuda_copies);
ATF_TC_BODY(cuda_copies, tc)
{
#if RSD_CUDASIM
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	struct rsd_location dev0 = { .kind = RSD_CUDA, .device = 0 };
	struct rsd_location dev1 = { .kind = RSD_CUDA, .device = 1 };
	void *host, *d0, *d1;

	ATF_REQUIRE_EQ(rsd_cudasim_configure(2, 64ull << 20), cudaSuccess);
	ATF_REQUIRE_EQ(rsd_cudasim_set_progress(RSD_SIMDEV_BACKGROUND, 0), cudaSuccess);
	ATF_REQUIRE_EQ(ops->device_count(NULL), 2);
	RSD_REQUIRE_OK(ops->alloc(NULL, RSD_LOC_PINNED_HOST, NBYTES, &host));
	RSD_REQUIRE_OK(ops->alloc(NULL, dev0, NBYTES, &d0));
	RSD_REQUIRE_OK(ops->alloc(NULL, dev1, NBYTES, &d1));
	memset(host, 0x3c, NBYTES);
	/* NULL: the driver's own transfer streams, one per direction and pair. */
	RSD_REQUIRE_OK(ops->copy(NULL, d0, dev0, host, RSD_LOC_PINNED_HOST, NBYTES, NULL));
	RSD_REQUIRE_OK(ops->stream_sync(NULL, NULL));
	RSD_REQUIRE_OK(ops->copy(NULL, d1, dev1, d0, dev0, NBYTES, NULL));
	RSD_REQUIRE_OK(ops->stream_sync(NULL, NULL));
	memset(host, 0, NBYTES);
	RSD_REQUIRE_OK(ops->copy(NULL, host, RSD_LOC_PINNED_HOST, d1, dev1, NBYTES, NULL));
	RSD_REQUIRE_OK(ops->stream_sync(NULL, NULL));
	ATF_CHECK_EQ(((unsigned char *)host)[NBYTES - 1], 0x3c);
	ops->free(NULL, dev1, d1, NBYTES);
	ops->free(NULL, dev0, d0, NBYTES);
	ops->free(NULL, RSD_LOC_PINNED_HOST, host, NBYTES);
#else
	atf_tc_skip("needs the CUDA runtime double: make check CUDA=sim");
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, engines);
	ATF_TP_ADD_TC(tp, cuda_copies);
	return atf_no_error();
}
