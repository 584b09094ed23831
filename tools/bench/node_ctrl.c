// SPDX-License-Identifier: MIT
/*
 * One manager and one controller for a whole GPU node (group "node", case
 * "node_ctrl"), on the simulated device with its link model on, durations
 * stretched by NC_SCALE as in the node group.
 *
 * K worker threads, worker w on cuda:w, share one manager, one controller
 * and one pinned-host budget. Each runs a key-switching pipeline: its key
 * is a source loaded at pinned host; each step needs the key and the
 * step's ciphertext (exclusive, adopted at pageable host) on its device
 * and reserves room there for its output, which a kernel on the worker's
 * consumer stream writes and the use adopts; the next step is
 * used without waiting (rsd_controller_use_async) right after the kernel
 * is queued, and a ciphertext is discarded once its kernel has finished.
 * The device holds two steps: older outputs spill to pinned host and from
 * there to pageable host, as the policy chooses.
 *
 * Every run is a child process with a watchdog: a run that returns an
 * error from any call, crashes or does not finish within its bound (a
 * hang) is a failure. The figures, per policy: failures over NC_RUNS runs
 * at K = 2 and K = 4 with a tight pinned budget (the sum of the workers'
 * working sets plus a quarter); aggregate throughput at K = 2 and K = 4
 * over K = 1, medians of the runs in the same rsd-bench run; p99 use
 * latency (the use call alone) over K = 1's; failures with the pinned
 * budget exactly at the sum of the working sets. RSD_BENCH_NC_RUNS
 * overrides the number of runs; RSD_BENCH_NC_INPROC runs them in this
 * process without the watchdog (ThreadSanitizer does not follow forks).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define NC_SCALE 100.0
#define NC_KMAX 4
#define NC_MIB (1ull << 20)
#define NC_KEY (4 * NC_MIB)
#define NC_CT (4 * NC_MIB)
#define NC_OUT (4 * NC_MIB)
#define NC_ITERS_MAX 16u
#define NC_SETUP_NS 120000000000ull
/* What one worker holds at pinned host at most: its key while it loads,
 * and two outputs on their way from its device to pageable host. */
#define NC_WORKING_SET (NC_KEY + 2 * NC_OUT)

struct nc_cfg {
	int k;
	bool next_use;
	uint64_t pinned; /* the pinned-host budget */
	unsigned iters;	 /* steps per worker */
};

/* What a run reports to the parent (in shared memory). */
struct nc_result {
	int code; /* 0, or the first failing call's error */
	char what[96];
	char msg[600];
	uint64_t wall_ns;
	double p99_ns;	      /* of the use calls of every worker */
	_Atomic int started;  /* set up: the workers run from now */
	_Atomic int finished; /* the workers ended; what follows is clean-up */
};

struct nc_run;

struct nc_worker {
	struct nc_run *run;
	int w;
	void *cs;
	struct rsd_handle key;
	struct rsd_handle ct[NC_ITERS_MAX];
	double lat[NC_ITERS_MAX];
	int code;
	char what[96];
	char msg[600];
};

struct nc_run {
	const struct nc_cfg *cfg;
	struct rsd_simdev *sd;
	const struct rsd_device_ops *ops;
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_policy *pol;
	struct nc_worker w[NC_KMAX];
	pthread_barrier_t start;
};

static struct rsd_location nc_cuda(int d)
{
	return (struct rsd_location){ RSD_CUDA, d };
}

/* A worker's key: loaded at pinned host, its bytes written. */
static int nc_key_load(void *ctx, struct rsd_resident **out)
{
	struct nc_worker *w = ctx;
	uint64_t n = NC_KEY;
	int err = rsd_resident_alloc(w->run->m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n,
				     NULL, 0, out);

	if (!err)
		memset(rsd_resident_data(*out, 0), 0x40 + w->w, n);
	return err;
}

/* Blocks for the whole pinned budget, allocated at once and given back to
 * the pinned pool. */
static void nc_warm_pinned(struct nc_run *r, uint64_t budget)
{
	struct rsd_resident *res[64];
	size_t n = budget / NC_OUT;

	for (size_t i = 0; i < n && i < 64; i++) {
		uint64_t nb = NC_OUT;

		CK(rsd_resident_alloc(r->m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &nb, NULL,
				      0, &res[i]));
	}
	for (size_t i = 0; i < n && i < 64; i++)
		rsd_resident_free(res[i]);
}

static void nc_open(struct nc_run *r, const struct nc_cfg *cfg)
{
	struct rsd_simdev_config sc = {
		.ndevices = NC_KMAX,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = NC_SCALE,
	};
	struct rsd_location pinned_to[] = { RSD_LOC_PAGEABLE_HOST };
	struct rsd_location dev_to[] = { RSD_LOC_PINNED_HOST, RSD_LOC_PAGEABLE_HOST };
	struct rsd_fallback_tier tiers[NC_KMAX + 1];
	struct rsd_budget b[NC_KMAX + 1];
	struct rsd_manager_config mc = { .budgets = b };
	struct rsd_value_spec key = { &rsd_resident_type, NC_KEY, NC_KEY, RSD_REPLICABLE,
				      RSD_RECONSTRUCTIBLE };

	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	CK(rsd_simdev_create(&sc, &r->sd));
	r->ops = rsd_simdev_ops();
	/* Each device holds its key, two ciphertexts and two outputs: older
	 * outputs spill to pinned host, and from there to pageable host. */
	for (int d = 0; d < cfg->k; d++) {
		b[d] = (struct rsd_budget){ nc_cuda(d), NC_KEY + 2 * NC_CT + 2 * NC_OUT };
		tiers[d] = (struct rsd_fallback_tier){ nc_cuda(d), dev_to, 2 };
	}
	b[cfg->k] = (struct rsd_budget){ RSD_LOC_PINNED_HOST, cfg->pinned };
	tiers[cfg->k] = (struct rsd_fallback_tier){ RSD_LOC_PINNED_HOST, pinned_to, 1 };
	mc.nbudgets = (size_t)cfg->k + 1;
	mc.driver = r->ops;
	mc.driver_ctx = r->sd;
	CK(rsd_manager_create(&mc, &r->m));
	if (cfg->next_use)
		CK(rsd_next_use_create(tiers, (size_t)cfg->k + 1, 2, &r->pol));
	else
		CK(rsd_tiered_lru_create(tiers, (size_t)cfg->k + 1, &r->pol));
	CK(rsd_controller_create(r->m, r->pol, 0, &r->c));
	for (int i = 0; i < cfg->k; i++) {
		struct nc_worker *w = &r->w[i];
		struct rsd_source src = { nc_key_load, NULL, w };

		w->run = r;
		w->w = i;
		CK(rsd_simdev_stream_create(r->sd, i, &w->cs));
		CK(rsd_register_source(r->m, &key, &src, RSD_LOC_PINNED_HOST, &w->key));
		for (unsigned s = 0; s < cfg->iters; s++) {
			struct rsd_resident *res;
			uint64_t n = NC_CT;

			CK(rsd_resident_alloc(r->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1,
					      &n, NULL, 0, &res));
			memset(rsd_resident_data(res, 0), (int)(s + 1), n);
			CK(rsd_adopt(r->m, res, NULL, RSD_EXCLUSIVE, &w->ct[s]));
		}
	}
	/* Steady state, as a long job runs: the keys loaded and on their
	 * devices, the device and pinned pools warm (no timed backing
	 * allocation: outputs spilled to pinned host reuse its blocks). */
	nc_warm_pinned(r, cfg->pinned);
	for (int i = 0; i < cfg->k; i++) {
		CK(rsd_ensure(r->m, r->w[i].key, nc_cuda(i), NULL, NULL));
		for (unsigned s = 0; s < 2 && s < cfg->iters; s++)
			CK(rsd_move(r->m, r->w[i].ct[s], nc_cuda(i), NULL, NULL, NULL));
		for (unsigned s = 0; s < 2 && s < cfg->iters; s++)
			CK(rsd_move(r->m, r->w[i].ct[s], RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL));
	}
	pthread_barrier_init(&r->start, NULL, (unsigned)cfg->k + 1);
}

/* Record a worker's first failure; returns rc. */
static int nc_check(struct nc_worker *w, int rc, const char *what)
{
	if (rc && !w->code) {
		w->code = rc;
		snprintf(w->what, sizeof(w->what), "worker %d: %s", w->w, what);
		snprintf(w->msg, sizeof(w->msg), "%s (%s)", rsd_last_error()->message,
			 rsd_strerror(rc));
	}
	return rc;
}

#define NC_CK(w_, expr_)                             \
	do {                                         \
		if (nc_check((w_), (expr_), #expr_)) \
			goto out;                    \
	} while (0)

static int nc_use(struct nc_worker *w, unsigned s, struct rsd_use **u)
{
	struct rsd_requirement req[2] = { { w->key, nc_cuda(w->w) }, { w->ct[s], nc_cuda(w->w) } };
	struct rsd_reservation_spec out = { nc_cuda(w->w), NC_OUT, "out" };
	struct rsd_request r = { "keyswitch", req, 2, &out, 1 };
	uint64_t t0 = bench_now_ns();
	/* No retry loop: the use is the whole answer. */
	int rc = rsd_controller_use_async(w->run->c, &r, &w->cs, 1, NULL, 0, u);

	w->lat[s] = (double)(bench_now_ns() - t0);
	return rc;
}

/* Step s: the kernel reads the key and the ciphertext on the device and
 * writes the output there; the output is adopted into the reservation. */
static int nc_step(struct nc_worker *w, unsigned s, struct rsd_use *u)
{
	struct nc_run *r = w->run;
	const struct rsd_resident *key, *ct;
	struct rsd_simdev_access acc[3];
	struct rsd_resident *out;
	struct rsd_handle oh;
	uint64_t n = NC_OUT;
	int rc;

	rc = rsd_use_value(u, w->key, nc_cuda(w->w), &key);
	if (!rc)
		rc = rsd_use_value(u, w->ct[s], nc_cuda(w->w), &ct);
	if (!rc)
		rc = rsd_resident_alloc(r->m, &rsd_resident_type, nc_cuda(w->w), 1, &n, NULL, 0,
					&out);
	if (rc)
		return rc;
	memset(acc, 0, sizeof(acc));
	acc[0] = (struct rsd_simdev_access){ rsd_resident_data(key, 0), NC_KEY, false, false, 0 };
	acc[1] = (struct rsd_simdev_access){ rsd_resident_data(ct, 0), NC_CT, false, false, 0 };
	acc[2] = (struct rsd_simdev_access){ rsd_resident_data(out, 0), NC_OUT, true, true,
					     (unsigned char)s };
	/* About one ciphertext's copy: copies and kernels overlap. */
	rc = rsd_simdev_launch_kernel(r->sd, w->cs, 80000, acc, 3, NULL, NULL);
	if (!rc)
		rc = rsd_use_adopt(u, "out", out, RSD_EXCLUSIVE, w->cs, &oh);
	if (rc) {
		/* still the caller's: free it once the kernel is done with it */
		nc_check(w, rc, "rsd_use_adopt");
		r->ops->stream_sync(r->sd, w->cs);
		rsd_resident_free(out);
	}
	return rc;
}

static void *nc_worker_main(void *p)
{
	struct nc_worker *w = p;
	struct nc_run *r = w->run;
	unsigned n = r->cfg->iters;
	void *done[NC_ITERS_MAX] = { NULL };
	struct rsd_use *u = NULL, *next = NULL;

	pthread_barrier_wait(&r->start);
	NC_CK(w, nc_use(w, 0, &u));
	for (unsigned s = 0; s < n; s++) {
		NC_CK(w, nc_step(w, s, u));
		/* closed first: the leases' release events come before done[s] */
		NC_CK(w, rsd_use_close(u, NULL));
		rsd_use_free(u);
		u = NULL;
		NC_CK(w, r->ops->event_record(r->sd, w->cs, &done[s]));
		if (s >= 1) {
			/* the kernel is done: let the manager see it, then the
			 * input goes */
			NC_CK(w, r->ops->event_sync(r->sd, done[s - 1]));
			NC_CK(w, rsd_manager_reap(r->m));
			NC_CK(w, rsd_discard(r->m, w->ct[s - 1], NULL));
		}
		if (s + 1 < n) {
			NC_CK(w, nc_use(w, s + 1, &next));
			u = next;
		}
	}
	NC_CK(w, r->ops->event_sync(r->sd, done[n - 1]));
	NC_CK(w, rsd_manager_reap(r->m));
	NC_CK(w, rsd_discard(r->m, w->ct[n - 1], NULL));
out:
	if (u) {
		rsd_use_close(u, NULL);
		rsd_use_free(u);
	}
	for (unsigned s = 0; s < n; s++)
		if (done[s])
			r->ops->event_destroy(r->sd, done[s]);
	return NULL;
}

/* One run, in the child: its result into *res. */
static void nc_run_child(const struct nc_cfg *cfg, struct nc_result *res)
{
	double lat[NC_KMAX * NC_ITERS_MAX];
	pthread_t t[NC_KMAX];
	struct nc_run r;
	size_t nlat = 0;
	uint64_t t0;

	nc_open(&r, cfg);
	for (int i = 0; i < cfg->k; i++)
		pthread_create(&t[i], NULL, nc_worker_main, &r.w[i]);
	pthread_barrier_wait(&r.start);
	t0 = bench_now_ns();
	atomic_store(&res->started, 1);
	for (int i = 0; i < cfg->k; i++)
		pthread_join(t[i], NULL);
	res->wall_ns = bench_now_ns() - t0;
	for (int i = 0; i < cfg->k; i++) {
		struct nc_worker *w = &r.w[i];

		if (w->code && !res->code) {
			res->code = w->code;
			snprintf(res->what, sizeof(res->what), "%s", w->what);
			snprintf(res->msg, sizeof(res->msg), "%s", w->msg);
		}
		for (unsigned s = 0; s < cfg->iters; s++)
			lat[nlat++] = w->lat[s];
	}
	res->p99_ns = bench_pct(lat, nlat, 99);
	atomic_store(&res->finished, 1);
	for (int i = 0; i < cfg->k; i++)
		r.ops->stream_sync(r.sd, r.w[i].cs);
	rsd_controller_free(r.c);
	rsd_policy_free(r.pol);
	CK(rsd_manager_close(r.m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(r.m);
	for (int i = 0; i < cfg->k; i++)
		rsd_simdev_stream_destroy(r.sd, r.w[i].cs);
	rsd_simdev_destroy(r.sd);
	pthread_barrier_destroy(&r.start);
}

/*
 * One run in a child process, watched: 0 when it finished without an
 * error (its figures in *res), 1 when it failed, hung past bound_ns or
 * died.
 */
static int nc_run_once(const struct nc_cfg *cfg, uint64_t bound_ns, struct nc_result *res)
{
	struct nc_result *shm =
		mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t t0 = bench_now_ns();
	int status = 0, failed = 1;
	pid_t pid, got = 0;

	if (shm == MAP_FAILED)
		bench_fail("mmap", -RSD_ENOMEM);
	memset(shm, 0, sizeof(*shm));
	/* In this process, unwatched: for ThreadSanitizer, which cannot follow
	 * a fork of a threaded process, and for debuggers. */
	if (getenv("RSD_BENCH_NC_INPROC")) {
		nc_run_child(cfg, shm);
		*res = *shm;
		munmap(shm, sizeof(*shm));
		return res->code != 0;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		bench_fail("fork", -RSD_ENOMEM);
	if (!pid) {
		nc_run_child(cfg, shm);
		_exit(0);
	}
	/* The bound is on the workers; the set-up and the clean-up (the pools
	 * allocate and give back modelled memory) take what they take. */
	while (!got && !atomic_load(&shm->started) && bench_now_ns() - t0 < NC_SETUP_NS) {
		got = waitpid(pid, &status, WNOHANG);
		if (!got)
			bench_sleep_ns(2000000);
	}
	t0 = bench_now_ns();
	while (!got && bench_now_ns() - t0 < bound_ns) {
		got = waitpid(pid, &status, WNOHANG);
		if (!got && atomic_load(&shm->finished))
			got = waitpid(pid, &status, 0);
		if (!got)
			bench_sleep_ns(2000000);
	}
	memset(res, 0, sizeof(*res));
	if (!got) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		snprintf(res->what, sizeof(res->what), "hung: no end within %.1f s",
			 (double)bound_ns / 1e9);
		res->code = -RSD_EEXEC;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(res->what, sizeof(res->what), "the run died (status %d)", status);
		res->code = -RSD_EEXEC;
	} else {
		*res = *shm;
		failed = res->code != 0;
	}
	munmap(shm, sizeof(*shm));
	return failed;
}

/* Runs of one configuration: failures, median throughput and p99. */
struct nc_series {
	unsigned runs, failures, hangs;
	double gbps, p99_us; /* medians over the runs that finished; 0: none */
	char first[720];
};

static void nc_series(const struct nc_cfg *cfg, unsigned runs, uint64_t bound_ns,
		      struct nc_series *out)
{
	double gbps[64], p99[64];
	unsigned ok = 0;

	memset(out, 0, sizeof(*out));
	out->runs = runs;
	for (unsigned i = 0; i < runs; i++) {
		struct nc_result res;

		if (nc_run_once(cfg, bound_ns, &res)) {
			out->failures++;
			out->hangs += !strncmp(res.what, "hung", 4);
			if (!out->first[0])
				snprintf(out->first, sizeof(out->first), "%s: %s", res.what,
					 res.msg);
			continue;
		}
		gbps[ok] = (double)cfg->k * cfg->iters * NC_CT / ((double)res.wall_ns / 1e9) / 1e9;
		p99[ok++] = res.p99_ns / 1e3;
	}
	if (ok) {
		out->gbps = bench_median(gbps, ok);
		out->p99_us = bench_median(p99, ok);
	}
}

static void nc_policy(bool next_use, unsigned runs, unsigned iters)
{
	const char *pn = next_use ? "next-use" : "tiered LRU";
	const char *cs = next_use ? "node_ctrl_nu" : "node_ctrl_lru";
	struct nc_cfg one = { 1, next_use, NC_WORKING_SET * 5 / 4, iters };
	struct nc_series base, s;
	uint64_t bound;
	char metric[32];
	struct bench_fig *f;

	/* The baseline: one worker never waits for another. */
	nc_series(&one, runs < 5 ? runs : 5, 60000000000ull, &base);
	if (base.failures)
		bench_note("%s: K=1 failed %u of %u: %s", cs, base.failures, base.runs, base.first);
	/* A run that takes 10x K = 1's time (2 s at least) is hung. */
	bound = (uint64_t)(10.0 * (double)one.k * iters * NC_CT / (base.gbps ? base.gbps : 0.1));
	if (bound < 2000000000ull)
		bound = 2000000000ull;
	bench_line(cs, "k1_GBps", base.gbps, "GB/s");
	bench_line(cs, "k1_p99_use_us", base.p99_us, "us");
	for (int k = 2; k <= NC_KMAX; k += 2) {
		struct nc_cfg cfg = { k, next_use, (uint64_t)k * NC_WORKING_SET * 5 / 4, iters };

		nc_series(&cfg, runs, bound, &s);
		if (s.failures)
			bench_note("%s: K=%d (%s), %u of %u runs failed (%u hung); first: %s", cs,
				   k, pn, s.failures, s.runs, s.hangs, s.first);
		snprintf(metric, sizeof(metric), "k%d_failures", k);
		f = bench_fig(cs, metric, s.failures, "runs");
		bench_fig_base(f, "runs", s.runs);
		bench_fig_target(f, TGT_MAX, 0);
		snprintf(metric, sizeof(metric), "k%d_vs_one", k);
		f = bench_fig(cs, metric, base.gbps ? s.gbps / base.gbps : 0, "x");
		bench_fig_base(f, "one worker", 1.0);
		bench_fig_target(f, TGT_MIN, k == 2 ? 1.8 : 3.4);
		snprintf(metric, sizeof(metric), "k%d_p99_use", k);
		f = bench_fig(cs, metric, s.p99_us, "us");
		bench_fig_base(f, "one worker", base.p99_us);
	}
	/* The pinned budget exactly at the sum of the working sets. */
	{
		struct nc_cfg cfg = { NC_KMAX, next_use, NC_KMAX * NC_WORKING_SET, iters };

		nc_series(&cfg, runs, bound, &s);
		if (s.failures)
			bench_note("%s: K=%d at the exact budget, %u of %u runs failed (%u hung); "
				   "first: %s",
				   cs, NC_KMAX, s.failures, s.runs, s.hangs, s.first);
		snprintf(metric, sizeof(metric), "k%d_exact_failures", NC_KMAX);
		f = bench_fig(cs, metric, s.failures, "runs");
		bench_fig_base(f, "runs", s.runs);
		bench_fig_target(f, TGT_MAX, 0);
	}
}

static void case_node_ctrl(void)
{
	const char *env = getenv("RSD_BENCH_NC_RUNS");
	unsigned runs = env ? (unsigned)strtoul(env, NULL, 10) : 20;
	unsigned iters = QF(6u, 12u);

	if (!runs || runs > 64)
		runs = 20;
	bench_note("node_ctrl: simulated device, link model on, durations x%.0f; K workers, one "
		   "manager, one controller; %u runs of %u steps per configuration; pinned budget "
		   "1.25x the working sets (%llu MiB per worker), or exactly them",
		   NC_SCALE, runs, iters, (unsigned long long)(NC_WORKING_SET / NC_MIB));
	nc_policy(false, runs, iters);
	nc_policy(true, runs, iters);
}
