// SPDX-License-Identifier: MIT
/*
 * Error codes and the thread-local last-error record. A failure is recorded
 * once, where its facts are known; everything above passes the code up.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../internal.h"

static _Thread_local struct rsd_error last_error = {
	.failed_action_index = -1,
	.failed_reservation_index = -1,
};

/* An RSD_EDEVLOST was recorded on this thread since rsd__devlost_take(). */
static _Thread_local bool devlost_seen;

static const char *const err_names[RSD_EMAX] = {
	[0] = "success",
	[RSD_EINVAL] = "invalid argument value",
	[RSD_ETYPE] = "invalid argument type",
	[RSD_EUSAGE] = "usage error",
	[RSD_ENOTFOUND] = "not found",
	[RSD_EBUDGET] = "residency budget exceeded",
	[RSD_EHANDLE] = "invalid residency handle",
	[RSD_EUNAVAILABLE] = "residency value unavailable",
	[RSD_EINUSE] = "residency value in use",
	[RSD_ELIFETIME] = "residency lifetime closed",
	[RSD_EMATERIAL] = "invalid materialization",
	[RSD_EOWNERSHIP] = "residency ownership violation",
	[RSD_EPLAN] = "residency plan infeasible",
	[RSD_ESTALE] = "residency state is stale",
	[RSD_ESEARCHLIMIT] = "residency search limit reached",
	[RSD_EEXEC] = "residency plan execution failed",
	[RSD_ECLOSED] = "residency manager closed",
	[RSD_EREENTRANT] = "residency manager re-entered",
	[RSD_ENOMEM] = "out of memory",
	[RSD_EDEVICE] = "device driver failure",
	[RSD_ESOURCE] = "reconstruction source failed",
	[RSD_EDEVLOST] = "device lost",
};

const char *rsd_strerror(int err)
{
	if (err < 0)
		err = err == INT_MIN ? RSD_EMAX : -err;
	if (err >= RSD_EMAX)
		return "unknown error";
	return err_names[err];
}

bool rsd_err_is_plan_error(int err)
{
	if (err < 0)
		err = err == INT_MIN ? 0 : -err;
	return err == RSD_EPLAN || err == RSD_ESTALE || err == RSD_ESEARCHLIMIT;
}

const char *rsd_phase_name(enum rsd_plan_phase phase)
{
	static const char *const names[] = {
		[RSD_PHASE_NONE] = "none",	 [RSD_PHASE_EXECUTE] = "execute",
		[RSD_PHASE_RECLAIM] = "reclaim", [RSD_PHASE_RESERVE] = "reserve",
		[RSD_PHASE_ENTER] = "enter",	 [RSD_PHASE_EXIT] = "exit",
	};
	if ((unsigned)phase >= RSD_ARRAY_SIZE(names))
		return "unknown";
	return names[phase];
}

const struct rsd_error *rsd_last_error(void)
{
	return &last_error;
}

struct rsd_error *rsd__err_record(void)
{
	return &last_error;
}

void rsd__err_clear(void)
{
	memset(&last_error, 0, sizeof(last_error));
	last_error.failed_action_index = -1;
	last_error.failed_reservation_index = -1;
}

int rsd__verr(int code, const char *fmt, va_list ap)
{
	if (code < 0)
		code = code == INT_MIN ? RSD_EUSAGE : -code;
	rsd__err_clear();
	last_error.code = code;
	vsnprintf(last_error.message, sizeof(last_error.message), fmt, ap);
	if (code == RSD_EDEVLOST)
		devlost_seen = true;
	return -code;
}

void rsd__devlost_note(void)
{
	devlost_seen = true;
}

bool rsd__devlost_take(void)
{
	bool seen = devlost_seen;

	devlost_seen = false;
	return seen;
}

int rsd__err(int code, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = rsd__verr(code, fmt, ap);
	va_end(ap);
	return ret;
}

const char *rsd__ledger_text(const struct rsd__ledger *l, char *buf, size_t len)
{
	snprintf(buf, len,
		 "budget=%llu, used=%llu, reserved=%llu, in flight=%llu, held by %lu plan%s=%llu",
		 (unsigned long long)l->budget, (unsigned long long)l->used,
		 (unsigned long long)l->reserved, (unsigned long long)l->in_flight,
		 (unsigned long)l->holders, l->holders == 1 ? "" : "s",
		 (unsigned long long)l->held);
	return buf;
}

int rsd__err_budget(struct rsd_location at, const struct rsd__ledger *l, uint64_t requested)
{
	char name[RSD_LOCATION_NAME_MAX], terms[RSD__LEDGER_TEXT_MAX];

	rsd__err(RSD_EBUDGET, "Residency budget exceeded at %s: %s, requested=%llu",
		 rsd_location_name(at, name, sizeof(name)),
		 rsd__ledger_text(l, terms, sizeof(terms)), (unsigned long long)requested);
	last_error.has_location = true;
	last_error.location = at;
	last_error.has_budget = true;
	last_error.budget_bytes = l->budget;
	last_error.used_bytes = l->used;
	last_error.reserved_bytes = l->reserved;
	last_error.requested_bytes = requested;
	last_error.in_flight_bytes = l->in_flight;
	last_error.plan_held_bytes = l->held;
	last_error.plan_hold_count = l->holders;
	return -RSD_EBUDGET;
}

int rsd__err_stale(uint64_t expected, uint64_t actual)
{
	rsd__err(RSD_ESTALE, "Residency state is stale: expected state_version %llu, actual %llu",
		 (unsigned long long)expected, (unsigned long long)actual);
	last_error.has_versions = true;
	last_error.expected_version = expected;
	last_error.actual_version = actual;
	return -RSD_ESTALE;
}
