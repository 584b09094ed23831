// SPDX-License-Identifier: MIT
/*
 * Prefetching: while the GPU computes batch i, the copies that bring batch
 * i + 1 to it are already queued (rsd_controller_use_async()).
 *
 * One thread, one consumer stream, a device budget for the weights and two
 * batches. For each batch i the loop
 *   1. queues kernel i on the consumer stream (before anything of batch
 *      i + 1 goes on that stream, or kernel i would wait for its copies);
 *   2. closes use i: its leases stay pending until kernel i has run, so
 *      nothing evicts the bytes kernel i reads;
 *   3. records an event after them: "kernel i and its leases are done";
 *   4. waits for the event of kernel i - 1, the one wait it needs: batch
 *      i + 1 needs the room of batch i - 1, and without the wait the host
 *      would run ahead of the device until the budget was all protected;
 *   5. uses batch i + 1 without waiting for its copies: they run on the
 *      transfer stream beside kernel i, and kernel i + 1, queued on the
 *      consumer stream next time round, starts once they are done.
 *
 * The simulated device runs its streams in the background, as a GPU does.
 * Its kernel occupies the device's compute engine for KERNEL_NS, declares
 * the bytes it reads (the batch's input and the weights: the simulator
 * aborts if a copy still writing them is not ordered before it) and, when it
 * finishes, checks every one of them.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#define NBATCH 8u
#define BATCH (64u << 10)
#define WEIGHTS (32u << 10)
#define WEIGHT_BYTE 0xa5
/* Each item on a simulated stream runs this long after it became runnable. */
#define DEVICE_DELAY_NS 200000
/* How long each kernel computes. */
#define KERNEL_NS 1000000

static unsigned char batch_byte(unsigned i)
{
	return (unsigned char)(i * 29 + 7);
}

/* One kernel's arguments and what it saw; written by the device, read by
 * the host only after waiting for it. */
struct kernel {
	const unsigned char *in, *w; /* the leased device bytes */
	uint64_t nin, nw;
	unsigned char seed;
	atomic_int state; /* 0: not finished; 1: every byte right; -1: a byte wrong */
};

static void kernel(void *arg)
{
	struct kernel *k = arg;
	int ok = 1;

	for (uint64_t j = 0; j < k->nin; j++)
		ok &= k->in[j] == k->seed;
	for (uint64_t j = 0; j < k->nw; j++)
		ok &= k->w[j] == WEIGHT_BYTE;
	atomic_store(&k->state, ok ? 1 : -1);
}

struct pipeline {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_controller *c;
	void *stream;
	struct rsd_location dev;
	struct rsd_handle w, in[NBATCH];
	struct rsd_use *use[NBATCH];
	void *done[NBATCH]; /* event after kernel i and use i's leases */
	struct kernel k[NBATCH];
	size_t evictions[NBATCH];
	unsigned host_waits, early; /* early: not a wait, see run() */
};

/* A value of n bytes of `byte`, adopted in pinned host memory. */
static int adopt(struct pipeline *p, uint64_t n, unsigned char byte, struct rsd_handle *h)
{
	struct rsd_resident *r;
	int err;

	err = rsd_resident_alloc(p->m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n, NULL, 0, &r);
	if (err)
		return err;
	memset(rsd_resident_data(r, 0), byte, n);
	err = rsd_adopt(p->m, r, NULL, RSD_REPLICABLE, h);
	if (err)
		rsd_resident_free(r);
	return err;
}

/* Batch i's input and the weights on the device, leased for the consumer
 * stream, without waiting for the copies. */
static int use_batch(struct pipeline *p, unsigned i)
{
	struct rsd_requirement req[2] = { { p->in[i], p->dev }, { p->w, p->dev } };
	char name[16];
	struct rsd_request r = { name, req, 2, NULL, 0 };
	int err;

	snprintf(name, sizeof(name), "batch-%u", i);
	/* Kernel i - 1 finishing between the decision and the entry reaps its
	 * leases, which makes the decision stale: decide again. */
	for (int tries = 0;; tries++) {
		err = rsd_controller_use_async(p->c, &r, &p->stream, 1, NULL, 0, &p->use[i]);
		if (err != -RSD_ESTALE || tries == 8)
			break;
	}
	if (!err)
		p->evictions[i] = rsd_use_decision(p->use[i])->nevictions;
	return err;
}

static int queue_kernel(struct pipeline *p, unsigned i)
{
	const struct rsd_resident *in, *w;
	struct kernel *k = &p->k[i];
	struct rsd_simdev_access reads[2] = { { 0 } };
	int err;

	err = rsd_use_value(p->use[i], p->in[i], p->dev, &in);
	if (!err)
		err = rsd_use_value(p->use[i], p->w, p->dev, &w);
	if (err)
		return err;
	k->in = rsd_resident_data(in, 0);
	k->nin = rsd_resident_buffer_nbytes(in, 0);
	k->w = rsd_resident_data(w, 0);
	k->nw = rsd_resident_buffer_nbytes(w, 0);
	k->seed = batch_byte(i);
	atomic_init(&k->state, 0);
	reads[0] = (struct rsd_simdev_access){ .ptr = (void *)k->in, .nbytes = k->nin };
	reads[1] = (struct rsd_simdev_access){ .ptr = (void *)k->w, .nbytes = k->nw };
	return rsd_simdev_launch_kernel(p->sd, p->stream, KERNEL_NS, reads, 2, kernel, k);
}

static int run(struct pipeline *p)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	int err;

	err = use_batch(p, 0);
	for (unsigned i = 0; !err && i < NBATCH; i++) {
		err = queue_kernel(p, i);
		if (!err)
			err = rsd_use_close(p->use[i], NULL);
		if (!err)
			err = ops->event_record(p->sd, p->stream, &p->done[i]);
		if (err || i + 1 == NBATCH)
			break;
		if (i > 0) {
			err = ops->event_sync(p->sd, p->done[i - 1]);
			p->host_waits++;
		}
		/* Reaping ends use i - 1's leases now that kernel i - 1 ran. */
		if (!err)
			err = rsd_manager_reap(p->m);
		if (!err)
			err = use_batch(p, i + 1);
		/* Not a wait: did batch i + 1's use return before kernel i ended? */
		p->early += !err && atomic_load(&p->k[i].state) == 0;
	}
	/* The results: wait for the last kernel. */
	if (!err) {
		err = ops->stream_sync(p->sd, p->stream);
		p->host_waits++;
	}
	return err;
}

static int setup(struct pipeline *p)
{
	struct rsd_simdev_config sc = { .ndevices = 1,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.delay_ns = DEVICE_DELAY_NS };
	struct rsd_budget budget = { { RSD_CUDA, 0 }, WEIGHTS + 2 * (uint64_t)BATCH };
	struct rsd_manager_config cfg = { .budgets = &budget, .nbudgets = 1 };
	int err;

	p->dev = budget.location;
	err = rsd_simdev_create(&sc, &p->sd);
	if (err)
		return err;
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = p->sd;
	err = rsd_manager_create(&cfg, &p->m);
	if (!err)
		err = adopt(p, WEIGHTS, WEIGHT_BYTE, &p->w);
	for (unsigned i = 0; !err && i < NBATCH; i++)
		err = adopt(p, BATCH, batch_byte(i), &p->in[i]);
	/* NULL policy: a tiered LRU; a batch's device copy is dropped when
	 * room is needed (its pinned copy stays). */
	if (!err)
		err = rsd_controller_create(p->m, NULL, 0, &p->c);
	if (!err)
		err = rsd_simdev_stream_create(p->sd, 0, &p->stream);
	return err;
}

static void teardown(struct pipeline *p)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();

	for (unsigned i = 0; i < NBATCH; i++) {
		rsd_use_free(p->use[i]);
		if (p->done[i])
			ops->event_destroy(p->sd, p->done[i]);
	}
	rsd_controller_free(p->c);
	if (p->m) {
		/* Waits for what is still queued (after a failure). */
		rsd_manager_close(p->m, RSD_CLOSE_FORCE);
		rsd_manager_destroy(p->m);
	}
	if (p->stream)
		rsd_simdev_stream_destroy(p->sd, p->stream);
	rsd_simdev_destroy(p->sd);
}

int main(void)
{
	struct pipeline p = { 0 };
	unsigned intact = 0;
	int rc = 1;

	if (setup(&p) || run(&p)) {
		fprintf(stderr, "prefetch: %s\n", rsd_last_error()->message);
		goto out;
	}
	for (unsigned i = 0; i < NBATCH; i++) {
		int state = atomic_load(&p.k[i].state);

		printf("batch %u: %zu evictions; kernel read %llu input and %llu weight bytes: %s\n",
		       i, p.evictions[i], (unsigned long long)p.k[i].nin,
		       (unsigned long long)p.k[i].nw,
		       state == 1 ? "intact" :
		       state < 0  ? "WRONG BYTES" :
				    "NOT RUN");
		intact += state == 1;
	}
	printf("%u of %u batches intact; the host waited %u times (%u for the kernel two "
	       "batches back, 1 for the last)\n",
	       intact, NBATCH, p.host_waits, p.host_waits - 1);
	printf("the next batch's copies were queued before the current kernel finished in %u of "
	       "%u batches\n",
	       p.early, NBATCH - 1);
	rc = intact == NBATCH ? 0 : 1;
out:
	teardown(&p);
	return rc;
}
