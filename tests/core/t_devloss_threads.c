// SPDX-License-Identifier: MIT
/*
 * A device lost in the middle of work from several threads (reference.md,
 * "When a device fails"). Two simulated devices run in the background;
 * each worker owns values of four kinds and runs a random mix of waiting
 * and not-waiting ensures, moves between the devices, drops, and GPU
 * leases released without waiting, while the main thread loses cuda:1.
 *
 *  - host: a pinned copy that stays (the other copy of every device copy);
 *  - sourced: a source rebuilds it;
 *  - durable: adopted with RSD_DURABLE, moved between devices;
 *  - device: its only copy moves between cuda:0 and cuda:1.
 *
 * A failure is legitimate only where the same call run alone at that
 * moment fails too: RSD_EDEVLOST from a call that names cuda:1 or touches a
 * value that may have been there (durable and device values), ending after
 * the loss began, or from a copy of a sourced value off cuda:1 whose
 * driver op met the loss (the first call to meet it returns it); RSD_EINUSE from a drop or a move whose copy a queued copy
 * or a released lease may still use. Everything else must succeed. At the
 * end, with the device drained: nothing is charged or counted at cuda:1;
 * host, sourced and durable values all survive with their bytes; a device
 * value is lost exactly when it has no copy, and the snapshot's lost flags
 * count those; close(0) closes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

#define NTHREADS 3
#define NOPS 300

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA1 = { RSD_CUDA, 1 };

enum kind {
	HOST,
	SOURCED,
	DURABLE,
	DEVICE,
	NKINDS
};

struct worker {
	struct cfx *f;
	int id;
	unsigned seed;
	struct rsd_handle h[NKINDS];
	struct rsd_handle probe; /* never placed on a device */
	struct csrc src;
	void *stream[2]; /* consumer streams, one per device */
	/* A not-waiting call queued a copy of the value to or from cuda:1:
	 * its failure is the value's next call's result, once (§22). */
	bool queued1[NKINDS];
	unsigned ops, devlost, einuse;
	char fail[640];
};

static atomic_bool loss_begun;
static atomic_uint calls_made;

static unsigned rnd(struct worker *w)
{
	w->seed = w->seed * 1103515245u + 12345u;
	return (w->seed >> 16) & 0x7fff;
}

static void note(struct worker *w, const char *what, int rc)
{
	if (!w->fail[0])
		snprintf(w->fail, sizeof(w->fail), "thread %d: %s returned %d: %.500s", w->id, what,
			 rc, rsd_last_error()->message);
}

/*
 * Whether rc is legitimate for a call on kind k that names cuda:1 (at1) or
 * removes a copy (removes). Read loss_begun after the call returned.
 */
static void judge(struct worker *w, const char *what, int rc, enum kind k, bool at1, bool removes)
{
	bool begun = atomic_load(&loss_begun);

	w->ops++;
	atomic_fetch_add(&calls_made, 1);
	if (!rc)
		return;
	if (rc == -RSD_EDEVLOST && begun && (at1 || k == DURABLE || k == DEVICE)) {
		w->devlost++;
		return;
	}
	if (rc == -RSD_EDEVLOST && begun && w->queued1[k] &&
	    strstr(rsd_last_error()->message, "a queued copy of value")) {
		w->queued1[k] = false;
		w->devlost++;
		return;
	}
	/* A sourced value whose only copy was at cuda:1: the call that
	 * copies from it meets the loss in the driver and returns it, as it
	 * would alone (§23.1); its source loads it again at the next one. */
	if (rc == -RSD_EDEVLOST && begun && k == SOURCED &&
	    strstr(rsd_last_error()->message, "cuda:1, which was lost")) {
		w->devlost++;
		return;
	}
	if (rc == -RSD_EINUSE && removes) {
		w->einuse++;
		return;
	}
	note(w, what, rc);
}

static struct rsd_location dev(unsigned r)
{
	return r & 1 ? CUDA1 : CUDA0;
}

static void one_op(struct worker *w)
{
	struct rsd_manager *m = w->f->m;
	enum kind k = (enum kind)(rnd(w) % NKINDS);
	struct rsd_handle h = w->h[k];
	unsigned r = rnd(w);
	struct rsd_location at = dev(r >> 4);
	bool at1 = at.device == 1;
	struct rsd_lease *l;
	int rc;

	switch (r % 5) {
	case 0:
		/* The host value's pinned copy stays: copies only. */
		rc = rsd_ensure(m, h, at, NULL, NULL);
		judge(w, "ensure", rc, k, at1, false);
		break;
	case 1:
		rc = rsd_ensure_async(m, h, at, NULL, NULL);
		judge(w, "ensure_async", rc, k, at1, false);
		/* To cuda:1, or from it: a sourced value's only copy may
		 * be there (§23.2: both fail with the device). */
		w->queued1[k] |= !rc && (at1 || k == SOURCED);
		break;
	case 2:
		/* Durable and device values move between the devices. */
		if (k != DURABLE && k != DEVICE)
			return;
		rc = (r & 32) ? rsd_move_async(m, h, at, NULL, NULL, NULL) :
				rsd_move(m, h, at, NULL, NULL, NULL);
		judge(w, "move", rc, k, true, true);
		break;
	case 3:
		/* Drop a device copy of a value that keeps another. */
		if (k == DEVICE)
			return;
		rc = rsd_drop(m, h, at, NULL);
		judge(w, "drop", rc, k, at1, true);
		break;
	default:
		rc = rsd_acquire(m, &h, 1, at, w->stream[at.device], &l);
		/* Not resident there: nothing to lease. */
		if (rc == -RSD_EUNAVAILABLE)
			return;
		judge(w, "acquire", rc, k, at1, false);
		if (rc)
			return;
		rc = rsd_lease_release(l, 0);
		rsd_lease_free(l);
		judge(w, "release", rc, k, at1, false);
		break;
	}
}

static void *run(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < NOPS && !w->fail[0]; i++)
		one_op(w);
	return NULL;
}

static void setup_worker(struct cfx *f, struct worker *w, int id)
{
	struct rsd_resident *r;

	memset(w, 0, sizeof(*w));
	w->f = f;
	w->id = id;
	w->seed = 7919u * (unsigned)(id + 1);
	w->h[HOST] = cfx_adopt(f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(f, w->h[HOST], PINNED, 0x10 + id);
	w->h[SOURCED] = cfx_sourced(f, &w->src, PAGEABLE);
	r = cfx_alloc(f, PINNED, N);
	OK(rsd_adopt(f->m, r, &PINNED, (enum rsd_replica_mode)(RSD_REPLICABLE | RSD_DURABLE),
		     &w->h[DURABLE]));
	cfx_fill(f, w->h[DURABLE], PINNED, 0x20 + id);
	OK(rsd_move(f->m, w->h[DURABLE], CUDA1, NULL, NULL, NULL));
	w->probe = cfx_adopt(f, PINNED, N, RSD_REPLICABLE);
	w->h[DEVICE] = cfx_adopt(f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(f, w->h[DEVICE], PINNED, 0x30 + id);
	OK(rsd_move(f->m, w->h[DEVICE], CUDA1, NULL, NULL, NULL));
	for (int d = 0; d < 2; d++)
		ATF_REQUIRE_EQ(rsd_simdev_stream_create(f->sd, d, &w->stream[d]), 0);
}

/*
 * A failed queued copy of h to cuda:1 that no call has reported yet (the
 * reaps above report one each) is reported once, to h's next call
 * (reference.md §23.2): take that report with an ensure where h is
 * resident, which is otherwise a no-op.
 */
static void take_copy_report(struct cfx *f, struct rsd_handle h, struct rsd_location at)
{
	int rc = rsd_ensure(f->m, h, at, NULL, NULL);

	if (rc == -RSD_EDEVLOST && strstr(rsd_last_error()->message, "a queued copy"))
		rc = rsd_ensure(f->m, h, at, NULL, NULL);
	ATF_CHECK_EQ_MSG(rc, 0, "ensure of value %llu where it is resident: %s",
			 (unsigned long long)h.id, rsd_last_error()->message);
}

ATF_TC(lost_under_load);
ATF_TC_HEAD(lost_under_load, tc)
{
	atf_tc_set_md_var(tc, "timeout", "120");
}
ATF_TC_BODY(lost_under_load, tc)
{
	const struct timespec pause = { 0, 100 * 1000 };
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct rsd_snapshot *snap;
	unsigned lost = 0, devlost = 0, ops = 0;
	struct cfx f;
	int rc;

	cfx_sim(&f, NULL, 0, 2);
	for (int i = 0; i < NTHREADS; i++)
		setup_worker(&f, &w[i], i);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 0);
	atomic_store(&loss_begun, false);
	atomic_store(&calls_made, 0);
	for (int i = 0; i < NTHREADS; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, run, &w[i]), 0);
	/* Halfway through the workers' calls. */
	while (atomic_load(&calls_made) < NTHREADS * NOPS / 2 && !w[0].fail[0])
		nanosleep(&pause, NULL);
	atomic_store(&loss_begun, true);
	OK(rsd_simdev_lose_device(f.sd, 1));
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NTHREADS; i++) {
		ATF_CHECK_MSG(!w[i].fail[0], "%s", w[i].fail);
		devlost += w[i].devlost;
		ops += w[i].ops;
	}
	printf("%u calls, %u failed with RSD_EDEVLOST\n", ops, devlost);

	/* Drain: the sound device's work ends (the consumer streams' and the
	 * copies' still queued there), the lost one's is settled; a queued
	 * copy's failure is reported once, one value's to each reap. */
	rsd_simdev_complete_all(f.sd);
	rc = rsd_ensure(f.m, w[0].probe, CUDA1, NULL, NULL);
	ATF_CHECK_EQ(rc, -RSD_EDEVLOST);
	for (int i = 0; i < NTHREADS * (NKINDS + 1) && (rc = rsd_manager_reap(f.m)); i++)
		ATF_CHECK_EQ_MSG(rc, -RSD_EDEVLOST, "reap: %s", rsd_last_error()->message);
	OK(rsd_manager_reap(f.m));

	snap = cfx_snap(&f);
	ATF_CHECK(cfx_loc(snap, CUDA1)->failed);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->value_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->pending_event_count, 0);
	for (size_t i = 0; i < snap->nvalues; i++)
		lost += snap->values[i].lost;
	for (int i = 0; i < NTHREADS; i++) {
		const struct rsd_value_snapshot *dv = cfx_val(snap, w[i].h[DEVICE]);

		ATF_CHECK(!cfx_val(snap, w[i].h[HOST])->lost);
		ATF_CHECK(!cfx_val(snap, w[i].h[SOURCED])->lost);
		ATF_CHECK(!cfx_val(snap, w[i].h[DURABLE])->lost);
		/* A device value is lost exactly when it has no copy left. */
		ATF_CHECK_EQ(dv->lost, dv->nmaterializations == 0);
		lost -= dv->lost;
	}
	ATF_CHECK_EQ_MSG(lost, 0, "%u lost values that are not device values", lost);
	rsd_snapshot_free(snap);

	for (int i = 0; i < NTHREADS; i++) {
		take_copy_report(&f, w[i].h[HOST], PINNED);
		ATF_CHECK(cfx_has_pattern(&f, w[i].h[HOST], PINNED, 0x10 + i));
		take_copy_report(&f, w[i].h[DURABLE], PINNED);
		ATF_CHECK(cfx_has_pattern(&f, w[i].h[DURABLE], PINNED, 0x20 + i));
		if (cfx_resident(&f, w[i].h[DEVICE], CUDA0)) {
			take_copy_report(&f, w[i].h[DEVICE], CUDA0);
			ATF_CHECK(cfx_has_pattern(&f, w[i].h[DEVICE], CUDA0, 0x30 + i));
		}
		/* Its earlier queued copy's failure may be reported now, once. */
		rc = rsd_ensure(f.m, w[i].h[SOURCED], CUDA0, NULL, NULL);
		if (rc == -RSD_EDEVLOST && strstr(rsd_last_error()->message, "a queued copy"))
			rc = rsd_ensure(f.m, w[i].h[SOURCED], CUDA0, NULL, NULL);
		ATF_CHECK_EQ_MSG(rc, 0, "ensure: %s", rsd_last_error()->message);
		for (int d = 0; d < 2; d++)
			rsd_simdev_stream_destroy(f.sd, w[i].stream[d]);
	}
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, lost_under_load);
	return atf_no_error();
}
