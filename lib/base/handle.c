// SPDX-License-Identifier: MIT
/*
 * Handle records: structural equality, and the malformed-handle check every
 * entry point applies before it resolves any handle.
 */
#include <stdio.h>

#include "../internal.h"

bool rsd_handle_equal(struct rsd_handle a, struct rsd_handle b)
{
	return a.manager_id == b.manager_id && a.id == b.id && a.type == b.type;
}

/*
 * A zero id is the reference's empty identity string (an argument value
 * error); a missing or foreign type is a type error. Neither depends on a
 * manager, so entry points run this before they take any lock. i < 0: a
 * single handle, else its index in an array. The message is formatted only
 * on failure: acquire and the transitions call this on every handle.
 */
static int check_one(struct rsd_handle h, const char *what, long i)
{
	bool bad_id = !h.manager_id || !h.id;
	char where[96];

	if (rsd__likely(!bad_id && h.type && rsd_type_is_a(h.type, &rsd_resident_type)))
		return 0;
	if (i < 0)
		snprintf(where, sizeof(where), "%s", what);
	else
		snprintf(where, sizeof(where), "%s %ld", what, i);
	if (bad_id)
		return rsd__err(RSD_EINVAL,
				"%s: malformed handle (manager_id %llu, id %llu): ids are never 0",
				where, (unsigned long long)h.manager_id, (unsigned long long)h.id);
	if (!h.type)
		return rsd__err(RSD_ETYPE, "%s: malformed handle %llu: its type is NULL", where,
				(unsigned long long)h.id);
	return rsd__err(RSD_ETYPE, "%s: malformed handle %llu: type '%s' is not a value type",
			where, (unsigned long long)h.id, h.type->name ? h.type->name : "?");
}

int rsd__handle_check(struct rsd_handle h, const char *what)
{
	return check_one(h, what, -1);
}

int rsd__handles_check(const struct rsd_handle *h, size_t n, const char *what)
{
	int err;

	for (size_t i = 0; i < n; i++) {
		err = check_one(h[i], what, (long)i);
		if (err)
			return err;
	}
	return 0;
}
