// SPDX-License-Identifier: MIT
/*
 * RSD_CTRL_LOOKAHEAD (Documentation/controller.md, "Looking ahead"): after
 * a not-waiting use under the next-use policy with a schedule, copies of
 * the following steps' values are queued while they fit, room made only by
 * the drop Belady's rule would make at the incoming value's use, never of
 * what an earlier use still needs; the bytes brought are Belady's.
 */
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include "fixture.h"

#define CUDA0 ((struct rsd_location){ RSD_CUDA, 0 })
#define OK(x) ATF_REQUIRE_EQ((x), 0)

enum where {
	ABSENT,
	RESIDENT,
	ARRIVING
};

static enum where where_at(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_snapshot *s;
	enum where w = ABSENT;

	OK(rsd_snapshot_take(f->m, &s));
	for (size_t v = 0; v < s->nvalues; v++)
		for (size_t i = 0;
		     s->values[v].handle.id == h.id && i < s->values[v].nmaterializations; i++)
			if (rsd_location_equal(s->values[v].materializations[i].location, at))
				w = s->values[v].materializations[i].arriving ? ARRIVING : RESIDENT;
	rsd_snapshot_free(s);
	return w;
}

static enum where where(struct fx *f, struct rsd_handle h)
{
	return where_at(f, h, CUDA0);
}

struct la;
static void la_expect(struct la *t, const char *want, int line);
/* Where each value is: one letter per value, R resident, A arriving, -
 * absent. */
#define EXPECT(t, want) la_expect((t), (want), __LINE__)

struct la {
	struct fx f;
	struct rsd_policy *pol;
	struct rsd_controller *c;
	void *cs;
	struct rsd_handle v[8];
	size_t nv;
};

/* nv pinned replicable values, a device budget of room values, a
 * controller under the next-use policy (lru: the tiered LRU) with the
 * schedule steps[] (value indices), flags as given; spill: cuda:0's sole
 * copies spill to pinned memory (else the policy names no fallback). */
static void la_open_spill(struct la *t, bool immediate, size_t nv, uint64_t room,
			  const unsigned *steps, size_t nsteps, bool lru, unsigned flags,
			  bool spill)
{
	const struct rsd_location pinned = PINNED;
	const struct rsd_fallback_tier tier = { CUDA0, &pinned, 1 };
	const struct rsd_budget b = { CUDA0, room * N };
	struct rsd_schedule_step st[256];

	memset(t, 0, sizeof(*t));
	if (immediate)
		fx_init(&t->f, &b, 1, 1);
	else
		fx_init_on_command(&t->f, &b, 1, 1);
	for (size_t i = 0; i < nv; i++)
		t->v[i] = fx_adopt(&t->f, PINNED, RSD_REPLICABLE);
	t->nv = nv;
	OK(lru ? rsd_tiered_lru_create(spill ? &tier : NULL, spill, &t->pol) :
		 rsd_next_use_create(spill ? &tier : NULL, spill, 0, &t->pol));
	OK(rsd_controller_create(t->f.m, t->pol, 0, &t->c));
	OK(rsd_controller_set_flags(t->c, flags));
	for (size_t i = 0; i < nsteps; i++)
		st[i] = (struct rsd_schedule_step){ &t->v[steps[i]], 1 };
	if (nsteps)
		OK(rsd_controller_set_schedule(t->c, st, nsteps, false));
	OK(rsd_simdev_stream_create(t->f.sd, 0, &t->cs));
}

static void la_open(struct la *t, bool immediate, size_t nv, uint64_t room, const unsigned *steps,
		    size_t nsteps, bool lru, unsigned flags)
{
	la_open_spill(t, immediate, nv, room, steps, nsteps, lru, flags, false);
}

static void la_close(struct la *t)
{
	rsd_simdev_complete_all(t->f.sd);
	rsd_controller_free(t->c);
	rsd_policy_free(t->pol);
	rsd_simdev_stream_destroy(t->f.sd, t->cs);
	fx_fini(&t->f);
}

static void la_expect(struct la *t, const char *want, int line)
{
	static const char letter[] = { '-', 'R', 'A' };

	for (size_t i = 0; i < t->nv; i++)
		ATF_CHECK_MSG(letter[where(&t->f, t->v[i])] == want[i],
			      "line %d: value %zu: %c, want %c", line, i,
			      letter[where(&t->f, t->v[i])], want[i]);
}

static struct rsd_use *la_use(struct la *t, unsigned i, bool async)
{
	struct rsd_requirement req = fx_req(t->v[i], CUDA0);
	struct rsd_request r = { "step", &req, 1, NULL, 0 };
	struct rsd_use *u;

	if (async)
		OK(rsd_controller_use_async(t->c, &r, &t->cs, 1, NULL, 0, &u));
	else
		OK(rsd_controller_use(t->c, &r, &t->cs, 1, NULL, 0, &u));
	return u;
}

/* A not-waiting use of value i that copies ncopies values, after which the
 * values are where want says and the device holds used values. */
static struct rsd_use *la_step(struct la *t, unsigned i, unsigned long ncopies, const char *want,
			       uint64_t used, int line)
{
	unsigned long copies = rsd_simdev_calls(t->f.sd, RSD_SIMDEV_COPY);
	struct rsd_use *u = la_use(t, i, true);

	ATF_CHECK_EQ_MSG(rsd_simdev_calls(t->f.sd, RSD_SIMDEV_COPY) - copies, ncopies, "line %d",
			 line);
	la_expect(t, want, line);
	ATF_CHECK_EQ_MSG(fx_used(&t->f, CUDA0), used * N, "line %d", line);
	return u;
}

static void la_done(struct rsd_use *u)
{
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
}

/* Free room: the next steps' values are queued, nearest first, while they
 * fit; the use's own value first. */
ATF_TC_WITHOUT_HEAD(fills_free_room);
ATF_TC_BODY(fills_free_room, tc)
{
	static const unsigned steps[] = { 0, 1, 2, 3, 4 };
	struct rsd_use *u;
	struct la t;

	la_open(&t, false, 5, 3, steps, 5, false, RSD_CTRL_LOOKAHEAD);
	u = la_step(&t, 0, 3, "AAA--", 3, __LINE__);
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	/* The next use finds its value there: the one copy is the look
	 * ahead's, of v3, for which v0 (never used again) goes. */
	rsd_simdev_complete_all(t.f.sd);
	u = la_step(&t, 1, 1, "-RRA-", 3, __LINE__);
	la_done(u);
	la_close(&t);
}

/* Off unless every condition holds: the flag, a schedule, the next-use
 * policy, a not-waiting use. An unknown flag is refused. */
ATF_TC_WITHOUT_HEAD(conditions);
ATF_TC_BODY(conditions, tc)
{
	static const unsigned steps[] = { 0, 1, 2 };
	struct {
		size_t nsteps;
		bool lru, async;
		unsigned flags;
	} cs[] = {
		{ 3, false, true, 0 },
		{ 3, true, true, RSD_CTRL_LOOKAHEAD },
		{ 0, false, true, RSD_CTRL_LOOKAHEAD },
		{ 3, false, false, RSD_CTRL_LOOKAHEAD },
	};

	for (size_t k = 0; k < sizeof(cs) / sizeof(cs[0]); k++) {
		struct rsd_use *u;
		struct la t;

		la_open(&t, true, 3, 3, steps, cs[k].nsteps, cs[k].lru, cs[k].flags);
		u = la_use(&t, 0, cs[k].async);
		ATF_CHECK_EQ_MSG(where(&t.f, t.v[1]), ABSENT, "case %zu", k);
		ATF_CHECK_EQ_MSG(fx_used(&t.f, CUDA0), N, "case %zu", k);
		rsd_simdev_complete_all(t.f.sd);
		la_done(u);
		if (!k) {
			ATF_CHECK_EQ(rsd_controller_set_flags(t.c, 1u << 3), -RSD_EINVAL);
			ATF_CHECK_EQ(rsd_last_error()->code, RSD_EINVAL);
		}
		la_close(&t);
	}
}

/*
 * Room is made by the drop Belady's rule makes at the incoming value's use:
 * a, then c, a, b with a and b on the device and room for two. At c's use
 * b is used farthest on: b goes now, c comes now; a, used sooner, stays.
 */
ATF_TC_WITHOUT_HEAD(drops_the_belady_victim);
ATF_TC_BODY(drops_the_belady_victim, tc)
{
	static const unsigned steps[] = { 0, 2, 0, 1 };
	struct rsd_use *u;
	struct la t;

	la_open(&t, true, 3, 2, steps, 4, false, RSD_CTRL_LOOKAHEAD);
	fx_ensure(&t.f, t.v[0], CUDA0);
	fx_ensure(&t.f, t.v[1], CUDA0);
	/* from here copies stay queued until run */
	rsd_simdev_set_auto_complete(t.f.sd, false);
	u = la_step(&t, 0, 1, "R-A", 2, __LINE__);
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	la_close(&t);
}

/*
 * What must stay stays: a, b, a, c with room for two. After a's use only b
 * fits (a and b are both needed before c). At b's use Belady's victim for
 * c is b itself, leased: nothing. At a's use, b's kernel still queued
 * (its released lease waits for its event) and a leased: both are victims
 * of equal rank that cannot go, and c waits for its own use.
 */
ATF_TC_WITHOUT_HEAD(keeps_what_uses_need);
ATF_TC_BODY(keeps_what_uses_need, tc)
{
	static const unsigned steps[] = { 0, 1, 0, 2 };
	struct rsd_use *u;
	struct la t;

	la_open(&t, false, 3, 2, steps, 4, false, RSD_CTRL_LOOKAHEAD);
	u = la_use(&t, 0, true);
	EXPECT(&t, "AA-");
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	rsd_simdev_complete_all(t.f.sd);

	u = la_use(&t, 1, true);
	EXPECT(&t, "RR-");
	la_done(u); /* its event stays pending: the stream is not run */

	u = la_use(&t, 0, true);
	EXPECT(&t, "RR-");
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	la_close(&t);
}

/* Copies (each one value) Belady's rule makes for trace[] with room values. */
static unsigned belady(const unsigned *trace, size_t n, size_t room)
{
	bool held[8] = { false };
	unsigned copies = 0;
	size_t nheld = 0;

	for (size_t i = 0; i < n; i++) {
		size_t far = 8, fard = 0;

		if (held[trace[i]])
			continue;
		copies++;
		if (nheld == room) {
			for (size_t v = 0; v < 8; v++) {
				size_t d = i + 1;

				if (!held[v])
					continue;
				while (d < n && trace[d] != v)
					d++;
				if (far == 8 || d > fard || (d == fard && v < far)) {
					far = v;
					fard = d;
				}
			}
			held[far] = false;
			nheld--;
		}
		held[trace[i]] = true;
		nheld++;
	}
	return copies;
}

/*
 * Pseudo-random traces of 6 values, room for 3, every use not waiting and
 * each step's copies run before the next. Without the flag nothing comes
 * early; with it values come before their use (the next step's, brought
 * by this step's use) and yet exactly as many are copied as Belady's rule
 * copies; a second run makes the same copies at the same steps.
 */
ATF_TC_WITHOUT_HEAD(bytes_are_beladys);
ATF_TC_BODY(bytes_are_beladys, tc)
{
	unsigned trace[120];
	uint64_t x = 0x2545f4914f6cdd1dull;

	for (int seed = 0; seed < 8; seed++) {
		unsigned long copies[3];
		unsigned early[3];

		for (size_t i = 0; i < 120; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			trace[i] = (unsigned)(x % 6);
		}
		for (int run = 0; run < 3; run++) {
			struct la t;

			la_open(&t, true, 6, 3, trace, 120, false, run ? RSD_CTRL_LOOKAHEAD : 0);
			copies[run] = rsd_simdev_calls(t.f.sd, RSD_SIMDEV_COPY);
			early[run] = 0;
			for (size_t i = 0; i < 120; i++) {
				bool absent = i + 1 < 120 && trace[i + 1] != trace[i] &&
					      where(&t.f, t.v[trace[i + 1]]) == ABSENT;

				la_done(la_use(&t, trace[i], true));
				early[run] += absent && where(&t.f, t.v[trace[i + 1]]) != ABSENT;
			}
			copies[run] = rsd_simdev_calls(t.f.sd, RSD_SIMDEV_COPY) - copies[run];
			la_close(&t);
		}
		ATF_CHECK_EQ_MSG(copies[0], belady(trace, 120, 3), "trace %d", seed);
		ATF_CHECK_EQ_MSG(copies[1], copies[0], "trace %d", seed);
		ATF_CHECK_EQ_MSG(copies[2], copies[1], "trace %d", seed);
		ATF_CHECK_EQ_MSG(early[0], 0, "trace %d", seed);
		ATF_CHECK_MSG(early[1] > 0, "trace %d", seed);
		ATF_CHECK_EQ_MSG(early[2], early[1], "trace %d", seed);
	}
}

/* Values 0 and 1 only on the device (their host copies dropped), then
 * copies left queued until run. */
static void la_sole_pair(struct la *t)
{
	for (int i = 0; i < 2; i++) {
		fx_ensure(&t->f, t->v[i], CUDA0);
		OK(rsd_drop(t->f.m, t->v[i], PINNED, NULL));
	}
	rsd_simdev_set_auto_complete(t->f.sd, false);
}

/*
 * Writing back ahead: a, c, a, b with a and b only on the device and room
 * for two. At c's use Belady's victim is b (used last), free to go but
 * its only copy: a's use queues b's copy to pinned memory (one copy, c
 * not brought: its room comes when that copy lands) and c's use finds b
 * a replica and drops it: one copy, c's. Without the flag, c's use spills
 * b: two copies then. Twice each: the same actions.
 */
ATF_TC_WITHOUT_HEAD(writes_back_ahead);
ATF_TC_BODY(writes_back_ahead, tc)
{
	static const unsigned steps[] = { 0, 2, 0, 1 };

	for (int run = 0; run < 4; run++) {
		bool on = run < 2;
		struct rsd_use *u;
		struct la t;

		la_open_spill(&t, true, 3, 2, steps, 4, false, on ? RSD_CTRL_LOOKAHEAD : 0, true);
		la_sole_pair(&t);
		u = la_step(&t, 0, on ? 1 : 0, "RR-", 2, __LINE__);
		ATF_CHECK_EQ_MSG(where_at(&t.f, t.v[1], PINNED), on ? ARRIVING : ABSENT, "run %d",
				 run);
		ATF_CHECK_EQ_MSG(where_at(&t.f, t.v[0], PINNED), ABSENT, "run %d", run);
		rsd_simdev_complete_all(t.f.sd);
		la_done(u);
		/* a spill's room is waited for: copies run as queued */
		rsd_simdev_set_auto_complete(t.f.sd, true);
		u = la_step(&t, 2, on ? 1 : 2, "R-R", 2, __LINE__);
		ATF_CHECK_EQ_MSG(where_at(&t.f, t.v[1], PINNED), RESIDENT, "run %d", run);
		rsd_simdev_complete_all(t.f.sd);
		la_done(u);
		la_close(&t);
	}
}

/* Use value i with copies run as queued (the room of a spill is waited
 * for): its plan spills value spilled to pinned memory, two copies. */
static void la_spill_use(struct la *t, unsigned i, unsigned spilled, const char *want, int line)
{
	struct rsd_use *u;

	rsd_simdev_set_auto_complete(t->f.sd, true);
	u = la_step(t, i, 2, want, 2, line);
	ATF_CHECK_EQ_MSG(where_at(&t->f, t->v[spilled], PINNED), RESIDENT, "line %d", line);
	la_done(u);
}

/*
 * Never what a use still needs: a, b, c with a and b only on the device
 * and room for two. c's victim is a (never used again, b being used
 * before c), leased by its use: no copy is written back, nothing moves;
 * at b's use a's released lease still waits for its kernel's event: the
 * same. c's own use spills a.
 */
ATF_TC_WITHOUT_HEAD(write_back_keeps_what_uses_need);
ATF_TC_BODY(write_back_keeps_what_uses_need, tc)
{
	static const unsigned steps[] = { 0, 1, 2 };
	struct rsd_use *u, *w;
	struct la t;

	la_open_spill(&t, true, 3, 2, steps, 3, false, RSD_CTRL_LOOKAHEAD, true);
	la_sole_pair(&t);
	u = la_step(&t, 0, 0, "RR-", 2, __LINE__);
	la_done(u); /* its event stays pending: the stream is not run */
	w = la_step(&t, 1, 0, "RR-", 2, __LINE__);
	ATF_CHECK_EQ(where_at(&t.f, t.v[0], PINNED), ABSENT);
	rsd_simdev_complete_all(t.f.sd);
	la_done(w);
	la_spill_use(&t, 2, 0, "-RR", __LINE__);
	la_close(&t);
}

/*
 * Nor what is used before the incoming value: a, b, c, a with a and b only
 * on the device and room for two. At c's use Belady's victim is b (never
 * used again, a is), free to go after a's use but used before c: nothing
 * is written back. b's use leases it: nothing again. c's use spills b.
 */
ATF_TC_WITHOUT_HEAD(write_back_not_before_use);
ATF_TC_BODY(write_back_not_before_use, tc)
{
	static const unsigned steps[] = { 0, 1, 2, 0 };
	struct rsd_use *u;
	struct la t;

	la_open_spill(&t, true, 3, 2, steps, 4, false, RSD_CTRL_LOOKAHEAD, true);
	la_sole_pair(&t);
	u = la_step(&t, 0, 0, "RR-", 2, __LINE__);
	ATF_CHECK_EQ(where_at(&t.f, t.v[1], PINNED), ABSENT);
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	rsd_simdev_complete_all(t.f.sd);
	u = la_step(&t, 1, 0, "RR-", 2, __LINE__);
	ATF_CHECK_EQ(where_at(&t.f, t.v[1], PINNED), ABSENT);
	rsd_simdev_complete_all(t.f.sd);
	la_done(u);
	la_spill_use(&t, 2, 1, "R-R", __LINE__);
	ATF_CHECK_EQ(where_at(&t.f, t.v[0], PINNED), ABSENT);
	la_close(&t);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, fills_free_room);
	ATF_TP_ADD_TC(tp, conditions);
	ATF_TP_ADD_TC(tp, drops_the_belady_victim);
	ATF_TP_ADD_TC(tp, keeps_what_uses_need);
	ATF_TP_ADD_TC(tp, bytes_are_beladys);
	ATF_TP_ADD_TC(tp, writes_back_ahead);
	ATF_TP_ADD_TC(tp, write_back_keeps_what_uses_need);
	ATF_TP_ADD_TC(tp, write_back_not_before_use);
	return 0;
}
