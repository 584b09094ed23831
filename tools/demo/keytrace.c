// SPDX-License-Identifier: MIT
/*
 * A key-access trace replayed through the controller (keytrace.h): the
 * trace's parser, one replay on the simulated device, and rsd-demo --trace,
 * which replays a user's trace under both policies, waiting and
 * prefetching, beside what keybound.c computes: Belady's bound, the ideal
 * time, the trace's lower bound and an offline plan.
 */
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keytrace.h"

#define KT_MAX_COLUMNS 64

static const struct rsd_location KT_CUDA0 = { RSD_CUDA, 0 };

/* ---- the trace ------------------------------------------------------------ */

void kt_free(struct kt_trace *t)
{
	for (unsigned k = 0; k < t->nkeys; k++)
		free(t->key_name[k]);
	free(t->key_name);
	free(t->key_bytes);
	free(t->access);
	memset(t, 0, sizeof(*t));
}

/* The index of a tab-separated column named name in the header, or -1. */
static int kt_column(char *header, const char *name)
{
	int i = 0;

	for (char *f = header, *end; f; f = end ? end + 1 : NULL, i++) {
		size_t n;

		end = strchr(f, '\t');
		n = end ? (size_t)(end - f) : strcspn(f, "\r\n");
		if (n == strlen(name) && !strncmp(f, name, n))
			return i;
	}
	return -1;
}

/* Split a tab-separated line in place into at most max fields; their
 * number. */
static int kt_split(char *line, char **f, int max)
{
	int n = 0;

	line[strcspn(line, "\r\n")] = '\0';
	for (char *p = line; p && n < max; n++) {
		f[n] = p;
		p = strchr(p, '\t');
		if (p)
			*p++ = '\0';
	}
	return n;
}

/* The key named name, added when new; -1 when memory ran out. */
static int kt_key(struct kt_trace *t, const char *name, uint64_t nbytes, unsigned *cap)
{
	for (unsigned k = 0; k < t->nkeys; k++)
		if (!strcmp(t->key_name[k], name))
			return (int)k;
	if (t->nkeys == *cap) {
		unsigned ncap = *cap ? *cap * 2 : 64;
		char **names = realloc(t->key_name, ncap * sizeof(*names));
		uint64_t *bytes;

		if (!names)
			return -1;
		t->key_name = names;
		bytes = realloc(t->key_bytes, ncap * sizeof(*bytes));
		if (!bytes)
			return -1;
		t->key_bytes = bytes;
		*cap = ncap;
	}
	t->key_name[t->nkeys] = strdup(name);
	if (!t->key_name[t->nkeys])
		return -1;
	t->key_bytes[t->nkeys] = nbytes;
	return (int)t->nkeys++;
}

static int kt_parse(FILE *f, const char *path, struct kt_trace *t)
{
	char line[4096], *field[KT_MAX_COLUMNS];
	int ckey = -1, cbytes = -1;
	unsigned lineno = 0, kcap = 0, acap = 0;

	while (fgets(line, sizeof(line), f)) {
		char *name, *bytes, *end;
		uint64_t n;
		int k;

		lineno++;
		if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (ckey < 0) {
			ckey = kt_column(line, "key");
			cbytes = kt_column(line, "key_bytes");
			if (ckey < 0 || cbytes < 0) {
				fprintf(stderr,
					"%s:%u: the header names no 'key' or no 'key_bytes' column\n",
					path, lineno);
				return -1;
			}
			continue;
		}
		if (kt_split(line, field, KT_MAX_COLUMNS) <= (ckey > cbytes ? ckey : cbytes)) {
			fprintf(stderr, "%s:%u: too few columns\n", path, lineno);
			return -1;
		}
		name = field[ckey];
		bytes = field[cbytes];
		n = strtoull(bytes, &end, 10);
		if (!*name || *end || !n) {
			fprintf(stderr, "%s:%u: key '%s' of '%s' bytes: want a name and a size\n",
				path, lineno, name, bytes);
			return -1;
		}
		k = kt_key(t, name, n, &kcap);
		if (k < 0)
			goto nomem;
		if (t->key_bytes[k] != n) {
			fprintf(stderr, "%s:%u: key %s was %llu bytes, now %llu\n", path, lineno,
				name, (unsigned long long)t->key_bytes[k], (unsigned long long)n);
			return -1;
		}
		if (t->naccess == acap) {
			uint32_t *a = realloc(t->access, (acap ? acap * 2 : 256) * sizeof(*a));

			if (!a)
				goto nomem;
			t->access = a;
			acap = acap ? acap * 2 : 256;
		}
		t->access[t->naccess++] = (uint32_t)k;
	}
	if (!t->naccess) {
		fprintf(stderr, "%s: no access\n", path);
		return -1;
	}
	return 0;
nomem:
	fprintf(stderr, "%s: out of memory\n", path);
	return -1;
}

int kt_load(const char *path, struct kt_trace *t)
{
	FILE *f = fopen(path, "r");
	int err;

	memset(t, 0, sizeof(*t));
	if (!f) {
		perror(path);
		return -1;
	}
	err = kt_parse(f, path, t);
	fclose(f);
	if (err)
		kt_free(t);
	return err;
}

uint64_t kt_key_bytes(const struct kt_trace *t, uint64_t scale)
{
	uint64_t sum = 0;

	for (unsigned k = 0; k < t->nkeys; k++)
		sum += t->key_bytes[k] / scale;
	return sum;
}

/* ---- one replay ------------------------------------------------------------ */

struct kt_check {
	struct kt_run *run;
	const unsigned char *p;
	uint64_t n;
	unsigned key;
};

struct kt_run {
	const struct kt_trace *t;
	const struct kt_opts *o;
	struct rsd_simdev *sd;
	const struct rsd_device_ops *ops;
	struct rsd_manager *m;
	struct rsd_policy *pol;
	struct rsd_controller *c;
	void *cs;
	struct rsd_handle *h;
	struct rsd_use **u;
	void **done;
	struct kt_check *chk;
	struct kt_result *r;
	atomic_uint reads, faults;
};

/* Byte j of key k: a pattern no other key's bytes repeat at that place. */
static unsigned char kt_byte(unsigned k, uint64_t j)
{
	return (unsigned char)((j * 131) ^ (k * 29 + 7) ^ (j >> 12));
}

/* The kernel's computation: three windows of the key it read. */
static void kt_kernel_done(void *arg)
{
	const struct kt_check *c = arg;
	uint64_t at[3] = { 0, c->n / 2, c->n - 64 };
	bool ok = true;

	for (int w = 0; w < 3; w++)
		for (uint64_t j = at[w]; j < at[w] + 64 && j < c->n; j++)
			ok &= c->p[j] == kt_byte(c->key, j);
	atomic_fetch_add(&c->run->reads, 1);
	if (!ok)
		atomic_fetch_add(&c->run->faults, 1);
}

/*
 * The simulated device's ops with copies counted: every byte brought to a
 * device, by a use's plan or by the controller looking ahead, passes
 * through the driver's copy. One replay runs at a time.
 */
static struct rsd_device_ops kt_ops;
static atomic_uint_fast64_t kt_h2d_bytes, kt_h2d_copies;

static int kt_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		   struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	int err = rsd_simdev_ops()->copy(ctx, dst, dst_at, src, src_at, nbytes, stream);

	if (!err && dst_at.kind == RSD_CUDA && src_at.kind != RSD_CUDA) {
		atomic_fetch_add(&kt_h2d_bytes, nbytes);
		atomic_fetch_add(&kt_h2d_copies, 1);
	}
	return err;
}

static uint64_t kt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Map the device's pool before the clock starts: the simulated device's
 * memory is host memory populated when its pool first grows (about 20 ms
 * for the first chunk here), which the first copy would otherwise wait
 * for. A job's GPU pool is warm after its first step, and the trace is one
 * step of such a job. The pooled device keeps the chunk once freed.
 */
static int kt_warm(struct kt_run *x)
{
	uint64_t n = x->o->budget;
	struct rsd_resident *res;
	int err;

	if (!n)
		return 0;
	err = rsd_resident_alloc(x->m, &rsd_resident_type, KT_CUDA0, 1, &n, NULL, 0, &res);
	if (!err)
		rsd_resident_free(res);
	return err;
}

static int kt_open(struct kt_run *x)
{
	const struct kt_opts *o = x->o;
	struct rsd_simdev_config sc = {
		.ndevices = 1,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = o->time_scale,
		/* the scaled keys' copies take the full keys' time */
		.h2d_bps = o->link_bps / o->scale,
		.d2h_bps = o->link_bps / o->scale,
		/* pageable at the simulator's own ratio, 27 of 55 */
		.pageable_bps = o->link_bps / 55 * 27 / o->scale,
		/* backing allocations are not what the trace measures */
		.dev_alloc_ns = 1,
		.pinned_alloc_ns = 1,
		.free_ns = 1,
	};
	struct rsd_budget b = { KT_CUDA0, o->budget };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = 1 };
	const struct rsd_schedule_step *steps;
	struct rsd_schedule_step *st;
	int err;

	err = rsd_simdev_create(&sc, &x->sd);
	if (!err)
		err = rsd_simdev_stream_create(x->sd, 0, &x->cs);
	if (err)
		return err;
	kt_ops = *rsd_simdev_ops();
	kt_ops.copy = kt_copy;
	x->ops = &kt_ops;
	mc.driver = x->ops;
	mc.driver_ctx = x->sd;
	err = rsd_manager_create(&mc, &x->m);
	if (!err)
		err = o->pol == DP_NEXT_USE ? rsd_next_use_create(NULL, 0, 0, &x->pol) :
					      rsd_tiered_lru_create(NULL, 0, &x->pol);
	if (!err)
		err = rsd_controller_create(x->m, x->pol, 0, &x->c);
	if (!err && o->lookahead)
		err = rsd_controller_set_flags(x->c, RSD_CTRL_LOOKAHEAD);
	if (!err)
		err = kt_warm(x);
	if (err)
		return err;
	for (unsigned k = 0; k < x->t->nkeys; k++) {
		uint64_t n = x->t->key_bytes[k] / o->scale;
		struct rsd_resident *res;
		unsigned char *p;

		err = rsd_resident_alloc(x->m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n, NULL,
					 0, &res);
		if (err)
			return err;
		p = rsd_resident_data(res, 0);
		for (uint64_t j = 0; j < n; j++)
			p[j] = kt_byte(k, j);
		err = rsd_adopt(x->m, res, NULL, RSD_REPLICABLE, &x->h[k]);
		if (err)
			return err;
	}
	st = calloc(x->t->naccess, sizeof(*st));
	if (!st)
		return -RSD_ENOMEM;
	for (unsigned i = 0; i < x->t->naccess; i++)
		st[i] = (struct rsd_schedule_step){ &x->h[x->t->access[i]], 1 };
	steps = st;
	err = rsd_controller_set_schedule(x->c, steps, x->t->naccess, false);
	free(st);
	return err;
}

static void kt_close(struct kt_run *x)
{
	if (x->cs)
		x->ops->stream_sync(x->sd, x->cs);
	rsd_controller_free(x->c);
	rsd_policy_free(x->pol);
	if (x->m) {
		rsd_manager_close(x->m, RSD_CLOSE_FORCE);
		rsd_manager_destroy(x->m);
	}
	if (x->cs)
		rsd_simdev_stream_destroy(x->sd, x->cs);
	if (x->sd)
		rsd_simdev_destroy(x->sd);
}

static int kt_use(struct kt_run *x, unsigned i)
{
	struct rsd_requirement req = { x->h[x->t->access[i]], KT_CUDA0 };
	struct rsd_request r = { .name = "key-switch", .requirements = &req, .nrequirements = 1 };
	int err;

	/* A kernel's lease event completing between the decision and the
	 * entry makes the entry stale: decide again. */
	for (int tries = 0;; tries++) {
		err = x->o->prefetch ?
			      rsd_controller_use_async(x->c, &r, &x->cs, 1, NULL, 0, &x->u[i]) :
			      rsd_controller_use(x->c, &r, &x->cs, 1, NULL, 0, &x->u[i]);
		if (err != -RSD_ESTALE || tries == 8)
			return err;
	}
}

static int kt_done(struct kt_run *x, unsigned i)
{
	int err = rsd_use_close(x->u[i], NULL);

	rsd_use_free(x->u[i]);
	x->u[i] = NULL;
	return err;
}

/* Access i's kernel on the consumer stream, and an event after it. */
static int kt_kernel(struct kt_run *x, unsigned i)
{
	unsigned k = x->t->access[i];
	const struct rsd_resident *res;
	struct rsd_simdev_access acc;
	struct kt_check *c = &x->chk[i];
	int err = rsd_use_value(x->u[i], x->h[k], KT_CUDA0, &res);

	if (err)
		return err;
	*c = (struct kt_check){ x, rsd_resident_data(res, 0), x->t->key_bytes[k] / x->o->scale, k };
	memset(&acc, 0, sizeof(acc));
	acc.ptr = (void *)c->p;
	acc.nbytes = c->n;
	err = rsd_simdev_launch_kernel(x->sd, x->cs, x->o->kernel_ns, &acc, 1, kt_kernel_done, c);
	if (!err)
		err = x->ops->event_record(x->sd, x->cs, &x->done[i]);
	return err;
}

static int kt_wait(struct kt_run *x, unsigned i)
{
	int err = x->ops->event_sync(x->sd, x->done[i]);

	x->ops->event_destroy(x->sd, x->done[i]);
	x->done[i] = NULL;
	return err ? err : rsd_manager_reap(x->m);
}

/*
 * Waiting: each access is used, computed and waited for. Prefetching:
 * access i + 1 is used without waiting right after kernel i is queued (the
 * consumer stream's wait for its copy comes after kernel i), and the host
 * waits only for kernel i - 1, whose key the next decision may evict.
 */
static int kt_accesses(struct kt_run *x)
{
	unsigned n = x->t->naccess;
	int err = 0;

	if (x->o->prefetch)
		err = kt_use(x, 0);
	for (unsigned i = 0; i < n && !err; i++) {
		if (!x->o->prefetch)
			err = kt_use(x, i);
		if (!err)
			err = kt_kernel(x, i);
		if (!err)
			err = kt_done(x, i);
		if (!err && !x->o->prefetch)
			err = kt_wait(x, i);
		if (!err && x->o->prefetch && i >= 1)
			err = kt_wait(x, i - 1);
		if (!err && x->o->prefetch && i + 1 < n)
			err = kt_use(x, i + 1);
	}
	if (!err && x->o->prefetch)
		err = kt_wait(x, n - 1);
	return err;
}

int kt_replay(const struct kt_trace *t, const struct kt_opts *o, struct kt_result *r)
{
	struct kt_run x = { .t = t, .o = o, .r = r };
	uint64_t t0;
	int err;

	memset(r, 0, sizeof(*r));
	x.h = calloc(t->nkeys, sizeof(*x.h));
	x.u = calloc(t->naccess, sizeof(struct rsd_use *));
	x.done = calloc(t->naccess, sizeof(*x.done));
	x.chk = calloc(t->naccess, sizeof(*x.chk));
	err = x.h && x.u && x.done && x.chk ? kt_open(&x) : -RSD_ENOMEM;
	if (!err) {
		r->copy_ns = rsd_simdev_copy_ns(x.sd, KT_CUDA0, RSD_LOC_PINNED_HOST,
						t->key_bytes[0] / o->scale);
		atomic_store(&kt_h2d_bytes, 0);
		atomic_store(&kt_h2d_copies, 0);
		t0 = kt_now();
		err = kt_accesses(&x);
		r->elapsed_ns = kt_now() - t0;
		r->h2d_bytes = atomic_load(&kt_h2d_bytes);
		r->copies = (unsigned)atomic_load(&kt_h2d_copies);
	}
	if (err)
		fprintf(stderr, "key trace replay failed: %s\n", rsd_last_error()->message);
	for (unsigned i = 0; i < t->naccess; i++) {
		if (x.u && x.u[i])
			rsd_use_free(x.u[i]);
		if (x.done && x.done[i])
			kt_wait(&x, i);
	}
	kt_close(&x);
	r->kernel_reads = atomic_load(&x.reads);
	r->kernel_faults = atomic_load(&x.faults);
	free(x.h);
	free(x.u);
	free(x.done);
	free(x.chk);
	return err ? -1 : 0;
}

/* ---- rsd-demo --trace ------------------------------------------------------- */

static void kt_usage(void)
{
	fprintf(stderr,
		"usage: rsd-demo --trace FILE [--scale N] [--kernel-us N] [--device-mib N]\n"
		"                [--policy lru|next-use|both] [--time-scale X]\n"
		"                [--link-gbps X]\n"
		"  --trace FILE   a key-access trace (tab-separated, columns 'key' and\n"
		"                 'key_bytes', one access per line, '#' comments), as in\n"
		"                 tools/data/fhe-bootstrap/; replayed through the controller\n"
		"                 on the simulated device with the trace as its schedule\n"
		"  --scale N      divide key bytes and link bandwidths by N (default %u)\n"
		"  --kernel-us N  each access's kernel (default %.0f us, one key switch)\n"
		"  --device-mib N the device budget in scaled MiB (default: 25%% and 50%%\n"
		"                 of the keys' bytes, one run each)\n"
		"  --time-scale X stretch every modelled duration by X (default 1)\n"
		"  --link-gbps X  the host-device link's rate each way, in GB/s before\n"
		"                 --scale (default %.1f, the kernel's card's PCIe 4.0 x16)\n",
		KT_DEFAULT_SCALE, (double)KT_DEFAULT_KERNEL_NS / 1e3,
		(double)KT_DEFAULT_LINK_BPS / 1e9);
}

struct kt_cli {
	const char *path;
	struct kt_opts o;
	uint64_t device_mib;
	unsigned policies;
};

static int kt_parse_args(int argc, char **argv, struct kt_cli *cli)
{
	static const struct option longopts[] = {
		{ "trace", required_argument, NULL, 1 },
		{ "scale", required_argument, NULL, 2 },
		{ "kernel-us", required_argument, NULL, 3 },
		{ "device-mib", required_argument, NULL, 4 },
		{ "policy", required_argument, NULL, 5 },
		{ "time-scale", required_argument, NULL, 6 },
		{ "link-gbps", required_argument, NULL, 7 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double gbps;
	int c;

	*cli = (struct kt_cli){ .o = { .scale = KT_DEFAULT_SCALE,
				       .time_scale = 1,
				       .kernel_ns = KT_DEFAULT_KERNEL_NS,
				       .link_bps = KT_DEFAULT_LINK_BPS },
				.policies = (1u << DP_LRU) | (1u << DP_NEXT_USE) };
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 1:
			cli->path = optarg;
			break;
		case 2:
			cli->o.scale = strtoull(optarg, NULL, 0);
			break;
		case 3:
			cli->o.kernel_ns = strtoull(optarg, NULL, 0) * 1000;
			break;
		case 4:
			cli->device_mib = strtoull(optarg, NULL, 0);
			break;
		case 5:
			cli->policies = !strcmp(optarg, "lru")	    ? 1u << DP_LRU :
					!strcmp(optarg, "next-use") ? 1u << DP_NEXT_USE :
					!strcmp(optarg, "both")	    ? (1u << DP_LRU) |
									  (1u << DP_NEXT_USE) :
								  0;
			break;
		case 6:
			cli->o.time_scale = strtod(optarg, NULL);
			break;
		case 7:
			gbps = strtod(optarg, NULL);
			cli->o.link_bps = gbps >= 0.001 && gbps <= 1e6 ? (uint64_t)(gbps * 1e9) : 0;
			break;
		default:
			kt_usage();
			return -1;
		}
	}
	if (optind < argc || !cli->path || cli->path[0] == '-' || !cli->o.scale || !cli->policies ||
	    !(cli->o.time_scale > 0) || cli->o.link_bps / cli->o.scale == 0) {
		kt_usage();
		return -1;
	}
	return 0;
}

static int kt_budget_runs(const struct kt_trace *t, struct kt_cli *cli, uint64_t budget)
{
	double path = 0, plan = 0;
	unsigned plan_copies = 0;
	uint64_t bound;
	bool exact;

	cli->o.budget = budget;
	bound = kt_belady(t, cli->o.scale, budget, &exact);
	if (bound == KT_FAILED)
		return 1;
	printf("\ndevice budget %.1f MiB: Belady's bound %.1f MiB%s\n", demo_mib(budget),
	       demo_mib(bound), exact ? "" : " (keys of several sizes: not a strict bound)");
	printf("  %-24s %-11s %10s %8s %11s %9s %8s\n", "policy", "mode", "to device", "x bound",
	       "elapsed ms", "ideal ms", "x ideal");
	for (int p = 0; p < NPOLICIES; p++) {
		if (!(cli->policies & (1u << p)))
			continue;
		/* waiting, prefetching one access ahead, and (next-use only)
		 * looking ahead as far as the budget allows */
		for (int mode = 0; mode < (p == DP_NEXT_USE ? 3 : 2); mode++) {
			static const char *const mname[] = { "waiting", "prefetching",
							     "lookahead" };
			struct kt_result r;
			double ideal;

			cli->o.pol = (enum demo_policy)p;
			cli->o.prefetch = mode > 0;
			cli->o.lookahead = mode == 2;
			if (kt_replay(t, &cli->o, &r))
				return 1;
			ideal = kt_ideal(t, &cli->o, bound, r.copy_ns);
			/* the lower bound the ideal leaves out, and a schedule
			 * that comes close to it */
			path = kt_critical(t, &cli->o, r.copy_ns) / ideal;
			plan = kt_plan(t, &cli->o, r.copy_ns, &plan_copies) / ideal;
			if (path < 0 || plan < 0)
				return 1;
			printf("  %-24s %-11s %6.1f MiB %8.3f %11.1f %9.1f %8.3f\n",
			       demo_policy_name[p], mname[mode], demo_mib(r.h2d_bytes),
			       (double)r.h2d_bytes / (double)bound, (double)r.elapsed_ns / 1e6,
			       ideal / 1e6, (double)r.elapsed_ns / ideal);
			if (r.kernel_faults || r.kernel_reads != t->naccess) {
				printf("  %u of %u kernels read their key, %u read wrong bytes\n",
				       r.kernel_reads, t->naccess, r.kernel_faults);
				return 1;
			}
		}
	}
	printf("  no replay goes below %.3fx the ideal (the keys the accesses up to one\n"
	       "  must wait for, then the kernels after it or the copies the rest needs\n"
	       "  beyond what the budget holds); an offline plan with no host in the\n"
	       "  way: %.3fx (%u copies)\n",
	       path, plan, plan_copies);
	if (kt_critical_stride(t->naccess) > 1)
		printf("  (a long trace: the copies the rest needs counted from one access\n"
		       "  in %u, each standing for the accesses before it; the bound is\n"
		       "  still one, if lower than counting from every access)\n",
		       kt_critical_stride(t->naccess));
	return 0;
}

int kt_main(int argc, char **argv)
{
	struct kt_trace t;
	struct kt_cli cli;
	uint64_t total;
	int rc = 0;

	if (kt_parse_args(argc, argv, &cli))
		return 2;
	if (kt_load(cli.path, &t))
		return 2;
	total = kt_key_bytes(&t, cli.o.scale);
	printf("%s: %u accesses of %u keys, %.1f MiB of keys (scaled 1/%llu: %.1f MiB); "
	       "kernel %.0f us per access; link %.1f GB/s\n",
	       cli.path, t.naccess, t.nkeys, demo_mib(kt_key_bytes(&t, 1)),
	       (unsigned long long)cli.o.scale, demo_mib(total),
	       (double)cli.o.kernel_ns * cli.o.time_scale / 1e3, (double)cli.o.link_bps / 1e9);
	if (cli.device_mib)
		rc = kt_budget_runs(&t, &cli, cli.device_mib * MiB);
	else
		for (int q = 1; q <= 2 && !rc; q++)
			rc = kt_budget_runs(&t, &cli, total * (uint64_t)q / 4);
	kt_free(&t);
	return rc;
}
