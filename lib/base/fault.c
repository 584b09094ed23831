// SPDX-License-Identifier: MIT
/*
 * Fault points: the testing interface of include/rsd/fault.h.
 *
 * The hot path (rsd__fault() in internal.h) reads rsd__fault_armed and
 * takes the slow path below only while some point is armed. The slow path
 * counts the hit and, under fault_lock, decides whether this hit is the one
 * to fail. The lock is a leaf: nothing is called while it is held, so a
 * point may be hit with any librsd lock held.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../internal.h"

struct fault_point {
	const char *name;
	/* Hits made while any point was armed; relaxed, only ever added to. */
	atomic_uint_fast64_t hits;
	/* The arming, under fault_lock. */
	bool armed;
	uint64_t left; /* counted hits until the failing one, that one included */
	int err;       /* positive RSD_E* code */
	char *match;   /* NULL: every hit counts */
};

static struct fault_point points[RSD__FAULT_N] = {
	[RSD__FAULT_ALLOC] = { .name = "alloc" },
	[RSD__FAULT_ACQUIRE] = { .name = "acquire" },
	[RSD__FAULT_RESERVE] = { .name = "reserve" },
	[RSD__FAULT_RESIDENT] = { .name = "resident" },
};

/* Protects every point's arming, rsd__fault_armed's writes, and the record
 * of the last fired fault below. */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_uint rsd__fault_armed;
static uint64_t fired;
static char fired_subject[128];

static struct fault_point *point_find(const char *name)
{
	for (size_t i = 0; i < RSD_ARRAY_SIZE(points); i++)
		if (!strcmp(points[i].name, name))
			return &points[i];
	return NULL;
}

/* Under fault_lock. */
static void point_disarm(struct fault_point *p)
{
	if (!p->armed)
		return;
	p->armed = false;
	p->left = 0;
	free(p->match);
	p->match = NULL;
	atomic_fetch_sub_explicit(&rsd__fault_armed, 1, memory_order_relaxed);
}

int rsd_fault_inject(const char *point, const char *match, uint64_t nth, int err)
{
	struct fault_point *p;
	char *copy = NULL;

	if (!point)
		return rsd__err(RSD_ETYPE, "rsd_fault_inject: point is NULL");
	p = point_find(point);
	if (!p)
		return rsd__err(RSD_ENOTFOUND, "rsd_fault_inject: no fault point named '%s'",
				point);
	if (nth) {
		if (err <= 0 || err >= RSD_EMAX)
			return rsd__err(RSD_EINVAL, "rsd_fault_inject: %d is not an RSD_E* code",
					err);
		if (p == &points[RSD__FAULT_ALLOC] && err != RSD_ENOMEM)
			return rsd__err(
				RSD_EINVAL,
				"rsd_fault_inject: point 'alloc' fails only with RSD_ENOMEM, "
				"not %s",
				rsd_strerror(err));
		if (match && !rsd__nonblank(match))
			return rsd__err(RSD_EINVAL, "rsd_fault_inject: match must not be blank");
		/* Plain strdup: the framework's own memory is no fault point. */
		if (match && !(copy = strdup(match)))
			return rsd__err(RSD_ENOMEM,
					"rsd_fault_inject: out of memory copying match");
	}
	pthread_mutex_lock(&fault_lock);
	point_disarm(p);
	if (nth) {
		p->armed = true;
		p->left = nth;
		p->err = err;
		p->match = copy;
		atomic_fetch_add_explicit(&rsd__fault_armed, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&fault_lock);
	return 0;
}

int rsd__fault_hit(enum rsd__fault_id id, const char *subject)
{
	struct fault_point *p = &points[id];
	int err = 0;

	atomic_fetch_add_explicit(&p->hits, 1, memory_order_relaxed);
	pthread_mutex_lock(&fault_lock);
	if (p->armed && (!p->match || (subject && !strcmp(p->match, subject))) && !--p->left) {
		err = p->err;
		point_disarm(p);
		fired++;
		snprintf(fired_subject, sizeof(fired_subject), "%s", subject ? subject : "");
	}
	pthread_mutex_unlock(&fault_lock);
	if (!err)
		return 0;
	if (id == RSD__FAULT_ALLOC)
		return -err; /* the caller's out-of-memory path records it */
	return rsd__err(err, "injected fault at point '%s' (subject '%s')", p->name,
			subject ? subject : "");
}

uint64_t rsd_fault_hits(const char *point)
{
	struct fault_point *p = point ? point_find(point) : NULL;

	return p ? atomic_load_explicit(&p->hits, memory_order_relaxed) : 0;
}

size_t rsd_fault_points(const char **names, size_t cap)
{
	for (size_t i = 0; i < cap && i < RSD_ARRAY_SIZE(points); i++)
		names[i] = points[i].name;
	return RSD_ARRAY_SIZE(points);
}

uint64_t rsd__fault_fired(char *subject, size_t len)
{
	uint64_t n;

	pthread_mutex_lock(&fault_lock);
	n = fired;
	if (subject && len)
		snprintf(subject, len, "%s", fired_subject);
	pthread_mutex_unlock(&fault_lock);
	return n;
}
