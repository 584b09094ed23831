// SPDX-License-Identifier: MIT
/*
 * A plan's queued copies (reference.md §21.1): rsd_execute_actions() runs
 * its actions one after another, but a device copy of one action need not
 * finish before the next action is admitted. Inside a batch, place()
 * admits a device copy, queues it on its transfer stream with a completion
 * event and returns; the batch commits the queued copies in action order
 * when it is flushed. Copies to different devices (or over different
 * links) then overlap, while the reports, the state_version steps and the
 * errors are exactly those of the actions run one by one:
 *
 *  - an action touching a value with a queued copy, or one that could not
 *    be admitted (room a queued move frees), flushes first and runs again;
 *  - an action that could load its value flushes before it runs, so no
 *    load is ever repeated;
 *  - a flush waits for every queued event without the transition lock,
 *    then commits in order; the first failed copy is the plan's failure,
 *    and the copies queued after it are rolled back as if never run (their
 *    charges refunded; the peaks they raised stay). A copy the device gave
 *    no answer for (its sync and its stream's drain failed) may still run:
 *    it stays in flight as a queued copy instead (rsd__xfer_unanswered()).
 *
 * The batch lives on the executing thread's stack; at most RSD_BATCH_MAX
 * copies are queued (a full batch runs further copies synchronously), so
 * it allocates nothing.
 */
#include <string.h>

#include "core.h"
#include "../trace.h"

void rsd__batch_begin(struct rsd_manager *m, struct rsd_xfer_batch *b)
{
	struct rsd_exec *x = rsd__exec();

	memset(b, 0, sizeof(*b));
	b->m = m;
	b->up = x->batch;
	x->batch = b;
}

void rsd__batch_end(struct rsd_xfer_batch *b)
{
	rsd__exec()->batch = b->up;
}

bool rsd__batch_room(void)
{
	const struct rsd_xfer_batch *cur = rsd__exec()->batch;

	return cur && cur->n < RSD_BATCH_MAX;
}

bool rsd__batch_pending(void)
{
	const struct rsd_xfer_batch *cur = rsd__exec()->batch;

	return cur && cur->n;
}

void rsd__batch_add(const struct rsd_xfer *x)
{
	struct rsd_xfer_batch *cur = rsd__exec()->batch;
	struct rsd_batch_entry *d = &cur->q[cur->n++];

	memset(d, 0, sizeof(*d));
	d->xf = *x;
	d->xf.kind = RSD_XFER_BATCH;
	d->index = cur->index;
}

void rsd__batch_report(const struct rsd_transition *rep, bool stamp, struct rsd_transition *out)
{
	struct rsd_xfer_batch *cur = rsd__exec()->batch;
	struct rsd_batch_entry *d = &cur->q[cur->n - 1];

	d->rep = *rep;
	d->stamp = stamp;
	d->out = out;
}

int rsd__batch_flush(struct rsd_manager *m)
{
	struct rsd_xfer_batch *b = rsd__exec()->batch;
	struct rsd_error first;
	int err = 0, errs[RSD_BATCH_MAX] = { 0 };

	memset(&first, 0, sizeof(first));
	size_t n;

	if (!b || !b->n)
		return 0;
	n = b->n;
	b->n = 0;
	/* The copies are counted in m->inflight since their admission. */
	rsd__writer_pause(m);
	for (size_t i = 0; i < n; i++) {
		struct rsd_xfer *x = &b->q[i].xf;

		/* An event left set: the device gave no answer (QUEUED). */
		errs[i] = rsd__copy_wait(m, x->stream, &x->event);
		if (!x->event)
			rsd__xfer_set_state(x, errs[i] ? RSD_XFER_FAILED : RSD_XFER_DONE, errs[i]);
		if (errs[i] && !err) {
			err = errs[i];
			first = *rsd_last_error();
		}
	}
	rsd__writer_resume(m);
	/* Closed meanwhile without waiting for this thread (close(FORCE |
	 * NOWAIT)): the copies were waited for, so their settling is what a
	 * failure's is, and the last thread back frees the rest. */
	if (m->closed && !err) {
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
		first = *rsd_last_error();
		errs[0] = err;
	}
	err = 0;
	for (size_t i = 0; i < n; i++) {
		struct rsd_batch_entry *d = &b->q[i];
		struct rsd_xfer *x = &d->xf;

		if (!err && errs[i]) {
			err = errs[i];
			b->failed = true;
			b->failed_index = d->index;
		}
		rsd__lin_note(m, RSD_LIN_SETTLE_BEGIN, d->index);
		if (x->event) {
			/* Not rolled back: it may still run. */
			rsd__xfer_unanswered(m, x, errs[i], false);
		} else {
			rsd__xfer_settle(m, x->rec, &x->src, x->to, x->leave ? &x->src : NULL, err);
			rsd__xfer_set_state(x, RSD_XFER_SETTLED, 0);
		}
		rsd__lin_note(m, RSD_LIN_SETTLE_END, d->index);
		if (err)
			continue;
		if (d->stamp)
			d->rep.completed_at_ns = rsd__now_ns();
		rsd_trace_transition(m->id, &d->rep);
		if (d->out)
			*d->out = d->rep;
	}
	if (err)
		*rsd__err_record() = first;
	return err;
}
