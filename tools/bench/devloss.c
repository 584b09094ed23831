// SPDX-License-Identifier: MIT
/*
 * A device lost halfway through a job (group "devloss", case "devloss";
 * Documentation/performance.md, "A device lost halfway").
 *
 * A stage workload shaped like rsd-demo's, on two simulated devices with
 * the link model on, one thread per device: each stage brings a ciphertext
 * (a must-preserve value whose copy stays in pinned host memory) and a key
 * (a value with a source) to its device, runs a kernel on them through a
 * GPU lease, drops them there, and adopts the stage's output on the device;
 * the last DL_KEEP outputs stay there (device-only must-preserve values),
 * older ones were consumed and are discarded. Halfway through cuda:0's stages,
 * cuda:1's thread is stopped between two stages, the snapshot is read and
 * cuda:1 is lost; its thread's next call meets the loss and it stops.
 *
 * Rows (PASS/MISS):
 *  - intact_pct: of the values that had a copy off cuda:1 or a source in
 *    the snapshot before the loss, the share that is whole after it (not
 *    lost, readable, ciphertexts and outputs with their bytes): 100.
 *  - lost_reported: values the snapshot marks lost after the loss, against
 *    the device-only must-preserve values on cuda:1 in the snapshot before
 *    (the base): at least as many, and lost_extra (the difference): none
 *    more.
 *  - survivor_tput: cuda:0's stages per second after the loss against
 *    before it (the base): >= 0.9.
 *  - durable_tput: the same workload without a loss, every output adopted
 *    with RSD_DURABLE (one more device-to-host copy per stage: its write-back
 *    to pinned host at its adopt) against without (the base): reported,
 *    what durability costs.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

#define DL_NDEV 2
#define DL_CT 6
#define DL_KEYS 4
#define DL_KEEP 4
#define DL_MAXOUT 256

struct dl_run;

struct dl_dev {
	struct dl_run *run;
	int d;
	struct rsd_location at;
	void *stream;
	struct rsd_handle ct[DL_CT], key[DL_KEYS];
	struct rsd_handle out[DL_MAXOUT];
	unsigned nout, stages;
	uint64_t t_start, t_half, t_end;
	int err; /* the call that stopped it */
};

struct dl_run {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	unsigned nstages, kernel_us;
	bool durable, lose;
	uint64_t nbytes;
	atomic_bool pause1, paused1, go1; /* cuda:1's thread between stages */
	atomic_uint half0;		  /* cuda:0 reached half its stages */
	struct dl_dev dev[DL_NDEV];
};

/* A resident of the run's size at `at`, filled with seed's pattern. */
static struct rsd_resident *dl_alloc(struct dl_run *r, struct rsd_location at, int seed)
{
	struct rsd_resident *v;
	uint64_t n = r->nbytes;

	CK(rsd_resident_alloc(r->m, &rsd_resident_type, at, 1, &n, NULL, 0, &v));
	memset(rsd_resident_data(v, 0), seed & 0xff, (size_t)n);
	return v;
}

static int dl_seed(int d, unsigned i, bool output)
{
	return (int)(1 + d * 97 + i * 7 + (output ? 50 : 0));
}

/* One stage on dv's device; 0 or the first call's error. */
static int dl_stage(struct dl_dev *dv, unsigned s)
{
	struct dl_run *r = dv->run;
	struct rsd_manager *m = r->m;
	struct rsd_handle in[2] = { dv->ct[s % DL_CT], dv->key[s % DL_KEYS] };
	int mode = RSD_REPLICABLE | (r->durable ? RSD_DURABLE : 0);
	struct rsd_resident *v;
	struct rsd_lease *l;
	int err;

	for (int i = 0; i < 2; i++) {
		err = rsd_ensure(m, in[i], dv->at, NULL, NULL);
		if (err)
			return err;
	}
	err = rsd_acquire(m, in, 2, dv->at, dv->stream, &l);
	if (err)
		return err;
	err = rsd_simdev_launch_kernel(r->sd, dv->stream, (uint64_t)r->kernel_us * 1000, NULL, 0,
				       NULL, NULL);
	if (!err)
		err = rsd_lease_release(l, RSD_RELEASE_WAIT);
	rsd_lease_free(l);
	for (int i = 0; i < 2 && !err; i++)
		err = rsd_drop(m, in[i], dv->at, NULL);
	if (err)
		return err;
	if (dv->nout == DL_MAXOUT)
		return 0;
	v = dl_alloc(r, dv->at, dl_seed(dv->d, dv->nout, true));
	err = rsd_adopt(m, v, &dv->at, (enum rsd_replica_mode)mode, &dv->out[dv->nout]);
	if (err) {
		rsd_resident_free(v);
		return err;
	}
	/* An older output was consumed by the stages since: it ends. */
	if (++dv->nout > DL_KEEP)
		err = rsd_discard(m, dv->out[dv->nout - DL_KEEP - 1], NULL);
	return err;
}

static void *dl_thread(void *arg)
{
	struct dl_dev *dv = arg;
	struct dl_run *r = dv->run;

	/* cuda:1's thread is still running when the loss comes. */
	unsigned n = dv->d == 1 && r->lose ? 2 * r->nstages : r->nstages;

	dv->t_start = bench_now_ns();
	for (unsigned s = 0; s < n; s++) {
		if (dv->d == 1 && atomic_load(&r->pause1)) {
			atomic_store(&r->paused1, true);
			while (!atomic_load(&r->go1))
				bench_sleep_ns(100 * 1000);
		}
		dv->err = dl_stage(dv, s);
		if (dv->err)
			break;
		dv->stages++;
		if (dv->d == 0 && s + 1 == r->nstages / 2) {
			dv->t_half = bench_now_ns();
			atomic_store(&r->half0, 1);
		}
	}
	dv->t_end = bench_now_ns();
	/* cuda:1 stopped before the pause (its stages ran out): let main go. */
	atomic_store(&r->paused1, true);
	return NULL;
}

static void dl_setup(struct dl_run *r)
{
	struct rsd_simdev_config sc = { .ndevices = DL_NDEV,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.links = true,
					.time_scale = 20 };
	struct rsd_manager_config mc = { 0 };

	CK(rsd_simdev_create(&sc, &r->sd));
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = r->sd;
	CK(rsd_manager_create(&mc, &r->m));
	for (int d = 0; d < DL_NDEV; d++) {
		struct dl_dev *dv = &r->dev[d];

		dv->run = r;
		dv->d = d;
		CK(rsd_cuda_location(d, &dv->at));
		CK(rsd_simdev_stream_create(r->sd, d, &dv->stream));
		for (unsigned i = 0; i < DL_CT; i++) {
			struct rsd_resident *v =
				dl_alloc(r, RSD_LOC_PINNED_HOST, dl_seed(d, i, false));

			CK(rsd_adopt(r->m, v, &RSD_LOC_PINNED_HOST, RSD_REPLICABLE, &dv->ct[i]));
		}
		bench_sources(r->m, DL_KEYS, r->nbytes, dv->key);
	}
}

static void dl_teardown(struct dl_run *r)
{
	for (int d = 0; d < DL_NDEV; d++)
		rsd_simdev_stream_destroy(r->sd, r->dev[d].stream);
	bench_manager_end(r->m);
	rsd_simdev_destroy(r->sd);
}

/* Whether the bytes of h's copy at `at` are seed's pattern (read through a
 * host lease). */
static bool dl_bytes(struct dl_run *r, struct rsd_handle h, struct rsd_location at, int seed)
{
	const struct rsd_resident *v;
	const unsigned char *p;
	struct rsd_lease *l;
	bool same = true;

	if (rsd_acquire(r->m, &h, 1, at, NULL, &l))
		return false;
	if (!rsd_lease_value(l, h, &v)) {
		p = rsd_resident_data(v, 0);
		for (uint64_t i = 0; i < r->nbytes; i += 4096)
			same &= p[i] == (unsigned char)seed;
	} else {
		same = false;
	}
	rsd_lease_release(l, 0);
	rsd_lease_free(l);
	return same;
}

/* A value of the snapshot: whether its only copies are on cuda:1 with no
 * source (lost when cuda:1 goes). */
static bool dl_device_only(const struct rsd_value_snapshot *v)
{
	if (v->has_source || v->discarded || !v->nmaterializations)
		return false;
	for (size_t k = 0; k < v->nmaterializations; k++)
		if (v->materializations[k].location.kind != RSD_CUDA ||
		    v->materializations[k].location.device != 1)
			return false;
	return true;
}

/* Whether h, which survives, is whole: readable off cuda:1 with its bytes. */
static bool dl_whole(struct dl_run *r, const struct rsd_value_snapshot *v, int seed)
{
	struct rsd_handle h = v->handle;

	if (v->lost)
		return false;
	if (v->has_source)
		return !rsd_ensure(r->m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL);
	if (rsd_ensure(r->m, h, RSD_LOC_PINNED_HOST, NULL, NULL))
		return false;
	return dl_bytes(r, h, RSD_LOC_PINNED_HOST, seed);
}

/* The seed of a value (ciphertext or output), or -1 for a key. */
static int dl_value_seed(const struct dl_run *r, struct rsd_handle h)
{
	for (int d = 0; d < DL_NDEV; d++) {
		for (unsigned i = 0; i < DL_CT; i++)
			if (rsd_handle_equal(r->dev[d].ct[i], h))
				return dl_seed(d, i, false);
		for (unsigned i = 0; i < r->dev[d].nout; i++)
			if (rsd_handle_equal(r->dev[d].out[i], h))
				return dl_seed(d, i, true);
	}
	return -1;
}

/* One run; fills the survivors' figures when it loses cuda:1. */
static bool dl_run_once(struct dl_run *r, double *intact, double *lost, double *expect,
			double *before, double *after)
{
	struct rsd_snapshot *s0 = NULL, *s1 = NULL;
	pthread_t t[DL_NDEV];
	bool ok = true;
	size_t whole = 0, cands = 0, nlost = 0, nexp = 0;

	dl_setup(r);
	for (int d = 0; d < DL_NDEV; d++)
		if (pthread_create(&t[d], NULL, dl_thread, &r->dev[d]))
			bench_fail("pthread_create", -RSD_ENOMEM);
	if (r->lose) {
		while (!atomic_load(&r->half0))
			bench_sleep_ns(100 * 1000);
		atomic_store(&r->pause1, true);
		while (!atomic_load(&r->paused1))
			bench_sleep_ns(100 * 1000);
		CK(rsd_snapshot_take(r->m, &s0));
		CK(rsd_simdev_lose_device(r->sd, 1));
		atomic_store(&r->go1, true);
	}
	for (int d = 0; d < DL_NDEV; d++)
		pthread_join(t[d], NULL);
	if (r->dev[0].err) {
		bench_note("devloss: cuda:0's stage failed: %d", r->dev[0].err);
		ok = false;
	}
	if (r->lose) {
		if (r->dev[1].err != -RSD_EDEVLOST) {
			bench_note("devloss: cuda:1's thread ended with %d, not RSD_EDEVLOST",
				   r->dev[1].err);
			ok = false;
		}
		CK(rsd_snapshot_take(r->m, &s1));
		for (size_t i = 0; i < s0->nvalues; i++) {
			const struct rsd_value_snapshot *v0 = &s0->values[i];
			const struct rsd_value_snapshot *v1 = &s1->values[i];

			/* Registration order: the values since come after. */
			if (!rsd_handle_equal(v0->handle, v1->handle)) {
				bench_note("devloss: the snapshots' values differ at %zu", i);
				ok = false;
				break;
			}
			nexp += dl_device_only(v0);
			/* Survivors only; cuda:0's job may have consumed one since. */
			if (v0->discarded || v1->discarded || dl_device_only(v0) ||
			    (!v0->nmaterializations && !v0->has_source))
				continue;
			cands++;
			whole += dl_whole(r, v1, dl_value_seed(r, v1->handle));
		}
		for (size_t i = 0; i < s1->nvalues; i++)
			nlost += s1->values[i].lost;
		*intact = cands ? 100.0 * (double)whole / (double)cands : 0;
		*lost = (double)nlost;
		*expect = (double)nexp;
		rsd_snapshot_free(s0);
		rsd_snapshot_free(s1);
	}
	*before = (double)(r->nstages / 2) / ((double)(r->dev[0].t_half - r->dev[0].t_start) / 1e9);
	*after = (double)(r->dev[0].stages - r->nstages / 2) /
		 ((double)(r->dev[0].t_end - r->dev[0].t_half) / 1e9);
	dl_teardown(r);
	return ok;
}

static void dl_init(struct dl_run *r, bool lose, bool durable)
{
	memset(r, 0, sizeof(*r));
	r->nstages = QF(40, 120);
	r->kernel_us = 2000;
	r->nbytes = 1u << 20;
	r->lose = lose;
	r->durable = durable;
}

static void case_devloss(void)
{
	double intact = 0, lost = 0, expect = 0, before, after, b2, plain, durable, x;
	struct dl_run r;
	struct bench_fig *f;

	bench_note("devloss: %d devices (link model, time scale 20), %d stages per device of "
		   "1 MiB values and a 2 ms kernel, cuda:1 lost halfway",
		   DL_NDEV, QF(40, 120));
	dl_init(&r, true, false);
	if (!dl_run_once(&r, &intact, &lost, &expect, &before, &after)) {
		bench_skip("devloss", "intact_pct", "a run failed (see the note)");
		return;
	}
	f = bench_fig("devloss", "intact_pct", intact, "%");
	bench_fig_target(f, TGT_MIN, 100);
	f = bench_fig("devloss", "lost_reported", lost, "values");
	bench_fig_base(f, "device-only", expect);
	bench_fig_target(f, TGT_RATIO_MIN, 1.0);
	f = bench_fig("devloss", "lost_extra", lost - expect, "values");
	bench_fig_target(f, TGT_MAX, 0);
	f = bench_fig("devloss", "survivor_tput", after, "stage/s");
	bench_fig_base(f, "before the loss", before);
	bench_fig_target(f, TGT_RATIO_MIN, 0.9);

	dl_init(&r, false, false);
	if (!dl_run_once(&r, &x, &x, &x, &plain, &b2))
		return;
	plain = (double)r.nstages / ((double)(r.dev[0].t_end - r.dev[0].t_start) / 1e9);
	dl_init(&r, false, true);
	if (!dl_run_once(&r, &x, &x, &x, &durable, &b2))
		return;
	durable = (double)r.nstages / ((double)(r.dev[0].t_end - r.dev[0].t_start) / 1e9);
	f = bench_fig("devloss", "durable_tput", durable, "stage/s");
	bench_fig_base(f, "without RSD_DURABLE", plain);
}
