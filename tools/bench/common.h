/* SPDX-License-Identifier: MIT */
/*
 * rsd-bench: timing, statistics, figures and the closing table.
 *
 * A figure is one measured number; it is printed when recorded, as
 * "bench <case> <metric> <value> <unit>", and joins the closing table with
 * its baseline (measured in the same run), the Python reference's number
 * where the issues give one, and the target. Informational lines
 * (baselines, counts) are printed in the same format but stay out of the
 * table.
 */
#ifndef RSD_BENCH_COMMON_H
#define RSD_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/rsd.h>

/* The Makefile passes -DRSD_TRACE=0|1 to every compile. */
#ifndef RSD_TRACE
#define RSD_TRACE 0
#endif

struct bench_opts {
	bool quick;   /* small iteration counts: the whole run in seconds */
	bool scaling; /* run the 1k..1M scaling sweep */
	bool verbose;
};
extern struct bench_opts bench_opts;

/* Pick the quick or the full count. */
#define QF(q_, f_) (bench_opts.quick ? (q_) : (f_))

enum bench_tkind {
	TGT_NONE,
	TGT_MAX,       /* value <= x */
	TGT_MIN,       /* value >= x */
	TGT_RATIO_MAX, /* value / baseline <= x */
	TGT_RATIO_MIN, /* value / baseline >= x */
};

struct bench_fig {
	char cs[32];
	char metric[32];
	double value;
	char unit[12];
	bool has_base;
	char base_name[40];
	double base;
	bool has_py;
	double py; /* in the figure's unit */
	enum bench_tkind tkind;
	double tx;
	bool skipped;
	char why[200];
};

uint64_t bench_now_ns(void);
void bench_sleep_ns(uint64_t ns);

/* Statistics over a sample array (the array is sorted in place). */
double bench_median(double *v, size_t n);
double bench_pct(double *v, size_t n, double p);

/* Print and record a table figure; the return value takes the decorations. */
struct bench_fig *bench_fig(const char *cs, const char *metric, double value, const char *unit);
void bench_fig_base(struct bench_fig *f, const char *name, double base);
void bench_fig_py(struct bench_fig *f, double py);
void bench_fig_target(struct bench_fig *f, enum bench_tkind kind, double x);
/* A figure that could not be measured here, with the reason. */
void bench_skip(const char *cs, const char *metric, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Print a line in the figure format, outside the table. */
void bench_line(const char *cs, const char *metric, double value, const char *unit);
/* A free-form note (prefixed with '#'). */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void bench_print_table(void);
/* Figures that missed their target. */
int bench_nmissed(void);

/* A failed librsd call is a defect of the run: report it and exit 1. */
void bench_fail(const char *what, int rc) __attribute__((noreturn));
#define CK(expr)                                   \
	do {                                       \
		int ck_rc_ = (expr);               \
		if (ck_rc_)                        \
			bench_fail(#expr, ck_rc_); \
	} while (0)

/* ---- workload helpers ---- */

/* A host-only manager; budgets may be NULL. */
struct rsd_manager *bench_manager(const struct rsd_budget *budgets, size_t nbudgets);
void bench_manager_end(struct rsd_manager *m);
/* Allocate nbytes at pageable host and adopt it (write the bytes when touch). */
struct rsd_handle bench_adopt(struct rsd_manager *m, uint64_t nbytes, enum rsd_replica_mode mode,
			      bool touch);
/* Register n reconstructible sources of nbytes at pageable host (no load). */
void bench_sources(struct rsd_manager *m, size_t n, uint64_t nbytes, struct rsd_handle *out);
/* One ensure(pinned)+drop(pinned) cycle of a replicable pageable value. */
void bench_cycle(struct rsd_manager *m, struct rsd_handle h);
/* Median ns of one bench_cycle over reps batches of iters cycles. */
double bench_cycle_ns(struct rsd_manager *m, struct rsd_handle h, size_t iters, size_t reps);
/* Median ns of reps ensures of h at `at`, each followed by its drop (one
 * more round first warms the pools); at most 32 reps. */
double bench_ensure_ns(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
		       size_t reps);

#endif
