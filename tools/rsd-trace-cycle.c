// SPDX-License-Identifier: MIT
/*
 * rsd-trace-cycle: the cost of one ensure/drop cycle, for comparing tracing
 * compiled out, compiled in but not recorded, and recorded
 * (tools/rsd-trace-bench runs it in all three).
 *
 * One 4 KiB reconstructible, replicable value on a host-only manager is
 * loaded at pageable host; a cycle is rsd_ensure(pinned-host) (a copy out
 * of pageable memory into the pinned pool) followed by
 * rsd_drop(pinned-host). Each cycle is two transitions and two changes of
 * pinned-host's used bytes, so a recorded cycle fires two rsd:transition and
 * two rsd:state events. The figure is the median, over RUNS timed runs, of
 * the mean ns per cycle of a run of CYCLES cycles, after one untimed warm-up
 * run (it grows the pinned pool and faults the pages in).
 *
 * Output: "bench trace_LABEL cycle NS ns", then one "#" line with the
 * spread and the parameters.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

/* The build passes -DRSD_TRACE=0|1; elsewhere say "compiled out". */
#ifndef RSD_TRACE
#define RSD_TRACE 0
#endif

#define VALUE_BYTES 4096u
#define MAX_RUNS 101

struct opts {
	unsigned long cycles;
	unsigned runs;
	const char *label;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: rsd-trace-cycle [-n CYCLES] [-r RUNS] [-l LABEL]\n"
		   "  -n CYCLES  ensure/drop cycles per timed run (default 20000)\n"
		   "  -r RUNS    timed runs; the median is printed (default 7, at most %d)\n"
		   "  -l LABEL   the figure is printed as \"bench trace_LABEL cycle NS ns\"\n"
		   "             (default: \"compiled_out\" or \"compiled_in\", as built)\n",
		MAX_RUNS);
}

static int parse(int argc, char **argv, struct opts *o)
{
	char *end;
	int c;

	o->cycles = 20000;
	o->runs = 7;
	o->label = RSD_TRACE ? "compiled_in" : "compiled_out";
	while ((c = getopt(argc, argv, "n:r:l:h")) != -1) {
		switch (c) {
		case 'n':
			o->cycles = strtoul(optarg, &end, 10);
			if (*end || !o->cycles) {
				fprintf(stderr, "rsd-trace-cycle: -n wants a positive count, not '%s'\n",
					optarg);
				return -1;
			}
			break;
		case 'r':
			o->runs = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !o->runs || o->runs > MAX_RUNS) {
				fprintf(stderr, "rsd-trace-cycle: -r wants 1..%d, not '%s'\n", MAX_RUNS,
					optarg);
				return -1;
			}
			break;
		case 'l':
			o->label = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The source: a fresh pageable buffer, as a reconstructible value reloads. */
static int load(void *ctx, struct rsd_resident **out)
{
	struct rsd_resident *r;
	uint64_t n = VALUE_BYTES;
	int err;

	err = rsd_resident_alloc(ctx, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				 &r);
	if (err)
		return err;
	memset(rsd_resident_data(r, 0), 0x5a, VALUE_BYTES);
	*out = r;
	return 0;
}

static void release(void *ctx)
{
	(void)ctx;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "rsd-trace-cycle: %s: %s: %s\n", what, rsd_strerror(rc),
		rsd_last_error()->message);
	return 1;
}

/* n cycles; 0 or the first failure's error code, with *what naming the call. */
static int cycles(struct rsd_manager *m, struct rsd_handle h, unsigned long n, const char **what)
{
	int err = 0;

	for (unsigned long i = 0; i < n && !err; i++) {
		err = rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, NULL);
		*what = "rsd_ensure(pinned-host)";
		if (!err) {
			err = rsd_drop(m, h, RSD_LOC_PINNED_HOST, NULL);
			*what = "rsd_drop(pinned-host)";
		}
	}
	return err;
}

int main(int argc, char **argv)
{
	const struct rsd_value_spec spec = { &rsd_resident_type, VALUE_BYTES, VALUE_BYTES,
					     RSD_REPLICABLE, RSD_RECONSTRUCTIBLE };
	struct rsd_manager_config cfg = { .host_only = true };
	struct rsd_manager *m = NULL;
	const char *what = "";
	double ns[MAX_RUNS], med;
	struct rsd_handle h;
	struct opts o;
	int err, rc = 1;

	if (parse(argc, argv, &o))
		return 2;
	err = rsd_manager_create(&cfg, &m);
	if (err)
		return fail("rsd_manager_create", err);
	{
		struct rsd_source src = { load, release, m };

		err = rsd_register_source(m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h);
	}
	if (err) {
		rc = fail("rsd_register_source", err);
		goto out;
	}
	err = rsd_ensure(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL);
	if (err) {
		rc = fail("rsd_ensure(pageable-host)", err);
		goto out;
	}
	err = cycles(m, h, o.cycles, &what);
	for (unsigned r = 0; r < o.runs && !err; r++) {
		uint64_t t0 = now_ns();

		err = cycles(m, h, o.cycles, &what);
		ns[r] = (double)(now_ns() - t0) / (double)o.cycles;
	}
	if (err) {
		rc = fail(what, err);
		goto out;
	}
	qsort(ns, o.runs, sizeof(ns[0]), cmp_double);
	med = o.runs % 2 ? ns[o.runs / 2] : (ns[o.runs / 2 - 1] + ns[o.runs / 2]) / 2;
	printf("bench trace_%s cycle %.1f ns\n", o.label, med);
	printf("# rsd-trace-cycle: median of %u runs of %lu ensure(pinned-host)+drop(pinned-host) "
	       "cycles of a %u-byte reconstructible value (min %.1f, max %.1f ns); tracing "
	       "compiled %s\n",
	       o.runs, o.cycles, VALUE_BYTES, ns[0], ns[o.runs - 1], RSD_TRACE ? "in" : "out");
	rc = 0;
out:
	err = rsd_manager_close(m, 0);
	if (err && !rc)
		rc = fail("rsd_manager_close", err);
	rsd_manager_destroy(m);
	return rc;
}
