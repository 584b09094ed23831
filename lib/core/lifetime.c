// SPDX-License-Identifier: MIT
/*
 * The caller-owned lifetime objects (leases, holds, reservations, scopes)
 * as the manager knows them: the list m->objs that destroy walks to detach
 * them, and the release their *_free() makes when the caller never released
 * them (§8.9).
 */
#include "core.h"

void rsd__obj_link(struct rsd_manager *m, struct rsd_objlink *link)
{
	pthread_mutex_lock(&m->objs_lock);
	rsd__obj_link_locked(m, link);
	pthread_mutex_unlock(&m->objs_lock);
}

void rsd__obj_unlink(struct rsd_objlink *link)
{
	struct rsd_manager *m = link->m;

	if (!m)
		return;
	pthread_mutex_lock(&m->objs_lock);
	rsd__obj_unlink_locked(link);
	pthread_mutex_unlock(&m->objs_lock);
}

bool rsd__free_release(const struct rsd_lifetime_kind *kind, void *obj,
		       const struct rsd_objlink *link, bool active, const char *label, size_t n)
{
	struct rsd_manager *m = link->m;

	if (!active || !m)
		return true;
	if (kind->release(obj)) {
		/* The manager still lists the object: keep both. */
		m->keep_alive = true;
		if (label)
			rsd__warn(m, "abandoned %s '%s' could not be released (%s): %s", kind->noun,
				  label, rsd_last_error()->message, kind->retained);
		else
			rsd__warn(m, "abandoned %s could not be released (%s): %s", kind->noun,
				  rsd_last_error()->message, kind->retained);
		return false;
	}
	if (label)
		rsd__warn(m, "%s '%s' was freed without release: released it", kind->noun, label);
	else
		rsd__warn(m, "%s on %zu value(s) was freed without release: released it",
			  kind->noun, n);
	return true;
}
