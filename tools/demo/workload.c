// SPDX-License-Identifier: MIT
/*
 * The rsd-demo workload (see tools/rsd-demo.c for what it does). A single
 * process runs it without a ring; tools/rsd-demo-mpi.c lends it one, and
 * every stage then also hands a share of the rank's ciphertexts to the next
 * rank and adopts as many from the previous one. The stages themselves and
 * their kernels are in stages.c, the options in options.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

static uint64_t fnv1a(const unsigned char *p, uint64_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

uint64_t demo_window_sum(const unsigned char *p, uint64_t n)
{
	uint64_t w = n < DEMO_WINDOW ? n : DEMO_WINDOW;

	return fnv1a(p, w) ^ (fnv1a(p + n - w, w) * 31);
}

static void fill(unsigned char *p, uint64_t n, unsigned seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

/* The checksum of what fill(seed) writes (what a value must hold), and
 * its demo_window_sum(); either may be NULL. */
static int seed_sum(uint64_t n, unsigned seed, uint64_t *sum, uint64_t *window)
{
	unsigned char *tmp = malloc(n);

	if (!tmp)
		return -1;
	fill(tmp, n, seed);
	if (sum)
		*sum = fnv1a(tmp, n);
	if (window)
		*window = demo_window_sum(tmp, n);
	free(tmp);
	return 0;
}

static int regenerate_key(void *ctx, struct rsd_resident **out)
{
	struct keysrc *k = ctx;
	int err;

	err = rsd_resident_alloc(k->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &k->nbytes,
				 &k->seed, sizeof(k->seed), out);
	if (err)
		return err;
	fill(rsd_resident_data(*out, 0), k->nbytes, 1000 + k->seed);
	k->loads++;
	return 0;
}

void demo_account(struct demo *dm, struct row *r, enum phase ph, const struct rsd_decision *d,
		  const struct rsd_plan_report *rep, const struct rsd_handle *outgoing, size_t n)
{
	for (size_t i = 0; d && i < d->nevictions; i++) {
		bool drop = d->evictions[i].action.kind == RSD_ACT_DROP;

		dm->evictions++;
		dm->drops += drop;
		dm->spills += !drop;
		if (r) {
			r->evict++;
			r->drops += drop;
			r->spills += !drop;
		}
	}
	if (d)
		dm->explored += d->explored_states;
	if (r && d)
		r->explored += d->explored_states;
	for (size_t i = 0; rep && i < rep->ntransitions; i++) {
		const struct rsd_transition *t = &rep->transitions[i];
		enum tier from, to;
		enum why why;

		if (t->no_op || !t->has_source || !t->has_destination)
			continue;
		from = demo_tier(t->source);
		to = demo_tier(t->destination);
		why = demo_why_of(ph, t, outgoing, n);
		dm->moved[why][from][to] += t->storage_nbytes;
		dm->nmoved[why][from][to]++;
		if (!r)
			continue;
		if (to == T_DEVICE && from != T_DEVICE)
			r->h2d += t->storage_nbytes;
		else if (from == T_DEVICE && to != T_DEVICE)
			r->d2h += t->storage_nbytes;
		else if (from != T_DEVICE && to != T_DEVICE)
			r->h2h += t->storage_nbytes;
	}
}

/* What moved where and why, with the evictions behind it. */
static void print_moved(struct demo *dm)
{
	fprintf(dm->out, "\n%u evictions (%u spills, %u drops of recoverable keys and weights)\n",
		dm->evictions, dm->spills, dm->drops);
	fprintf(dm->out, "what moved where, and why:\n");
	for (int w = 0; w < NWHY; w++)
		for (int i = 0; i < NTIERS; i++)
			for (int j = 0; j < NTIERS; j++)
				if (dm->nmoved[w][i][j])
					fprintf(dm->out, "  %-8s -> %-8s %8.1f MiB %5u x  %s\n",
						demo_tier_name[i], demo_tier_name[j],
						demo_mib(dm->moved[w][i][j]), dm->nmoved[w][i][j],
						demo_why_text[w]);
	if (dm->ring)
		fprintf(dm->out,
			"sent %u ciphertexts (%.1f MiB) to rank %d from pinned-host leases; "
			"received %u from rank %d, adopted under new handles\n",
			dm->sent, demo_mib((uint64_t)dm->sent * dm->o->ct_bytes),
			(dm->ring->rank + 1) % dm->ring->nranks, dm->received,
			(dm->ring->rank + dm->ring->nranks - 1) % dm->ring->nranks);
}

/* Bring a value to pageable host and checksum it through a lease. */
static int checksum(struct demo *dm, struct rsd_handle h, bool exclusive, uint64_t *sum)
{
	struct rsd_plan_report rep = { "verify", 1, NULL, 0, 0 };
	struct rsd_transition t;
	const struct rsd_resident *v;
	struct rsd_lease *l;
	int err;

	err = exclusive ? rsd_move(dm->m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, &t) :
			  rsd_ensure(dm->m, h, RSD_LOC_PAGEABLE_HOST, NULL, &t);
	if (err)
		return err;
	rep.transitions = &t;
	demo_account(dm, NULL, PH_VERIFY, NULL, &rep, NULL, 0);
	err = rsd_acquire(dm->m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l);
	if (err)
		return err;
	err = rsd_lease_value(l, h, &v);
	if (!err)
		*sum = fnv1a(rsd_resident_data(v, 0), rsd_resident_buffer_nbytes(v, 0));
	rsd_lease_release(l, 0);
	rsd_lease_free(l);
	return err;
}

/* The device: the CUDA runtime's cuda:<local rank> when this process sees
 * it, else a simulated device with that index. */
static int open_manager(struct demo *dm)
{
	const struct demo_opts *o = dm->o;
	int idx = dm->ring ? dm->ring->local_rank : 0;
	struct rsd_manager_config cfg = { 0 };
	struct rsd_budget budgets[2];
	char name[RSD_LOCATION_NAME_MAX], label[RSD_MANAGER_LABEL_MAX + 1];
	int err;

	rsd_cuda_location(idx, &dm->dev);
	/* Traces name the manager's series by its policy (and, comparing,
	 * whether it prefetched). */
	snprintf(label, sizeof(label), "%s%s", demo_policy_name[dm->pol],
		 o->compare ? (o->prefetch ? " prefetching" : " waiting") : "");
	cfg.label = label;
	budgets[0] = (struct rsd_budget){ dm->dev, o->device_budget };
	budgets[1] = (struct rsd_budget){ RSD_LOC_PINNED_HOST, o->pinned_budget };
	cfg.budgets = budgets;
	cfg.nbudgets = 2;
	rsd_location_name(dm->dev, name, sizeof(name));
	if (rsd_cuda_driver()->device_count(NULL) > idx) {
		cfg.driver = rsd_cuda_driver();
		fprintf(dm->out, "device: %s through the CUDA runtime driver\n", name);
	} else {
		/* Without the link model the device runs work as it is queued:
		 * every run is the same, figure for figure. With it, copies take
		 * the time an H200 node's links would (stretched by the time
		 * scale) and run in the background as on a GPU. */
		struct rsd_simdev_config sc = {
			.ndevices = idx + 1,
			.auto_complete = !o->links,
			.pooled = true,
			.progress = RSD_SIMDEV_BACKGROUND,
			.links = o->links,
			.time_scale =
				o->links && !getenv("RSD_SIMDEV_TIME_SCALE") ? DEMO_TIME_SCALE : 0
		};

		err = rsd_simdev_create(&sc, &dm->sd);
		if (err)
			return err;
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = dm->sd;
		fprintf(dm->out, "device: %s is the simulated device (no CUDA GPU %d here)%s\n",
			name, idx,
			o->links ? ", its links modelled, work run in the background" : "");
	}
	dm->ops = cfg.driver;
	err = rsd_manager_create(&cfg, &dm->m);
	if (err)
		return err;
	{
		/* The device spills to pinned host, else pageable host; the
		 * next-use policy picks which comes first by when a value is
		 * needed again, the tiered LRU always tries pinned host first. */
		struct rsd_location to_host[] = { RSD_LOC_PINNED_HOST, RSD_LOC_PAGEABLE_HOST };
		struct rsd_location to_pageable[] = { RSD_LOC_PAGEABLE_HOST };
		struct rsd_fallback_tier tiers[] = { { dm->dev, to_host, 2 },
						     { RSD_LOC_PINNED_HOST, to_pageable, 1 } };

		if (dm->pol == DP_NEXT_USE)
			err = rsd_next_use_create(tiers, 2,
						  o->near_set ? o->near : demo_default_near(o),
						  &dm->policy);
		else
			err = rsd_tiered_lru_create(tiers, 2, &dm->policy);
		if (err)
			return err;
	}
	err = rsd_controller_create(dm->m, dm->policy, 0, &dm->c);
	/* One thread drives the demo and handles a stage that does not fit
	 * yet itself (it decides again once the previous kernel has run, and
	 * counts it): its uses fail at once rather than wait. */
	if (!err)
		err = rsd_controller_set_flags(dm->c, RSD_CTRL_NOWAIT);
	if (err)
		return err;
	if (dm->sd)
		return rsd_simdev_stream_create(dm->sd, idx, &dm->stream);
	/* On the CUDA driver the consumer stream is the driver's stream of the
	 * rank's device: a use of a value there needs one. */
	dm->stream = rsd_cuda_driver()->default_stream(NULL, idx);
	return dm->stream ? 0 : -RSD_EDEVICE;
}

/* The values: ciphertexts (ids rank * ciphertexts + i, job-wide), keys with
 * sources, weights. */
static int populate(struct demo *dm)
{
	const struct demo_opts *o = dm->o;
	struct rsd_location pageable = RSD_LOC_PAGEABLE_HOST;
	unsigned rank = dm->ring ? (unsigned)dm->ring->rank : 0;

	dm->ct = calloc(o->ciphertexts, sizeof(*dm->ct));
	dm->meta = calloc(o->ciphertexts, sizeof(*dm->meta));
	dm->key = calloc(o->keys, sizeof(*dm->key));
	dm->ks = calloc(o->keys, sizeof(*dm->ks));
	dm->w = calloc(o->weights, sizeof(*dm->w));
	dm->ct_sum = calloc(o->ciphertexts, sizeof(*dm->ct_sum));
	dm->key_sum = calloc(o->keys, sizeof(*dm->key_sum));
	dm->w_sum = calloc(o->weights, sizeof(*dm->w_sum));
	if (!dm->ct || !dm->meta || !dm->key || !dm->ks || !dm->w || !dm->ct_sum || !dm->key_sum ||
	    !dm->w_sum)
		return -1;
	for (unsigned i = 0; i < o->ciphertexts; i++) {
		struct ct_meta *mt = &dm->meta[i];
		struct rsd_resident *r;

		*mt = (struct ct_meta){ rank * o->ciphertexts + i, 7, rank, 0 };
		if (rsd_resident_alloc(dm->m, &rsd_resident_type, pageable, 1, &o->ct_bytes, mt,
				       sizeof(*mt), &r))
			return -1;
		fill(rsd_resident_data(r, 0), o->ct_bytes, mt->gid);
		dm->ct_sum[i] = demo_window_sum(rsd_resident_data(r, 0), o->ct_bytes);
		if (rsd_adopt(dm->m, r, NULL, RSD_EXCLUSIVE, &dm->ct[i])) {
			rsd_resident_free(r);
			return -1;
		}
	}
	for (unsigned i = 0; i < o->keys; i++) {
		struct rsd_value_spec spec = { &rsd_resident_type, o->key_bytes, o->key_bytes,
					       RSD_REPLICABLE, RSD_RECONSTRUCTIBLE };
		struct rsd_source src = { regenerate_key, NULL, &dm->ks[i] };

		dm->ks[i] = (struct keysrc){ dm->m, i, o->key_bytes, 0 };
		if (seed_sum(o->key_bytes, 1000 + i, NULL, &dm->key_sum[i]) ||
		    rsd_register_source(dm->m, &spec, &src, pageable, &dm->key[i]))
			return -1;
		/* Rotation keys are costly to regenerate: keep them longer. */
		if (rsd_controller_set_policy_metadata(dm->c, dm->key[i], 1, NULL))
			return -1;
	}
	for (unsigned i = 0; i < o->weights; i++) {
		struct rsd_resident *r;

		if (rsd_resident_alloc(dm->m, &rsd_resident_type, pageable, 1, &o->weight_bytes,
				       NULL, 0, &r))
			return -1;
		fill(rsd_resident_data(r, 0), o->weight_bytes, 5000 + i);
		dm->w_sum[i] = demo_window_sum(rsd_resident_data(r, 0), o->weight_bytes);
		if (rsd_adopt(dm->m, r, NULL, RSD_REPLICABLE, &dm->w[i])) {
			rsd_resident_free(r);
			return -1;
		}
	}
	return 0;
}

void demo_stage_handles(struct demo *dm, unsigned s, struct rsd_requirement *req)
{
	const struct demo_opts *o = dm->o;
	uint32_t idx[DEMO_NSTAGE_VALUES];

	demo_stage_values(o, s, idx);
	for (unsigned i = 0; i < DEMO_NSTAGE_VALUES; i++) {
		uint32_t v = idx[i];

		req[i].location = dm->dev;
		req[i].handle = v < o->ciphertexts	     ? dm->ct[v] :
				v < o->ciphertexts + o->keys ? dm->key[v - o->ciphertexts] :
							       dm->w[v - o->ciphertexts - o->keys];
	}
}

/* The job's schedule, declared to the controller for the next-use policy:
 * every stage's values, in stage order, once. */
static int declare_schedule(struct demo *dm)
{
	const struct demo_opts *o = dm->o;
	struct rsd_requirement *req = calloc((size_t)o->stages * DEMO_NSTAGE_VALUES, sizeof(*req));
	struct rsd_handle *h = calloc((size_t)o->stages * DEMO_NSTAGE_VALUES, sizeof(*h));
	struct rsd_schedule_step *steps = calloc(o->stages ? o->stages : 1, sizeof(*steps));
	int err = -RSD_ENOMEM;

	if (req && h && steps) {
		for (unsigned s = 0; s < o->stages; s++) {
			demo_stage_handles(dm, s, req + (size_t)s * DEMO_NSTAGE_VALUES);
			for (unsigned i = 0; i < DEMO_NSTAGE_VALUES; i++)
				h[(size_t)s * DEMO_NSTAGE_VALUES + i] =
					req[(size_t)s * DEMO_NSTAGE_VALUES + i].handle;
			steps[s].handles = h + (size_t)s * DEMO_NSTAGE_VALUES;
			steps[s].nhandles = DEMO_NSTAGE_VALUES;
		}
		err = rsd_controller_set_schedule(dm->c, steps, o->stages, false);
	}
	free(req);
	free(h);
	free(steps);
	return err;
}

/*
 * The ring step: o.share ciphertexts leave for rank + 1 and as many arrive
 * from rank - 1, into the same slots. One controller use brings the leaving
 * ones to pinned host (a lease there: MPI reads their buffers) and reserves
 * pinned room for the arriving ones, which are received into residents
 * allocated in the pinned pool and adopted once the use is closed.
 */
int demo_exchange(struct demo *dm, unsigned s, struct row *row)
{
	const struct demo_opts *o = dm->o;
	struct rsd_location pinned = RSD_LOC_PINNED_HOST;
	size_t k = o->share;
	struct rsd_requirement *req = calloc(k, sizeof(*req));
	struct rsd_handle *outgoing = calloc(k, sizeof(*outgoing));
	struct rsd_resident **in = calloc(k, sizeof(struct rsd_resident *));
	struct ct_meta *out_meta = calloc(k, sizeof(*out_meta));
	struct ct_meta *in_meta = calloc(k, sizeof(*in_meta));
	const void **out_ptr = calloc(2 * k, sizeof(*out_ptr));
	void **in_ptr = calloc(2 * k, sizeof(*in_ptr));
	unsigned *slot = calloc(k, sizeof(*slot));
	struct rsd_reservation_spec room = { pinned, k * o->ct_bytes, "incoming" };
	char name[32];
	struct rsd_request request = { name, req, k, &room, 1 };
	struct rsd_plan_report *rep = NULL;
	struct rsd_use *u = NULL;
	int err = -1;

	if (!req || !outgoing || !in || !out_meta || !in_meta || !out_ptr || !in_ptr || !slot)
		goto out;
	for (size_t j = 0; j < k; j++) {
		slot[j] = (unsigned)((s * 7 + 1 + j) % o->ciphertexts);
		outgoing[j] = dm->ct[slot[j]];
		req[j] = (struct rsd_requirement){ outgoing[j], pinned };
	}
	/* The stage's kernels read the leaving ciphertexts on dm->stream; an
	 * EXCLUSIVE value may move to pinned host only once that work has
	 * finished and the stage's leases are reaped (on the simulated device
	 * in immediate mode that is already so; on a GPU it is not). */
	if (dm->stream) {
		err = dm->ops->stream_sync(dm->sd, dm->stream);
		if (!err)
			err = rsd_manager_reap(dm->m);
		if (err)
			goto out;
	}
	snprintf(name, sizeof(name), "exchange-%u", s);
	err = rsd_controller_use(dm->c, &request, NULL, 0, NULL, 0, &u);
	if (err)
		goto out;
	for (size_t j = 0; j < k; j++) {
		const struct rsd_resident *v;

		err = rsd_use_value(u, outgoing[j], pinned, &v);
		if (err)
			goto out;
		out_meta[j] = dm->meta[slot[j]];
		out_meta[j].hops++;
		out_ptr[j] = &out_meta[j];
		out_ptr[k + j] = rsd_resident_data(v, 0);
		in_ptr[j] = &in_meta[j];
	}
	err = -1;
	if (dm->ring->shift(dm->ring, out_ptr, in_ptr, k, sizeof(struct ct_meta)))
		goto out;
	for (size_t j = 0; j < k; j++) {
		err = rsd_resident_alloc(dm->m, &rsd_resident_type, pinned, 1, &o->ct_bytes,
					 &in_meta[j], sizeof(in_meta[j]), &in[j]);
		if (err)
			goto out;
		in_ptr[k + j] = rsd_resident_data(in[j], 0);
	}
	err = -1;
	if (dm->ring->shift(dm->ring, out_ptr + k, in_ptr + k, k, o->ct_bytes))
		goto out;
	err = rsd_use_close(u, &rep);
	demo_account(dm, row, PH_EXCHANGE, rsd_use_decision(u), rep, outgoing, k);
	if (err)
		goto out;
	/* The leaving values are the next rank's now; the arriving ones are
	 * ours under handles of our own. */
	for (size_t j = 0; j < k; j++) {
		uint64_t sum = demo_window_sum(rsd_resident_data(in[j], 0), o->ct_bytes);

		err = rsd_discard(dm->m, outgoing[j], NULL);
		if (!err)
			err = rsd_adopt(dm->m, in[j], &pinned, RSD_EXCLUSIVE, &dm->ct[slot[j]]);
		if (err)
			goto out;
		dm->ct_sum[slot[j]] = sum;
		in[j] = NULL;
		dm->meta[slot[j]] = in_meta[j];
	}
	dm->sent += (unsigned)k;
	dm->received += (unsigned)k;
out:
	rsd_plan_report_free(rep);
	rsd_use_free(u);
	for (size_t j = 0; in && j < k; j++)
		rsd_resident_free(in[j]);
	free(req);
	free(outgoing);
	free(in);
	free(out_meta);
	free(in_meta);
	free(out_ptr);
	free(in_ptr);
	free(slot);
	return err;
}

/*
 * Every ciphertext against its seed and its metadata, every key against
 * its source's seed. owned[gid] counts the intact ciphertexts this rank
 * holds per job-wide id. Returns the number of losses.
 */
static unsigned verify(struct demo *dm, uint64_t *owned, unsigned *loads)
{
	const struct demo_opts *o = dm->o;
	unsigned lost = 0;

	for (unsigned i = 0; i < o->ciphertexts; i++) {
		uint64_t sum = 0, want = 0;

		if (checksum(dm, dm->ct[i], true, &sum) ||
		    seed_sum(o->ct_bytes, dm->meta[i].gid, &want, NULL) || sum != want) {
			fprintf(stderr, "rsd-demo: ciphertext %u (slot %u) is corrupt or lost\n",
				dm->meta[i].gid, i);
			lost++;
			continue;
		}
		owned[dm->meta[i].gid]++;
	}
	*loads = 0;
	for (unsigned i = 0; i < o->keys; i++) {
		uint64_t sum = 0, want = 0;

		if (checksum(dm, dm->key[i], false, &sum) ||
		    seed_sum(o->key_bytes, 1000 + i, &want, NULL) || sum != want) {
			fprintf(stderr, "rsd-demo: rotation key %u is corrupt or lost\n", i);
			lost++;
		}
		*loads += dm->ks[i].loads;
	}
	return lost;
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Job-wide: every ciphertext id owned intact exactly once, nothing lost on
 * any rank. Rank 0 prints the job's lines. Returns the job's losses. */
static uint64_t job_summary(struct demo *dm, uint64_t *tally, size_t ntally,
			    const struct timespec *t0)
{
	const struct demo_opts *o = dm->o;
	struct demo_ring *ring = dm->ring;
	uint64_t nct = (uint64_t)ring->nranks * o->ciphertexts, lost, missing = 0;
	uint64_t *owned = tally + 4;

	/* tally: lost, key loads, sent, received, then owned[gid]. */
	if (ring->sum(ring, tally, ntally))
		ring->abort(ring, 1);
	lost = tally[0];
	for (uint64_t g = 0; g < nct; g++)
		if (owned[g] != 1)
			missing++;
	if (ring->rank == 0) {
		printf("\n== job: %d ranks ==\n", ring->nranks);
		printf("ring: %llu ciphertexts sent, %llu received and adopted (%.1f MiB)\n",
		       (unsigned long long)tally[2], (unsigned long long)tally[3],
		       demo_mib(tally[2] * o->ct_bytes));
		printf("verified %llu ciphertexts (each owned by exactly one rank: %s) and "
		       "%llu keys (%llu key regenerations) on %d ranks: %s\n",
		       (unsigned long long)nct, missing ? "NO" : "yes",
		       (unsigned long long)ring->nranks * o->keys, (unsigned long long)tally[1],
		       ring->nranks, lost || missing ? "DATA LOST" : "all intact");
		printf("elapsed %.2f s\n", seconds_since(t0));
	}
	return lost + missing;
}

static void demo_close(struct demo *dm)
{
	rsd_controller_free(dm->c);
	rsd_policy_free(dm->policy);
	if (dm->m) {
		rsd_manager_close(dm->m, RSD_CLOSE_FORCE);
		rsd_manager_destroy(dm->m);
	}
	if (dm->sd && dm->stream)
		rsd_simdev_stream_destroy(dm->sd, dm->stream);
	rsd_simdev_destroy(dm->sd);
	free(dm->ct);
	free(dm->meta);
	free(dm->key);
	free(dm->ks);
	free(dm->w);
	free(dm->ct_sum);
	free(dm->key_sum);
	free(dm->w_sum);
}

/*
 * One run under dm->pol: the manager and its values, every stage, the
 * table, the checks. owned: as for verify. Fills res; 0, or -1 after a
 * failure (said on stderr).
 */
static int run_one(struct demo *dm, uint64_t *owned, unsigned *loads, struct demo_result *res)
{
	const struct demo_opts *o = dm->o;
	struct table tab = { 0 };
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (open_manager(dm) || populate(dm) || (dm->pol == DP_NEXT_USE && declare_schedule(dm)) ||
	    demo_table_begin(&tab, o->stages))
		goto out;
	if (demo_stages(dm, &tab))
		goto out;
	if (!o->quiet)
		demo_table_end(&tab, dm->out);
	fprintf(dm->out, "\n%u stages in %.3f s, %s\n", o->stages, (double)dm->stages_ns / 1e9,
		o->prefetch ? "prefetching: each stage's copies queued while the stage before "
			      "computed" :
			      "waiting for each stage's copies");
	if (dm->room_waits)
		fprintf(dm->out,
			"%u times the device could not hold two stages' values: the next stage "
			"was decided again once this one's kernel had run\n",
			dm->room_waits);
	if (dm->sd)
		fprintf(dm->out, "the stages' kernels read %u values on the device: %s\n",
			dm->kernel_reads, dm->kernel_faults ? "WRONG BYTES" : "all intact");
	demo_print_snapshot(dm->out, dm->m);
	/* The stages' figures, before the checks move anything. */
	res->ran = true;
	for (int w = 0; w < NWHY; w++)
		for (int i = 0; i < NTIERS; i++)
			for (int j = 0; j < NTIERS; j++)
				if (w != W_VERIFY)
					res->moved[i][j] += dm->moved[w][i][j];
	res->evictions = dm->evictions;
	res->spills = dm->spills;
	res->drops = dm->drops;
	res->explored = dm->explored;
	res->stages_ns = dm->stages_ns;
	res->kernel_reads = dm->kernel_reads;
	res->kernel_faults = dm->kernel_faults;
	/* Nothing lost: every ciphertext and key byte is what it was, and
	 * every kernel read what it should have. */
	res->lost = verify(dm, owned, loads) + dm->kernel_faults;
	print_moved(dm);
	fprintf(dm->out, "\nverified %u ciphertexts and %u keys (%u key regenerations): %s\n",
		o->ciphertexts, o->keys, *loads, res->lost ? "DATA LOST" : "all intact");
	rc = 0;
out:
	free(tab.rows);
	return rc;
}

int demo_workload(const struct demo_opts *o, enum demo_policy pol, struct demo_ring *ring,
		  FILE *out, struct demo_result *res)
{
	struct demo dm = { .o = o, .pol = pol, .ring = ring, .out = out };
	uint64_t *owned =
		calloc((size_t)(ring ? ring->nranks : 1) * o->ciphertexts, sizeof(*owned));
	FILE *null = NULL;
	unsigned loads = 0;
	int rc = -1;

	if (!out)
		dm.out = null = fopen("/dev/null", "w");
	if (dm.out && owned)
		rc = run_one(&dm, owned, &loads, res);
	demo_close(&dm);
	if (null)
		fclose(null);
	free(owned);
	return rc;
}

/* In a job each rank writes its report into memory and rank 0 prints them
 * in rank order, then the job's lines. Alone, every policy asked for runs
 * in turn, and two are compared at the end. */
int demo_run(int argc, char **argv, struct demo_ring *ring)
{
	struct demo_result res[NPOLICIES], wait[NPOLICIES];
	struct demo_opts o;
	struct demo dm = { .ring = ring };
	struct timespec t0;
	uint64_t *tally = NULL, lost = 0;
	size_t ntally = 0, textlen = 0;
	char *text = NULL;
	FILE *out;
	unsigned loads = 0, nruns = 0;
	int rc = 1;

	if (demo_parse(argc, argv, &o, ring != NULL))
		return 2;
	for (int p = 0; p < NPOLICIES; p++)
		nruns += !!(o.policies & (1u << p));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	out = ring ? open_memstream(&text, &textlen) : stdout;
	if (!out)
		goto fail;
	if (ring)
		fprintf(out, "== rank %d (pid %d) of %d ==\n", ring->rank, (int)getpid(),
			ring->nranks);
	fprintf(out,
		"%u ciphertexts x %.0f MiB, %u keys x %.0f MiB, %u weights x %.0f MiB; "
		"device budget %.0f MiB, pinned %.0f MiB, workspace %.0f MiB per stage",
		o.ciphertexts, demo_mib(o.ct_bytes), o.keys, demo_mib(o.key_bytes), o.weights,
		demo_mib(o.weight_bytes), demo_mib(o.device_budget), demo_mib(o.pinned_budget),
		demo_mib(o.workspace));
	if (ring)
		fprintf(out, "; %u to the next rank per stage", o.share);
	fprintf(out, "\n\n");
	ntally = 4 + (size_t)(ring ? ring->nranks : 1) * o.ciphertexts;
	tally = calloc(ntally, sizeof(*tally));
	if (!tally)
		goto fail;
	memset(res, 0, sizeof(res));
	memset(wait, 0, sizeof(wait));
	/* --compare-prefetch: each policy waiting (run 0), then prefetching. */
	o.links |= o.compare;
	for (int run = 0; run < NPOLICIES * 2; run++) {
		int p = run / 2;
		struct demo_result *r = run % 2 ? &res[p] : &wait[p];

		if (!(o.policies & (1u << p)) || (run % 2 == 0 && !o.compare))
			continue;
		if (o.compare)
			o.prefetch = run % 2;
		demo_close(&dm);
		dm = (struct demo){ .o = &o, .pol = (enum demo_policy)p, .ring = ring, .out = out };
		dm.progress = o.quiet && (!ring || ring->rank == 0);
		if (o.compare)
			fprintf(out, "=== policy: %s, %s ===\n\n", demo_policy_name[p],
				o.prefetch ? "prefetching" : "waiting for each stage's copies");
		else if (nruns > 1)
			fprintf(out, "=== policy: %s ===\n\n", demo_policy_name[p]);
		memset(tally, 0, ntally * sizeof(*tally));
		if (run_one(&dm, tally + 4, &loads, r))
			goto fail;
		lost += r->lost;
		if (nruns > 1 || o.compare)
			fprintf(out, "\n");
	}
	if (nruns > 1)
		demo_print_compare(out, &o, res);
	if (o.compare)
		demo_print_prefetch(out, &o, wait, res);
	fprintf(out, "elapsed %.2f s\n", seconds_since(&t0));
	if (ring) {
		tally[0] = lost;
		tally[1] = loads;
		tally[2] = dm.sent;
		tally[3] = dm.received;
		fclose(out);
		out = NULL;
		if (ring->print_all(ring, text, textlen))
			ring->abort(ring, 1);
		lost = job_summary(&dm, tally, ntally, &t0);
	}
	rc = lost ? 1 : 0;
	goto out;
fail:
	fprintf(stderr, "rsd-demo: %s\n", rsd_last_error()->message);
	if (ring)
		ring->abort(ring, 1);
out:
	if (ring && out)
		fclose(out);
	free(text);
	free(tally);
	demo_close(&dm);
	return rc;
}
