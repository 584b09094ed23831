// SPDX-License-Identifier: MIT
/*
 * rsd-demo: an encrypted-inference-style workload under a device budget too
 * small for its working set.
 *
 * Values:
 *   ciphertexts  exclusive, must-preserve: adopted once, never regenerated;
 *   rotation keys replicable, reconstructible: a source regenerates each
 *                deterministically from its seed;
 *   weights      replicable plaintext blocks, adopted in pageable memory.
 *
 * Each stage asks the controller (rsd_controller_use) for two ciphertexts,
 * one key and one weight block on the device plus a workspace reservation.
 * The deterministic tiered LRU spills ciphertexts cuda:0 -> pinned-host ->
 * pageable-host and drops keys and weights that can be recovered. At the end
 * every ciphertext and key is checked against what was adopted or
 * regenerated; the exit status says whether anything was lost.
 *
 * Uses the CUDA runtime when a GPU is present, the simulated device
 * otherwise (and says which).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#define MiB (1024ull * 1024)

/* Bytes as MiB for printing. */
static double mib(uint64_t nbytes)
{
	return (double)nbytes / (double)MiB;
}

struct opts {
	unsigned ciphertexts, keys, weights, stages;
	uint64_t ct_bytes, key_bytes, weight_bytes, workspace;
	uint64_t device_budget, pinned_budget;
	bool quiet;
};

struct keysrc {
	struct rsd_manager *m;
	unsigned seed;
	uint64_t nbytes;
	unsigned loads;
};

struct stage_stats {
	unsigned evictions, spills, drops, loads;
	uint64_t moved[3][3]; /* [from tier][to tier]: pageable, pinned, device */
};

static const char *tier_name[3] = { "pageable", "pinned", "device" };

static unsigned tier(struct rsd_location at)
{
	return at.kind == RSD_CUDA ? 2 : (unsigned)at.kind;
}

static uint64_t fnv1a(const unsigned char *p, uint64_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
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

static void usage(void)
{
	fprintf(stderr,
		"usage: rsd-demo [-c CIPHERTEXTS] [-k KEYS] [-w WEIGHTS] [-s STAGES]\n"
		"                [--ct-mib N] [--key-mib N] [--weight-mib N] [--workspace-mib N]\n"
		"                [--device-mib N] [--pinned-mib N] [-q]\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "ct-mib", required_argument, NULL, 1 },
		{ "key-mib", required_argument, NULL, 2 },
		{ "weight-mib", required_argument, NULL, 3 },
		{ "workspace-mib", required_argument, NULL, 4 },
		{ "device-mib", required_argument, NULL, 5 },
		{ "pinned-mib", required_argument, NULL, 6 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .ciphertexts = 24, .keys = 6, .weights = 12, .stages = 60,
			    .ct_bytes = 2 * MiB, .key_bytes = 4 * MiB, .weight_bytes = 2 * MiB,
			    .workspace = 4 * MiB, .device_budget = 24 * MiB,
			    .pinned_budget = 24 * MiB };
	while ((c = getopt_long(argc, argv, "c:k:w:s:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o->ciphertexts = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'k': o->keys = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'w': o->weights = (unsigned)strtoul(optarg, NULL, 0); break;
		case 's': o->stages = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'q': o->quiet = true; break;
		case 1: o->ct_bytes = strtoull(optarg, NULL, 0) * MiB; break;
		case 2: o->key_bytes = strtoull(optarg, NULL, 0) * MiB; break;
		case 3: o->weight_bytes = strtoull(optarg, NULL, 0) * MiB; break;
		case 4: o->workspace = strtoull(optarg, NULL, 0) * MiB; break;
		case 5: o->device_budget = strtoull(optarg, NULL, 0) * MiB; break;
		case 6: o->pinned_budget = strtoull(optarg, NULL, 0) * MiB; break;
		default: usage(); return -1;
		}
	}
	if (o->ciphertexts < 2 || !o->keys || !o->weights || !o->ct_bytes) {
		usage();
		return -1;
	}
	return 0;
}

static void account(struct stage_stats *st, const struct rsd_decision *d,
		    const struct rsd_plan_report *rep)
{
	st->evictions += (unsigned)d->nevictions;
	for (size_t i = 0; i < d->nevictions; i++) {
		if (d->evictions[i].action.kind == RSD_ACT_DROP)
			st->drops++;
		else
			st->spills++;
	}
	for (size_t i = 0; rep && i < rep->ntransitions; i++) {
		const struct rsd_transition *t = &rep->transitions[i];

		if (t->no_op || !t->has_source || !t->has_destination)
			continue;
		st->moved[tier(t->source)][tier(t->destination)] += t->storage_nbytes;
	}
}

static void print_snapshot(struct rsd_manager *m)
{
	struct rsd_snapshot *s;
	char name[RSD_LOCATION_NAME_MAX];

	if (rsd_snapshot_take(m, &s))
		return;
	printf("\nfinal snapshot (state_version %llu, %zu values)\n",
	       (unsigned long long)s->state_version, s->nvalues);
	printf("  %-14s %10s %10s %10s %10s %10s %7s\n", "location", "budget", "used", "reserved",
	       "peak used", "peak chgd", "values");
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];
		char budget[32] = "-";

		if (l->has_budget)
			snprintf(budget, sizeof(budget), "%.1fM", mib(l->budget_bytes));
		printf("  %-14s %10s %9.1fM %9.1fM %9.1fM %9.1fM %7llu\n",
		       rsd_location_name(l->location, name, sizeof(name)), budget,
		       mib(l->used_bytes), mib(l->reserved_bytes), mib(l->peak_used_bytes),
		       mib(l->peak_charged_bytes),
		       (unsigned long long)l->value_count);
	}
	rsd_snapshot_free(s);
}

/* Bring a value to pageable host and checksum it through a lease. */
static int checksum(struct rsd_manager *m, struct rsd_handle h, bool exclusive, uint64_t *sum)
{
	const struct rsd_resident *v;
	struct rsd_lease *l;
	int err;

	err = exclusive ? rsd_move(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL)
			: rsd_ensure(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL);
	if (!err)
		err = rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l);
	if (err)
		return err;
	err = rsd_lease_value(l, h, &v);
	if (!err)
		*sum = fnv1a(rsd_resident_data(v, 0), rsd_resident_buffer_nbytes(v, 0));
	rsd_lease_release(l, 0);
	rsd_lease_free(l);
	return err;
}

int main(int argc, char **argv)
{
	struct rsd_manager_config cfg = { 0 };
	struct rsd_budget budgets[2];
	struct rsd_simdev *sd = NULL;
	struct rsd_manager *m = NULL;
	struct rsd_controller *c = NULL;
	struct rsd_policy *policy = NULL;
	struct rsd_location dev, pinned = RSD_LOC_PINNED_HOST, pageable = RSD_LOC_PAGEABLE_HOST;
	struct rsd_handle *ct = NULL, *key = NULL, *w = NULL;
	uint64_t *ct_sum = NULL, *key_sum = NULL;
	struct keysrc *ks = NULL;
	struct stage_stats total;
	void *stream = NULL;
	unsigned lost = 0, loads = 0;
	struct opts o;
	int rc = 1, err;
	struct timespec t0, t1;

	if (parse(argc, argv, &o))
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rsd_cuda_location(0, &dev);
	budgets[0] = (struct rsd_budget){ dev, o.device_budget };
	budgets[1] = (struct rsd_budget){ pinned, o.pinned_budget };
	cfg.budgets = budgets;
	cfg.nbudgets = 2;
	if (rsd_cuda_driver()->device_count(NULL) > 0) {
		cfg.driver = rsd_cuda_driver();
		printf("device: cuda:0 through the CUDA runtime driver\n");
	} else {
		struct rsd_simdev_config sc = { .ndevices = 1, .auto_complete = true, .pooled = true };

		if (rsd_simdev_create(&sc, &sd))
			goto fail;
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = sd;
		printf("device: cuda:0 is the simulated device (no CUDA GPU here)\n");
	}
	if (rsd_manager_create(&cfg, &m))
		goto fail;
	{
		struct rsd_location to_pinned[] = { RSD_LOC_PINNED_HOST };
		struct rsd_location to_pageable[] = { RSD_LOC_PAGEABLE_HOST };
		struct rsd_fallback_tier tiers[] = { { dev, to_pinned, 1 },
						     { pinned, to_pageable, 1 } };

		if (rsd_tiered_lru_create(tiers, 2, &policy) ||
		    rsd_controller_create(m, policy, 0, &c))
			goto fail;
	}
	ct = calloc(o.ciphertexts, sizeof(*ct));
	ct_sum = calloc(o.ciphertexts, sizeof(*ct_sum));
	key = calloc(o.keys, sizeof(*key));
	key_sum = calloc(o.keys, sizeof(*key_sum));
	ks = calloc(o.keys, sizeof(*ks));
	w = calloc(o.weights, sizeof(*w));
	if (!ct || !ct_sum || !key || !key_sum || !ks || !w)
		goto fail;
	for (unsigned i = 0; i < o.ciphertexts; i++) {
		struct rsd_resident *r;
		unsigned level = 7;

		if (rsd_resident_alloc(m, &rsd_resident_type, pageable, 1, &o.ct_bytes, &level,
				       sizeof(level), &r))
			goto fail;
		fill(rsd_resident_data(r, 0), o.ct_bytes, i);
		ct_sum[i] = fnv1a(rsd_resident_data(r, 0), o.ct_bytes);
		if (rsd_adopt(m, r, NULL, RSD_EXCLUSIVE, &ct[i]))
			goto fail;
	}
	for (unsigned i = 0; i < o.keys; i++) {
		struct rsd_value_spec spec = { &rsd_resident_type, o.key_bytes, o.key_bytes,
					       RSD_REPLICABLE, RSD_RECONSTRUCTIBLE };
		struct rsd_source src = { regenerate_key, NULL, &ks[i] };
		unsigned char *tmp = malloc(o.key_bytes);

		if (!tmp)
			goto fail;
		ks[i] = (struct keysrc){ m, i, o.key_bytes, 0 };
		fill(tmp, o.key_bytes, 1000 + i);
		key_sum[i] = fnv1a(tmp, o.key_bytes);
		free(tmp);
		if (rsd_register_source(m, &spec, &src, pageable, &key[i]))
			goto fail;
	}
	for (unsigned i = 0; i < o.weights; i++) {
		struct rsd_resident *r;

		if (rsd_resident_alloc(m, &rsd_resident_type, pageable, 1, &o.weight_bytes, NULL, 0,
				       &r))
			goto fail;
		fill(rsd_resident_data(r, 0), o.weight_bytes, 5000 + i);
		if (rsd_adopt(m, r, NULL, RSD_REPLICABLE, &w[i]))
			goto fail;
	}
	/* Rotation keys are costly to regenerate: keep them longer. */
	for (unsigned i = 0; i < o.keys; i++)
		rsd_controller_set_policy_metadata(c, key[i], 1, NULL);
	if (sd && rsd_simdev_stream_create(sd, 0, &stream))
		goto fail;
	/* On the CUDA driver the consumer stream is its cuda:0 stream: a use
	 * of a cuda:0 value needs one. */
	if (!sd && !(stream = rsd_cuda_driver()->default_stream(NULL, 0)))
		goto fail;

	memset(&total, 0, sizeof(total));
	printf("%u ciphertexts x %.0f MiB, %u keys x %.0f MiB, %u weights x %.0f MiB; "
	       "device budget %.0f MiB, pinned %.0f MiB, workspace %.0f MiB per stage\n\n",
	       o.ciphertexts, mib(o.ct_bytes), o.keys, mib(o.key_bytes), o.weights,
	       mib(o.weight_bytes), mib(o.device_budget), mib(o.pinned_budget), mib(o.workspace));
	printf("%-6s %-10s %5s %6s %5s %10s %10s %10s %10s %8s\n", "stage", "request", "evict",
	       "spills", "drops", "H->D MiB", "D->H MiB", "H->H MiB", "dev peak", "explored");
	for (unsigned s = 0; s < o.stages; s++) {
		unsigned a = (s * 5) % o.ciphertexts, b = (s * 5 + 3) % o.ciphertexts;
		struct rsd_requirement req[4] = {
			{ ct[a], dev }, { ct[b == a ? (b + 1) % o.ciphertexts : b], dev },
			{ key[s % o.keys], dev }, { w[(s * 7) % o.weights], dev },
		};
		struct rsd_reservation_spec ws = { dev, o.workspace, "workspace" };
		char name[32];
		struct rsd_request request = { name, req, 4, &ws, 1 };
		struct rsd_plan_report *rep = NULL;
		struct stage_stats st;
		const struct rsd_decision *d;
		struct rsd_snapshot *snap;
		struct rsd_use *u = NULL;
		uint64_t h2d = 0, d2h = 0, h2h, peak = 0;

		snprintf(name, sizeof(name), "stage-%u", s);
		/* A consumer stream finishing between the decision and the
		 * scope's entry (a lease reaped) makes the decision stale: on
		 * an asynchronous device that is normal, so decide again. */
		for (int tries = 0;; tries++) {
			err = rsd_controller_use(c, &request, stream ? &stream : NULL,
						 stream ? 1 : 0, NULL, 0, &u);
			if (err != -RSD_ESTALE || tries == 8)
				break;
			rsd_use_free(u);
			u = NULL;
		}
		if (err) {
			fprintf(stderr, "rsd-demo: %s: %s\n", name, rsd_last_error()->message);
			rsd_use_free(u);
			goto fail;
		}
		d = rsd_use_decision(u);
		/* The stage's kernels would read the borrowed values here. */
		err = rsd_use_close(u, &rep);
		memset(&st, 0, sizeof(st));
		account(&st, d, rep);
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 3; j++) {
				total.moved[i][j] += st.moved[i][j];
				if (j == 2 && i != 2)
					h2d += st.moved[i][j];
				if (i == 2 && j != 2)
					d2h += st.moved[i][j];
			}
		h2h = st.moved[0][1] + st.moved[1][0];
		total.evictions += st.evictions;
		total.spills += st.spills;
		total.drops += st.drops;
		if (!rsd_snapshot_take(m, &snap)) {
			for (size_t i = 0; i < snap->nlocations; i++)
				if (rsd_location_equal(snap->locations[i].location, dev))
					peak = snap->locations[i].peak_charged_bytes;
			rsd_snapshot_free(snap);
		}
		if (!o.quiet)
			printf("%-6u %-10s %5u %6u %5u %10.1f %10.1f %10.1f %9.1fM %8llu\n", s, name,
			       st.evictions, st.spills, st.drops, mib(h2d), mib(d2h), mib(h2h), mib(peak),
			       (unsigned long long)d->explored_states);
		else if (s % 10 == 9)
			fprintf(stderr, "\rrsd-demo: stage %u/%u", s + 1, o.stages);
		rsd_plan_report_free(rep);
		rsd_use_free(u);
		if (err)
			goto fail;
	}
	if (o.quiet)
		fprintf(stderr, "\n");
	printf("\ntotal: %u evictions (%u spills, %u drops)\n", total.evictions, total.spills,
	       total.drops);
	printf("bytes moved per direction (MiB):\n");
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (total.moved[i][j])
				printf("  %-8s -> %-8s %10.1f\n", tier_name[i], tier_name[j],
				       mib(total.moved[i][j]));
	print_snapshot(m);

	/* Nothing lost: every ciphertext and key byte is what it was. */
	for (unsigned i = 0; i < o.ciphertexts; i++) {
		uint64_t sum = 0;

		if (checksum(m, ct[i], true, &sum) || sum != ct_sum[i]) {
			fprintf(stderr, "rsd-demo: ciphertext %u is corrupt or lost\n", i);
			lost++;
		}
	}
	for (unsigned i = 0; i < o.keys; i++) {
		uint64_t sum = 0;

		if (checksum(m, key[i], false, &sum) || sum != key_sum[i]) {
			fprintf(stderr, "rsd-demo: rotation key %u is corrupt or lost\n", i);
			lost++;
		}
		loads += ks[i].loads;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("\nverified %u ciphertexts and %u keys (%u key regenerations): %s\n", o.ciphertexts,
	       o.keys, loads, lost ? "DATA LOST" : "all intact");
	printf("elapsed %.2f s\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	rc = lost ? 1 : 0;
	goto out;
fail:
	fprintf(stderr, "rsd-demo: %s\n", rsd_last_error()->message);
out:
	rsd_controller_free(c);
	rsd_policy_free(policy);
	if (m) {
		rsd_manager_close(m, RSD_CLOSE_FORCE);
		rsd_manager_destroy(m);
	}
	if (sd && stream)
		rsd_simdev_stream_destroy(sd, stream);
	rsd_simdev_destroy(sd);
	free(ct);
	free(ct_sum);
	free(key);
	free(key_sum);
	free(ks);
	free(w);
	return rc;
}
