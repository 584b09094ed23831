/* SPDX-License-Identifier: MIT */
/*
 * A reference model of the residency manager, written from Documentation/reference.md
 * alone: plain arrays, linear scans, no RCU, no cleverness. Every operation
 * returns the result code librsd must return and fills the report librsd
 * must produce; the interpreter (interp.c) runs the same operation on both
 * and compares. Locations are small indices (enum mloc); handles are
 * indices into the value table, or one of the bad-handle refs below.
 */
#ifndef RSD_TEST_MODEL_H
#define RSD_TEST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/rsd.h>

/* The locations the model knows; ML_CUDA2 is not available (2 devices). */
enum mloc {
	ML_PAGE,
	ML_PIN,
	ML_CUDA0,
	ML_CUDA1,
	ML_CUDA2,
	ML_N
};
#define ML_VALID 4

/* Bad handle references (valid refs are value indices >= 0). */
#define MH_FOREIGN (-1) /* another manager's id */
#define MH_UNKNOWN (-2) /* this manager, an id never issued */
#define MH_BADTYPE (-3) /* an issued id with another type */

/* Streams: consumer streams 0..3 (device i / 2), transfer streams 4, 5. */
#define MS_NCONSUMER 4
#define MS_N 6
#define MS_NONE (-1)
static inline int ms_device(int s)
{
	return s < MS_NCONSUMER ? s / 2 : s - MS_NCONSUMER;
}

#define MM_VALUES 64
#define MM_LIFETIMES 48
#define MM_HMAX 6

/* How the next load of a source behaves. */
enum msrc_fail {
	MSRC_OK,
	MSRC_FAIL_POS,
	MSRC_FAIL_NOMEM,
	MSRC_WRONG_SIZE
};

/*
 * filling: the destination of a not-waiting call's queued copy (§22.1),
 * resident for the model but protected until model_copy_done(); qread:
 * queued copies still reading this materialization (it is protected).
 */
struct mmat {
	int loc;
	unsigned use, hold, pend;
	bool filling;
	unsigned qread;
};

struct mval {
	uint64_t logical, charge;
	enum rsd_replica_mode mode;
	bool has_source;
	int src_loc;
	bool discarded;
	int nmat;
	struct mmat mat[ML_VALID];
	enum msrc_fail fail_next;
	unsigned loads, releases;
	bool ever_source;
};

struct mlocrec {
	bool known;
	bool has_budget;
	uint64_t budget, used, reserved, peak_used, peak_charged;
	/* Bytes queued copies still read that belong to no materialization
	 * (a move's source, a value loaded for the copy): admitted against. */
	uint64_t inflight;
};

/* A not-waiting call's queued copy (§22.1), until model_copy_done(). */
struct mqcopy {
	bool live;
	int v, to;
	int from;    /* the materialization it reads, or -1 */
	int held_at; /* where its inflight bytes are charged, or -1 */
	uint64_t held;
};
#define MM_QCOPIES 64

enum mlife_state {
	MLS_GONE,
	MLS_ACTIVE,
	MLS_PENDING
};

struct mlease {
	enum mlife_state state; /* manager side */
	bool obj_active;	/* the caller's object */
	bool live;		/* slot in use (object not freed) */
	int loc;
	int nh, h[MM_HMAX];
	int nstreams, stream[MS_N];
	unsigned seq[MS_N];
	uint64_t order;
};

struct mhold {
	bool live, active;
	int loc;
	int nh, h[MM_HMAX];
};

struct mresv {
	bool live, active;
	int loc;
	uint64_t nbytes;
	char label[16];
	uint64_t order;
};

struct mstream {
	unsigned recorded, completed;
};

struct model {
	uint64_t version;
	bool closed;
	int nknown;
	int known[ML_N]; /* registry order */
	struct mlocrec loc[ML_N];
	int nval;
	struct mval val[MM_VALUES];
	struct mlease lease[MM_LIFETIMES];
	struct mhold hold[MM_LIFETIMES];
	struct mresv resv[MM_LIFETIMES];
	struct mstream stream[MS_N];
	uint64_t order;
	/* Set around a not-waiting call's action: a copy to or from a device
	 * is queued, committed at once and completes at model_copy_done(). */
	bool queue_mode;
	struct mqcopy qc[MM_QCOPIES];
};

/* An action over model refs. */
struct mact {
	enum rsd_action_kind kind;
	int h, loc;
	bool has_from;
	int from;
};

/* The explanation facts compared with rsd_explain. */
struct mexpl {
	bool feasible;
	size_t nactions;
	bool executable[8], no_op[8];
	char reason[1024];
	bool reason_exact; /* false: the reason quotes a handle error message */
};

struct rsd_location ml_loc(int l);
int ml_from_loc(struct rsd_location loc);
const char *ml_name(int l);

void model_init(struct model *md, const bool *has_budget, const uint64_t *budget, const int *order,
		int nbudgets);

/* Every operation returns 0 or a negative RSD_E* code. rep may be NULL. */
int model_adopt(struct model *md, int res_loc, int at, enum rsd_replica_mode mode, uint64_t n,
		int *out);
int model_register_source(struct model *md, uint64_t logical, uint64_t charge,
			  enum rsd_recoverability rc, int src_loc, int *out);
/* stream: MS_NONE or a stream index. */
int model_action(struct model *md, const struct mact *a, int stream, bool prologue,
		 struct rsd_transition *rep);
/* Fills reps[0..*nrep) (the committed prefix on -RSD_EEXEC) and *cause,
 * *failed on -RSD_EEXEC. expected: NULL or the expected version. */
int model_execute(struct model *md, const struct mact *a, size_t n, const uint64_t *expected,
		  struct rsd_transition *reps, size_t *nrep, int *cause, long *failed);
int model_explain(struct model *md, const struct mact *a, size_t n, const uint64_t *expected,
		  struct mexpl *e);
int model_acquire(struct model *md, const int *h, int n, int at, int stream, int *slot);
int model_lease_release(struct model *md, int slot, bool wait);
void model_lease_free(struct model *md, int slot);
/* Release when recording the completion events fails (the fallback
 * release): the streams are synchronized and the lease is gone at once. */
int model_lease_release_unrecorded(struct model *md, int slot);
int model_lease_add_stream(struct model *md, int slot, int stream);
int model_lease_value(struct model *md, int slot, int h);
int model_hold(struct model *md, const int *h, int n, int at, int *slot);
int model_hold_release(struct model *md, int slot);
void model_hold_free(struct model *md, int slot);
int model_reserve(struct model *md, int at, uint64_t n, const char *label, int *slot);
int model_resv_release(struct model *md, int slot);
void model_resv_free(struct model *md, int slot);
void model_stream_complete(struct model *md, int stream);
int model_reap(struct model *md);
/* The queued copy of value v to loc completed: 0, or -1 when the model
 * has none (no state_version step either way). */
int model_copy_done(struct model *md, int v, int loc);
/* Queued copies not completed yet. */
int model_queued(const struct model *md);
int model_close(struct model *md, unsigned flags);

/* The value's mat at a location, or NULL. */
struct mmat *model_mat(struct model *md, int v, int loc);

#endif
