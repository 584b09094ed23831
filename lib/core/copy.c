// SPDX-License-Identifier: MIT
/*
 * Copying a value to a destination (§4.4). Host-to-host copies are plain
 * memcpy (pinned memory is host memory); anything touching a device goes
 * through the driver on a stream, then waits for an event on that stream,
 * so a transition's destination bytes are complete when it returns.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static bool host_kind(struct rsd_location at)
{
	return at.kind != RSD_CUDA;
}

int rsd__copy_to(struct rsd_manager *m, const struct rsd_resident *src, struct rsd_location from,
		 struct rsd_location to, void *stream, struct rsd_resident **out)
{
	uint64_t sizes_small[8] = { 0 }, *sizes = sizes_small;
	struct rsd_resident *dst = NULL;
	void *ev = NULL;
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
				  src->meta, src->meta_len, &dst);
	if (sizes != sizes_small)
		free(sizes);
	if (err)
		return err;
	if (host_kind(from) && host_kind(to)) {
		for (size_t i = 0; i < src->nbuf; i++)
			if (src->bufs[i].nbytes)
				memcpy(dst->bufs[i].data, src->bufs[i].data, src->bufs[i].nbytes);
		*out = dst;
		return 0;
	}
	if (!stream)
		stream = m->ops->default_stream(m->ops_ctx, to.kind == RSD_CUDA ? to.device : from.device);
	for (size_t i = 0; i < src->nbuf; i++) {
		if (!src->bufs[i].nbytes)
			continue;
		err = m->ops->copy(m->ops_ctx, dst->bufs[i].data, to, src->bufs[i].data, from,
				   src->bufs[i].nbytes, stream);
		if (err)
			goto fail;
	}
	err = m->ops->event_record(m->ops_ctx, stream, &ev);
	if (err)
		goto fail;
	err = m->ops->event_sync(m->ops_ctx, ev);
	m->ops->event_destroy(m->ops_ctx, ev);
	if (err)
		goto fail;
	*out = dst;
	return 0;
fail:
	{
		/* Best effort: drain the stream before freeing its target; a
		 * second failure must not mask the first. */
		struct rsd_error saved = *rsd_last_error();

		m->ops->stream_sync(m->ops_ctx, stream);
		*rsd__err_record() = saved;
	}
	rsd__resident_destroy(dst);
	return err;
}
