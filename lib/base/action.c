// SPDX-License-Identifier: MIT
/* Action records: constructors and structural equality. */
#include <string.h>

#include "../internal.h"

struct rsd_action rsd_action_ensure(struct rsd_handle h, struct rsd_location at)
{
	struct rsd_action a;

	memset(&a, 0, sizeof(a));
	a.kind = RSD_ACT_ENSURE;
	a.handle = h;
	a.location = at;
	return a;
}

struct rsd_action rsd_action_move(struct rsd_handle h, struct rsd_location to,
				  const struct rsd_location *from)
{
	struct rsd_action a = rsd_action_ensure(h, to);

	a.kind = RSD_ACT_MOVE;
	if (from) {
		a.has_from = true;
		a.from = *from;
	}
	return a;
}

struct rsd_action rsd_action_drop(struct rsd_handle h, struct rsd_location at)
{
	struct rsd_action a = rsd_action_ensure(h, at);

	a.kind = RSD_ACT_DROP;
	return a;
}

struct rsd_action rsd_action_discard(struct rsd_handle h)
{
	struct rsd_action a = rsd_action_ensure(h, RSD_LOC_PAGEABLE_HOST);

	a.kind = RSD_ACT_DISCARD;
	return a;
}

bool rsd_action_equal(const struct rsd_action *a, const struct rsd_action *b)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || !rsd_handle_equal(a->handle, b->handle))
		return false;
	if (a->kind == RSD_ACT_DISCARD)
		return true;
	if (!rsd_location_equal(a->location, b->location))
		return false;
	if (a->kind != RSD_ACT_MOVE)
		return true;
	return a->has_from == b->has_from && (!a->has_from || rsd_location_equal(a->from, b->from));
}

const char *rsd_action_kind_name(enum rsd_action_kind kind)
{
	switch (kind) {
	case RSD_ACT_ENSURE:
		return "ensure";
	case RSD_ACT_MOVE:
		return "move";
	case RSD_ACT_DROP:
		return "drop";
	case RSD_ACT_DISCARD:
		return "discard";
	}
	return "unknown";
}
