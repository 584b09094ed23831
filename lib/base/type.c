// SPDX-License-Identifier: MIT
/* Value types: the root type, derivation, and the type check of handles and residents. */
#include "../internal.h"

const struct rsd_type rsd_resident_type = { "resident", NULL };

bool rsd_type_is_a(const struct rsd_type *t, const struct rsd_type *base)
{
	if (!base)
		return false;
	for (; t; t = t->parent)
		if (t == base)
			return true;
	return false;
}

int rsd__type_check(const struct rsd_type *type, const char *what)
{
	if (!type)
		return rsd__err(RSD_ETYPE, "%s: value type is NULL", what);
	if (!rsd_type_is_a(type, &rsd_resident_type))
		return rsd__err(RSD_ETYPE,
				"%s: type '%s' does not derive from the resident value type", what,
				type->name ? type->name : "?");
	return 0;
}
