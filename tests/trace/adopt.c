// SPDX-License-Identifier: MIT
#include <string.h>

#include <atf-c.h>

#include "../check.h"
#include "adopt.h"

struct rsd_handle trace_adopt_bytes(struct rsd_manager *m, const struct rsd_type *type,
				    uint64_t nbytes, int fill, enum rsd_replica_mode mode)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(m, type, RSD_LOC_PAGEABLE_HOST, 1, &nbytes, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), fill, nbytes);
	RSD_REQUIRE_OK(rsd_adopt(m, r, NULL, mode, &h));
	return h;
}
