// SPDX-License-Identifier: MIT
/*
 * What no replay of a key-access trace can beat, and a schedule that comes
 * close (keytrace.h): Belady's bound on the bytes, the ideal time, the
 * trace's lower bound on the elapsed time (kt_critical) and an offline plan
 * with no host in the way (kt_plan). Pure functions of the trace and the
 * options; keytrace.c replays the trace and prints them beside the replay.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keytrace.h"

/*
 * Each access's next access to the same key, t->naccess when none: one
 * backward pass. NULL after printing why when memory ran out.
 */
static unsigned *kt_next_uses(const struct kt_trace *t)
{
	unsigned *nxt = malloc(((size_t)t->naccess + 1) * sizeof(*nxt));
	unsigned *last = malloc(((size_t)t->nkeys + 1) * sizeof(*last));

	if (!nxt || !last) {
		fprintf(stderr, "keytrace: out of memory for the next uses of %u accesses\n",
			t->naccess);
		free(nxt);
		free(last);
		return NULL;
	}
	for (unsigned k = 0; k < t->nkeys; k++)
		last[k] = t->naccess;
	for (unsigned i = t->naccess; i-- > 0;) {
		nxt[i] = last[t->access[i]];
		last[t->access[i]] = i;
	}
	free(last);
	return nxt;
}

/*
 * One Belady run's state: the held keys in a max-heap on their next use,
 * the lower key index first among equals (keys not used again in the run),
 * so that the victim is the one a scan of the keys in index order would
 * pick, in O(log keys) per access.
 */
struct kt_bel {
	const struct kt_trace *t;
	const unsigned *nxt; /* kt_next_uses() */
	unsigned *next;	     /* per held key: its next use in the run */
	unsigned *heap;	     /* the held keys, the one used farthest ahead first */
	unsigned *pos;	     /* per key: its place in heap; UINT_MAX when not held */
	unsigned nheap;
};

static void kt_bel_free(struct kt_bel *b)
{
	free(b->next);
	free(b->heap);
	free(b->pos);
	free((void *)b->nxt);
}

/* 0, or -1 after printing why when memory ran out (b freed then). */
static int kt_bel_init(struct kt_bel *b, const struct kt_trace *t)
{
	size_t nk = (size_t)t->nkeys + 1;

	*b = (struct kt_bel){ .t = t,
			      .nxt = kt_next_uses(t),
			      .next = malloc(nk * sizeof(*b->next)),
			      .heap = malloc(nk * sizeof(*b->heap)),
			      .pos = malloc(nk * sizeof(*b->pos)) };
	if (b->nxt && b->next && b->heap && b->pos)
		return 0;
	if (b->nxt)
		fprintf(stderr, "keytrace: out of memory for Belady's run over %u keys\n",
			t->nkeys);
	kt_bel_free(b);
	return -1;
}

/* Is held key x a better victim than held key y. */
static bool kt_bel_above(const struct kt_bel *b, unsigned x, unsigned y)
{
	if (b->next[x] != b->next[y])
		return b->next[x] > b->next[y];
	return x < y;
}

static void kt_bel_place(struct kt_bel *b, unsigned at, unsigned k)
{
	b->heap[at] = k;
	b->pos[k] = at;
}

/* Key k's next use rose (or k was just added at the end): move it up. */
static void kt_bel_up(struct kt_bel *b, unsigned k)
{
	unsigned at = b->pos[k];

	while (at && kt_bel_above(b, k, b->heap[(at - 1) / 2])) {
		kt_bel_place(b, at, b->heap[(at - 1) / 2]);
		at = (at - 1) / 2;
	}
	kt_bel_place(b, at, k);
}

/* Take the top (the victim) out of the heap; the key. */
static unsigned kt_bel_pop(struct kt_bel *b)
{
	unsigned top = b->heap[0], k = b->heap[--b->nheap], at = 0;

	b->pos[top] = UINT_MAX;
	if (!b->nheap)
		return top;
	for (;;) {
		unsigned c = 2 * at + 1;

		if (c >= b->nheap)
			break;
		if (c + 1 < b->nheap && kt_bel_above(b, b->heap[c + 1], b->heap[c]))
			c++;
		if (!kt_bel_above(b, b->heap[c], k))
			break;
		kt_bel_place(b, at, b->heap[c]);
		at = c;
	}
	kt_bel_place(b, at, k);
	return top;
}

/*
 * The whole trace's Belady run, as kt_critical's suffix runs meet it.
 * Recorded once: its bytes after each access and the keys each access
 * evicted. Then a suffix run from s starts empty beside the whole run's
 * held keys just before s; as soon as the two hold the same keys they
 * decide alike to the end (the same held keys, the same next uses: both
 * count uses up to the trace's end; the same ties), so the suffix's bytes
 * are its own so far and the whole run's after that access.
 */
struct kt_whole {
	bool record;	   /* this run is the whole trace's: record it */
	uint64_t *cum;	   /* per access: the whole run's bytes up to it */
	uint64_t total;	   /* the whole run's bytes */
	unsigned *evstart; /* per access: its evictions in evkey, to evstart[i + 1] */
	unsigned *evkey;
	bool *held; /* the whole run's held keys before access `at` */
	unsigned at;
	bool *now;  /* the same, advanced beside a suffix run */
	bool *mine; /* the suffix run's held keys */
};

/* Set key k's membership of set to v, counting in *diff the keys that
 * are in one of set and other only (other NULL: no count). */
static void kt_whole_set(bool *set, unsigned k, bool v, const bool *other, unsigned *diff)
{
	if (set[k] == v)
		return;
	if (other)
		*diff = set[k] != other[k] ? *diff - 1 : *diff + 1;
	set[k] = v;
}

/* Access j of the whole run in set: its evictions, then its key. */
static void kt_whole_step(const struct kt_trace *t, struct kt_whole *w, bool *set, unsigned j,
			  const bool *other, unsigned *diff)
{
	for (unsigned e = w->evstart[j]; e < w->evstart[j + 1]; e++)
		kt_whole_set(set, w->evkey[e], false, other, diff);
	kt_whole_set(set, t->access[j], true, other, diff);
}

/*
 * Belady's bytes for the trace's accesses from `from` to before n, the
 * device empty at the start: fetch on a miss, evict the held key used
 * farthest ahead until the key fits (or none is left: the key alone is
 * larger than the budget). With w recording, from 0 to the trace's end,
 * the whole run as kt_whole says; with w recorded, a suffix run that
 * stops where it meets the whole run.
 */
static uint64_t kt_bel_run(struct kt_bel *b, uint64_t scale, uint64_t budget, unsigned from,
			   unsigned n, struct kt_whole *w)
{
	const struct kt_trace *t = b->t;
	bool meet = w && !w->record;
	uint64_t used = 0, moved = 0;
	unsigned diff = 0, nev = 0;

	for (unsigned k = 0; k < t->nkeys; k++)
		b->pos[k] = UINT_MAX;
	b->nheap = 0;
	if (meet) {
		/* the whole run's held keys just before from, against none */
		for (; w->at < from; w->at++)
			kt_whole_step(t, w, w->held, w->at, NULL, NULL);
		memcpy(w->now, w->held, t->nkeys * sizeof(*w->now));
		memset(w->mine, 0, t->nkeys * sizeof(*w->mine));
		for (unsigned k = 0; k < t->nkeys; k++)
			diff += w->now[k];
	}
	for (unsigned i = from; i < n; i++) {
		unsigned k = t->access[i];
		uint64_t nb = t->key_bytes[k] / scale;

		b->next[k] = b->nxt[i] < n ? b->nxt[i] : n;
		if (w && w->record)
			w->evstart[i] = nev;
		if (b->pos[k] != UINT_MAX) {
			kt_bel_up(b, k); /* its next use only grows */
		} else {
			moved += nb;
			while (used + nb > budget && b->nheap) {
				unsigned v = kt_bel_pop(b);

				used -= t->key_bytes[v] / scale;
				if (w && w->record)
					w->evkey[nev++] = v;
				if (meet)
					kt_whole_set(w->mine, v, false, w->now, &diff);
			}
			b->pos[k] = b->nheap++;
			kt_bel_up(b, k);
			used += nb;
			if (meet)
				kt_whole_set(w->mine, k, true, w->now, &diff);
		}
		if (w && w->record)
			w->cum[i] = moved;
		if (meet) {
			kt_whole_step(t, w, w->now, i, w->mine, &diff);
			if (!diff)
				return moved + w->total - w->cum[i];
		}
	}
	if (w && w->record) {
		w->evstart[n] = nev;
		w->total = moved;
	}
	return moved;
}

uint64_t kt_belady(const struct kt_trace *t, uint64_t scale, uint64_t budget, bool *exact)
{
	struct kt_bel b;
	uint64_t moved;
	bool one = true;

	if (kt_bel_init(&b, t))
		return KT_FAILED;
	moved = kt_bel_run(&b, scale, budget, 0, t->naccess, NULL);
	kt_bel_free(&b);
	for (unsigned k = 1; k < t->nkeys; k++)
		one &= t->key_bytes[k] == t->key_bytes[0];
	*exact = one;
	return moved;
}

/* ---- the ideal, the lower bound and the offline plan ------------------------ */

double kt_ideal(const struct kt_trace *t, const struct kt_opts *o, uint64_t bound, uint64_t copy_ns)
{
	uint64_t key = t->key_bytes[0] / o->scale; /* one scaled key */
	double copies = (double)bound / (double)key * (double)copy_ns;
	double kernels = (double)t->naccess * (double)o->kernel_ns * o->time_scale;

	return copies > kernels ? copies : kernels;
}

/*
 * The prefix term, Belady's bytes for the accesses 0 to i, for every i from
 * one run over the whole trace: its bytes after access i. With keys of one
 * size, any eviction of a key used farthest ahead is optimal (Belady), so
 * it suffices that the whole trace's run makes such a choice for the prefix
 * at every miss before i. It does: its victim is used farthest ahead in the
 * whole trace; if that use is within the prefix it is the prefix's
 * farthest too, and if not, no held key is used again within the prefix
 * beyond it, and keys not used again within the prefix are interchangeable
 * there. Its copies up to i are therefore the prefix's optimum.
 *
 * The suffix term needs a run from an empty device on each suffix. Up to
 * KT_CRITICAL_EXACT accesses every suffix gets its run; beyond, every
 * stride-th one (KT_CRITICAL_POINTS of them, and the last access), and an
 * access in between takes the next such suffix's bytes. That is still a
 * lower bound: a suffix s of suffix i needs no more copies than i does
 * (follow i's optimal schedule from s on, copying a key only when it is
 * read and i's schedule holds it: each such copy is one of i's copies from
 * s on, or the first read after s of a key i's schedule copied before s
 * and still holds, one per copy), and the suffix term only grows with
 * the suffix's bytes.
 */
double kt_critical(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns)
{
	uint64_t key = t->key_bytes[0] / o->scale; /* one scaled key */
	double kernel = (double)o->kernel_ns * o->time_scale, start = 0, best = 0;
	uint64_t slots = o->budget / key; /* whole keys the budget holds */
	unsigned n = t->naccess, sampled = UINT_MAX;
	unsigned stride = kt_critical_stride(n);
	size_t nk = (size_t)t->nkeys + 1, na = (size_t)n + 1;
	struct kt_whole w = { .record = true,
			      .cum = malloc(na * sizeof(*w.cum)),
			      .evstart = malloc(na * sizeof(*w.evstart)),
			      .evkey = malloc(na * sizeof(*w.evkey)),
			      .held = calloc(nk, sizeof(*w.held)),
			      .now = malloc(nk * sizeof(*w.now)),
			      .mine = malloc(nk * sizeof(*w.mine)) };
	struct kt_bel b = { 0 };
	uint64_t suffix = 0;

	if (!w.cum || !w.evstart || !w.evkey || !w.held || !w.now || !w.mine) {
		fprintf(stderr, "keytrace: out of memory for the bound of %u accesses\n", n);
		best = -1;
		goto out;
	}
	if (kt_bel_init(&b, t)) {
		best = -1;
		goto out;
	}
	kt_bel_run(&b, o->scale, o->budget, 0, n, &w);
	w.record = false;
	for (unsigned i = 0; i < n; i++) {
		/* the suffix whose bytes stand for suffix i's */
		unsigned s = i % stride ? i - i % stride + stride : i;
		double before = (double)w.cum[i], after, rest;

		if (s > n - 1)
			s = n - 1;
		if (s != sampled) {
			suffix = kt_bel_run(&b, o->scale, o->budget, s, n, &w);
			sampled = s;
		}
		after = (double)suffix;
		/* kernel i's earliest start: after the first i + 1 accesses'
		 * copies, and a kernel after kernel i - 1's earliest start */
		before = before / (double)key * (double)copy_ns;
		start = i && start + kernel > before ? start + kernel : before;
		/* then the kernels from i on, or the copies the suffix needs
		 * beyond the slots it can find filled and the last one's kernel */
		after = after / (double)key - (double)slots;
		rest = after > 0 ? after * (double)copy_ns + kernel : 0;
		if (rest < (double)(n - i) * kernel)
			rest = (double)(n - i) * kernel;
		if (start + rest > best)
			best = start + rest;
	}
	kt_bel_free(&b);
out:
	free(w.cum);
	free(w.evstart);
	free(w.evkey);
	free(w.held);
	free(w.now);
	free(w.mine);
	return best;
}

unsigned kt_critical_stride(unsigned naccess)
{
	if (naccess <= KT_CRITICAL_EXACT)
		return 1;
	return (naccess + KT_CRITICAL_POINTS - 1) / KT_CRITICAL_POINTS;
}

/* Is a key free at `at` and used next at `next` a better victim than the
 * one found so far: used farther ahead first under belady, else free
 * sooner first; the other as the tie-break. */
static bool kt_plan_better(bool belady, double at, unsigned next, double vat, unsigned vnext)
{
	if (belady && next != vnext)
		return next > vnext;
	if (at != vat)
		return at < vat;
	return next > vnext;
}

/*
 * One offline schedule (kt_plan): at each miss, evict the key whose room is
 * free soonest (farthest used among equals), or with belady the key used
 * farthest ahead, whenever its room is free.
 */
static double kt_plan_rule(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
			   bool belady, unsigned *copies)
{
	uint64_t key = t->key_bytes[0] / o->scale; /* one scaled key */
	uint64_t slots = o->budget / key, nheld = 0;
	double kernel = (double)o->kernel_ns * o->time_scale, engine = 0, kend = 0;
	double *ready = calloc(t->nkeys, sizeof(*ready));     /* its copy's end */
	double *free_at = calloc(t->nkeys, sizeof(*free_at)); /* its last kernel's end */
	bool *held = calloc(t->nkeys, sizeof(*held));
	/* per key: its first access from i on (n when none), kept as the
	 * accesses are passed */
	unsigned *up = malloc(((size_t)t->nkeys + 1) * sizeof(*up));
	unsigned *nxt = kt_next_uses(t), i = 0, ncopies = 0;

	if (!ready || !free_at || !held || !up || !nxt) {
		if (nxt)
			fprintf(stderr, "keytrace: out of memory for a plan of %u keys\n",
				t->nkeys);
		kend = -1;
		goto out;
	}
	if (!slots) {
		*copies = 0;
		goto out;
	}
	for (unsigned k = 0; k < t->nkeys; k++)
		up[k] = t->naccess;
	for (unsigned j = t->naccess; j-- > 0;)
		up[t->access[j]] = j;
	for (;;) {
		unsigned k, victim = t->nkeys, vnext = 0;
		double start = engine, vat = 0;

		/* the kernels whose keys are there (or arriving), in order */
		for (; i < t->naccess && held[t->access[i]]; i++) {
			k = t->access[i];
			kend = (kend > ready[k] ? kend : ready[k]) + kernel;
			free_at[k] = kend;
			up[k] = nxt[i];
		}
		if (i == t->naccess)
			break;
		/* access i misses: with the budget full, evict the rule's
		 * victim, free from when the engine is */
		for (unsigned v = 0; nheld == slots && v < t->nkeys; v++) {
			double at = free_at[v] > engine ? free_at[v] : engine;
			unsigned next = up[v];

			if (!held[v])
				continue;
			if (victim == t->nkeys || kt_plan_better(belady, at, next, vat, vnext)) {
				victim = v;
				vat = at;
				vnext = next;
			}
		}
		if (victim < t->nkeys) {
			held[victim] = false;
			nheld--;
			start = vat;
		}
		k = t->access[i];
		held[k] = true;
		nheld++;
		ready[k] = free_at[k] = engine = start + (double)copy_ns;
		ncopies++;
	}
	*copies = ncopies;
out:
	free(ready);
	free(free_at);
	free(held);
	free(up);
	free(nxt);
	return kend;
}

double kt_plan(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
	       unsigned *copies)
{
	unsigned one = 0, other = 0;
	double soonest = kt_plan_rule(t, o, copy_ns, false, &one);
	double farthest = soonest < 0 ? -1 : kt_plan_rule(t, o, copy_ns, true, &other);

	if (farthest < 0)
		return -1;
	if (farthest < soonest) {
		*copies = other;
		return farthest;
	}
	*copies = one;
	return soonest;
}
