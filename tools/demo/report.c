// SPDX-License-Identifier: MIT
/*
 * rsd-demo's report: why bytes moved, the compact per-stage table and the
 * final snapshot.
 */
#include <stdlib.h>
#include <string.h>

#include "demo.h"

/* Stages printed in full before the table shows changes only. */
#define DEMO_FULL_STAGES 3

double demo_mib(uint64_t nbytes)
{
	return (double)nbytes / (double)MiB;
}

const char *const demo_tier_name[NTIERS] = { "pageable", "pinned", "device" };

const char *const demo_why_text[NWHY] = {
	[W_LOAD] = "stage inputs brought to the device",
	[W_SPILL_DEV] = "spilled: the device budget was full",
	[W_SPILL_PIN] = "spilled: the pinned budget was full",
	[W_SEND] = "staged on pinned host for an MPI send",
	[W_ROOM] = "spilled: room on pinned host for received values",
	[W_VERIFY] = "brought to pageable host for the checksums",
	[W_OTHER] = "other",
};

enum tier demo_tier(struct rsd_location at)
{
	return at.kind == RSD_CUDA ? T_DEVICE : (enum tier)at.kind;
}

enum why demo_why_of(enum phase ph, const struct rsd_transition *t,
		     const struct rsd_handle *outgoing, size_t n)
{
	enum tier from = demo_tier(t->source), to = demo_tier(t->destination);

	if (ph == PH_VERIFY)
		return W_VERIFY;
	if (ph == PH_EXCHANGE) {
		for (size_t i = 0; i < n; i++)
			if (rsd_handle_equal(t->action.handle, outgoing[i]) && to == T_PINNED)
				return W_SEND;
		return from == T_DEVICE ? W_OTHER : W_ROOM;
	}
	if (to == T_DEVICE)
		return W_LOAD;
	if (from == T_DEVICE)
		return W_SPILL_DEV;
	if (from == T_PINNED && to == T_PAGEABLE)
		return W_SPILL_PIN;
	return W_OTHER;
}

static void table_print(FILE *out, const char *label, const struct row *r)
{
	fprintf(out, "%-8s %5llu %6llu %5llu %10.1f %10.1f %10.1f %9.1fM %8llu\n", label,
		(unsigned long long)r->evict, (unsigned long long)r->spills,
		(unsigned long long)r->drops, demo_mib(r->h2d), demo_mib(r->d2h), demo_mib(r->h2h),
		demo_mib(r->peak), (unsigned long long)r->explored);
}

static bool row_same(const struct table *t, unsigned a, unsigned b)
{
	return !memcmp(&t->rows[a], &t->rows[b], sizeof(t->rows[a]));
}

/* Lines that runs of equal rows make of stages [from, to). */
static unsigned table_runs(const struct table *t, unsigned from, unsigned to, FILE *out)
{
	unsigned lines = 0;
	char label[32];

	for (unsigned s = from, e; s < to; s = e) {
		for (e = s + 1; e < to && row_same(t, s, e); e++)
			;
		lines++;
		if (!out)
			continue;
		if (e - s == 1)
			snprintf(label, sizeof(label), "%u", s);
		else
			snprintf(label, sizeof(label), "%u-%u", s, e - 1);
		table_print(out, label, &t->rows[s]);
	}
	return lines;
}

int demo_table_begin(struct table *t, unsigned nstages)
{
	t->n = 0;
	t->rows = calloc(nstages ? nstages : 1, sizeof(*t->rows));
	return t->rows ? 0 : -1;
}

void demo_table_add(struct table *t, const struct row *r)
{
	t->rows[t->n++] = *r;
}

/*
 * The first stages, then the rest as runs; when from some stage on every
 * row equals the one a period before, that cycle is printed once and the
 * stages after it are one line. The cycle chosen is the one that prints
 * fewest lines (none when plain runs print fewer).
 */
void demo_table_end(struct table *t, FILE *out)
{
	unsigned n = t->n, full = n < DEMO_FULL_STAGES ? n : DEMO_FULL_STAGES;
	unsigned best = table_runs(t, full, n, NULL), cyc_from = n, period = 0;
	struct row total = { 0 };
	char label[32];

	for (unsigned p = 2; full + 2 * p <= n; p++) {
		unsigned s = n;
		unsigned lines;

		while (s > full + p && row_same(t, s - 1, s - 1 - p))
			s--;
		/* Stages [s, n) repeat [s - p, n - p): print [full, s) in runs. */
		if (n - s < p)
			continue;
		lines = table_runs(t, full, s, NULL) + 1;
		if (lines < best) {
			best = lines;
			cyc_from = s;
			period = p;
		}
	}
	fprintf(out,
		"per stage (stages 0-%u in full, then one line per run of equal stages, a "
		"repeating cycle once):\n",
		full ? full - 1 : 0);
	fprintf(out, "%-8s %5s %6s %5s %10s %10s %10s %10s %8s\n", "stage", "evict", "spills",
		"drops", "H->D MiB", "D->H MiB", "H->H MiB", "dev peak", "explored");
	for (unsigned s = 0; s < full; s++) {
		snprintf(label, sizeof(label), "%u", s);
		table_print(out, label, &t->rows[s]);
	}
	table_runs(t, full, cyc_from, out);
	if (cyc_from < n) {
		snprintf(label, sizeof(label), "%u-%u", cyc_from, n - 1);
		fprintf(out, "%-8s (stages %u-%u again, every %u stages)\n", label,
			cyc_from - period, cyc_from - 1, period);
	}
	for (unsigned s = 0; s < n; s++) {
		const struct row *r = &t->rows[s];

		total.evict += r->evict;
		total.spills += r->spills;
		total.drops += r->drops;
		total.h2d += r->h2d;
		total.d2h += r->d2h;
		total.h2h += r->h2h;
		total.explored += r->explored;
		if (r->peak > total.peak)
			total.peak = r->peak;
	}
	table_print(out, "total", &total);
	free(t->rows);
	t->rows = NULL;
}

uint64_t demo_device_peak(struct rsd_manager *m, struct rsd_location dev)
{
	struct rsd_snapshot *snap;
	uint64_t peak = 0;

	if (rsd_snapshot_take(m, &snap))
		return 0;
	for (size_t i = 0; i < snap->nlocations; i++)
		if (rsd_location_equal(snap->locations[i].location, dev))
			peak = snap->locations[i].peak_charged_bytes;
	rsd_snapshot_free(snap);
	return peak;
}

void demo_print_snapshot(FILE *out, struct rsd_manager *m)
{
	struct rsd_snapshot *s;
	char name[RSD_LOCATION_NAME_MAX];

	if (rsd_snapshot_take(m, &s))
		return;
	fprintf(out, "\nfinal snapshot (state_version %llu, %zu values)\n",
		(unsigned long long)s->state_version, s->nvalues);
	fprintf(out, "  %-14s %10s %10s %10s %10s %10s %7s\n", "location", "budget", "used",
		"reserved", "peak used", "peak chgd", "values");
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];
		char budget[32] = "-";

		if (l->has_budget)
			snprintf(budget, sizeof(budget), "%.1fM", demo_mib(l->budget_bytes));
		fprintf(out, "  %-14s %10s %9.1fM %9.1fM %9.1fM %9.1fM %7llu\n",
			rsd_location_name(l->location, name, sizeof(name)), budget,
			demo_mib(l->used_bytes), demo_mib(l->reserved_bytes),
			demo_mib(l->peak_used_bytes), demo_mib(l->peak_charged_bytes),
			(unsigned long long)l->value_count);
	}
	rsd_snapshot_free(s);
}
