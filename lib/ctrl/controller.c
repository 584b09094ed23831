// SPDX-License-Identifier: MIT
/*
 * The residency controller (reference.md §12.4-12.7, §13.5): optional
 * automation over one manager, built on the public API plus the core's
 * read side (lib/core/image.h). It keeps policy metadata and access epochs, and
 * decides when asked: decide reads one published image in place (an RCU
 * read section, no snapshot copy), searches, and simulates the plan on
 * that same image to confirm it. It never calls a source and never
 * executes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/image.h"
#include "ctrl.h"

#define DEFAULT_LIMIT 100000

/* ---- the metadata / epoch table ---- */

static size_t meta_slot(uint64_t id, size_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)id & (cap - 1);
}

struct rsd__meta *rsd__meta_find(struct rsd_controller *c, uint64_t id)
{
	if (!c->meta_n || !id)
		return NULL;
	for (size_t i = meta_slot(id, c->meta_cap);; i = (i + 1) & (c->meta_cap - 1)) {
		if (c->meta[i].id == id)
			return &c->meta[i];
		if (!c->meta[i].id)
			return NULL;
	}
}

struct rsd__meta *rsd__meta_get(struct rsd_controller *c, uint64_t id)
{
	struct rsd__meta *e = rsd__meta_find(c, id);
	size_t i;

	if (e)
		return e;
	if (2 * (c->meta_n + 1) > c->meta_cap) {
		size_t cap = c->meta_cap ? 2 * c->meta_cap : 64;
		struct rsd__meta *t = rsd__calloc(cap, sizeof(*t));

		if (!t) {
			rsd__err(RSD_ENOMEM, "out of memory growing the controller metadata");
			return NULL;
		}
		for (size_t k = 0; k < c->meta_cap; k++) {
			if (!c->meta[k].id)
				continue;
			for (i = meta_slot(c->meta[k].id, cap); t[i].id; i = (i + 1) & (cap - 1))
				;
			t[i] = c->meta[k];
		}
		free(c->meta);
		c->meta = t;
		c->meta_cap = cap;
	}
	for (i = meta_slot(id, c->meta_cap); c->meta[i].id; i = (i + 1) & (c->meta_cap - 1))
		;
	memset(&c->meta[i], 0, sizeof(c->meta[i]));
	c->meta[i].id = id;
	c->meta_n++;
	return &c->meta[i];
}

/* ---- construction ---- */

static int check_policy(const struct rsd_policy *p)
{
	const struct rsd_policy_config_entry *cfg;
	const char *name;
	size_t n = 0;

	if (!p->ops || !p->ops->name || !p->ops->config_identity || !p->ops->fallback_locations ||
	    !p->ops->order_candidates)
		return rsd__err(RSD_ETYPE,
				"struct rsd_policy_ops must provide name, config_identity, "
				"fallback_locations and order_candidates");
	name = p->ops->name(p->ctx);
	if (!name)
		return rsd__err(RSD_ETYPE, "residency policy name must be a string");
	if (!rsd__nonblank(name))
		return rsd__err(RSD_EINVAL, "residency policy name must be non-blank");
	cfg = p->ops->config_identity(p->ctx, &n);
	if (n && !cfg)
		return rsd__err(RSD_ETYPE, "policy %s: config_identity returned NULL", name);
	for (size_t i = 0; i < n; i++) {
		if (!rsd__nonblank(cfg[i].key))
			return rsd__err(RSD_EINVAL, "policy %s: config_identity key %zu is blank",
					name, i);
		if (!cfg[i].value)
			return rsd__err(RSD_ETYPE, "policy %s: config_identity value %zu is NULL",
					name, i);
	}
	return 0;
}

int rsd_controller_create(struct rsd_manager *m, const struct rsd_policy *policy,
			  size_t search_state_limit, struct rsd_controller **out)
{
	pthread_mutexattr_t attr;
	struct rsd_controller *c;
	int err;

	if (!m)
		return rsd__err(RSD_ETYPE, "rsd_controller_create: manager is NULL");
	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_controller_create: out is NULL");
	if (policy && (err = check_policy(policy)))
		return err;
	c = rsd__calloc(1, sizeof(*c));
	if (!c)
		return rsd__err(RSD_ENOMEM, "out of memory creating a controller");
	if (!policy) {
		err = rsd_tiered_lru_create(NULL, 0, &c->owned_policy);
		if (err) {
			free(c);
			return err;
		}
		policy = c->owned_policy;
	}
	c->m = m;
	c->manager_id = rsd_manager_id(m);
	c->policy = policy;
	c->limit = search_state_limit ? search_state_limit : DEFAULT_LIMIT;
	rsd__mem_cache_init(&c->search_mem, RSD__SEARCH_KEEP);
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_init(&c->wait_lock, NULL);
	pthread_cond_init(&c->wait_cond, NULL);
	atomic_store(&c->wait_limit_ns, UINT64_MAX);
	*out = c;
	return 0;
}

int rsd_controller_set_flags(struct rsd_controller *c, unsigned flags)
{
	const unsigned known = RSD_CTRL_PRECHECK | RSD_CTRL_NOWAIT | RSD_CTRL_LOOKAHEAD;

	if (!c)
		return rsd__err(RSD_ETYPE, "rsd_controller_set_flags: controller is NULL");
	if (flags & ~known)
		return rsd__err(RSD_EINVAL, "rsd_controller_set_flags: unknown flags %#x",
				flags & ~known);
	pthread_mutex_lock(&c->lock);
	c->flags = flags;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int rsd_controller_set_wait_limit(struct rsd_controller *c, uint64_t max_ns)
{
	if (!c)
		return rsd__err(RSD_ETYPE, "rsd_controller_set_wait_limit: controller is NULL");
	atomic_store(&c->wait_limit_ns, max_ns);
	return 0;
}

void rsd_controller_free(struct rsd_controller *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->meta_cap; i++)
		if (c->meta[i].id) {
			free(c->meta[i].key);
			free(c->meta[i].uses);
		}
	free(c->meta);
	rsd__sched_fini(c);
	rsd_policy_free(c->owned_policy);
	rsd__mem_cache_fini(&c->search_mem);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wait_cond);
	pthread_mutex_destroy(&c->wait_lock);
	free(c);
}

/* ---- handles against a published image ---- */

long rsd__img_index(const struct rsd_image *img, struct rsd_handle h)
{
	uint64_t lo = 0, hi = img->values.count;

	/* Ids are unique and grow with registration order (discarded values
	 * keep their place), so the position found by id is the only one that
	 * can hold h. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct rsd_img_value *iv = rsd__pv_get(&img->values, mid);

		if (iv->handle.id == h.id)
			return rsd_handle_equal(iv->handle, h) ? (long)mid : -1;
		if (iv->handle.id < h.id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* §2.5 against an image of manager manager_id: foreign, unknown, discarded. */
int rsd__img_resolve(const struct rsd_image *img, uint64_t manager_id, struct rsd_handle h,
		     long *idx)
{
	if (h.manager_id != manager_id)
		return rsd__err(RSD_EHANDLE,
				"Handle '%llu' belongs to manager '%llu', not '%llu' "
				"(another manager)",
				(unsigned long long)h.id, (unsigned long long)h.manager_id,
				(unsigned long long)manager_id);
	*idx = rsd__img_index(img, h);
	if (*idx < 0)
		return rsd__err(RSD_EHANDLE, "Residency handle '%llu' is unknown",
				(unsigned long long)h.id);
	if (((const struct rsd_img_value *)rsd__pv_get(&img->values, (uint64_t)*idx))->discarded)
		return rsd__err(RSD_EHANDLE, "Residency value '%llu' has been discarded",
				(unsigned long long)h.id);
	return 0;
}

/*
 * The manager is open and h[0..n) are live values of its last published
 * image. Only the handles are checked against the image: the read section
 * is left before the caller touches the controller's table.
 */
static int check_live(struct rsd_controller *c, const struct rsd_handle *h, size_t n)
{
	const struct rsd_image *img = rsd__read_begin(c->m);
	long idx;
	int err = 0;

	if (img->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)c->manager_id);
	for (size_t i = 0; i < n && !err; i++)
		err = rsd__img_resolve(img, c->manager_id, h[i], &idx);
	rsd__read_end();
	return err;
}

/* ---- set_policy_metadata (§12.5) ---- */

int rsd_controller_set_policy_metadata(struct rsd_controller *c, struct rsd_handle h, int priority,
				       const char *stable_key)
{
	struct rsd__meta *e;
	char *key = NULL;
	int err;

	if (!c)
		return rsd__err(RSD_ETYPE,
				"rsd_controller_set_policy_metadata: controller is NULL");
	err = rsd__handle_check(h, "rsd_controller_set_policy_metadata");
	if (err)
		return err;
	if (stable_key && !rsd__nonblank(stable_key))
		return rsd__err(RSD_EINVAL, "policy metadata stable_key must be non-blank");
	err = rsd__read_fresh(c->m);
	if (err)
		return err;
	pthread_mutex_lock(&c->lock);
	err = check_live(c, &h, 1);
	if (err)
		goto out;
	if (stable_key) {
		/* other handles' keys, discarded handles' included */
		for (size_t i = 0; i < c->meta_cap; i++) {
			const struct rsd__meta *o = &c->meta[i];

			if (o->id && o->id != h.id && o->key && !strcmp(o->key, stable_key)) {
				char q[160];

				err = rsd__err(RSD_EINVAL,
					       "stable_key %s is already used by handle '%llu'",
					       rsd__quote(stable_key, q, sizeof(q)),
					       (unsigned long long)o->id);
				goto out;
			}
		}
		key = rsd__strdup(stable_key);
		if (!key) {
			err = -RSD_ENOMEM;
			goto out;
		}
	}
	e = rsd__meta_get(c, h.id);
	if (!e) {
		free(key);
		err = -RSD_ENOMEM;
		goto out;
	}
	free(e->key);
	e->key = key;
	e->priority = priority;
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* ---- access epochs recorded by the caller (§12.6) ---- */

int rsd_controller_record_access(struct rsd_controller *c, const struct rsd_handle *h, size_t n)
{
	struct rsd_requirement *q = NULL;
	int err = 0;

	if (!c || (n && !h))
		return rsd__err(RSD_ETYPE, "rsd_controller_record_access: NULL argument");
	if (!n)
		return rsd__err(RSD_EINVAL, "rsd_controller_record_access: no handles");
	for (size_t i = 0; i < n; i++) {
		err = rsd__handle_check(h[i], "rsd_controller_record_access");
		if (err)
			return err;
	}
	err = rsd__read_fresh(c->m);
	if (err)
		return err;
	/* The schedule matches requests: the handles as requirements. */
	q = rsd__calloc(n, sizeof(*q));
	if (!q)
		return rsd__err(RSD_ENOMEM, "out of memory recording %zu accesses", n);
	for (size_t i = 0; i < n; i++)
		q[i].handle = h[i];
	pthread_mutex_lock(&c->lock);
	err = check_live(c, h, n);
	/* Every entry exists before the epoch moves: all or nothing. */
	for (size_t i = 0; i < n && !err; i++)
		if (!rsd__meta_get(c, h[i].id))
			err = -RSD_ENOMEM;
	if (err)
		goto out;
	c->epoch++;
	for (size_t i = 0; i < n; i++) {
		struct rsd__meta *e = rsd__meta_get(c, h[i].id);

		e->has_epoch = true;
		e->epoch = c->epoch;
	}
	/* and the schedule's position, as a use entry moves it */
	rsd__sched_advance(c, &(struct rsd_request){ "access", q, n, NULL, 0 });
out:
	pthread_mutex_unlock(&c->lock);
	free(q);
	return err;
}

/* ---- requests (§12.1) ---- */

int rsd__request_check(const struct rsd_request *r)
{
	char what[48];
	int err;

	if (!r)
		return rsd__err(RSD_ETYPE, "residency request is NULL");
	if (!r->name)
		return rsd__err(RSD_ETYPE, "residency request name is NULL");
	if (!rsd__nonblank(r->name))
		return rsd__err(RSD_EINVAL, "residency request name must be a non-blank string");
	if (!r->nrequirements)
		return rsd__err(RSD_EINVAL, "residency request '%s' has no requirements", r->name);
	if (!r->requirements)
		return rsd__err(RSD_ETYPE, "residency request '%s': requirements array is NULL",
				r->name);
	for (size_t i = 0; i < r->nrequirements; i++) {
		const struct rsd_requirement *q = &r->requirements[i];

		snprintf(what, sizeof(what), "requirement %zu", i);
		err = rsd__handle_check(q->handle, what);
		if (!err)
			err = rsd__location_check(q->location, what);
		if (err)
			return err;
		for (size_t j = 0; j < i; j++)
			if (rsd_handle_equal(r->requirements[j].handle, q->handle) &&
			    rsd_location_equal(r->requirements[j].location, q->location)) {
				char name[RSD_LOCATION_NAME_MAX];

				return rsd__err(
					RSD_EINVAL,
					"residency request '%s' requires handle '%llu' at %s twice",
					r->name, (unsigned long long)q->handle.id,
					rsd_location_name(q->location, name, sizeof(name)));
			}
	}
	if (r->nreservations && !r->reservations)
		return rsd__err(RSD_ETYPE, "residency request '%s': reservations array is NULL",
				r->name);
	for (size_t i = 0; i < r->nreservations; i++) {
		snprintf(what, sizeof(what), "reservation %zu", i);
		err = rsd__location_check(r->reservations[i].location, what);
		if (err)
			return err;
		if (!r->reservations[i].label)
			return rsd__err(RSD_ETYPE, "reservation %zu: label is NULL", i);
		if (!rsd__nonblank(r->reservations[i].label))
			return rsd__err(RSD_EINVAL, "reservation %zu: label must be non-blank", i);
	}
	return 0;
}

/* VALIDATE (§12.7): handles, then EXCLUSIVE values required twice. */
int rsd__validate(const struct rsd_image *img, uint64_t manager_id, const struct rsd_request *r)
{
	long idx;
	int err;

	for (size_t i = 0; i < r->nrequirements; i++)
		if ((err = rsd__img_resolve(img, manager_id, r->requirements[i].handle, &idx)))
			return err;
	for (size_t i = 0; i < r->nrequirements; i++) {
		struct rsd_handle h = r->requirements[i].handle;
		bool first = true;

		for (size_t j = 0; j < i; j++)
			if (rsd_handle_equal(r->requirements[j].handle, h))
				first = false;
		if (!first)
			continue;
		for (size_t j = i + 1; j < r->nrequirements; j++) {
			if (!rsd_handle_equal(r->requirements[j].handle, h))
				continue;
			idx = rsd__img_index(img, h);
			if (((const struct rsd_img_value *)rsd__pv_get(&img->values, (uint64_t)idx))
				    ->spec.replica_mode == RSD_EXCLUSIVE)
				return rsd__err(
					RSD_EOWNERSHIP,
					"RSD_EXCLUSIVE value '%llu' cannot be required at several "
					"locations",
					(unsigned long long)h.id);
			break;
		}
	}
	return 0;
}
