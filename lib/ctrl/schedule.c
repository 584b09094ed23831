// SPDX-License-Identifier: MIT
/*
 * The declared schedule (Documentation/controller.md, "The next-use
 * policy"): the steps a job will run, each the set of handles it uses. The
 * controller keeps, per handle, the ascending list of steps naming it (in
 * its metadata record, so a candidate's next use is a binary search away)
 * and a position, the step it expects next. Only a successful use moves
 * the position, as only a successful use advances the access epoch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/image.h"
#include "ctrl.h"

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void sched_clear(struct rsd__sched *s)
{
	free(s->off);
	free(s->ids);
	memset(s, 0, sizeof(*s));
}

void rsd__sched_fini(struct rsd_controller *c)
{
	sched_clear(&c->sched);
}

/* Every handle of every step is well formed and a live value of c's manager. */
static int check_steps(struct rsd_controller *c, const struct rsd_schedule_step *steps,
		       size_t nsteps, size_t *total)
{
	const struct rsd_image *img;
	char what[64];
	long idx;
	int err = 0;

	*total = 0;
	if (nsteps && !steps)
		return rsd__err(RSD_ETYPE, "schedule: NULL array of %zu steps", nsteps);
	if (nsteps >= UINT32_MAX)
		return rsd__err(RSD_EINVAL, "schedule: %zu steps are too many", nsteps);
	for (size_t i = 0; i < nsteps; i++) {
		if (!steps[i].nhandles)
			return rsd__err(RSD_EINVAL, "schedule step %zu names no handle", i);
		if (!steps[i].handles)
			return rsd__err(RSD_ETYPE, "schedule step %zu: NULL array of %zu handles",
					i, steps[i].nhandles);
		for (size_t k = 0; k < steps[i].nhandles; k++) {
			snprintf(what, sizeof(what), "schedule step %zu, handle %zu", i, k);
			err = rsd__handle_check(steps[i].handles[k], what);
			if (err)
				return err;
		}
		if (*total + steps[i].nhandles >= UINT32_MAX)
			return rsd__err(RSD_EINVAL, "schedule: more than %u handles in all",
					UINT32_MAX - 1);
		*total += steps[i].nhandles;
	}
	err = rsd__read_fresh(c->m);
	if (err)
		return err;
	img = rsd__read_begin(c->m);
	if (img->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)c->manager_id);
	for (size_t i = 0; i < nsteps && !err; i++)
		for (size_t k = 0; k < steps[i].nhandles && !err; k++) {
			err = rsd__img_resolve(img, c->manager_id, steps[i].handles[k], &idx);
			if (err) {
				/* keep the code, say where the handle is */
				struct rsd_error *e = rsd__err_record();
				char msg[sizeof(e->message)];

				snprintf(msg, sizeof(msg), "schedule step %zu: %.480s", i,
					 e->message);
				rsd__err(-err, "%s", msg);
			}
		}
	rsd__read_end();
	return err;
}

/* The new schedule's step sets: sorted, duplicates removed. */
static int build_steps(const struct rsd_schedule_step *steps, size_t nsteps, size_t total,
		       struct rsd__sched *s, uint32_t *ntotal)
{
	uint32_t n = 0;

	s->off = rsd__malloc((nsteps + 1) * sizeof(*s->off));
	s->ids = rsd__malloc((total ? total : 1) * sizeof(*s->ids));
	if (!s->off || !s->ids)
		return rsd__err(RSD_ENOMEM, "out of memory copying a schedule of %zu steps",
				nsteps);
	for (size_t i = 0; i < nsteps; i++) {
		uint64_t *ids = s->ids + n;
		uint32_t m = 0;

		s->off[i] = n;
		for (size_t k = 0; k < steps[i].nhandles; k++)
			ids[k] = steps[i].handles[k].id;
		qsort(ids, steps[i].nhandles, sizeof(*ids), id_cmp);
		for (size_t k = 0; k < steps[i].nhandles; k++)
			if (!m || ids[m - 1] != ids[k])
				ids[m++] = ids[k];
		n += m;
	}
	s->off[nsteps] = n;
	s->nsteps = (uint32_t)nsteps;
	*ntotal = n;
	return 0;
}

struct use_pair {
	uint64_t id;
	uint32_t step;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct use_pair *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

/*
 * Each handle's ascending step list, from the (id, step) pairs sorted. All
 * allocation happens before the commit: records created on the way hold
 * defaults, which mean what no record means, so a failure part way leaves
 * nothing observable. Record pointers are looked up only at the commit,
 * since creating records may move the table.
 */
static int build_uses(struct rsd_controller *c, const struct rsd__sched *s, uint32_t total)
{
	uint32_t ndistinct = 0, k = 0;
	struct use_pair *pairs = rsd__malloc((total ? total : 1) * sizeof(*pairs));
	uint32_t **lists = NULL, *len = NULL;
	int err = 0;

	if (!pairs)
		goto nomem;
	for (uint32_t i = 0; i < s->nsteps; i++)
		for (uint32_t j = s->off[i]; j < s->off[i + 1]; j++)
			pairs[k++] = (struct use_pair){ s->ids[j], i };
	qsort(pairs, total, sizeof(*pairs), pair_cmp);
	for (uint32_t j = 0; j < total; j++)
		ndistinct += !j || pairs[j].id != pairs[j - 1].id;
	lists = rsd__calloc(ndistinct ? ndistinct : 1, sizeof(*lists));
	len = rsd__calloc(ndistinct ? ndistinct : 1, sizeof(*len));
	if (!lists || !len)
		goto nomem;
	for (uint32_t j = 0, d = 0; j < total; d++) {
		uint32_t e = j;

		while (e < total && pairs[e].id == pairs[j].id)
			e++;
		lists[d] = rsd__malloc((e - j) * sizeof(*lists[d]));
		if (!lists[d] || !rsd__meta_get(c, pairs[j].id))
			goto nomem;
		for (len[d] = 0; j < e; j++)
			lists[d][len[d]++] = pairs[j].step;
	}
	/* Commit: drop every old list, then hand out the new ones. */
	for (size_t i = 0; i < c->meta_cap; i++) {
		free(c->meta[i].uses);
		c->meta[i].uses = NULL;
		c->meta[i].nuses = 0;
	}
	for (uint32_t j = 0, d = 0; j < total; d++) {
		struct rsd__meta *m = rsd__meta_find(c, pairs[j].id);

		m->uses = lists[d];
		m->nuses = len[d];
		lists[d] = NULL;
		while (j < total && pairs[j].id == m->id)
			j++;
	}
	goto out;
nomem:
	err = rsd__err(RSD_ENOMEM, "out of memory indexing a schedule of %u steps", s->nsteps);
out:
	for (uint32_t d = 0; lists && d < ndistinct; d++)
		free(lists[d]);
	free(lists);
	free(len);
	free(pairs);
	return err;
}

int rsd_controller_set_schedule(struct rsd_controller *c, const struct rsd_schedule_step *steps,
				size_t nsteps, bool cyclic)
{
	struct rsd__sched s = { 0 };
	uint32_t ntotal = 0;
	size_t total;
	int err;

	if (!c)
		return rsd__err(RSD_ETYPE, "rsd_controller_set_schedule: controller is NULL");
	pthread_mutex_lock(&c->lock);
	err = check_steps(c, steps, nsteps, &total);
	if (!err)
		err = build_steps(steps, nsteps, total, &s, &ntotal);
	if (!err)
		err = build_uses(c, &s, ntotal);
	if (err) {
		sched_clear(&s);
		goto out;
	}
	sched_clear(&c->sched);
	c->sched = s;
	c->sched.cyclic = cyclic && nsteps;
	c->sched.pos = 0;
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

int rsd_controller_schedule_position(struct rsd_controller *c, uint64_t *out)
{
	int err = 0;

	if (!c || !out)
		return rsd__err(RSD_ETYPE, "rsd_controller_schedule_position: NULL %s",
				c ? "out" : "controller");
	pthread_mutex_lock(&c->lock);
	if (!c->sched.nsteps)
		err = rsd__err(RSD_ENOTFOUND, "no schedule is declared on this controller");
	else
		*out = c->sched.pos;
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* Is the set of r's distinct handle ids exactly step i's set? */
static bool step_matches(const struct rsd__sched *s, uint32_t i, const struct rsd_request *r)
{
	const uint64_t *ids = s->ids + s->off[i];
	uint32_t n = s->off[i + 1] - s->off[i], distinct = 0;

	for (size_t q = 0; q < r->nrequirements; q++) {
		uint64_t id = r->requirements[q].handle.id;
		bool seen = false;

		for (size_t p = 0; p < q && !seen; p++)
			seen = r->requirements[p].handle.id == id;
		if (seen)
			continue;
		if (!bsearch(&id, ids, n, sizeof(*ids), id_cmp))
			return false;
		distinct++;
	}
	return distinct == n;
}

/*
 * Only steps naming the request's first handle can match: walk that
 * handle's step list from the position on (wrapping once when cyclic),
 * which visits candidate steps in the order a scan of every step would,
 * at the cost of the handle's uses instead of the schedule's length.
 */
bool rsd__sched_locate(struct rsd_controller *c, const struct rsd_request *r, uint32_t *pos)
{
	const struct rsd__sched *s = &c->sched;
	const struct rsd__meta *md = rsd__meta_find(c, r->requirements[0].handle.id);
	uint32_t lo = 0, hi;

	*pos = s->pos;
	if (!md || !md->nuses)
		return false;
	for (hi = md->nuses; lo < hi;) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (md->uses[mid] < s->pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t k = 0; k < md->nuses; k++) {
		uint32_t j = lo + k;

		if (j >= md->nuses) {
			if (!s->cyclic)
				break;
			j -= md->nuses;
		}
		if (step_matches(s, md->uses[j], r)) {
			*pos = md->uses[j];
			return true;
		}
	}
	return false;
}

void rsd__sched_advance(struct rsd_controller *c, const struct rsd_request *r)
{
	struct rsd__sched *s = &c->sched;
	uint32_t i;

	if (!s->nsteps || !rsd__sched_locate(c, r, &i))
		return;
	s->pos = s->cyclic ? (i + 1) % s->nsteps : i + 1;
}

bool rsd__sched_next_use(const struct rsd_controller *c, const struct rsd__meta *md, uint32_t pos,
			 uint64_t *d)
{
	const struct rsd__sched *s = &c->sched;
	uint32_t lo = 0, hi;

	if (!md || !md->nuses)
		return false;
	/* first use at or after pos */
	for (hi = md->nuses; lo < hi;) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (md->uses[mid] < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < md->nuses) {
		*d = md->uses[lo] - pos;
		return true;
	}
	if (!s->cyclic)
		return false;
	*d = (uint64_t)md->uses[0] + s->nsteps - pos;
	return true;
}
