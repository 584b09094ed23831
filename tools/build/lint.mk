# SPDX-License-Identifier: MIT
#
# make lint: clang-tidy and cppcheck over the sources the build compiles.

# ---------------------------------------------------------------------------
# make lint: clang-tidy (checks in .clang-tidy) over the sources this build
# compiles, and cppcheck over lib/ and tools/ in every preprocessor
# configuration it finds, with RSD_TRACE=0 (the LTTng provider's macros are
# beyond it).
#
# Diagnostics inside system headers are not ours to fix: clang-tidy keeps
# --system-headers off and .clang-tidy's HeaderFilterRegex names only the
# tree's own headers. That is not enough for the static analyzer, which
# reports a path ending in a system header when the path starts in our code:
# every tracepoint reaches LTTng-UST's inline read-side lock
# (lttng/urcu/static/urcu-ust.h), where it "dereferences" the thread's reader
# record right after lttng_ust_urcu_register_thread() has set it, a call the
# analyzer cannot see into. So lib/ and tools/ are linted as with TRACE=0
# (lib/trace.h's hooks are then empty inline functions that still type-check
# their arguments), and only the provider itself (tracepoints/*.c, built when
# TRACE=1) is linted with the build's flags. The trace-on half of lib/trace.h
# is still compiled with -Wall -Wextra -Werror by every TRACE=1 build.
# MPI programs get Open MPI's include flags (pkg-config ompi-c, the flags
# `mpicc --showme:compile` prints) as system directories; without Open MPI
# they are not built, and so not linted (the note above says so).
LINT_SRCS	:= $(LIB_SRCS) $(TOOL_SRCS) $(DEMO_SRCS) $(TP_SRCS)
LINT_CPPFLAGS	:= $(filter-out -DRSD_TRACE=%,$(RSD_CPPFLAGS)) -DRSD_TRACE=0
LINT_MPIFLAGS	:= $(patsubst -I%,-isystem %,$(MPI_CFLAGS))
# rsd-bench is linted with its StarPU cases when StarPU is installed.
LINT_STARPUFLAGS := $(if $(STARPU_PC),-DRSD_BENCH_STARPU=1 \
		    $(patsubst -I%,-isystem %,$(shell pkg-config --cflags $(STARPU_PC))))
lint_flags	= $(if $(filter $(TP_SRCS),$(1)),$(RSD_CPPFLAGS),$(LINT_CPPFLAGS)) \
		  $(if $(filter $(MPI_SRCS),$(1)),$(LINT_MPIFLAGS)) \
		  $(if $(filter tools/rsd-bench.c,$(1)),$(LINT_STARPUFLAGS))
CLANG_TIDY	?= clang-tidy
CPPCHECK	?= cppcheck

.PHONY: lint
lint:
	$(Q)command -v $(CLANG_TIDY) >/dev/null || { echo 'lint: $(CLANG_TIDY) missing'; exit 1; }
	$(Q)command -v $(CPPCHECK) >/dev/null || { echo 'lint: $(CPPCHECK) missing'; exit 1; }
	$(Q)rc=0; $(foreach f,$(LINT_SRCS), \
		$(if $(Q),printf '  %-7s %s\n' TIDY $(f);) \
		$(CLANG_TIDY) --quiet $(f) -- -std=c11 $(call lint_flags,$(f)) \
			2> >(grep -v '^[0-9]* warnings\? generated' >&2) || rc=1;) \
	$(if $(Q),printf '  %-7s %s\n' CPPCHECK 'lib tools';) \
	$(CPPCHECK) --enable=warning,performance,portability --error-exitcode=1 --inline-suppr \
		--std=c11 -Iinclude -Ilib -DRSD_TRACE=0 --force -q lib tools || rc=1; \
	if [ $$rc -ne 0 ]; then echo 'lint: findings above'; fi; exit $$rc

# ---------------------------------------------------------------------------
# make format-check: every tracked C source and header must be what
# clang-format makes of it under the tree's .clang-format (clang-format 14,
# Debian's, which tools/build/install-deps installs; another major version
# formats a few constructs differently). Nothing is changed; run
# `clang-format -i FILE` on what it names. Outside a git checkout the files
# are found under the source directories instead. tracepoints/rsd_tp.h keeps
# the LTTng-UST event macros laid out by hand (clang-format off there).
CLANG_FORMAT	?= clang-format
FORMAT_SRCS	= $(or $(shell git ls-files '*.c' '*.h' 2>/dev/null), \
		  $(shell find include lib tests tools tracepoints -name '*.[ch]' 2>/dev/null))

.PHONY: format-check
format-check:
	$(Q)command -v $(CLANG_FORMAT) >/dev/null || { echo 'format-check: $(CLANG_FORMAT) missing'; exit 1; }
	$(if $(Q),@printf '  %-7s %s\n' FORMAT '$(words $(FORMAT_SRCS)) files')
	$(Q)$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_SRCS) || \
		{ echo 'format-check: the files above differ from clang-format'"'"'s output'; exit 1; }
