/* SPDX-License-Identifier: MIT */
/*
 * Replaying a key-access trace (tools/data/fhe-bootstrap/README.md) through
 * the controller: rsd-demo --trace FILE and rsd-bench --case fhe_keys.
 *
 * Every distinct key of the trace is a pinned host value, its bytes divided
 * by a scale factor; the link model's bandwidths are divided by the same
 * factor, so a scaled key's copy takes as long as the full key's would. The
 * trace is the controller's schedule, one step per access, and each access
 * is a kernel of known length on the simulated device reading the key.
 */
#ifndef RSD_DEMO_KEYTRACE_H
#define RSD_DEMO_KEYTRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "demo.h"

/* The main trace's keys are 63 x 2 MiB: divided by 63 each is 2 MiB. */
#define KT_DEFAULT_SCALE 63u
/*
 * One key switch's kernel: the HEonGPU README's table of CKKS
 * bootstrapping times (RTX 4090; "Slim" bootstrapping, N = 2^16, 2^15
 * slots, less-key mode on, 4 levels left: the slowest of its three slim
 * rows, the one nearest the trace's 10 levels left) gives 164.20 ms for
 * one bootstrapping; charged to the 161 key switches of the main trace,
 * that is 1.02 ms each. That time is the whole bootstrapping's, not only
 * its key switches': a key switch's own kernel is, if anything, shorter.
 */
#define KT_DEFAULT_KERNEL_NS 1020000ull
/*
 * The link the keys cross: the same card's. An RTX 4090 is a PCIe 4.0 x16
 * card, whose lanes run at half a PCIe 5.0 lane's rate (16 against 32 GT/s,
 * the same 128b/130b encoding): half the 55 GB/s the simulated device
 * models for a PCIe 5.0 x16 link, at the same efficiency. A kernel time
 * from one card with another card's link would describe no machine
 * (Documentation/performance.md shows both pairings).
 */
#define KT_DEFAULT_LINK_BPS 27500000000ull

struct kt_trace {
	unsigned naccess, nkeys;
	uint32_t *access;    /* the key index of each access, in trace order */
	uint64_t *key_bytes; /* per key, full size as the trace gives it */
	char **key_name;     /* per key */
};

struct kt_opts {
	uint64_t scale;	      /* key bytes and link bandwidths divided by it */
	double time_scale;    /* every modelled duration multiplied by it */
	uint64_t kernel_ns;   /* one access's kernel, before time_scale */
	uint64_t link_bps;    /* host <-> device, each way, before scale */
	uint64_t budget;      /* cuda:0's budget in scaled bytes */
	enum demo_policy pol; /* with the trace as the schedule */
	bool prefetch;	      /* use access i + 1 while kernel i runs */
	bool lookahead;	      /* and RSD_CTRL_LOOKAHEAD: prefetch what fits */
};

struct kt_result {
	uint64_t h2d_bytes;	/* scaled bytes brought to the device */
	unsigned copies;	/* copies to the device */
	uint64_t elapsed_ns;	/* first use to the last kernel's end */
	uint64_t copy_ns;	/* the model's duration of one scaled key's copy */
	unsigned kernel_reads;	/* kernels that ran and checked their key */
	unsigned kernel_faults; /* of those, kernels that read wrong bytes */
};

/* Read a trace: '#' lines are comments, the first other line names the
 * columns, of which "key" and "key_bytes" are used. 0, or -1 after
 * printing why to stderr. */
int kt_load(const char *path, struct kt_trace *t);
void kt_free(struct kt_trace *t);
/* kt_belady's answer when memory ran out (after printing why). */
#define KT_FAILED UINT64_MAX
/*
 * kt_critical runs Belady's rule on every suffix of a trace of up to
 * KT_CRITICAL_EXACT accesses; on a longer one, on KT_CRITICAL_POINTS evenly
 * spaced suffixes (every kt_critical_stride()-th access and the last),
 * which gives a lower bound at most as high as the exact one.
 */
#define KT_CRITICAL_EXACT 2048u
#define KT_CRITICAL_POINTS 1024u
/* The spacing of the suffixes kt_critical runs on: 1 when all. */
unsigned kt_critical_stride(unsigned naccess);
/* The scaled bytes of every distinct key. */
uint64_t kt_key_bytes(const struct kt_trace *t, uint64_t scale);
/*
 * Bytes brought to a device of budget bytes (scaled) by Belady's rule:
 * fetch on a miss, evict the key used farthest ahead. Optimal when the
 * keys have one size (as in every OpenFHE trace); *exact says whether they
 * do. O(accesses x log keys); KT_FAILED when memory ran out.
 */
uint64_t kt_belady(const struct kt_trace *t, uint64_t scale, uint64_t budget, bool *exact);
/* max(bound bytes copied at the link rate, one copy taking copy_ns per
 * key, and the kernels), in ns: the ideal elapsed time. */
double kt_ideal(const struct kt_trace *t, const struct kt_opts *o, uint64_t bound,
		uint64_t copy_ns);
/*
 * A lower bound on any replay's elapsed time, in ns, that the ideal
 * leaves out, for keys of one size (one copy at a time, copy_ns each; the
 * kernels one after another in trace order; a key's room taken from its
 * copy's start to its eviction, after the last kernel that read it). Kernel
 * i cannot start before the copies the first j + 1 accesses need at least
 * (Belady's for that prefix), plus the kernels j + 1 to i, for every
 * j <= i. After that start come the kernels from i on, and the copies the
 * accesses from i on need beyond what the budget can hold then (Belady's
 * for that suffix from an empty device, less the budget's keys), the last
 * one followed by its kernel. The maximum over i of that start plus the
 * longer of the two; never below the ideal's two terms. Uses o->budget.
 * The prefix term costs one Belady run, the suffix term one per suffix
 * (see KT_CRITICAL_EXACT). Negative when memory ran out.
 */
double kt_critical(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns);
/*
 * An offline schedule under the same rules, with no host in the way: the
 * copy engine takes the misses in trace order, each as soon as it is free
 * and room is, evicting either the key whose room is free soonest (its
 * last kernel ended, or before the engine is free; among those the one
 * used farthest ahead) or Belady's victim, whichever of the two whole
 * schedules ends first. Its elapsed time in ns; *copies, the keys it
 * copies. Keys of one size; 0 when the budget holds none; negative when
 * memory ran out (*copies unchanged). O(accesses + misses x keys).
 */
double kt_plan(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
	       unsigned *copies);
/* One replay. 0, or -1 after printing why to stderr. */
int kt_replay(const struct kt_trace *t, const struct kt_opts *o, struct kt_result *r);

/* rsd-demo --trace FILE [options]: the exit status. */
int kt_main(int argc, char **argv);

#endif
