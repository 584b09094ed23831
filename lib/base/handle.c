// SPDX-License-Identifier: MIT
/* Handle records: structural equality, used by every layer above. */
#include "../internal.h"

bool rsd_handle_equal(struct rsd_handle a, struct rsd_handle b)
{
	return a.manager_id == b.manager_id && a.id == b.id && a.type == b.type;
}
