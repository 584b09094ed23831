// SPDX-License-Identifier: MIT
/* rsd-bench: timing, statistics, figures, the closing table, helpers. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

struct bench_opts bench_opts;

#define BENCH_MAX_FIGS 160
static struct bench_fig figs[BENCH_MAX_FIGS];
static size_t nfigs;

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts))
		;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_pct(double *v, size_t n, double p)
{
	size_t k;

	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	/* Nearest rank: the smallest sample with at least p% at or below it. */
	k = (size_t)ceil(p / 100.0 * (double)n);
	return v[k ? k - 1 : 0];
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_value(double v, const char *unit, char *buf, size_t len)
{
	if (v != v)
		snprintf(buf, len, "nan");
	else if (fabs(v) >= 100000 || (unit && !strcmp(unit, "count")))
		snprintf(buf, len, "%.0f", v);
	else if (fabs(v) >= 100)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.3g", v);
}

void bench_line(const char *cs, const char *metric, double value, const char *unit)
{
	char v[40];

	print_value(value, unit, v, sizeof(v));
	printf("bench %s %s %s %s\n", cs, metric, v, unit);
	fflush(stdout);
}

void bench_note(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static struct bench_fig *fig_new(const char *cs, const char *metric)
{
	static struct bench_fig overflow;
	struct bench_fig *f = nfigs < BENCH_MAX_FIGS ? &figs[nfigs++] : &overflow;

	memset(f, 0, sizeof(*f));
	snprintf(f->cs, sizeof(f->cs), "%s", cs);
	snprintf(f->metric, sizeof(f->metric), "%s", metric);
	return f;
}

struct bench_fig *bench_fig(const char *cs, const char *metric, double value, const char *unit)
{
	struct bench_fig *f = fig_new(cs, metric);

	f->value = value;
	snprintf(f->unit, sizeof(f->unit), "%s", unit);
	bench_line(cs, metric, value, unit);
	return f;
}

void bench_fig_base(struct bench_fig *f, const char *name, double base)
{
	f->has_base = true;
	snprintf(f->base_name, sizeof(f->base_name), "%s", name);
	f->base = base;
}

void bench_fig_py(struct bench_fig *f, double py)
{
	f->has_py = true;
	f->py = py;
}

void bench_fig_target(struct bench_fig *f, enum bench_tkind kind, double x)
{
	f->tkind = kind;
	f->tx = x;
}

void bench_skip(const char *cs, const char *metric, const char *fmt, ...)
{
	struct bench_fig *f = fig_new(cs, metric);
	va_list ap;

	f->skipped = true;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof(f->why), fmt, ap);
	va_end(ap);
	printf("bench %s %s skipped %s\n", cs, metric, f->why);
	fflush(stdout);
}

/* 1 pass, 0 miss, -1 no target (or nothing to judge). */
static int fig_verdict(const struct bench_fig *f)
{
	double r;

	if (f->skipped)
		return -1;
	switch (f->tkind) {
	case TGT_MAX:
		return f->value <= f->tx;
	case TGT_MIN:
		return f->value >= f->tx;
	case TGT_RATIO_MAX:
	case TGT_RATIO_MIN:
		if (!f->has_base || f->base == 0)
			return -1;
		r = f->value / f->base;
		return f->tkind == TGT_RATIO_MAX ? r <= f->tx : r >= f->tx;
	default:
		return -1;
	}
}

static void fig_target_text(const struct bench_fig *f, char *buf, size_t len)
{
	char v[40];

	print_value(f->tx, f->unit, v, sizeof(v));
	switch (f->tkind) {
	case TGT_MAX:
		snprintf(buf, len, "<= %s %s", v, f->unit);
		break;
	case TGT_MIN:
		snprintf(buf, len, ">= %s %s", v, f->unit);
		break;
	case TGT_RATIO_MAX:
		snprintf(buf, len, "<= %.2fx base", f->tx);
		break;
	case TGT_RATIO_MIN:
		snprintf(buf, len, ">= %.2fx base", f->tx);
		break;
	default:
		snprintf(buf, len, "-");
	}
}

int bench_nmissed(void)
{
	int n = 0;

	for (size_t i = 0; i < nfigs; i++)
		n += fig_verdict(&figs[i]) == 0;
	return n;
}

void bench_print_table(void)
{
	int pass = 0, miss = 0, skip = 0;

	printf("\n%-18s %-22s %12s %-6s %-28s %8s %10s %8s %-16s %s\n", "case", "metric", "value",
	       "unit", "baseline (same run)", "x base", "python", "py/value", "target", "result");
	for (size_t i = 0; i < nfigs; i++) {
		const struct bench_fig *f = &figs[i];
		char val[40], base[64], ratio[24], py[40], speed[24], tgt[48];
		const char *res;
		int v;

		if (f->skipped) {
			printf("%-18s %-22s %12s %-6s %s\n", f->cs, f->metric, "skipped", "",
			       f->why);
			skip++;
			continue;
		}
		print_value(f->value, f->unit, val, sizeof(val));
		base[0] = ratio[0] = py[0] = speed[0] = '\0';
		snprintf(base, sizeof(base), "-");
		snprintf(ratio, sizeof(ratio), "-");
		snprintf(py, sizeof(py), "-");
		snprintf(speed, sizeof(speed), "-");
		if (f->has_base) {
			char b[40];

			print_value(f->base, f->unit, b, sizeof(b));
			snprintf(base, sizeof(base), "%s %s", f->base_name, b);
			snprintf(ratio, sizeof(ratio), "%.2f", f->base ? f->value / f->base : NAN);
		}
		if (f->has_py) {
			print_value(f->py, f->unit, py, sizeof(py));
			/* Python figures are times: how many times faster we are. */
			snprintf(speed, sizeof(speed), "%.0fx", f->value ? f->py / f->value : NAN);
		}
		fig_target_text(f, tgt, sizeof(tgt));
		v = fig_verdict(f);
		res = v < 0 ? "-" : v ? "PASS" : "MISS";
		pass += v == 1;
		miss += v == 0;
		printf("%-18s %-22s %12s %-6s %-28s %8s %10s %8s %-16s %s\n", f->cs, f->metric, val,
		       f->unit, base, ratio, py, speed, tgt, res);
	}
	printf("\n%d PASS, %d MISS, %d skipped\n", pass, miss, skip);
	fflush(stdout);
}

void bench_fail(const char *what, int rc)
{
	const struct rsd_error *e = rsd_last_error();

	fflush(stdout);
	fprintf(stderr, "rsd-bench: %s failed: %d (%s): %s\n", what, rc, rsd_strerror(rc),
		e->code ? e->message : "");
	exit(1);
}

/* ---- workload helpers ---- */

struct rsd_manager *bench_manager(const struct rsd_budget *budgets, size_t nbudgets)
{
	struct rsd_manager_config cfg = { 0 };
	struct rsd_manager *m;

	cfg.host_only = true;
	cfg.budgets = budgets;
	cfg.nbudgets = nbudgets;
	CK(rsd_manager_create(&cfg, &m));
	return m;
}

void bench_manager_end(struct rsd_manager *m)
{
	/* Benchmarks may leave leases behind on purpose: force. */
	rsd_manager_close(m, RSD_CLOSE_FORCE);
	rsd_manager_destroy(m);
}

struct rsd_handle bench_adopt(struct rsd_manager *m, uint64_t nbytes, enum rsd_replica_mode mode,
			      bool touch)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	CK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &nbytes, NULL, 0,
			      &r));
	if (touch && nbytes)
		memset(rsd_resident_data(r, 0), 0x5a, (size_t)nbytes);
	CK(rsd_adopt(m, r, NULL, mode, &h));
	return h;
}

/* The filler sources share one context: they load an untouched buffer. */
struct filler_ctx {
	struct rsd_manager *m;
	uint64_t nbytes;
};

static int filler_load(void *ctx, struct rsd_resident **out)
{
	struct filler_ctx *f = ctx;

	return rsd_resident_alloc(f->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &f->nbytes,
				  NULL, 0, out);
}

static void filler_release(void *ctx)
{
	free(ctx);
}

void bench_sources(struct rsd_manager *m, size_t n, uint64_t nbytes, struct rsd_handle *out)
{
	struct rsd_value_spec sp = { &rsd_resident_type, nbytes, nbytes, RSD_REPLICABLE,
				     RSD_RECONSTRUCTIBLE };
	struct rsd_handle h;

	for (size_t i = 0; i < n; i++) {
		/* One context per source: release frees it exactly once. */
		struct filler_ctx *f = malloc(sizeof(*f));
		struct rsd_source src = { filler_load, filler_release, f };

		if (!f) {
			fprintf(stderr, "rsd-bench: out of memory\n");
			exit(1);
		}
		f->m = m;
		f->nbytes = nbytes;
		CK(rsd_register_source(m, &sp, &src, RSD_LOC_PAGEABLE_HOST, &h));
		if (out)
			out[i] = h;
	}
}

void bench_cycle(struct rsd_manager *m, struct rsd_handle h)
{
	CK(rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, NULL));
	CK(rsd_drop(m, h, RSD_LOC_PINNED_HOST, NULL));
}

double bench_cycle_ns(struct rsd_manager *m, struct rsd_handle h, size_t iters, size_t reps)
{
	double v[64] = { 0 };

	if (reps > 64)
		reps = 64;
	for (size_t i = 0; i < iters / 4 + 1; i++) /* warm up */
		bench_cycle(m, h);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < iters; i++)
			bench_cycle(m, h);
		v[r] = (double)(bench_now_ns() - t0) / (double)iters;
	}
	return bench_median(v, reps);
}

double bench_ensure_ns(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
		       size_t reps)
{
	double t[32] = { 0 };

	if (reps > 32)
		reps = 32;
	for (size_t i = 0; i < reps + 1; i++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_ensure(m, h, at, NULL, NULL));
		if (i)
			t[i - 1] = (double)(bench_now_ns() - t0);
		CK(rsd_drop(m, h, at, NULL));
	}
	return bench_median(t, reps);
}
