// SPDX-License-Identifier: MIT
/*
 * Lock-free observation: snapshots read the last published image and never
 * wait for the writer, and readers do not slow the writer down.
 *
 * The baseline "snapshot that locks the writer mutex" cannot be built from
 * the public API: rsd_manager_reap() takes the transition lock, but during a
 * source load it fails at once with -RSD_EREENTRANT instead of waiting, so
 * "reap, then snapshot" would never block there. The baseline therefore uses
 * a process-local FIFO lock that the benchmark's writer thread holds around
 * each of its operations (the 200 ms load included) and that the baseline
 * reader takes around rsd_snapshot_take(): what a snapshot behind the
 * writer's mutex costs. The writer takes that lock in both arms, so only the
 * reader differs. FIFO (a ticket lock), so that neither side starves.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define VAL_BYTES 4096u
#define LAT_VALUES 1000u /* values in the manager for the latency cases */
#define SLOW_LOAD_NS 200000000u

struct fifo_lock {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next, serving; /* protected by mu */
};

static void fifo_lock(struct fifo_lock *l)
{
	uint64_t t;

	pthread_mutex_lock(&l->mu);
	t = l->next++;
	while (l->serving != t)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

static void fifo_unlock(struct fifo_lock *l)
{
	pthread_mutex_lock(&l->mu);
	l->serving++;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

enum writer_kind {
	W_CYCLE,
	W_SLOW_LOAD
};

struct rcu_env {
	struct rsd_manager *m;
	struct rsd_handle cyc;	/* replicable pageable value: ensure/drop at pinned */
	struct rsd_handle slow; /* source whose load sleeps 200 ms */
	struct fifo_lock lock;
	atomic_bool stop;
	atomic_ulong cycles;
	atomic_ulong slow_loads;
	enum writer_kind wk;
	/* readers of the throughput case */
	uint64_t pace_ns; /* 0: back to back */
	/* CPUs the writer and the readers run on; -1: wherever the kernel puts them */
	int writer_cpu, reader_cpu;
	char writer_name[16]; /* the writer thread's name, when set */
};

/* Pin the calling thread to one CPU; cpu < 0 leaves it free. */
static void rcu_pin(int cpu)
{
	cpu_set_t set;
	int rc;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc)
		bench_fail("pthread_setaffinity_np", -RSD_EUSAGE);
}

static int slow_load(void *ctx, struct rsd_resident **out)
{
	struct rcu_env *e = ctx;
	uint64_t nb = VAL_BYTES;

	bench_sleep_ns(SLOW_LOAD_NS);
	atomic_fetch_add(&e->slow_loads, 1);
	return rsd_resident_alloc(e->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &nb, NULL, 0,
				  out);
}

static void rcu_env_init(struct rcu_env *e, size_t nvalues)
{
	struct rsd_value_spec sp = { &rsd_resident_type, VAL_BYTES, VAL_BYTES, RSD_REPLICABLE,
				     RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { slow_load, NULL, e };

	memset(e, 0, sizeof(*e));
	e->writer_cpu = e->reader_cpu = -1;
	pthread_mutex_init(&e->lock.mu, NULL);
	pthread_cond_init(&e->lock.cv, NULL);
	e->m = bench_manager(NULL, 0);
	e->cyc = bench_adopt(e->m, VAL_BYTES, RSD_REPLICABLE, true);
	CK(rsd_register_source(e->m, &sp, &src, RSD_LOC_PAGEABLE_HOST, &e->slow));
	for (size_t i = 2; i < nvalues; i++)
		bench_adopt(e->m, VAL_BYTES, RSD_REPLICABLE, false);
}

static void rcu_env_fini(struct rcu_env *e)
{
	bench_manager_end(e->m);
	pthread_mutex_destroy(&e->lock.mu);
	pthread_cond_destroy(&e->lock.cv);
}

static void *writer_main(void *arg)
{
	struct rcu_env *e = arg;

	rcu_pin(e->writer_cpu);
	if (e->writer_name[0])
		pthread_setname_np(pthread_self(), e->writer_name);
	while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
		if (e->wk == W_CYCLE) {
			fifo_lock(&e->lock);
			CK(rsd_ensure(e->m, e->cyc, RSD_LOC_PINNED_HOST, NULL, NULL));
			fifo_unlock(&e->lock);
			fifo_lock(&e->lock);
			CK(rsd_drop(e->m, e->cyc, RSD_LOC_PINNED_HOST, NULL));
			fifo_unlock(&e->lock);
		} else {
			fifo_lock(&e->lock);
			CK(rsd_ensure(e->m, e->slow, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
			fifo_unlock(&e->lock);
			fifo_lock(&e->lock);
			CK(rsd_drop(e->m, e->slow, RSD_LOC_PAGEABLE_HOST, NULL));
			fifo_unlock(&e->lock);
		}
		atomic_fetch_add_explicit(&e->cycles, 1, memory_order_relaxed);
	}
	return NULL;
}

static void *reader_main(void *arg)
{
	struct rcu_env *e = arg;
	struct rsd_snapshot *s;

	rcu_pin(e->reader_cpu);
	while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
		CK(rsd_snapshot_take(e->m, &s));
		rsd_snapshot_free(s);
		if (e->pace_ns)
			bench_sleep_ns(e->pace_ns);
	}
	return NULL;
}

/* snapshot_10k: one snapshot of 10,000 materialized 4 KiB values. */
static void case_snapshot_10k(void)
{
	size_t n = 10000, reps = QF(21, 101);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_snapshot *s;
	double *v = calloc(reps, sizeof(*v));
	struct bench_fig *f;

	for (size_t i = 0; i < n; i++)
		bench_adopt(m, VAL_BYTES, RSD_REPLICABLE, false);
	for (size_t i = 0; i < 5; i++) {
		CK(rsd_snapshot_take(m, &s));
		if (s->nvalues != n)
			bench_fail("snapshot value count", -RSD_EUSAGE);
		rsd_snapshot_free(s);
	}
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_snapshot_take(m, &s));
		v[r] = (double)(bench_now_ns() - t0) / 1e6;
		rsd_snapshot_free(s);
	}
	bench_manager_end(m);
	f = bench_fig("snapshot_10k", "take_ms", bench_median(v, reps), "ms");
	bench_fig_py(f, 67);
	bench_fig_target(f, TGT_MAX, 1);
	free(v);
}

/*
 * Snapshot latency (take only) on the main thread while a writer thread
 * runs; locked: the baseline reader takes the writer's FIFO lock.
 */
static void latency_run(enum writer_kind wk, bool locked, uint64_t dur_ns, double *p50, double *p99,
			double *pmax, size_t *nsamples, unsigned long *wcycles)
{
	size_t cap = 1u << 20, n = 0;
	double *lat = malloc(cap * sizeof(*lat));
	struct rcu_env e = { 0 };
	pthread_t w;
	uint64_t end;

	if (!lat)
		bench_fail("malloc", -RSD_ENOMEM);
	rcu_env_init(&e, LAT_VALUES);
	e.wk = wk;
	if (pthread_create(&w, NULL, writer_main, &e))
		bench_fail("pthread_create", -RSD_ENOMEM);
	/* Let the writer get going (into its first load in the slow case). */
	bench_sleep_ns(wk == W_SLOW_LOAD ? 20000000u : 5000000u);
	end = bench_now_ns() + dur_ns;
	while (n < cap) {
		struct rsd_snapshot *s;
		uint64_t t0 = bench_now_ns(), t1;

		if (t0 >= end)
			break;
		if (locked)
			fifo_lock(&e.lock);
		CK(rsd_snapshot_take(e.m, &s));
		if (locked)
			fifo_unlock(&e.lock);
		t1 = bench_now_ns();
		lat[n++] = (double)(t1 - t0) / 1e6;
		rsd_snapshot_free(s);
	}
	atomic_store(&e.stop, true);
	pthread_join(w, NULL);
	*wcycles = atomic_load(&e.cycles);
	*nsamples = n;
	*p99 = bench_pct(lat, n, 99);
	*p50 = bench_pct(lat, n, 50);
	*pmax = lat[n - 1];
	rcu_env_fini(&e);
	free(lat);
}

static void latency_case(const char *cs, enum writer_kind wk, uint64_t dur_ns)
{
	double p50[2], p99[2], pmax[2];
	size_t ns[2];
	unsigned long wc[2];
	struct bench_fig *f;

	for (int locked = 0; locked < 2; locked++)
		latency_run(wk, locked, dur_ns, &p50[locked], &p99[locked], &pmax[locked],
			    &ns[locked], &wc[locked]);
	bench_line(cs, "locked_p50_ms", p50[1], "ms");
	bench_line(cs, "locked_p99_ms", p99[1], "ms");
	bench_line(cs, "locked_max_ms", pmax[1], "ms");
	bench_line(cs, "locked_samples", (double)ns[1], "count");
	f = bench_fig(cs, "p50_ms", p50[0], "ms");
	bench_fig_base(f, "locked", p50[1]);
	f = bench_fig(cs, "p99_ms", p99[0], "ms");
	bench_fig_base(f, "locked", p99[1]);
	bench_fig_target(f, TGT_MAX, 1);
	bench_line(cs, "max_ms", pmax[0], "ms");
	bench_line(cs, "samples", (double)ns[0], "count");
	bench_line(cs, "writer_cycles", (double)wc[0], "count");
}

static void case_snapshot_latency_writer(void)
{
	latency_case("snap_lat_writer", W_CYCLE, QF(300000000u, 2000000000u));
	bench_note("snap_lat_*: latency of rsd_snapshot_take on %u values; baseline 'locked' = "
		   "the same reader taking a FIFO lock the writer thread holds around each "
		   "operation (see tools/bench/rcu.c)",
		   LAT_VALUES);
}

static void case_snapshot_latency_load(void)
{
	latency_case("snap_lat_load", W_SLOW_LOAD, QF(450000000u, 2100000000u));
	bench_note("snap_lat_load: the writer thread loops ensure (a source load sleeping 200 ms) "
		   "+ drop");
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		bench_fail("clock_gettime", -RSD_EUSAGE);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Writer ensure/drop cycles per second with nreaders snapshot threads;
 * *per_cpu_s: cycles per second of the writer thread's own CPU time, which
 * other processes on the machine do not change. per_core: the writer runs
 * on CPU 0 and the readers on CPU 1 (the writer alone too).
 */
static double writer_rate(unsigned nreaders, uint64_t pace_ns, uint64_t dur_ns, bool per_core,
			  double *per_cpu_s)
{
	struct rcu_env e = { 0 };
	pthread_t w, rd[4];
	clockid_t wclk;
	unsigned long c0, c1;
	uint64_t t0, t1, u0, u1;

	rcu_env_init(&e, LAT_VALUES);
	e.wk = W_CYCLE;
	e.pace_ns = pace_ns;
	if (per_core) {
		e.writer_cpu = 0;
		e.reader_cpu = 1;
	}
	/* For profilers: "writer-2r-pin" is the writer beside 2 readers, pinned. */
	snprintf(e.writer_name, sizeof(e.writer_name), "writer-%ur%s", nreaders,
		 per_core ? "-pin" : "");
	for (unsigned i = 0; i < nreaders; i++)
		if (pthread_create(&rd[i], NULL, reader_main, &e))
			bench_fail("pthread_create", -RSD_ENOMEM);
	if (pthread_create(&w, NULL, writer_main, &e))
		bench_fail("pthread_create", -RSD_ENOMEM);
	if (pthread_getcpuclockid(w, &wclk))
		bench_fail("pthread_getcpuclockid", -RSD_EUSAGE);
	bench_sleep_ns(dur_ns / 10);
	c0 = atomic_load(&e.cycles);
	u0 = clock_ns(wclk);
	t0 = bench_now_ns();
	bench_sleep_ns(dur_ns);
	c1 = atomic_load(&e.cycles);
	u1 = clock_ns(wclk);
	t1 = bench_now_ns();
	atomic_store(&e.stop, true);
	pthread_join(w, NULL);
	for (unsigned i = 0; i < nreaders; i++)
		pthread_join(rd[i], NULL);
	rcu_env_fini(&e);
	if (per_cpu_s)
		*per_cpu_s = (double)(c1 - c0) * 1e9 / (double)(u1 > u0 ? u1 - u0 : 1);
	return (double)(c1 - c0) * 1e9 / (double)(t1 - t0);
}

/* CPUs 0 and 1 both usable by this process. */
static bool two_cpus(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set))
		return false;
	return CPU_ISSET(0, &set) && CPU_ISSET(1, &set);
}

static void case_writer_throughput(void)
{
	uint64_t dur = QF(150000000u, 400000000u);
	size_t reps = QF(1, 5);
	bool pc = two_cpus();
	double alone[8], two[8], paced[8], alone_pc[8], two_pc[8], alone_cpu[8], two_cpu[8];
	struct bench_fig *f;

	for (size_t r = 0; r < reps; r++) {
		alone[r] = writer_rate(0, 0, dur, false, NULL);
		two[r] = writer_rate(2, 0, dur, false, NULL);
		paced[r] = writer_rate(2, 1000000u, dur, false, NULL);
		if (pc) {
			alone_pc[r] = writer_rate(0, 0, dur, true, &alone_cpu[r]);
			two_pc[r] = writer_rate(2, 0, dur, true, &two_cpu[r]);
		}
	}
	bench_line("writer_tput", "alone_cps", bench_median(alone, reps), "1/s");
	f = bench_fig("writer_tput", "2readers_cps", bench_median(two, reps), "1/s");
	bench_fig_base(f, "alone", bench_median(alone, reps));
	f = bench_fig("writer_tput", "2readers_paced_cps", bench_median(paced, reps), "1/s");
	bench_fig_base(f, "alone", bench_median(alone, reps));
	if (pc) {
		bench_line("writer_tput", "alone_cpu0_cps", bench_median(alone_pc, reps), "1/s");
		f = bench_fig("writer_tput", "2readers_cpu1_cps", bench_median(two_pc, reps),
			      "1/s");
		bench_fig_base(f, "alone cpu0", bench_median(alone_pc, reps));
		f = bench_fig("writer_tput", "per_core_2readers", bench_median(two_cpu, reps),
			      "1/cpu-s");
		bench_fig_base(f, "alone", bench_median(alone_cpu, reps));
		bench_fig_target(f, TGT_RATIO_MIN, 0.8);
	} else {
		bench_skip("writer_tput", "per_core_2readers",
			   "needs CPUs 0 and 1 (this process may run on one CPU only)");
	}
	bench_note("writer_tput: ensure+drop cycles/s of one writer thread; readers take "
		   "snapshots of %u values back to back, or paced one per ms; the machine has "
		   "%ld CPUs. Pinned: the writer on CPU 0, both readers on CPU 1 "
		   "(pthread_setaffinity_np), against the writer alone on CPU 0; per_core = "
		   "cycles per second of the writer thread's own CPU time "
		   "(pthread_getcpuclockid), which other processes do not change",
		   LAT_VALUES, sysconf(_SC_NPROCESSORS_ONLN));
}

/*
 * Ensure/drop cycle cost with few and with many values registered. Both
 * managers live side by side and their repetitions alternate, so that load
 * from elsewhere on the machine falls on both.
 */
static void case_cycle_scale(void)
{
	size_t counts[2] = { 1000, QF(100000, 1000000) };
	size_t iters = QF(20000, 50000), reps = QF(3, 9);
	struct rsd_manager *m[2];
	struct rsd_handle h[2];
	double ns[2][16];
	char metric[32];
	struct bench_fig *f;

	for (int i = 0; i < 2; i++) {
		uint64_t t0;

		m[i] = bench_manager(NULL, 0);
		h[i] = bench_adopt(m[i], VAL_BYTES, RSD_REPLICABLE, true);
		t0 = bench_now_ns();
		bench_sources(m[i], counts[i] - 1, VAL_BYTES, NULL);
		if (i)
			bench_line("cycle_scale", "register_source_ns",
				   (double)(bench_now_ns() - t0) / (double)(counts[i] - 1), "ns");
	}
	for (size_t r = 0; r < reps; r++)
		for (int i = 0; i < 2; i++)
			ns[i][r] = bench_cycle_ns(m[i], h[i], iters, 1);
	for (int i = 0; i < 2; i++)
		bench_manager_end(m[i]);
	bench_line("cycle_scale", "cycle_1k_ns", bench_median(ns[0], reps), "ns");
	snprintf(metric, sizeof(metric), "cycle_%zuk_ns", counts[1] / 1000);
	f = bench_fig("cycle_scale", metric, bench_median(ns[1], reps), "ns");
	bench_fig_base(f, "1k", bench_median(ns[0], reps));
	bench_fig_target(f, TGT_RATIO_MAX, 2);
}
