// SPDX-License-Identifier: MIT
/*
 * Outputs of a controller use (reference.md §8.10, §13.6): a kernel on the
 * use's consumer stream reads the leased input and writes an output, which
 * rsd_use_adopt() moves into the request's reservation with the stream as
 * its producer. The location is full throughout (budget = input +
 * reservation); close releases the emptied reservation and the output
 * stays, filling (protected, readers ordered after it) until the kernel's
 * event is reaped.
 */
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "fixture.h"

struct kernel {
	const unsigned char *in;
	unsigned char *out;
	uint64_t n;
	unsigned runs;
};

/* The "kernel": out = ~in, on whichever thread runs the stream. */
static void kernel(void *arg)
{
	struct kernel *k = arg;

	for (uint64_t i = 0; i < k->n; i++)
		k->out[i] = (unsigned char)~k->in[i];
	k->runs++;
}

/* pending_event_count, use_count and reservation_count at `at`. */
static void check_prot(struct fx *f, struct rsd_location at, uint64_t pending, uint64_t use,
		       uint64_t nresv)
{
	struct rsd_snapshot *s;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];

		if (!rsd_location_equal(l->location, at))
			continue;
		ATF_CHECK_EQ(l->pending_event_count, pending);
		ATF_CHECK_EQ(l->use_count, use);
		ATF_CHECK_EQ(l->reservation_count, nresv);
	}
	rsd_snapshot_free(s);
}

ATF_TC_WITHOUT_HEAD(use_adopt_output);
ATF_TC_BODY(use_adopt_output, tc)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 };
	const struct rsd_budget bud[] = { { c0, 2 * N } };
	const struct rsd_reservation_spec rs[] = { { c0, N, "result" } };
	struct rsd_requirement q[1];
	struct rsd_request req = { "step", q, 1, rs, 1 };
	const struct rsd_resident *in;
	struct rsd_resident *out, *copy;
	struct rsd_controller *c;
	struct rsd_handle a, h, none = { 0 };
	struct rsd_lease *l;
	struct rsd_use *u;
	struct kernel k;
	unsigned char want[N];
	uint64_t v;
	void *s;
	struct fx f;

	fx_init(&f, bud, 1, 1);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s));
	q[0] = fx_req(a, c0);
	RSD_REQUIRE_OK(rsd_controller_use(c, &req, &s, 1, NULL, 0, &u));
	/* The input was copied in; the location is now exactly full. */
	ATF_CHECK_EQ(fx_used(&f, c0), N);
	ATF_CHECK_EQ(fx_reserved(&f, c0), N);
	RSD_REQUIRE_OK(rsd_use_value(u, a, c0, &in));
	for (size_t i = 0; i < N; i++)
		want[i] = (unsigned char)~((const unsigned char *)rsd_resident_data(in, 0))[i];

	/* The kernel runs on the consumer stream only when told to. */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	RSD_REQUIRE_OK(rsd_resident_alloc(f.m, &rsd_resident_type, c0, 1, &(uint64_t){ N }, NULL, 0,
					  &out));
	k = (struct kernel){ rsd_resident_data(in, 0), rsd_resident_data(out, 0), N, 0 };
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(f.sd, s, kernel, &k));

	/* A plain adopt would count the bytes twice; a wrong label finds
	 * nothing. Neither changes anything. */
	v = fx_version(&f);
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_adopt(f.m, out, &c0, RSD_EXCLUSIVE, &h));
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_use_adopt(u, "results", out, RSD_EXCLUSIVE, s, &h));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_use_adopt(u, "result", NULL, RSD_EXCLUSIVE, s, &h));
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK_EQ(fx_used(&f, c0), N);
	ATF_CHECK_EQ(fx_reserved(&f, c0), N);

	RSD_REQUIRE_OK(rsd_use_adopt(u, "result", out, RSD_EXCLUSIVE, s, &h));
	ATF_CHECK_EQ(fx_version(&f), v + 1);
	ATF_CHECK_EQ(fx_used(&f, c0), 2 * N);
	ATF_CHECK_EQ(fx_reserved(&f, c0), 0);
	ATF_CHECK(fx_at(&f, h, c0));
	/* The output is filling (not a pending lease); the input is leased. */
	check_prot(&f, c0, 0, 1, 1);
	ATF_CHECK_EQ(k.runs, 0);

	/* Close: the input's lease turns pending, the emptied reservation
	 * goes, the output stays. */
	RSD_REQUIRE_OK(rsd_use_close(u, NULL));
	ATF_CHECK_EQ(fx_version(&f), v + 3);
	ATF_CHECK_EQ(fx_used(&f, c0), 2 * N);
	ATF_CHECK_EQ(fx_reserved(&f, c0), 0);
	check_prot(&f, c0, 1, 0, 0);
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_use_adopt(u, "result", out, RSD_EXCLUSIVE, s, &none));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(f.m, h, c0, NULL));

	/* The kernel finishes: one reap step for the lease, none for the
	 * output's completion. */
	rsd_simdev_stream_complete(f.sd, s);
	ATF_CHECK_EQ(k.runs, 1);
	RSD_REQUIRE_OK(rsd_manager_reap(f.m));
	ATF_CHECK_EQ(fx_version(&f), v + 4);
	check_prot(&f, c0, 0, 0, 0);

	/* The output holds the kernel's bytes and is an ordinary value. */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	RSD_REQUIRE_OK(rsd_move(f.m, h, PAGEABLE, NULL, NULL, NULL));
	RSD_REQUIRE_OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, (const struct rsd_resident **)&copy));
	ATF_CHECK_EQ(memcmp(rsd_resident_data(copy, 0), want, N), 0);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	ATF_CHECK_EQ(none.id, 0);

	rsd_use_free(u);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, use_adopt_output);
	return atf_no_error();
}
