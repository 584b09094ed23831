# SPDX-License-Identifier: MIT
#
# make demo and make bench: the programs users run from the build tree.
# Scripts and programs get the build directory in RSD_BUILD_DIR.

# ---------------------------------------------------------------------------
RUN_ENV		:= RSD_BUILD_DIR=$(abspath $(B)) O=$(B)

.PHONY: demo demo-report bench

# RANKS=N: the demo as an MPI job of N ranks (tools/rsd-demo-mpi).
demo: lib tools
	$(Q)$(RUN_ENV) RSD_DEMO_RANKS=$(RANKS) bash tools/build/rsd-demo.sh $(DEMO_ARGS)

# The demo, then a screenshot of its report page for a person to look at
# (headless Chromium: make deps installs it).
demo-report: lib tools
	$(Q)$(RUN_ENV) RSD_DEMO_RANKS=$(RANKS) RSD_DEMO_SCREENSHOT=1 \
		bash tools/build/rsd-demo.sh $(DEMO_ARGS)

bench: lib tools
	$(Q)$(RUN_ENV) $(B)/tools/rsd-bench $(BENCH_ARGS)
