// SPDX-License-Identifier: MIT
/*
 * A test-only history of one thread's writer sections (internal.h,
 * rsd__lin_log_set): the multi-threaded model test orders the calls of
 * several threads by the sections in which they took effect and replays
 * them in that order against the sequential model. While no thread has a
 * log, every hook is one relaxed load of rsd__lin_on and a not-taken branch.
 */
#include "core.h"

atomic_uint rsd__lin_on;

/* The sections of every logging thread, in the order they took the lock. */
static atomic_uint_fast64_t lin_seq;
static _Thread_local struct rsd_lin_log *lin_cur;

void rsd__lin_log_set(struct rsd_lin_log *log)
{
	if (log && !lin_cur)
		atomic_fetch_add_explicit(&rsd__lin_on, 1, memory_order_relaxed);
	else if (!log && lin_cur)
		atomic_fetch_sub_explicit(&rsd__lin_on, 1, memory_order_relaxed);
	lin_cur = log;
}

void rsd__lin_note_slow(const struct rsd_manager *m, enum rsd_lin_kind kind, uint64_t arg)
{
	struct rsd_lin_log *log = lin_cur;
	struct rsd_lin_ent *e;

	if (!log)
		return;
	if (log->n == log->cap) {
		log->overflow = true;
		return;
	}
	e = &log->ent[log->n++];
	e->kind = kind;
	/* Only lock holders take a number: their order is the lock's. */
	e->seq = kind == RSD_LIN_LOCK ? atomic_fetch_add(&lin_seq, 1) + 1 : arg;
	e->version = m->version;
}
