# SPDX-License-Identifier: MIT
#
# make check: the suite under kyua, plain, sanitized (SANITIZE=...) or under
# valgrind (VALGRIND=1). The suppression files are tests/supp/*.supp.

# ---------------------------------------------------------------------------
# make check: kyua runs the suite; its report follows, then our own closing
# line (kyua counts skips as passes). Broken tests count as failed, expected
# failures as passed. Tests see RSD_SRCDIR (the source tree) and
# RSD_BUILD_DIR in their environment.
#
# VALGRIND=1: kyua cannot wrap a test program, so $(B)/tests-vg/ mirrors the
# Kyuafiles with each atf-c program replaced by a two-line shell wrapper that
# execs valgrind on the real binary in $(B)/tests/ (argv[0] stays there, so
# atf's srcdir still finds helpers and data). A valgrind error or leak makes
# the program exit 99 after reporting "passed", which kyua marks broken.
#
# tests/supp/suite.supp and tests/supp/librsd.supp (the one installed for
# users) silence what is not librsd's; see their comments.

# --fair-sched: valgrind runs one thread at a time; without fair scheduling a
# thread polling for the transition lock can starve the one holding it.
VALGRIND_CMD	?= valgrind --error-exitcode=99 --leak-check=full --quiet --fair-sched=try \
		   --suppressions=$(CURDIR)/tests/supp/suite.supp \
		   --suppressions=$(CURDIR)/tests/supp/librsd.supp $(VALGRIND_ARGS)
ifeq ($(VALGRIND),1)
KDIR		:= $(B)/tests-vg
RESULTS		:= $(B)/kyua-vg.db
VG_FILES	:= $(TEST_C_PROGS:$(B)/tests/%=$(KDIR)/%) $(TEST_SH_PROGS:$(B)/tests/%=$(KDIR)/%) \
		   $(TEST_KYUAFILES:tests/%=$(KDIR)/%) $(KDIR)/Kyuafile

$(TEST_C_PROGS:$(B)/tests/%=$(KDIR)/%): $(KDIR)/%: $(B)/tests/% FORCE
	@mkdir -p $(@D)
	@printf '#!/bin/sh\nRSD_UNDER_VALGRIND=1 exec %s %s "$$@"\n' '$(call sq,$(VALGRIND_CMD))' '$(abspath $<)' >$@.tmp
	@chmod 755 $@.tmp && mv $@.tmp $@

$(TEST_SH_PROGS:$(B)/tests/%=$(KDIR)/%): $(KDIR)/%: $(B)/tests/%
	@mkdir -p $(@D)
	@printf '#!/bin/sh\nexec %s "$$@"\n' '$(abspath $<)' >$@.tmp
	@chmod 755 $@.tmp && mv $@.tmp $@

$(KDIR)/Kyuafile $(TEST_KYUAFILES:tests/%=$(KDIR)/%): $(KDIR)/%: $(B)/tests/%
	@mkdir -p $(@D)
	@cp -p $< $@
else
KDIR		:= $(B)/tests
RESULTS		:= $(B)/kyua.db
VG_FILES	:=
endif

# Sanitized runs: CUDA's runtime maps memory where ASan's shadow gap sits, so
# let it; tests/supp/lsan.supp and tests/supp/ubsan.supp say what they
# silence and why.
SANITIZED	:= $(if $(strip $(SANITIZE)),y)
CHECK_ENV	:= $(if $(and $(filter 1,$(CUDA)),$(findstring address,$(SANITIZE))),\
		   ASAN_OPTIONS="protect_shadow_gap=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}") \
		   $(if $(SANITIZED),LSAN_OPTIONS="suppressions=$(CURDIR)/tests/supp/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}") \
		   UBSAN_OPTIONS="print_stacktrace=1$(if $(SANITIZED),:halt_on_error=1:suppressions=$(CURDIR)/tests/supp/ubsan.supp)$${UBSAN_OPTIONS:+:$$UBSAN_OPTIONS}" \
		   RSD_SRCDIR=$(CURDIR) RSD_BUILD_DIR=$(abspath $(B))

# SANITIZE=thread (build-tsan/): each process that reports writes its
# reports to a file in $(B)/tsan/; check counts them, prints their summary
# lines, and fails on any. tests/tsan/tsan.supp suppresses only code that is
# not librsd's. atexit_sleep_ms=0: the runtime otherwise sleeps a second in
# every exit, and every test case is a process. First tests/tsan/probe says
# whether TSan programs start here; where they start only without address
# randomization (GCC 12's runtime and a kernel randomizing with more bits
# than its memory layout allows), kyua runs under setarch -R.
ifneq ($(TSAN),)
TSAN_DIR	:= $(abspath $(B))/tsan
TSAN_OPTS	:= atexit_sleep_ms=0:suppressions=$(CURDIR)/tests/tsan/tsan.supp
CHECK_ENV	+= TSAN_OPTIONS="$(TSAN_OPTS):log_path=$(TSAN_DIR)/report$${TSAN_OPTIONS:+:$$TSAN_OPTIONS}"
define tsan_probe
rm -rf $(TSAN_DIR) && mkdir -p $(TSAN_DIR); wrap=; \
probe() { TSAN_OPTIONS=$(TSAN_OPTS) "$$@" $(B)/tests/tsan/probe >/dev/null 2>>$(TSAN_DIR)/probe.err; }; \
if ! probe; then \
	if probe setarch "$$(uname -m)" -R; then \
		wrap="setarch $$(uname -m) -R"; \
		echo '  NOTE    ThreadSanitizer starts only without address randomization: kyua under setarch -R'; \
	else \
		echo 'ThreadSanitizer programs cannot start here, with or without setarch -R:'; \
		head -n5 $(TSAN_DIR)/probe.err | sed 's/^/    /'; exit 1; \
	fi; \
fi;
endef
define tsan_count
n=$$(cat $(TSAN_DIR)/report.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer'); \
echo; echo "ThreadSanitizer: $$n reports"; \
if [ "$$n" -ne 0 ]; then \
	rc=1; echo "reports in $(TSAN_DIR)/report.*; their summaries:"; \
	cat $(TSAN_DIR)/report.* | grep '^SUMMARY: ThreadSanitizer' | sort | uniq -c | sort -rn | head -n20; \
fi;
endef
endif

.PHONY: check
check: all $(VG_FILES)
	@rm -f $(RESULTS) $(RESULTS:.db=.log)
	@echo '  KYUA    $(KDIR:$(B)/%=%)/Kyuafile$(if $(filter 1,$(VALGRIND)), (under valgrind))'
	@$(tsan_probe) rc=0; $(CHECK_ENV) $$wrap $(KYUA) --logfile=$(RESULTS:.db=.log) test --kyuafile $(KDIR)/Kyuafile \
		--results-file $(RESULTS) || rc=$$?; \
	if [ ! -s $(RESULTS) ]; then \
		echo "kyua test produced no results (exit $$rc)"; \
		echo "0 passed, 0 failed, 0 skipped"; exit $${rc/#0/1}; \
	fi; \
	echo; $(KYUA) report --results-file $(RESULTS) >$(B)/kyua-report.txt || rc=1; \
	cat $(B)/kyua-report.txt; \
	if [ $$rc -ne 0 ]; then \
		echo; echo '===> Details of broken and failed tests'; \
		$(KYUA) report --results-file $(RESULTS) --verbose --results-filter broken,failed \
			| awk '/^===> /{ on = ($$2 ~ /:/) } on'; \
	fi; \
	line=$$(grep -E '^Test cases: [0-9]+ total' $(B)/kyua-report.txt | tail -n1); \
	num() { sed -nE "s/.* ([0-9]+) $$1.*/\1/p" <<<"$$line"; }; \
	total=$$(sed -nE 's/^Test cases: ([0-9]+) total.*/\1/p' <<<"$$line"); \
	skip=$$(num skipped); \
	broken=$$(num broken); failed=$$(num failed); \
	failed=$$(( $${failed:-0} + $${broken:-0} )); skip=$${skip:-0}; \
	passed=$$(( $${total:-0} - skip - failed )); \
	$(tsan_count) \
	echo; echo "$$passed passed, $$failed failed, $$skip skipped"; \
	exit $$rc

# make tsan-mutations: three TSan builds, each missing one of the edges
# lib/core/rcu_annot.h gives ThreadSanitizer, must each report
# (tests/tsan/mutations; Documentation/reliability.md). The script runs make
# itself, so this make's command-line variables (O=, SANITIZE=) stay here.
.PHONY: tsan-mutations
tsan-mutations:
	$(Q)env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL MAKE=$(MAKE) bash tests/tsan/mutations
