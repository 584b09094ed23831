// SPDX-License-Identifier: MIT
/*
 * The simulated device's link model (simdev.h): which engine a copy uses,
 * how long it takes, and the figures, from the config, the environment or
 * the defaults of an H200 PCIe Gen5 node (Documentation/drivers.md gives
 * each figure's source).
 *
 * Engines: each device has one copy engine per direction (host to device,
 * device to host) and each ordered device pair a peer link. A copy reserves
 * its engines from max(now, their busy_until) for latency + nbytes /
 * bandwidth, times the time scale, so copies on one engine follow one
 * another (first started, first done) and copies on different engines or
 * devices overlap. A device pair without peer access bounces through host
 * memory: the copy holds the source's D2H engine and the destination's H2D
 * engine at once, at the bounce bandwidth. Copies within one device and
 * host-to-host copies use no engine and take no modelled time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simdev.h"

#define GB 1000000000.0

/* Defaults: see Documentation/drivers.md, "The link model". */
#define DEF_H2D_BPS 55000000000ull
#define DEF_D2H_BPS 55000000000ull
#define DEF_PAGEABLE_BPS 27000000000ull
#define DEF_PEER_BPS 370000000000ull
#define DEF_BOUNCE_BPS 20000000000ull
#define DEF_PCIE_LATENCY_NS 8000ull
#define DEF_PEER_LATENCY_NS 5000ull
#define DEF_DEV_ALLOC_NS 1000000ull
#define DEF_PINNED_ALLOC_NS 2000000ull
#define DEF_FREE_NS 1000000ull
#define DEF_OVERSIZE_KEEP (1ull << 30)

uint64_t rsd__sim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rsd__sim_sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* A non-negative number from the environment, or 0 when unset. A value
 * that does not parse is reported and ignored. */
static double env_num(const char *name)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || v < 0) {
		fprintf(stderr,
			"librsd: simulated device: %s=%s is not a non-negative number; "
			"ignored\n",
			name, s);
		return 0;
	}
	return v;
}

static bool env_flag(const char *name)
{
	return env_num(name) != 0;
}

/* A field: the config's when set, else the environment's, else dflt. */
static uint64_t pick(uint64_t field, const char *env, double env_unit, uint64_t dflt)
{
	double v;

	if (field)
		return field;
	v = env_num(env) * env_unit;
	return v >= 1 ? (uint64_t)v : dflt;
}

void rsd__sim_links_init(struct rsd_simdev *sd, const struct rsd_simdev_config *cfg)
{
	struct sim_links *lm = &sd->lm;
	double scale = cfg->time_scale > 0 ? cfg->time_scale : env_num("RSD_SIMDEV_TIME_SCALE");

	lm->on = cfg->links || env_flag("RSD_SIMDEV_LINKS");
	lm->peer_capable = !cfg->no_peer_access && !env_flag("RSD_SIMDEV_NO_PEER_ACCESS");
	lm->scale = scale > 0 ? scale : 1;
	lm->h2d_bps = pick(cfg->h2d_bps, "RSD_SIMDEV_H2D_GBPS", GB, DEF_H2D_BPS);
	lm->d2h_bps = pick(cfg->d2h_bps, "RSD_SIMDEV_D2H_GBPS", GB, DEF_D2H_BPS);
	lm->pageable_bps =
		pick(cfg->pageable_bps, "RSD_SIMDEV_PAGEABLE_GBPS", GB, DEF_PAGEABLE_BPS);
	lm->peer_bps = pick(cfg->peer_bps, "RSD_SIMDEV_PEER_GBPS", GB, DEF_PEER_BPS);
	lm->bounce_bps = pick(cfg->bounce_bps, "RSD_SIMDEV_BOUNCE_GBPS", GB, DEF_BOUNCE_BPS);
	lm->pcie_latency_ns =
		pick(cfg->pcie_latency_ns, "RSD_SIMDEV_PCIE_LATENCY_NS", 1, DEF_PCIE_LATENCY_NS);
	lm->peer_latency_ns =
		pick(cfg->peer_latency_ns, "RSD_SIMDEV_PEER_LATENCY_NS", 1, DEF_PEER_LATENCY_NS);
	lm->dev_alloc_ns = pick(cfg->dev_alloc_ns, "RSD_SIMDEV_ALLOC_NS", 1, DEF_DEV_ALLOC_NS);
	lm->pinned_alloc_ns =
		pick(cfg->pinned_alloc_ns, "RSD_SIMDEV_PINNED_ALLOC_NS", 1, DEF_PINNED_ALLOC_NS);
	lm->free_ns = pick(cfg->free_ns, "RSD_SIMDEV_FREE_NS", 1, DEF_FREE_NS);
	lm->oversize_keep = pick(cfg->oversize_keep, "RSD_SIMDEV_OVERSIZE_KEEP", 1,
				 lm->on ? DEF_OVERSIZE_KEEP : 0);
	for (int i = 0; i < sd->ndevices * sd->ndevices; i++)
		sd->peer_on[i] = lm->peer_capable && i / sd->ndevices != i % sd->ndevices;
}

static bool is_host(struct rsd_location at)
{
	return at.kind == RSD_PAGEABLE_HOST || at.kind == RSD_PINNED_HOST;
}

/* The engines (e[0], e[1]; NULL when unused) and duration of a copy. */
struct route {
	struct sim_engine *e[2];
	uint64_t ns;
};

static uint64_t duration(const struct sim_links *lm, uint64_t latency, uint64_t bps, uint64_t n)
{
	double ns = (double)latency + (double)n * GB / (double)bps;

	return (uint64_t)(ns * lm->scale);
}

/* With sd->lock held. Locations were checked by the caller. */
static struct route route_of(struct rsd_simdev *sd, struct rsd_location dst,
			     struct rsd_location src, uint64_t n)
{
	const struct sim_links *lm = &sd->lm;
	bool pageable = dst.kind == RSD_PAGEABLE_HOST || src.kind == RSD_PAGEABLE_HOST;
	struct route r = { { NULL, NULL }, 0 };

	if (is_host(src) && dst.kind == RSD_CUDA) {
		r.e[0] = &sd->dev[dst.device].h2d_eng;
		r.ns = duration(lm, lm->pcie_latency_ns, pageable ? lm->pageable_bps : lm->h2d_bps,
				n);
	} else if (src.kind == RSD_CUDA && is_host(dst)) {
		r.e[0] = &sd->dev[src.device].d2h_eng;
		r.ns = duration(lm, lm->pcie_latency_ns, pageable ? lm->pageable_bps : lm->d2h_bps,
				n);
	} else if (src.kind == RSD_CUDA && dst.kind == RSD_CUDA && src.device != dst.device) {
		int i = src.device * sd->ndevices + dst.device;

		if (sd->peer_on[i]) {
			r.e[0] = &sd->peer_eng[i];
			r.ns = duration(lm, lm->peer_latency_ns, lm->peer_bps, n);
		} else {
			r.e[0] = &sd->dev[src.device].d2h_eng;
			r.e[1] = &sd->dev[dst.device].h2d_eng;
			r.ns = duration(lm, 2 * lm->pcie_latency_ns, lm->bounce_bps, n);
		}
	}
	return r;
}

uint64_t rsd__sim_link_start(struct rsd_simdev *sd, const struct sim_work *w, uint64_t now)
{
	struct route r;
	uint64_t start = now, end;

	if (!sd->lm.on || w->kind != SIM_WORK_COPY)
		return 0;
	r = route_of(sd, w->copy.dst_at, w->copy.src_at, w->copy.nbytes);
	if (!r.e[0])
		return 0;
	for (int i = 0; i < 2; i++)
		if (r.e[i] && r.e[i]->busy_until > start)
			start = r.e[i]->busy_until;
	end = start + r.ns;
	for (int i = 0; i < 2; i++)
		if (r.e[i])
			r.e[i]->busy_until = end;
	return end;
}

bool rsd__sim_link_holds(struct rsd_simdev *sd, struct rsd_location dst, struct rsd_location src)
{
	if (!sd->lm.on)
		return false;
	return (dst.kind == RSD_PAGEABLE_HOST && src.kind == RSD_CUDA) ||
	       (src.kind == RSD_PAGEABLE_HOST && dst.kind == RSD_CUDA);
}

static bool device_ok(const struct rsd_simdev *sd, struct rsd_location at)
{
	if (at.kind == RSD_CUDA)
		return rsd_location_valid(at) && at.device < sd->ndevices;
	return is_host(at);
}

uint64_t rsd_simdev_copy_ns(struct rsd_simdev *sd, struct rsd_location dst, struct rsd_location src,
			    uint64_t nbytes)
{
	struct route r;

	if (!sd || !sd->lm.on || !device_ok(sd, dst) || !device_ok(sd, src))
		return 0;
	pthread_mutex_lock(&sd->lock);
	r = route_of(sd, dst, src, nbytes);
	pthread_mutex_unlock(&sd->lock);
	return r.e[0] ? r.ns : 0;
}

bool rsd_simdev_links_on(struct rsd_simdev *sd)
{
	return sd && sd->lm.on;
}

bool rsd_simdev_peer_capable(struct rsd_simdev *sd)
{
	return sd && sd->lm.peer_capable;
}

int rsd_simdev_peer_access(struct rsd_simdev *sd, int device, int peer, bool on)
{
	if (!sd)
		return rsd__err(RSD_ETYPE, "rsd_simdev_peer_access: simdev is NULL");
	if (device < 0 || device >= sd->ndevices || peer < 0 || peer >= sd->ndevices ||
	    device == peer)
		return rsd__err(RSD_EINVAL,
				"rsd_simdev_peer_access: cuda:%d and cuda:%d are not two of the "
				"%d simulated devices",
				device, peer, sd->ndevices);
	if (on && !sd->lm.peer_capable)
		return rsd__err(RSD_EDEVICE,
				"rsd_simdev_peer_access: cuda:%d cannot reach cuda:%d: the "
				"simulated devices have no peer access (no_peer_access)",
				device, peer);
	pthread_mutex_lock(&sd->lock);
	sd->peer_on[device * sd->ndevices + peer] = on;
	sd->peer_on[peer * sd->ndevices + device] = on;
	pthread_mutex_unlock(&sd->lock);
	return 0;
}
