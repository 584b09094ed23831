/* SPDX-License-Identifier: MIT */
/* Private to the controller search: search.c (building blocks), run.c (machine). */
#ifndef RSD_CTRL_SEARCH_H
#define RSD_CTRL_SEARCH_H

#include "memo.h"
#include "pstate.h"

enum ftype {
	F_SEARCH,
	F_RECLAIM,
	F_CAPACITY
};

/* A ranked candidate; its rank is its index in the ranked array. */
struct ranked {
	uint32_t vidx;
	uint64_t charged;
};

/*
 * The "active" (handle, source) pairs of nested RECLAIM -> CAPACITY calls.
 * Every nested level adds a handle that was not blocked, so blocked is
 * exactly the set of handles of active; one persistent list serves both.
 */
struct active {
	const struct active *prev;
	uint32_t vidx, slot;
};

enum stage_kind {
	ST_RESERVATION,
	ST_SOURCE,
	ST_MATERIALIZE
};

struct shortfall {
	unsigned slot;
	uint64_t n;
	uint64_t used, reserved; /* at the slot when the stage did not fit */
	enum stage_kind kind;
	size_t index; /* reservation or requirement index */
};

struct frame {
	uint8_t type, pc;
	bool flag;	       /* SEARCH: any successor; RECLAIM: others; CAPACITY: produced */
	int32_t parent;	       /* the consumer; -1 for the root SEARCH */
	int32_t child;	       /* the producer being consumed (RECLAIM or CAPACITY) */
	int32_t sub;	       /* CAPACITY: the nested CAPACITY(R, ...) */
	struct rsd__pstate *S; /* owned by SEARCH and CAPACITY, borrowed by RECLAIM */
	struct ranked *cands;
	uint32_t ncands, ci;
	union {
		struct {
			struct shortfall sh;
			uint64_t budget, used, reserved; /* of S at the shortfall location */
			char *notes;
			size_t nlen;
			/*
			 * Leading bytes of this level's failure text that can
			 * still reach the recorded message (run.c); its notes
			 * stop at ncap and nothing is formatted when room is 0.
			 */
			size_t room, head, ncap;
			bool any; /* a note was added (its bytes may be cut) */
		} s;
		struct {
			uint32_t vidx, src;
			uint64_t rank, charged;
			const struct active *in;
			struct active *mine; /* in + (vidx, src), for nested CAPACITY */
			uint8_t *dests;
			uint32_t ndests, di;
		} r;
		struct {
			uint32_t x;
			uint64_t amount;
			const struct active *act;
		} k;
	} u;
};

/* SIMULATE's location set of requirement q's value, shared by every
 * requirement of that value: the one at index first holds it, valid while
 * its gen is the simulation's. */
struct simv {
	uint32_t vidx, first;
	uint64_t gen;
	struct rsd__locset locs;
};

struct search {
	struct rsd_controller *c;
	const struct rsd_policy *pol;
	const struct rsd_image *img; /* read section held by decide */
	const struct rsd_view *view; /* of img: its protection counts */
	const struct rsd_request *req;
	struct rsd__basecache bc; /* of img */
	uint64_t limit, count;
	bool has_sched;	       /* a schedule is declared: candidates get next uses */
	uint32_t sched_pos;    /* from this step */
	const char *objective; /* of the COUNT that hit the limit */
	int objective_slot;
	bool has_budget[RSD_NSLOTS];
	uint64_t budget[RSD_NSLOTS];
	uint32_t *req_vidx; /* value index of each requirement */
	struct simv *simv;  /* SIMULATE scratch, one per requirement */
	uint64_t simgen;    /* simulations run, for simv[].gen */
	/* values with an unprotected image materialization, per slot */
	uint32_t *base_cands[RSD_NSLOTS];
	uint32_t nbase_cands[RSD_NSLOTS];
	/* A shipped policy's comparison (order.c), NULL for the caller's;
	 * with it, each base candidate's position in its order, per slot. */
	int (*cmp)(const struct rsd_eviction_candidate *, const struct rsd_eviction_candidate *);
	uint32_t *base_pos[RSD_NSLOTS];
	bool built[RSD_NSLOTS];
	struct rsd__memo failed_req, failed_cap;
	/* RSD_CTRL_PRECHECK (run.c): simulating past shortfalls */
	bool precheck;
	bool has_freeable[RSD_NSLOTS];
	uint64_t freeable[RSD_NSLOTS];	   /* rsd__freeable() of each slot */
	bool has_root_sh;		   /* the root SEARCH found the request short */
	struct shortfall root_sh;	   /* there */
	uint64_t root_used, root_reserved; /* of the image at root_sh.slot */
	struct frame *fr;
	size_t nfr, capfr;
	unsigned char *key;
	size_t keylen, keycap;
	/*
	 * The key's hash, set by the key builders. A request key ('R') is
	 * only hashed (from its state's running hash) until rsd__key_build()
	 * writes its bytes: most lookups find no key of that hash.
	 */
	uint64_t keyhash;
	const struct rsd__pstate *keyS; /* of an unbuilt request key */
	bool key_built;
	/* RANK scratch */
	struct rsd_eviction_candidate *cbuf;
	uint32_t *cvidx, *creq;
	struct rsd_handle *chandle; /* handle of cvidx[k], for find_input */
	uint64_t *ccharge;	    /* charge of cvidx[k] */
	unsigned char *cused;
	size_t ccap;
	/* SIMULATE output */
	struct rsd_action *enter;
	size_t nenter;
	int err;
};

int rsd__search_count(struct search *x, const char *objective, int slot);
uint64_t rsd__search_charge(const struct search *x, uint32_t v);
/* Index the requirements by value for SIMULATE; records -RSD_ENOMEM. */
int rsd__sim_init(struct search *x);
int rsd__search_simulate(struct search *x, const struct rsd__pstate *S, struct shortfall *sh);
bool rsd__search_active_has(const struct active *a, uint32_t v, int slot);
/* The candidate record of value v at slot, as the policy sees it. */
void rsd__candidate(const struct search *x, uint32_t v, unsigned slot,
		    struct rsd_eviction_candidate *c);
/* The charges of the candidates at slot before any planning. */
int rsd__freeable(struct search *x, unsigned slot, uint64_t *out);
/* Order cvidx[0..nord) and [nord..n) of base candidates of slot by x->cmp
 * into r (order.c); the policy is not called. */
int rsd__order_cached(struct search *x, unsigned slot, uint32_t nord, uint32_t n, struct ranked *r);
int rsd__search_rank(struct search *x, const struct rsd__pstate *S, unsigned X, const struct active *act,
	      struct ranked **out, uint32_t *nout);
int rsd__search_key_sig(struct search *x, char tag, const struct rsd__pstate *S);
int rsd__key_build(struct search *x);
int rsd__search_key_capacity(struct search *x, const struct rsd__pstate *S, unsigned X, uint64_t amount,
		      const struct active *act);

#endif
