// SPDX-License-Identifier: MIT
/*
 * rsd-demo's options: the defaults (shared with rsd-bench's cases) and the
 * command line.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: rsd-demo [-c CIPHERTEXTS] [-k KEYS] [-w WEIGHTS] [-s STAGES]\n"
		"                [--ct-mib N] [--key-mib N] [--weight-mib N] [--workspace-mib N]\n"
		"                [--device-mib N] [--pinned-mib N] [--share N]\n"
		"                [--policy lru|next-use|both] [--near N] [--no-prefetch]\n"
		"                [--kernel-us N] [--links] [--compare-prefetch] [-q]\n"
		"       rsd-demo --trace FILE [...]  (replay a key-access trace; --trace --help)\n"
		"  --share N   ciphertexts each rank sends on per stage (MPI job only; default 1)\n"
		"  --policy P  the controller's policy; both (the default of one process) runs\n"
		"              the workload under each and compares them (MPI job: lru only)\n"
		"  --near N    the next-use policy spills values needed within N stages to\n"
		"              pinned host first (default: the stages whose ciphertexts fill\n"
		"              the device and pinned budgets)\n"
		"  --no-prefetch  each stage waits for its copies; by default the next stage's\n"
		"              copies are queued while this stage's kernel runs\n"
		"  --kernel-us N  each stage's kernel computes N us on the simulated device\n"
		"              (default 500; stretched by the time scale with --links)\n"
		"  --links     the simulated device models its links (H200 PCIe rates, time\n"
		"              scale %g) and runs work in the background, as a GPU does\n"
		"  --compare-prefetch  run each policy waiting, then prefetching, with --links,\n"
		"              and set the stages' elapsed times side by side\n",
		DEMO_TIME_SCALE);
}

void demo_opts_default(struct demo_opts *o, bool ring)
{
	*o = (struct demo_opts){ .ciphertexts = 24,
				 .keys = 6,
				 .weights = 12,
				 .stages = 60,
				 .share = 1,
				 .ct_bytes = 2 * MiB,
				 .key_bytes = 4 * MiB,
				 .weight_bytes = 2 * MiB,
				 .workspace = 4 * MiB,
				 .device_budget = 24 * MiB,
				 .pinned_budget = 24 * MiB,
				 .policies = ring ? 1u << DP_LRU :
						    (1u << DP_LRU) | (1u << DP_NEXT_USE),
				 .prefetch = true,
				 .kernel_ns = 500000 };
}

int demo_parse(int argc, char **argv, struct demo_opts *o, bool ring)
{
	static const struct option longopts[] = {
		{ "ct-mib", required_argument, NULL, 1 },
		{ "key-mib", required_argument, NULL, 2 },
		{ "weight-mib", required_argument, NULL, 3 },
		{ "workspace-mib", required_argument, NULL, 4 },
		{ "device-mib", required_argument, NULL, 5 },
		{ "pinned-mib", required_argument, NULL, 6 },
		{ "share", required_argument, NULL, 7 },
		{ "policy", required_argument, NULL, 8 },
		{ "near", required_argument, NULL, 9 },
		{ "no-prefetch", no_argument, NULL, 10 },
		{ "links", no_argument, NULL, 11 },
		{ "compare-prefetch", no_argument, NULL, 12 },
		{ "kernel-us", required_argument, NULL, 13 },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	demo_opts_default(o, ring);
	while ((c = getopt_long(argc, argv, "c:k:w:s:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->ciphertexts = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			o->keys = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			o->weights = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 's':
			o->stages = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 1:
			o->ct_bytes = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 2:
			o->key_bytes = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 3:
			o->weight_bytes = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 4:
			o->workspace = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 5:
			o->device_budget = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 6:
			o->pinned_budget = strtoull(optarg, NULL, 0) * MiB;
			break;
		case 7:
			o->share = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 8:
			o->policies = !strcmp(optarg, "lru")	  ? 1u << DP_LRU :
				      !strcmp(optarg, "next-use") ? 1u << DP_NEXT_USE :
				      !strcmp(optarg, "both")	  ? (1u << DP_LRU) |
									(1u << DP_NEXT_USE) :
								0;
			break;
		case 9:
			o->near = strtoull(optarg, NULL, 0);
			o->near_set = true;
			break;
		case 10:
			o->prefetch = false;
			break;
		case 11:
			o->links = true;
			break;
		case 12:
			o->compare = true;
			break;
		case 13:
			o->kernel_ns = strtoull(optarg, NULL, 0) * 1000;
			break;
		default:
			usage();
			return -1;
		}
	}
	/* A share leaves at least the two ciphertexts a stage computes on. */
	/* An MPI job adopts arriving ciphertexts under new handles, which a
	 * schedule declared up front cannot name: it runs the tiered LRU. */
	if (optind < argc || o->ciphertexts < 2 || !o->keys || !o->weights || !o->ct_bytes ||
	    o->share > o->ciphertexts - 2 || !o->policies ||
	    (ring && o->policies != 1u << DP_LRU)) {
		usage();
		return -1;
	}
	return 0;
}
