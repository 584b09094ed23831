/* SPDX-License-Identifier: MIT */
/*
 * Private to the controller search: search_entry.c (entry point, failure
 * texts), search.c (the machine), search_steps.c (SIMULATE, RANK, COUNT),
 * search_keys.c (memo keys), order.c (the shipped policies' order).
 */
#ifndef RSD_CTRL_SEARCH_H
#define RSD_CTRL_SEARCH_H

#include "memo.h"
#include "pstate.h"

enum ftype {
	F_SEARCH,
	F_RECLAIM,
	F_CAPACITY
};

/*
 * A ranked candidate; its rank is its index in the ranked array. dpos is
 * its value's position in the ranked state's delta (found: an entry
 * there; else where one would go), known from the merge that listed it;
 * a list a SEARCH level took over from its parent (search_derive()) keeps
 * the parent's, so the drop views look the entry up in their state.
 */
struct ranked {
	uint32_t vidx, dpos;
	uint64_t charged;
	uint32_t bcode; /* its image set's code, RSD__LS_UNKNOWN when not known */
	bool found;
};

/*
 * A SEARCH candidate's drop successor, described ahead of its turn
 * (search_next() in search.c): DV_NONE when RECLAIM must run from the
 * start (no drop option, or a drop not described), DV_DROP with the
 * successor's description and its request key's hash; others: the value
 * keeps another replica (never spilled after the drop).
 */
enum {
	DV_NONE,
	DV_DROP
};

struct drop_view {
	struct rsd__ps_succ s;
	uint64_t keyhash;
	uint8_t state;
	bool others;
};

/*
 * A SEARCH level's views ahead (search.c), in the frames' arena: views of
 * candidates up to ndv - 1, candidate k's at dv[k & mask] (a ring of a
 * power of two views, no more than the candidates need); du: what a drop
 * of dC bytes at the shortfall does to S's accounting (dstate 1; 2: the
 * slot is not in S's maps; 0: not computed yet).
 */
struct drop_ahead {
	uint64_t dC;
	struct rsd__ps_used_edit du;
	uint8_t dstate;
	uint32_t ndv, mask;
	struct drop_view dv[];
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
	struct rsd__arena_mark mark; /* the frames' arena before this frame's scratch */
	struct ranked *cands;	     /* in the frames' arena */
	uint32_t ncands, ci;
	union {
		struct {
			struct shortfall sh;
			uint64_t budget, used, reserved; /* of S at the shortfall location */
			char *notes;
			size_t nlen;
			/*
			 * Leading bytes of this level's failure text that can
			 * still reach the recorded message (search_entry.c);
			 * its notes stop at ncap and nothing is formatted when
			 * room is 0. Worked out when first needed (roomed,
			 * sized): a level that succeeds never formats its head.
			 */
			size_t room, head, ncap;
			bool roomed, sized;
			bool any;	       /* a note was added (its bytes may be cut) */
			struct drop_ahead *da; /* the candidates' drop successors */
			bool dclear;	       /* the next successor is a drop state in no memo */
			/*
			 * cached: cands came from the shipped policy's order;
			 * derive: S is the parent SEARCH's S with its
			 * candidate ci dropped or moved elsewhere, by the one
			 * reclaim action S has more (search_derive()).
			 */
			bool cached, derive;
		} s;
		struct {
			uint32_t vidx, src;
			uint64_t rank, charged;
			const struct active *in;
			struct active *mine; /* in + (vidx, src), for nested CAPACITY */
			uint8_t *dests;	     /* in the frames' arena, like mine */
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
	struct rsd__pspace sp; /* of img: what its planning states share */
	uint64_t limit, count;
	bool has_sched;	       /* a schedule is declared: candidates get next uses */
	uint32_t sched_pos;    /* from this step */
	const char *objective; /* of the COUNT that hit the limit */
	int objective_slot;
	bool has_budget[RSD_NSLOTS];
	uint64_t budget[RSD_NSLOTS];
	/* Each slot's ledger in the image: its budget, bytes in flight and
	 * plans' headroom count in every state the search reaches (reclaim
	 * frees neither); rsd__search_ledger() puts a state's used and
	 * reserved bytes in. */
	struct rsd__ledger ledger[RSD_NSLOTS];
	/* Locations whose device was lost (quarantined): never a destination. */
	bool failed[RSD_NSLOTS];
	uint32_t *req_vidx; /* value index of each requirement */
	struct simv *simv;  /* SIMULATE scratch, one per requirement */
	uint64_t simgen;    /* simulations run, for simv[].gen */
	/* values with an unprotected image materialization, per slot, and
	 * their charges */
	uint32_t *base_cands[RSD_NSLOTS];
	uint64_t *base_charge[RSD_NSLOTS];
	uint32_t *base_code[RSD_NSLOTS]; /* their image sets' codes, when their own */
	uint32_t nbase_cands[RSD_NSLOTS];
	/*
	 * A shipped policy's comparison (order.c), NULL for the caller's;
	 * with it, per slot, the base candidates' indices in its order and
	 * whether each is a required endpoint there, and (cmark) one zeroed
	 * byte per base candidate of the largest list for marking a state's.
	 */
	int (*cmp)(const struct rsd_eviction_candidate *, const struct rsd_eviction_candidate *);
	uint32_t *base_order[RSD_NSLOTS];
	uint8_t *base_req[RSD_NSLOTS];
	uint8_t *cmark;
	size_t cmarkcap;
	bool built[RSD_NSLOTS];
	struct rsd__memo failed_req, failed_cap;
	/* RSD_CTRL_PRECHECK (search_entry.c): simulating past shortfalls */
	bool precheck;
	bool has_freeable[RSD_NSLOTS];
	uint64_t freeable[RSD_NSLOTS];	   /* rsd__freeable() of each slot */
	bool has_root_sh;		   /* the root SEARCH found the request short */
	struct shortfall root_sh;	   /* there */
	uint64_t root_used, root_reserved; /* of the image at root_sh.slot */
	struct frame *fr;
	size_t nfr, capfr;
	struct rsd__arena stk; /* the frames' scratch, a stack (frame.mark) */
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
	/*
	 * RANK scratch; cbi[k]: cvidx[k]'s index in the base list, or
	 * UINT32_MAX for a location projected by planning; cpos[k]: its
	 * delta position << 1 | found (struct ranked), as is bpos[cbi[k]]
	 * (one per base candidate, like cmark).
	 */
	struct rsd_eviction_candidate *cbuf;
	uint32_t *cvidx, *creq, *cbi, *cpos, *bpos;
	struct rsd_handle *chandle; /* handle of cvidx[k], for find_input */
	uint64_t *ccharge;	    /* charge of cvidx[k] */
	unsigned char *cused;
	size_t ccap;
	/* SIMULATE's used and reserved bytes per slot: all zero between
	 * simulations (each clears the slots it wrote) */
	uint64_t sim_used[RSD_NSLOTS], sim_reserved[RSD_NSLOTS];
	/* SIMULATE output */
	struct rsd_action *enter;
	size_t nenter;
	int err;
};

/* The ledger at slot with a state's used and reserved bytes. */
static inline struct rsd__ledger rsd__search_ledger(const struct search *x, unsigned slot,
						    uint64_t used, uint64_t reserved)
{
	struct rsd__ledger l = x->ledger[slot];

	l.used = used;
	l.reserved = reserved;
	return l;
}

/* The most bytes of notes a SEARCH level formats (see search_entry.c). */
#define NOTE_CAP 1024

/* Run the machine from the root SEARCH of S0 (owned from here on). 0:
 * success (*final set); 1: the root failed (*note set); < 0: error. */
int rsd__search_drive(struct search *x, struct rsd__pstate *S0, struct rsd__pstate **final,
		      char **note);
/* Pop every frame left, free the stack and the frames' arena. */
void rsd__search_frames_fini(struct search *x);
/*
 * Add a note to SEARCH frame f's failure text, within what can reach the
 * recorded message (ncap bytes): a level with no room only records that
 * a note exists, without formatting it (most levels of a deep search).
 */
void rsd__search_note_fmt(struct frame *f, const char *fmt, ...) rsd__printf(2, 3);
#define rsd__search_note(x, f, ...)  \
	(rsd__search_size((x), (f)), \
	 (f)->u.s.ncap ? rsd__search_note_fmt((f), __VA_ARGS__) : (void)((f)->u.s.any = true))
int rsd__search_fail_head(const struct search *x, const struct frame *f, char *buf, size_t len);
/* Its first room bytes; f's room worked out (rsd__search_room). */
char *rsd__search_fail_text(const struct search *x, const struct frame *f);
/*
 * SEARCH frame f's room: the root's is set when it is pushed, a nested
 * level's is what its parent's text leaves it, worked out on first need
 * (the parent is suspended, its text unchanged, while the level runs).
 */
void rsd__search_room(const struct search *x, struct frame *f);
/* f's room and the length of its failure text's head (f entered: its
 * shortfall known), on first need. */
void rsd__search_size(const struct search *x, struct frame *f);
/* The room of a nested level pushed for candidate ci of SEARCH frame f. */
size_t rsd__search_child_room(const struct search *x, struct frame *f);

int rsd__search_count(struct search *x, const char *objective, int slot);
uint64_t rsd__search_charge(const struct search *x, uint32_t v);
/* Index the requirements by value for SIMULATE; records -RSD_ENOMEM. */
int rsd__sim_init(struct search *x);
int rsd__search_simulate(struct search *x, const struct rsd__pstate *S, struct shortfall *sh);
bool rsd__search_active_has(const struct active *a, uint32_t v, int slot);
/* Is (value v, slot) one of the request's requirements? */
bool rsd__search_required(const struct search *x, uint32_t v, unsigned slot);
/* The candidate record of value v at slot, as the policy sees it. */
void rsd__candidate(const struct search *x, uint32_t v, unsigned slot,
		    struct rsd_eviction_candidate *c);
/* The charges of the candidates at slot before any planning. */
int rsd__freeable(struct search *x, unsigned slot, uint64_t *out);
/* RANK of the n base candidates cbi[0..n) of slot by x->cmp into r
 * (order.c): ordinary ones, then required endpoints; no policy call. */
int rsd__order_cached(struct search *x, unsigned slot, uint32_t n, struct ranked *r);
/* RANK(CANDIDATES(S, X, blocked)) into the frames' arena; *cached: the
 * shipped policy's order was used (no policy call), when not NULL. */
int rsd__search_rank(struct search *x, const struct rsd__pstate *S, unsigned X,
		     const struct active *act, struct ranked **out, uint32_t *nout, bool *cached);
int rsd__search_key_sig(struct search *x, char tag, const struct rsd__pstate *S);
int rsd__key_build(struct search *x);
/*
 * Describe candidate c's drop successor of S (the drop at src with the
 * accounting change *u, NULL when not described) into *dv, and prefetch
 * its memo slot. Return: 0 or the negative error, also in x->err.
 */
int rsd__search_drop_view(struct search *x, const struct rsd__pstate *S, const struct ranked *c,
			  unsigned src, const struct rsd__ps_used_edit *u, struct drop_view *dv);
/* Prefetch the memo key dv's lookup will compare, its slot being cached. */
void rsd__search_drop_prefetch(const struct search *x, const struct drop_view *dv);
/*
 * Is dv's successor (DV_DROP) a request state that failed before? Asked
 * without building it.
 */
bool rsd__search_drop_failed(const struct search *x, const struct rsd__pstate *S,
			     const struct drop_view *dv);
int rsd__search_key_capacity(struct search *x, const struct rsd__pstate *S, unsigned X,
			     uint64_t amount, const struct active *act);

#endif
