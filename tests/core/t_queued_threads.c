// SPDX-License-Identifier: MIT
/*
 * Not-waiting calls from several threads at once, checked against the
 * sequential model (reference.md §22): each thread owns its values and
 * runs a random mix of waiting and not-waiting ensures and moves, drops,
 * and GPU leases released without waiting, on a simulated device whose
 * work runs in the background. Every result must be the one the thread's
 * own sequential model of its values predicts, except the outcome only
 * queued copies and pending events can cause: RSD_EINUSE for removing a
 * materialization that a copy or a released lease may still use, and then
 * nothing changed. At the end, with the device drained and reaped, every
 * value's placement equals its model and every copy holds its bytes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

#define NTHREADS 3
#define NVALS 4
#define NOPS 400
#define NLOCS 4

static const struct rsd_location LOCS[NLOCS] = {
	{ RSD_PAGEABLE_HOST, -1 },
	{ RSD_PINNED_HOST, -1 },
	{ RSD_CUDA, 0 },
	{ RSD_CUDA, 1 },
};

struct worker {
	struct cfx *f;
	int id;
	unsigned seed;
	struct rsd_handle h[NVALS];
	bool at[NVALS][NLOCS]; /* the model: where each value is resident */
	bool busy[NVALS];      /* a queued copy or released lease may protect it */
	void *stream[2];       /* consumer streams, one per device */
	unsigned einuse, async_ops;
	char fail[1024];
};

static unsigned rnd(struct worker *w)
{
	w->seed = w->seed * 1103515245u + 12345u;
	return (w->seed >> 16) & 0x7fff;
}

static int loc_index(struct rsd_location at)
{
	for (int i = 0; i < NLOCS; i++)
		if (rsd_location_equal(LOCS[i], at))
			return i;
	return -1;
}

/* The least resident location in canonical order, `skip` left out. */
static int min_loc(const struct worker *w, int v, int skip)
{
	for (int i = 0; i < NLOCS; i++)
		if (w->at[v][i] && i != skip)
			return i;
	return -1;
}

static int count(const struct worker *w, int v)
{
	int n = 0;

	for (int i = 0; i < NLOCS; i++)
		n += w->at[v][i];
	return n;
}

#define EXPECT(w, cond, ...)                                                 \
	do {                                                                 \
		if (!(cond) && !(w)->fail[0])                                \
			snprintf((w)->fail, sizeof((w)->fail), __VA_ARGS__); \
	} while (0)

static void op(struct worker *w)
{
	int v = (int)(rnd(w) % NVALS), d = (int)(rnd(w) % NLOCS), kind = (int)(rnd(w) % 6);
	bool async = rnd(w) & 1;
	struct rsd_manager *m = w->f->m;
	int rc;

	switch (kind) {
	case 0:
	case 1: /* ensure */
		rc = async ? rsd_ensure_async(m, w->h[v], LOCS[d], NULL, NULL) :
			     rsd_ensure(m, w->h[v], LOCS[d], NULL, NULL);
		EXPECT(w, rc == 0, "ensure %d -> %d: %d (%s)", v, d, rc, rsd_last_error()->message);
		if (!rc && !w->at[v][d]) {
			w->at[v][d] = true;
			w->busy[v] |= async;
			w->async_ops += async;
		}
		break;
	case 2: { /* move, implicit source */
		int s = min_loc(w, v, d);

		rc = async ? rsd_move_async(m, w->h[v], LOCS[d], NULL, NULL, NULL) :
			     rsd_move(m, w->h[v], LOCS[d], NULL, NULL, NULL);
		if (rc == -RSD_EINUSE && w->busy[v]) {
			w->einuse++;
			break;
		}
		EXPECT(w, rc == 0, "move %d -> %d: %d (%s)", v, d, rc, rsd_last_error()->message);
		if (!rc) {
			w->busy[v] |= async && !w->at[v][d];
			w->async_ops += async && !w->at[v][d];
			w->at[v][d] = true;
			if (s >= 0)
				w->at[v][s] = false;
		}
		break;
	}
	case 3: /* drop */
		rc = rsd_drop(m, w->h[v], LOCS[d], NULL);
		if (rc == -RSD_EINUSE && w->busy[v]) {
			w->einuse++;
			break;
		}
		if (w->at[v][d] && count(w, v) == 1) {
			EXPECT(w, rc == -RSD_EOWNERSHIP, "drop of the last copy of %d: %d", v, rc);
			break;
		}
		EXPECT(w, rc == 0, "drop %d at %d: %d (%s)", v, d, rc, rsd_last_error()->message);
		if (!rc)
			w->at[v][d] = false;
		break;
	case 4: { /* a GPU lease released without waiting */
		int dev = (int)(rnd(w) % 2);
		struct rsd_lease *l;

		rc = rsd_acquire(m, &w->h[v], 1, LOCS[2 + dev], w->stream[dev], &l);
		if (!w->at[v][2 + dev]) {
			EXPECT(w, rc == -RSD_EUNAVAILABLE, "acquire of absent %d: %d", v, rc);
			break;
		}
		EXPECT(w, rc == 0, "acquire %d on cuda:%d: %d (%s)", v, dev, rc,
		       rsd_last_error()->message);
		if (rc)
			break;
		EXPECT(w, rsd_lease_release(l, 0) == 0, "release: %s", rsd_last_error()->message);
		rsd_lease_free(l);
		w->busy[v] = true;
		break;
	}
	case 5: { /* a host lease: waits for a queued copy there */
		struct rsd_lease *l;
		int at = (int)(rnd(w) % 2);

		rc = rsd_acquire(m, &w->h[v], 1, LOCS[at], NULL, &l);
		if (!w->at[v][at]) {
			EXPECT(w, rc == -RSD_EUNAVAILABLE, "acquire of absent %d: %d", v, rc);
			break;
		}
		EXPECT(w, rc == 0, "host acquire %d: %d (%s)", v, rc, rsd_last_error()->message);
		if (!rc) {
			rsd_lease_release(l, 0);
			rsd_lease_free(l);
		}
		break;
	}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < NOPS && !w->fail[0]; i++)
		op(w);
	return NULL;
}

static void check_bytes(struct cfx *f, struct rsd_handle h, struct rsd_location at, int seed,
			struct worker *w)
{
	const struct rsd_resident *r;
	struct rsd_lease *l;
	void *stream = NULL;
	const unsigned char *b;

	if (at.kind == RSD_CUDA)
		stream = rsd_simdev_ops()->default_stream(f->sd, at.device);
	OK(rsd_acquire(f->m, &h, 1, at, stream, &l));
	OK(rsd_lease_value(l, h, &r));
	b = rsd_resident_data(r, 0);
	for (uint64_t i = 0; i < rsd_resident_buffer_nbytes(r, 0); i++)
		EXPECT(w, b[i] == (unsigned char)seed, "value %llu at %s: byte %llu is %d, not %d",
		       (unsigned long long)h.id, cfx_name(at), (unsigned long long)i, b[i],
		       (unsigned char)seed);
	OK(rsd_lease_release(l, at.kind == RSD_CUDA ? RSD_RELEASE_WAIT : 0));
	rsd_lease_free(l);
}

ATF_TC_WITHOUT_HEAD(threads_match_the_model);
ATF_TC_BODY(threads_match_the_model, tc)
{
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	unsigned einuse = 0, async_ops = 0;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	for (int t = 0; t < NTHREADS; t++) {
		memset(&w[t], 0, sizeof(w[t]));
		w[t].f = &f;
		w[t].id = t;
		w[t].seed = 7919u * (unsigned)(t + 1);
		for (int d = 0; d < 2; d++)
			ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, d, &w[t].stream[d]), 0);
		for (int v = 0; v < NVALS; v++) {
			const struct rsd_resident *r;
			struct rsd_lease *l;

			w[t].h[v] = cfx_adopt(&f, PINNED, 4096, RSD_REPLICABLE);
			OK(rsd_acquire(f.m, &w[t].h[v], 1, PINNED, NULL, &l));
			OK(rsd_lease_value(l, w[t].h[v], &r));
			memset(rsd_resident_data(r, 0), 16 * t + v + 1, 4096);
			OK(rsd_lease_release(l, 0));
			rsd_lease_free(l);
			w[t].at[v][1] = true;
		}
	}
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 20000);
	for (int t = 0; t < NTHREADS; t++)
		ATF_REQUIRE_EQ(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	for (int t = 0; t < NTHREADS; t++) {
		ATF_CHECK_MSG(!w[t].fail[0], "thread %d: %s", t, w[t].fail);
		einuse += w[t].einuse;
		async_ops += w[t].async_ops;
		for (int v = 0; v < NVALS; v++) {
			struct rsd_location got[NLOCS];
			size_t n = cfx_mats(&f, w[t].h[v], got, NLOCS);
			bool seen[NLOCS] = { false };

			for (size_t k = 0; k < n; k++)
				seen[loc_index(got[k])] = true;
			for (int i = 0; i < NLOCS; i++) {
				ATF_CHECK_EQ_MSG(seen[i], w[t].at[v][i],
						 "thread %d value %d at %s: %d, model %d", t, v,
						 cfx_name(LOCS[i]), seen[i], w[t].at[v][i]);
				if (seen[i])
					check_bytes(&f, w[t].h[v], LOCS[i], 16 * t + v + 1, &w[t]);
			}
			ATF_CHECK_MSG(!w[t].fail[0], "thread %d: %s", t, w[t].fail);
		}
	}
	/* The mix must have exercised what it is for. */
	ATF_CHECK_MSG(async_ops > 20, "only %u not-waiting copies", async_ops);
	printf("not-waiting copies %u, RSD_EINUSE while protected %u\n", async_ops, einuse);
	for (int t = 0; t < NTHREADS; t++)
		for (int d = 0; d < 2; d++)
			rsd_simdev_stream_destroy(f.sd, w[t].stream[d]);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, threads_match_the_model);
	return 0;
}
