# SPDX-License-Identifier: MIT
#
# make soak (millions of random operations against the reference model,
# tools/rsd-soak) and make fuzz (libFuzzer targets of tests/fuzz/).

# ---------------------------------------------------------------------------
# make soak: tools/rsd-soak (SOAK_ARGS=...).
.PHONY: soak fuzz
soak: lib tools
	$(Q)$(RUN_ENV) $(B)/tools/rsd-soak $(SOAK_ARGS)

# The multi-threaded linearizability check (tests/model/linearize.c), long.
.PHONY: soak-threads
soak-threads: lib tools
	$(Q)$(RUN_ENV) $(B)/tools/rsd-soak -T 0 $(SOAK_ARGS)

# The hostile test (tests/model/hostile.inc): 4-8 threads, not-waiting
# calls, GPU leases, faults armed at random, every check, a watchdog.
# HOSTILE_FAULTS and HOSTILE_CHECKS are rsd-soak's -F and -C lists.
HOSTILE_FAULTS	?= all
HOSTILE_CHECKS	?= all
.PHONY: soak-hostile
soak-hostile: lib tools
	$(Q)$(RUN_ENV) $(B)/tools/rsd-soak -H -T 0 -F $(HOSTILE_FAULTS) -C $(HOSTILE_CHECKS) \
		$(SOAK_ARGS)

# ---------------------------------------------------------------------------
# make fuzz: each tests/fuzz/<name>.c is a libFuzzer target built with clang
# against a library instrumented the same way (in $(B)/fuzz/), run for
# FUZZ_SECONDS with tests/fuzz/corpus/<name>/ as seed corpus. New inputs go to
# $(B)/fuzz/corpus/<name>/ and crashes to $(B)/fuzz/artifacts/<name>/, never
# into the source tree.
FUZZ_SECONDS	?= 60
FUZZ_SRCS	:= $(sort $(wildcard tests/fuzz/*.c))
FB		:= $(B)/fuzz
FUZZ_PROGS	:= $(FUZZ_SRCS:tests/fuzz/%.c=$(FB)/%)
FUZZ_SAN	:= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_CFLAGS	:= -std=c11 -Wall -Wextra -O1 -g -fPIC -pthread $(FUZZ_SAN) $(CFLAGS)
FUZZ_LIB_OBJS	:= $(LIB_SRCS:%.c=$(FB)/obj/%.o) $(TP_SRCS:%.c=$(FB)/obj/%.o)
HAVE_CLANG	:= $(if $(filter fuzz,$(MAKECMDGOALS)),$(shell command -v $(CLANG) 2>/dev/null))

$(FB)/obj/%.o: %.c $(B)/.flags
	$(call msg,CLANG,$@)
	@mkdir -p $(@D)
	$(Q)$(CLANG) $(RSD_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FB)/librsd-fuzz.a: $(FUZZ_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(FUZZ_PROGS): $(FB)/%: tests/fuzz/%.c $(FB)/librsd-fuzz.a
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(RSD_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(filter $(FB)/obj/tracepoints/%,$(FUZZ_LIB_OBJS)) $(CUDA_PRELIBS) $(FB)/librsd-fuzz.a \
		$(LIB_LDLIBS) -lm $(LDLIBS)

-include $(FUZZ_LIB_OBJS:.o=.d)

ifneq ($(CUDASIM_SO),)
$(FUZZ_PROGS): $(CUDASIM_SO)
endif

ifeq ($(HAVE_CLANG),)
fuzz:
	@echo 'fuzz: $(CLANG) not found (tools/build/install-deps installs clang); skipping'
else
fuzz: $(FUZZ_PROGS)
	$(Q)for p in $(notdir $(FUZZ_PROGS)); do \
		mkdir -p $(FB)/corpus/$$p $(FB)/artifacts/$$p; \
		seed=tests/fuzz/corpus/$$p; [ -d $$seed ] || seed=; \
		echo "  FUZZ    $$p for $(FUZZ_SECONDS)s"; \
		$(FB)/$$p -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(FB)/artifacts/$$p/ $(FUZZ_ARGS) \
			$(FB)/corpus/$$p $$seed || exit 1; \
	done
endif
