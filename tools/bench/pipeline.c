// SPDX-License-Identifier: MIT
/*
 * rsd-bench: the copy pipeline (group "pipeline").
 *
 *  - pipe_h2d / pipe_d2h: a value copied between pageable host memory
 *    and cuda:0 (an ensure, timed, then its drop; 256 MiB to the device,
 *    64 MiB back, whose pageable destination the block cache keeps warm
 *    at that size) through the
 *    device's pinned staging pair, against the same copy of a pinned value
 *    (the rate staging aims for: target >= 0.8 of it), with the unstaged
 *    pageable copy (a manager with staging off) as the baseline it
 *    replaces. On the simulated device with its link model on (pinned
 *    copies at the H2D/D2H engine rates, pageable ones at the pageable
 *    rate, holding the caller), every duration stretched by PIPE_SCALE so
 *    that modelled link time, not this machine's memcpy, decides the
 *    figures; ratios do not depend on the scale.
 *
 * pipe_measure() is shared with the GPU cases (gpu.c), which run the same
 * comparison on the CUDA driver.
 */
#include <string.h>

#include "common.h"

#define PIPE_SCALE 100.0
#define PIPE_MIB (1ull << 20)

/* The three ways of one copy, in ns (medians). */
enum pipe_way {
	PIPE_STAGED,
	PIPE_PINNED,
	PIPE_UNSTAGED,
	PIPE_NWAYS
};

/* A replicable value of nb bytes adopted at host location at, written. */
static struct rsd_handle pipe_value(struct rsd_manager *m, struct rsd_location at, uint64_t nb)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	CK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &nb, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), 0x6b, (size_t)nb);
	CK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	return h;
}

/*
 * The three ways of a copy of nb bytes, reps rounds each: host to dev
 * (h2d) or dev to host (d2h, when h2d is NULL) of a pageable value
 * through staged (whose staging is on), of a pinned one through staged,
 * of a pageable one through unstaged (staging off). Each value is
 * discarded before the next is made.
 */
static void pipe_measure(struct rsd_manager *staged, struct rsd_manager *unstaged,
			 struct rsd_location dev, uint64_t nb, size_t reps, double *h2d,
			 double *d2h)
{
	static const struct rsd_location host[PIPE_NWAYS] = {
		[PIPE_STAGED] = { RSD_PAGEABLE_HOST, -1 },
		[PIPE_PINNED] = { RSD_PINNED_HOST, -1 },
		[PIPE_UNSTAGED] = { RSD_PAGEABLE_HOST, -1 },
	};

	for (int w = 0; w < PIPE_NWAYS; w++) {
		struct rsd_manager *m = w == PIPE_UNSTAGED ? unstaged : staged;
		struct rsd_handle h = pipe_value(m, host[w], nb);

		if (h2d) {
			h2d[w] = bench_ensure_ns(m, h, dev, reps);
		} else {
			/* Only on the device: the ensure back copies it. */
			CK(rsd_ensure(m, h, dev, NULL, NULL));
			CK(rsd_drop(m, h, host[w], NULL));
			d2h[w] = bench_ensure_ns(m, h, host[w], reps);
		}
		CK(rsd_discard(m, h, NULL));
	}
}

static struct rsd_manager *pipe_manager(struct rsd_simdev *sd, uint64_t staging)
{
	struct rsd_manager_config cfg = { .driver = rsd_simdev_ops(),
					  .driver_ctx = sd,
					  .staging_nbytes = staging };
	struct rsd_manager *m;

	CK(rsd_manager_create(&cfg, &m));
	return m;
}

/* The modelled rate: nb bytes in ns of time stretched by PIPE_SCALE. */
static double pipe_gbps(uint64_t nb, double ns)
{
	return ns > 0 ? (double)nb / ns * PIPE_SCALE : 0;
}

/* One direction's figures: the staged rate against the pinned one
 * (target), the unstaged rate against the pinned one (both in modelled
 * GB/s), and the stretched times. */
static void pipe_report(const char *cs, uint64_t nb, const double ns[PIPE_NWAYS])
{
	unsigned mib = (unsigned)(nb / PIPE_MIB);
	struct bench_fig *f;
	char m[32];

	snprintf(m, sizeof(m), "staged_%uMiB_GBps", mib);
	f = bench_fig(cs, m, pipe_gbps(nb, ns[PIPE_STAGED]), "GB/s");
	bench_fig_base(f, "pinned", pipe_gbps(nb, ns[PIPE_PINNED]));
	bench_fig_target(f, TGT_RATIO_MIN, 0.8);
	snprintf(m, sizeof(m), "unstaged_%uMiB_GBps", mib);
	f = bench_fig(cs, m, pipe_gbps(nb, ns[PIPE_UNSTAGED]), "GB/s");
	bench_fig_base(f, "pinned", pipe_gbps(nb, ns[PIPE_PINNED]));
	bench_line(cs, "staged_ms", ns[PIPE_STAGED] / 1e6, "ms");
	bench_line(cs, "pinned_ms", ns[PIPE_PINNED] / 1e6, "ms");
	bench_line(cs, "unstaged_ms", ns[PIPE_UNSTAGED] / 1e6, "ms");
	bench_line(cs, "pinned_over_staged", ns[PIPE_PINNED] / ns[PIPE_STAGED], "x");
	bench_line(cs, "pinned_over_unstaged", ns[PIPE_PINNED] / ns[PIPE_UNSTAGED], "x");
}

static void case_pipeline_staging(void)
{
	struct rsd_simdev_config cfg = {
		.ndevices = 1,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = PIPE_SCALE,
	};
	/* Device to host writes a new pageable block each time: up to 64 MiB
	 * the block cache hands back a warm one; a fresh 256 MiB one would
	 * time this machine's page faults, not the copy. */
	const uint64_t h2d_nb = QF(32, 256) * PIPE_MIB, d2h_nb = QF(32, 64) * PIPE_MIB;
	double h2d[PIPE_NWAYS], d2h[PIPE_NWAYS];
	struct rsd_manager *staged, *unstaged;
	struct rsd_location dev0 = { RSD_CUDA, 0 };
	struct rsd_simdev *sd;

	CK(rsd_simdev_create(&cfg, &sd));
	staged = pipe_manager(sd, 0);
	unstaged = pipe_manager(sd, RSD_STAGING_OFF);
	pipe_measure(staged, unstaged, dev0, h2d_nb, QF(3, 5), h2d, NULL);
	pipe_measure(staged, unstaged, dev0, d2h_nb, QF(3, 5), NULL, d2h);
	bench_note("pipeline: simulated device, link model on, durations x%.0f (rates in "
		   "modelled GB/s); ensure pageable -> cuda:0 (%u MiB) and cuda:0 -> pageable "
		   "(%u MiB) through the staging pair vs the same of a pinned value, and "
		   "unstaged (staging off)",
		   PIPE_SCALE, (unsigned)(h2d_nb / PIPE_MIB), (unsigned)(d2h_nb / PIPE_MIB));
	pipe_report("pipe_h2d", h2d_nb, h2d);
	pipe_report("pipe_d2h", d2h_nb, d2h);
	CK(rsd_manager_close(staged, 0));
	CK(rsd_manager_close(unstaged, 0));
	rsd_manager_destroy(staged);
	rsd_manager_destroy(unstaged);
	rsd_simdev_destroy(sd);
}
