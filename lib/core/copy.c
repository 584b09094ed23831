// SPDX-License-Identifier: MIT
/*
 * Copying a value to a destination (§4.4), in the two steps of a transfer
 * beside the writer (transition.c): the destination is allocated under the
 * transition lock, as part of the admission, and filled without it.
 *
 * Host-to-host copies are plain memcpy (pinned memory is host memory);
 * anything touching a device goes through the driver on a stream, then
 * waits for an event on that stream, so a transition's destination bytes
 * are complete when it commits; one between pageable memory and a device
 * runs through the device's pinned staging pair (staging.c). A value the library allocated is one block
 * holding every buffer: when both ends have the same layout the whole span
 * moves in one copy instead of one per buffer, which is what a copy engine
 * rewards (a 64-buffer value is one DMA, not 64).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static bool host_kind(struct rsd_location at)
{
	return at.kind != RSD_CUDA;
}

int rsd__copy_alloc(struct rsd_manager *m, const struct rsd_resident *src, struct rsd_location to,
		    void *stream, struct rsd_resident **out)
{
	uint64_t sizes_small[8] = { 0 }, *sizes = sizes_small;
	int err;

	if (stream && host_kind(to))
		return rsd__err(RSD_EINVAL, "a host destination takes no stream");
	if (src->nbuf > RSD_ARRAY_SIZE(sizes_small)) {
		sizes = rsd__malloc(src->nbuf * sizeof(*sizes));
		if (!sizes)
			return rsd__err(RSD_ENOMEM, "out of memory copying a value");
	}
	for (size_t i = 0; i < src->nbuf; i++)
		sizes[i] = src->bufs[i].nbytes;
	err = rsd__resident_alloc(m->ops, m->ops_ctx, m->ndevices, src->type, to, src->nbuf, sizes,
				  src->meta, src->meta_len, out);
	if (sizes != sizes_small)
		free(sizes);
	return err;
}

/*
 * The bytes from the first buffer's start to the last one's end, when src
 * and dst are single blocks whose buffers sit at the same offsets; 0
 * otherwise (then each buffer is copied on its own).
 */
static uint64_t common_span(const struct rsd_resident *src, const struct rsd_resident *dst)
{
	uint64_t span = 0;

	if (!src->block || !dst->block || src->nbuf != dst->nbuf || src->nbuf < 2)
		return 0;
	for (size_t i = 0; i < src->nbuf; i++) {
		const char *s = src->bufs[i].data, *d = dst->bufs[i].data;
		uint64_t off = (uint64_t)(s - (const char *)src->block);

		if (!src->bufs[i].nbytes)
			continue;
		if (off != (uint64_t)(d - (const char *)dst->block) ||
		    src->bufs[i].nbytes != dst->bufs[i].nbytes)
			return 0;
		if (off + src->bufs[i].nbytes > span)
			span = off + src->bufs[i].nbytes;
	}
	return span <= src->block_nbytes && span <= dst->block_nbytes ? span : 0;
}

/* The driver's stream for this direction, else the device's transfer
 * stream (what a NULL stream stands for). */
static void *pick_stream(struct rsd_manager *m, struct rsd_location from, struct rsd_location to)
{
	void *s = NULL;

	if (m->ops->transfer_stream) {
		struct rsd_error saved = *rsd_last_error();

		s = m->ops->transfer_stream(m->ops_ctx, to, from);
		*rsd__err_record() = saved;
	}
	return s ? s :
		   m->ops->default_stream(m->ops_ctx,
					  to.kind == RSD_CUDA ? to.device : from.device);
}

int rsd__copy_issue(struct rsd_manager *m, const struct rsd_resident *src, struct rsd_location from,
		    struct rsd_resident *dst, struct rsd_location to, void **stream, void **event,
		    bool *stuck)
{
	uint64_t span = common_span(src, dst);
	int err;

	*event = NULL;
	if (host_kind(from) && host_kind(to)) {
		if (span) {
			memcpy(dst->block, src->block, span);
			return 0;
		}
		for (size_t i = 0; i < src->nbuf; i++)
			if (src->bufs[i].nbytes)
				memcpy(dst->bufs[i].data, src->bufs[i].data, src->bufs[i].nbytes);
		return 0;
	}
	if (!*stream)
		*stream = pick_stream(m, from, to);
	err = rsd__staging_copy(m, src, from, dst, to, span, *stream, event, stuck);
	if (err != RSD__UNSTAGED)
		return err; /* staged (pageable <-> device): drained on failure */
	if (span) {
		err = m->ops->copy(m->ops_ctx, dst->block, to, src->block, from, span, *stream);
	} else {
		err = 0;
		for (size_t i = 0; i < src->nbuf && !err; i++)
			if (src->bufs[i].nbytes)
				err = m->ops->copy(m->ops_ctx, dst->bufs[i].data, to,
						   src->bufs[i].data, from, src->bufs[i].nbytes,
						   *stream);
	}
	if (!err)
		err = m->ops->event_record(m->ops_ctx, *stream, event);
	if (err && rsd__copy_drain(m, *stream))
		*stuck = true;
	return err;
}

int rsd__copy_drain(struct rsd_manager *m, void *stream)
{
	/* Best effort: drain the stream before the caller frees its target;
	 * a second failure must not mask the first. A stream whose device
	 * was lost runs nothing any more: that answer is as final as a
	 * drain (devloss.c settles what was there). */
	struct rsd_error saved = *rsd_last_error();
	int err = rsd__stream_drain(m, stream, -1);

	*rsd__err_record() = saved;
	return rsd__devloss_answer(m, stream, -1, err) ? 0 : err;
}

/*
 * The device orders two copies when both run on its streams as DMA: not
 * when an end is pageable (staged by the calling thread through the
 * staging pair, or read by the driver on the host), nor host to host
 * (memcpy). A copy ordered so reads its source only after the filling
 * copy's event; if that copy fails the driver fails the waiting stream's
 * later work too (device.h: stream_wait_event), so this copy's own event
 * reports the failure and its undo follows (queued.c).
 */
bool rsd__copy_order_after(struct rsd_manager *m, struct rsd_location from, struct rsd_location to,
			   void **stream, void *event)
{
	struct rsd_error saved;
	void *s = *stream;

	if (!m->ops->stream_wait_event || from.kind == RSD_PAGEABLE_HOST ||
	    to.kind == RSD_PAGEABLE_HOST || (host_kind(from) && host_kind(to)))
		return false;
	saved = *rsd_last_error();
	if (!s)
		s = pick_stream(m, from, to);
	/* Refused (a lost device, a foreign stream): the host waits, and
	 * that wait gives the answer. */
	if (m->ops->stream_wait_event(m->ops_ctx, s, event)) {
		*rsd__err_record() = saved;
		return false;
	}
	*stream = s;
	return true;
}

int rsd__copy_wait(struct rsd_manager *m, void *stream, void **event)
{
	int failed, err;

	if (!*event)
		return 0;
	/* No answer: the event is kept, the caller keeps both ends. */
	err = rsd__event_answer(m, stream, -1, *event, &failed);
	if (err)
		return err;
	m->ops->event_destroy(m->ops_ctx, *event);
	*event = NULL;
	return failed;
}
