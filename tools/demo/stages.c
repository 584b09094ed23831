// SPDX-License-Identifier: MIT
/*
 * rsd-demo's stages. Each asks the controller for two ciphertexts, a key and
 * a weight block on the device plus a workspace, queues its kernel on the
 * consumer stream and closes its use: the use's leases stay pending until
 * the kernel has run. On the simulated device the kernel computes for
 * o->kernel_ns on the device's compute engine, declares the values it reads
 * (the simulator aborts when a copy still writing them is not ordered before
 * it) and, when it ends, checks each value's bytes against what the value
 * holds; on a GPU there is no kernel (the demo launches none), only the
 * stream.
 *
 * Waiting (--no-prefetch), stage s + 1's rsd_controller_use() returns once
 * its copies are done. Prefetching, rsd_controller_use_async() returns once
 * they are queued: they run beside kernel s, and kernel s + 1, queued on the
 * consumer stream after the copies' waits, starts when its bytes are there.
 * Kernel s goes on the stream before stage s + 1's use, or it would wait
 * behind stage s + 1's copies. Either way the host waits for kernel s - 1
 * before deciding stage s + 1: the device must hold stage s's values (its
 * kernel may still read them) and stage s + 1's, and not s - 1's too. When
 * it cannot hold two stages, the decision is infeasible while kernel s runs:
 * the host waits for kernel s too, and decides again.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload.h"

/* One stage's kernel: the device bytes of its values and what they must
 * hold. */
struct kernel {
	const unsigned char *p[DEMO_NSTAGE_VALUES];
	uint64_t n[DEMO_NSTAGE_VALUES], want[DEMO_NSTAGE_VALUES];
	atomic_int wrong; /* values read wrong; -1 until the kernel ran */
};

struct stage {
	struct rsd_use *u;
	void *done; /* recorded after the kernel and the use's leases */
	struct kernel k;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void kernel(void *arg)
{
	struct kernel *k = arg;
	int wrong = 0;

	for (int i = 0; i < DEMO_NSTAGE_VALUES; i++)
		wrong += demo_window_sum(k->p[i], k->n[i]) != k->want[i];
	atomic_store(&k->wrong, wrong);
}

/* What value v of demo_stage_values() must hold. */
static uint64_t expected(const struct demo *dm, uint32_t v)
{
	const struct demo_opts *o = dm->o;

	if (v < o->ciphertexts)
		return dm->ct_sum[v];
	if (v < o->ciphertexts + o->keys)
		return dm->key_sum[v - o->ciphertexts];
	return dm->w_sum[v - o->ciphertexts - o->keys];
}

/* Queue stage s's kernel on the consumer stream (simulated device only). */
static int queue_kernel(struct demo *dm, struct stage *st, unsigned s)
{
	struct rsd_simdev_access reads[DEMO_NSTAGE_VALUES] = { { 0 } };
	struct rsd_requirement req[DEMO_NSTAGE_VALUES];
	uint32_t idx[DEMO_NSTAGE_VALUES];
	struct kernel *k = &st->k;
	int err;

	atomic_init(&k->wrong, -1);
	if (!dm->sd)
		return 0;
	demo_stage_handles(dm, s, req);
	demo_stage_values(dm->o, s, idx);
	for (int i = 0; i < DEMO_NSTAGE_VALUES; i++) {
		const struct rsd_resident *v;

		err = rsd_use_value(st->u, req[i].handle, dm->dev, &v);
		if (err)
			return err;
		k->p[i] = rsd_resident_data(v, 0);
		k->n[i] = rsd_resident_buffer_nbytes(v, 0);
		k->want[i] = expected(dm, idx[i]);
		reads[i] = (struct rsd_simdev_access){ .ptr = (void *)k->p[i], .nbytes = k->n[i] };
	}
	return rsd_simdev_launch_kernel(dm->sd, dm->stream, dm->o->kernel_ns, reads,
					DEMO_NSTAGE_VALUES, kernel, k);
}

/* Stage s's use: decided, entered and leased; its copies waited for, or
 * only queued when prefetching. */
static int stage_use(struct demo *dm, struct stage *st, unsigned s)
{
	const struct demo_opts *o = dm->o;
	struct rsd_requirement req[DEMO_NSTAGE_VALUES];
	struct rsd_reservation_spec ws = { dm->dev, o->workspace, "workspace" };
	char name[32];
	struct rsd_request request = { name, req, DEMO_NSTAGE_VALUES, &ws, 1 };
	void **cs = dm->stream ? &dm->stream : NULL;
	size_t ncs = dm->stream ? 1 : 0;
	int err;

	demo_stage_handles(dm, s, req);
	snprintf(name, sizeof(name), "stage-%u", s);
	/* A kernel finishing between the decision and the scope's entry (its
	 * leases reaped) makes the decision stale: on an asynchronous device
	 * that is normal, so decide again. */
	for (int tries = 0;; tries++) {
		err = o->prefetch ?
			      rsd_controller_use_async(dm->c, &request, cs, ncs, NULL, 0, &st->u) :
			      rsd_controller_use(dm->c, &request, cs, ncs, NULL, 0, &st->u);
		if (err != -RSD_ESTALE || tries == 8)
			break;
	}
	return err;
}

/* Stage s's kernel is queued: close its use (the row's figures) and mark
 * the stream after it. */
static int stage_close(struct demo *dm, struct stage *st, struct row *row)
{
	struct rsd_plan_report *rep = NULL;
	int err;

	err = rsd_use_close(st->u, &rep);
	demo_account(dm, row, PH_STAGE, rsd_use_decision(st->u), rep, NULL, 0);
	rsd_plan_report_free(rep);
	rsd_use_free(st->u);
	st->u = NULL;
	if (!err && dm->stream)
		err = dm->ops->event_record(dm->sd, dm->stream, &st->done);
	return err;
}

/* Before deciding stage s + 1: kernel s - 1 has run and its leases are
 * reaped, so its values may go. */
static int stage_room(struct demo *dm, struct stage *prev)
{
	int err = 0;

	if (prev && prev->done) {
		err = dm->ops->event_sync(dm->sd, prev->done);
		dm->ops->event_destroy(dm->sd, prev->done);
		prev->done = NULL;
	}
	return err ? err : rsd_manager_reap(dm->m);
}

static int stage_step(struct demo *dm, struct stage *st, unsigned s, struct row *row,
		      const char **what)
{
	const struct demo_opts *o = dm->o;
	int err;

	*what = "stage";
	err = queue_kernel(dm, &st[s], s);
	if (!err)
		err = stage_close(dm, &st[s], row);
	if (!err && dm->ring && o->share) {
		*what = "exchange";
		err = demo_exchange(dm, s, row);
	}
	if (err || s + 1 == o->stages)
		return err;
	*what = "stage";
	err = stage_room(dm, s ? &st[s - 1] : NULL);
	if (!err)
		err = stage_use(dm, &st[s + 1], s + 1);
	/* A device too small for two stages: stage s + 1 fits only once
	 * kernel s no longer protects its values. */
	if (err == -RSD_EPLAN && st[s].done) {
		dm->room_waits++;
		err = stage_room(dm, &st[s]);
		if (!err)
			err = stage_use(dm, &st[s + 1], s + 1);
	}
	return err;
}

int demo_stages(struct demo *dm, struct table *tab)
{
	const struct demo_opts *o = dm->o;
	struct stage *st = calloc(o->stages ? o->stages : 1, sizeof(*st));
	const char *what = "stage";
	uint64_t t0 = now_ns();
	unsigned s = 0;
	int err = -RSD_ENOMEM, sync;

	if (st)
		err = o->stages ? stage_use(dm, &st[0], 0) : 0;
	for (; !err && s < o->stages; s++) {
		struct row row = { 0 };

		err = stage_step(dm, st, s, &row, &what);
		if (err)
			break;
		row.peak = demo_device_peak(dm->m, dm->dev);
		demo_table_add(tab, &row);
		if (dm->progress && s % 10 == 9)
			fprintf(stderr, "\rrsd-demo: %s: stage %u/%u", demo_policy_name[dm->pol],
				s + 1, o->stages);
	}
	if (dm->progress)
		fprintf(stderr, "\n");
	if (err)
		fprintf(stderr, "rsd-demo: %s-%u: %s\n", what, s, rsd_last_error()->message);
	/* The kernels read st[]: they must have run before it goes. */
	sync = dm->stream ? dm->ops->stream_sync(dm->sd, dm->stream) : 0;
	dm->stages_ns = now_ns() - t0;
	if (!err && sync) {
		fprintf(stderr, "rsd-demo: waiting for the last kernel: %s\n",
			rsd_last_error()->message);
		err = sync;
	}
	for (unsigned i = 0; st && i < o->stages; i++) {
		int wrong = atomic_load(&st[i].k.wrong);

		if (st[i].u) {
			rsd_use_close(st[i].u, NULL);
			rsd_use_free(st[i].u);
		}
		if (st[i].done)
			dm->ops->event_destroy(dm->sd, st[i].done);
		/* A kernel that never ran read nothing right. */
		if (dm->sd && !err) {
			dm->kernel_reads += DEMO_NSTAGE_VALUES;
			dm->kernel_faults += wrong < 0 ? DEMO_NSTAGE_VALUES : (unsigned)wrong;
		}
	}
	free(st);
	return err ? -1 : 0;
}
