# SPDX-License-Identifier: MIT
#
# librsd: the one build entry. Non-recursive; sources are found by wildcard,
# so a new lib/<layer>/*.c, tests/<area>/t_*.c or tools/*.c is built without
# touching this file. `make help` lists targets and knobs.
#
#   make [V=1] [O=builddir] [CUDA=0|1|sim] [TRACE=0|1] [SANITIZE=address,undefined]
#
# Outputs land in $(O) (default build/, build-san/ for a sanitized build,
# build-tsan/ for SANITIZE=thread, build-cudasim/ and build-cudasim-san/ for
# CUDA=sim, when O is not given),
# never in the source tree.

VERSION_MAJOR	:= 0
VERSION_MINOR	:= 1
VERSION_PATCH	:= 0
VERSION		:= $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SONAME		:= librsd.so.$(VERSION_MAJOR)
REALNAME	:= librsd.so.$(VERSION)

MAKEFLAGS	+= -r
.SUFFIXES:
.DELETE_ON_ERROR:
.DEFAULT_GOAL	:= all
SHELL		:= /bin/bash

# ---------------------------------------------------------------------------
# Verbosity: kernel style. Quiet lines are "  TAG     path"; V=1 shows all.
ifeq ($(V),1)
Q	:=
msg	=
else
Q	:= @
msg	= @printf '  %-7s %s\n' '$(1)' '$(patsubst $(B)/%,%,$(2))';
endif

# ---------------------------------------------------------------------------
# Output directory. A sanitized build and a CUDA=sim build get their own
# defaults so plain, instrumented and simulated-CUDA objects never mix
# (ThreadSanitizer, which cannot share a process with AddressSanitizer, gets
# build-tsan); an explicit O= is always honored.
comma		:= ,
TSAN		:= $(if $(filter thread,$(subst $(comma), ,$(SANITIZE))),y)
ifeq ($(strip $(O)),)
B	:= $(if $(filter sim,$(CUDA)),build-cudasim,build)$(if $(strip $(SANITIZE)),$(if $(TSAN),-tsan,-san))
else
B	:= $(patsubst %/,%,$(strip $(O)))
endif
ifneq ($(filter . ./ / ..,$(B)),)
$(error O=$(O) would build into the source tree or /; pick a directory such as O=build)
endif

# ---------------------------------------------------------------------------
# Missing build dependencies: run tools/install-deps once, before anything
# else is evaluated. RSD_SKIP_DEPS=1 turns this off.
NODEPS_GOALS	:= help clean distclean uninstall
ifneq ($(filter-out $(NODEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
ifneq ($(RSD_SKIP_DEPS),1)
deps_ok := $(shell command -v pkg-config >/dev/null 2>&1 && \
		   pkg-config --exists liburcu atf-c 2>/dev/null && \
		   command -v kyua >/dev/null 2>&1 && echo y)
ifneq ($(deps_ok),y)
$(info librsd: liburcu, atf-c or kyua missing: running tools/install-deps)
deps_rc := $(shell bash tools/install-deps 1>&2; echo $$?)
ifneq ($(deps_rc),0)
$(error tools/install-deps failed (exit $(deps_rc)); install what it printed, then retry)
endif
endif
endif
endif

# ---------------------------------------------------------------------------
# Tools and install layout.
CC		?= cc
AR		?= ar
CLANG		?= clang
PKG_CONFIG	?= pkg-config
KYUA		?= kyua
INSTALL		?= install

PREFIX		?= /usr/local
BINDIR		?= $(PREFIX)/bin
LIBDIR		?= $(PREFIX)/lib
INCLUDEDIR	?= $(PREFIX)/include
PKGCONFIGDIR	?= $(LIBDIR)/pkgconfig
TESTSDIR	?= $(PREFIX)/tests/rsd
EXAMPLESDIR	?= $(PREFIX)/share/rsd/examples

# ---------------------------------------------------------------------------
# Features. CUDA and TRACE are detected once; pass 0 or 1 to force them.
CUDA_HOME	?= /usr/local/cuda
ifeq ($(origin CUDA),undefined)
CUDA := $(if $(and $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),\
		   $(wildcard $(CUDA_HOME)/lib64/libcudart.so)),1,0)
endif
ifeq ($(origin TRACE),undefined)
TRACE := $(shell $(PKG_CONFIG) --exists lttng-ust 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(filter 0 1 sim,$(CUDA)),)
$(error CUDA must be 0, 1 or sim, not '$(CUDA)')
endif
ifeq ($(filter 0 1,$(TRACE)),)
$(error TRACE must be 0 or 1, not '$(TRACE)')
endif

pc_cflags = $(shell $(PKG_CONFIG) --cflags $(1) 2>/dev/null)
pc_libs = $(shell $(PKG_CONFIG) --libs $(1) 2>/dev/null)
pc_exists = $(shell $(PKG_CONFIG) --exists $(1) 2>/dev/null && echo y)

# liburcu, memb flavor.
ifeq ($(call pc_exists,liburcu-memb),y)
URCU_CFLAGS	:= $(call pc_cflags,liburcu-memb)
URCU_LIBS	:= $(call pc_libs,liburcu-memb)
URCU_PC		:= liburcu-memb
else
URCU_CFLAGS	:=
URCU_LIBS	:= -lurcu-memb -lurcu-common
URCU_PC		:=
endif

ATF_CFLAGS	:= $(call pc_cflags,atf-c)
ATF_LIBS	:= $(or $(call pc_libs,atf-c),-latf-c)

ifeq ($(CUDA),1)
CUDA_CPPFLAGS	:= -I$(CUDA_HOME)/include
CUDA_LIBS	:= -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64
endif

# CUDA=sim: the CUDA driver is built against the toolkit's headers but
# linked with the CUDA runtime double (tests/cudasim/), a test-only shared
# library in $(B)/cudasim/ that implements the runtime calls on librsd's
# simulated device. It has its own soname, so the real libcudart is never
# loaded beside it, and is found through an rpath into the build directory;
# it is never installed (make install refuses a CUDA=sim build). Its
# references to the simulated device's rsd_simdev_* functions are resolved
# by the librsd a process uses: programs name it before librsd.a, so the
# archive members it needs are linked in and exported to it; librsd.so
# defines them itself.
CUDASIM_SRCS	:= $(sort $(wildcard tests/cudasim/*.c))
ifeq ($(CUDA),sim)
ifeq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
$(error CUDA=sim compiles against the CUDA runtime headers; none in $(CUDA_HOME)/include (set CUDA_HOME))
endif
CUDASIM_DIR	:= $(B)/cudasim
CUDASIM_SO	:= $(CUDASIM_DIR)/librsd-cudasim.so
CUDASIM_OBJS	:= $(CUDASIM_SRCS:%.c=$(B)/%.o)
CUDA_CPPFLAGS	:= -I$(CUDA_HOME)/include -DRSD_CUDASIM=1
CUDA_LIBS	:= -L$(CUDASIM_DIR) -lrsd-cudasim -Wl,-rpath,$(abspath $(CUDASIM_DIR))
# Named first and kept even under --as-needed (nothing references the
# runtime yet at that point), so its rsd_simdev_* references pull in the
# archive members that define them.
CUDA_PRELIBS	:= -L$(CUDASIM_DIR) -Wl,--push-state,--no-as-needed -lrsd-cudasim -Wl,--pop-state
endif

ifeq ($(TRACE),1)
LTTNG_CFLAGS	:= $(call pc_cflags,lttng-ust)
LTTNG_LIBS	:= $(or $(call pc_libs,lttng-ust),-llttng-ust)
LTTNG_LIBS	+= $(if $(filter -ldl,$(LTTNG_LIBS)),,-ldl)
endif

# MPI programs (a tools/ or tests/ source that includes <mpi.h>) build with
# Open MPI's flags; without libopenmpi-dev they are left out with a note.
MPI_CFLAGS	:= $(call pc_cflags,ompi-c)
MPI_LIBS	:= $(call pc_libs,ompi-c)
MPI_OK		:= $(call pc_exists,ompi-c)

# ---------------------------------------------------------------------------
# Flags. User CFLAGS/CPPFLAGS/LDFLAGS/LDLIBS are appended, so they win.
# -I. lets the tracepoint provider name itself "tracepoints/rsd_tp.h".
SAN_FLAGS	:= $(if $(strip $(SANITIZE)),-fsanitize=$(strip $(SANITIZE)) \
		     -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
# LTTng-UST's inline read-side lock (lttng/urcu/static/urcu-ust.h), expanded
# into every file that fires a tracepoint, touches its 128-byte-aligned
# reader record at an address liblttng-ust aligns less. Alignment alone is
# made recoverable so $(B)/tests/ubsan.supp can name that one site; with
# halt_on_error=1 any other misaligned access still stops the test.
SAN_ALIGN_FIX	:= $(if $(and $(filter 1,$(TRACE)),$(filter undefined alignment,$(subst $(comma), ,$(SANITIZE)))),y)
SAN_FLAGS	+= $(if $(SAN_ALIGN_FIX),-fsanitize-recover=alignment)

RSD_CPPFLAGS	:= -D_GNU_SOURCE -Iinclude -Ilib -I. \
		   -DRSD_HAVE_CUDA=$(if $(filter 0,$(CUDA)),0,1) -DRSD_TRACE=$(TRACE) \
		   $(URCU_CFLAGS) $(CUDA_CPPFLAGS) $(LTTNG_CFLAGS) $(CPPFLAGS)
RSD_CFLAGS	:= -std=c11 -Wall -Wextra -Werror -O2 -g -fPIC -pthread \
		   $(SAN_FLAGS) $(CFLAGS)
RSD_LDFLAGS	:= -pthread $(SAN_FLAGS) $(LDFLAGS)
LIB_LDLIBS	:= $(URCU_LIBS) $(LTTNG_LIBS) $(CUDA_LIBS) -pthread
# A sanitized shared library leaves the runtime's symbols to the executable.
NOUNDEF		:= $(if $(strip $(SANITIZE)),,-Wl,--no-undefined)

# ---------------------------------------------------------------------------
# Sources, found by wildcard. LIB_EXCLUDE and TEST_EXCLUDE (make patterns,
# e.g. LIB_EXCLUDE='lib/ctrl/%') leave files out for an experiment.
LIB_SRCS	:= $(filter-out $(LIB_EXCLUDE),$(sort $(wildcard lib/*.c lib/*/*.c)))
TP_SRCS		:= $(if $(filter 1,$(TRACE)),$(sort $(wildcard tracepoints/*.c)))
LIB_OBJS	:= $(LIB_SRCS:%.c=$(B)/%.o)
TP_OBJS		:= $(TP_SRCS:%.c=$(B)/%.o)

LIBA		:= $(B)/librsd.a
LIBSO		:= $(B)/$(REALNAME)
LIBSO_LINKS	:= $(B)/$(SONAME) $(B)/librsd.so
PCFILE		:= $(B)/librsd.pc

# Programs whose source includes <mpi.h>.
mpi_srcs = $(if $(1),$(shell grep -l -E '^[[:space:]]*\#[[:space:]]*include[[:space:]]*<mpi\.h>' \
		$(1) 2>/dev/null))

TOOL_SRCS_ALL	:= $(sort $(wildcard tools/*.c tools/examples/*.c tools/examples/*/*.c))
TEST_SRCS_ALL	:= $(filter-out $(TEST_EXCLUDE),$(sort $(wildcard tests/*/t_*.c)))
MPI_SRCS	:= $(call mpi_srcs,$(TOOL_SRCS_ALL) $(TEST_SRCS_ALL))
ifneq ($(MPI_OK),y)
ifneq ($(MPI_SRCS),)
$(info librsd: no Open MPI (pkg-config ompi-c); not building $(MPI_SRCS))
endif
TOOL_SRCS	:= $(filter-out $(MPI_SRCS),$(TOOL_SRCS_ALL))
TEST_C_SRCS	:= $(filter-out $(MPI_SRCS),$(TEST_SRCS_ALL))
else
TOOL_SRCS	:= $(TOOL_SRCS_ALL)
TEST_C_SRCS	:= $(TEST_SRCS_ALL)
endif
# tools/NAME.c -> $(B)/tools/NAME; tools/examples/NAME.c and
# tools/examples/GROUP/NAME.c -> $(B)/tools/examples/NAME.
prog_of		= $(if $(filter 4,$(words $(subst /, ,$(1)))),\
		     $(B)/tools/examples/$(notdir $(1:.c=)),$(B)/$(1:.c=))
TOOL_PROGS	:= $(foreach s,$(TOOL_SRCS),$(call prog_of,$(s)))
BIN_TOOLS	:= $(filter-out $(B)/tools/examples/%,$(TOOL_PROGS))
EXAMPLE_PROGS	:= $(filter $(B)/tools/examples/%,$(TOOL_PROGS))
EXAMPLE_SRCS	:= $(filter tools/examples/%,$(TOOL_SRCS))
# Executable scripts in tools/ run in place; they are also copied to
# $(B)/tools/, so $(B)/tools/ (and BINDIR once installed) holds every tool and
# a test finds one at $(atf_get_srcdir)/../../tools/NAME in any build dir.
TOOL_SCRIPTS	:= $(filter-out tools/install-deps tools/gpu-check,$(sort $(shell \
		     find tools -maxdepth 1 -type f -perm -u+x ! -name '*.c' 2>/dev/null)))

# Tests: tests/<area>/t_*.c (atf-c) and t_*.sh (atf-sh) become
# $(B)/tests/<area>/t_*. Any other tests/<area>/*.c is either a helper
# program that a test runs from its srcdir (it defines main: built as
# $(B)/tests/<area>/<name>) or a helper module linked into every t_* program
# of that area. *.sh helpers and data/ are copied beside the programs. Areas
# with a Kyuafile are run; tests/fuzz holds libFuzzer targets, not tests.
TEST_SH_SRCS	:= $(filter-out $(TEST_EXCLUDE),$(sort $(wildcard tests/*/t_*.sh)))
TEST_AUX_SRCS	:= $(filter-out tests/fuzz/% tests/cudasim/% $(wildcard tests/*/t_*.c) $(TEST_EXCLUDE),\
		     $(sort $(wildcard tests/*/*.c)))
MAIN_RE		:= '(^|[[:space:]])main[[:space:]]*[(](void|int)'
TEST_AUX_PROG_SRCS := $(if $(TEST_AUX_SRCS),$(sort $(shell grep -l -E $(MAIN_RE) \
		     $(TEST_AUX_SRCS) 2>/dev/null)))
TEST_HELPER_SRCS := $(filter-out $(TEST_AUX_PROG_SRCS),$(TEST_AUX_SRCS))
TEST_HELPER_OBJS := $(TEST_HELPER_SRCS:%.c=$(B)/%.o)
TEST_C_PROGS	:= $(TEST_C_SRCS:%.c=$(B)/%)
TEST_AUX_PROGS	:= $(TEST_AUX_PROG_SRCS:%.c=$(B)/%)
TEST_SH_PROGS	:= $(TEST_SH_SRCS:%.sh=$(B)/%)
TEST_PROGS	:= $(TEST_C_PROGS) $(TEST_SH_PROGS) $(TEST_AUX_PROGS)
TEST_SCRIPTS	:= $(filter-out $(wildcard tests/*/t_*.sh) $(TEST_EXCLUDE),\
		     $(sort $(wildcard tests/*/*.sh)))
TEST_DATA	:= $(filter-out $(TEST_EXCLUDE),$(sort $(shell \
		     find tests -mindepth 3 -path 'tests/*/data/*' -type f 2>/dev/null)))
TEST_KYUAFILES	:= $(filter-out $(TEST_EXCLUDE),$(sort $(wildcard tests/*/Kyuafile)))
TEST_AREAS	:= $(patsubst tests/%/Kyuafile,%,$(TEST_KYUAFILES))
TEST_FILES	:= $(TEST_PROGS) $(TEST_KYUAFILES:%=$(B)/%) $(TEST_SCRIPTS:%=$(B)/%) \
		   $(TEST_DATA:%=$(B)/%) $(B)/tests/Kyuafile

ALL_OBJS	:= $(LIB_OBJS) $(TP_OBJS) $(TOOL_SRCS:%.c=$(B)/%.o) \
		   $(TEST_C_SRCS:%.c=$(B)/%.o) $(TEST_AUX_SRCS:%.c=$(B)/%.o) $(CUDASIM_OBJS)

# Per-file knobs in kbuild style: CFLAGS_cuda.o, LDLIBS_rsd-bench.
$(foreach s,$(filter $(MPI_SRCS),$(TOOL_SRCS) $(TEST_C_SRCS)),\
	$(eval $(B)/$(s:.c=.o): EXTRA_CFLAGS += $(MPI_CFLAGS))\
	$(eval $(call prog_of,$(s)): EXTRA_LIBS += $(MPI_LIBS)))

# rsd-bench compares librsd with StarPU when starpu-1.3 is installed
# (tools/install-deps installs it); only rsd-bench links it, never the library.
STARPU_PC	:= $(shell pkg-config --exists starpu-1.3 2>/dev/null && echo starpu-1.3)
ifneq ($(STARPU_PC),)
CFLAGS_rsd-bench.o += -DRSD_BENCH_STARPU=1 $(shell pkg-config --cflags $(STARPU_PC))
LDLIBS_rsd-bench += $(shell pkg-config --libs $(STARPU_PC))
endif

# ---------------------------------------------------------------------------
# Rebuild everything when the flags change: $(B)/.flags holds the last set
# and is rewritten (bumping its mtime) only when it differs.
FLAGS_SIG	:= $(CC) $(RSD_CPPFLAGS) $(RSD_CFLAGS) $(RSD_LDFLAGS) $(LIB_LDLIBS) $(VERSION)
sq		= $(subst ','\'',$(1))

$(B)/.flags: FORCE
	@mkdir -p $(@D)
	@if [ '$(call sq,$(FLAGS_SIG))' != "$$(cat $@ 2>/dev/null)" ]; then \
		if [ -f $@ ]; then echo '  FLAGS   changed: rebuilding $(B)'; fi; \
		printf '%s\n' '$(call sq,$(FLAGS_SIG))' >$@; \
	fi

# ---------------------------------------------------------------------------
# Top-level targets.
.PHONY: all lib tools tests check demo bench soak soak-threads fuzz lint install uninstall \
	clean distclean help FORCE

all: lib tools tests
lib: $(LIBA) $(LIBSO) $(LIBSO_LINKS) $(PCFILE)
tools: $(TOOL_PROGS) $(TOOL_SCRIPTS:%=$(B)/%)
tests: $(TEST_FILES)

# ---------------------------------------------------------------------------
# Compilation.
$(B)/%.o: %.c $(B)/.flags
	$(call msg,CC,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(RSD_CPPFLAGS) $(RSD_CFLAGS) $(EXTRA_CFLAGS) $(CFLAGS_$(notdir $@)) \
		-MMD -MP -c -o $@ $<

$(TEST_C_SRCS:%.c=$(B)/%.o) $(TEST_AUX_SRCS:%.c=$(B)/%.o): EXTRA_CFLAGS += $(ATF_CFLAGS)

-include $(ALL_OBJS:.o=.d)

# ---------------------------------------------------------------------------
# The library: static archive, and a shared object exporting only the public
# names (lib/librsd.map).
$(LIBA): $(LIB_OBJS) $(TP_OBJS)
	$(call msg,AR,$@)
	@mkdir -p $(@D)
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(LIBSO): $(LIB_OBJS) $(TP_OBJS) lib/librsd.map $(B)/.flags
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/librsd.map $(NOUNDEF) \
		$(RSD_CFLAGS) $(RSD_LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_LDLIBS) $(LDLIBS)

$(B)/$(SONAME): $(LIBSO)
	$(call msg,LN,$@)
	$(Q)ln -sfn $(REALNAME) $@

$(B)/librsd.so: $(B)/$(SONAME)
	$(call msg,LN,$@)
	$(Q)ln -sfn $(SONAME) $@

# pkg-config file; rewritten only when its content changes (PREFIX etc.).
PC_REQUIRES	:= $(strip $(URCU_PC) $(if $(filter 1,$(TRACE)),lttng-ust))
PC_LIBS		:= $(strip $(if $(URCU_PC),,$(URCU_LIBS)) \
		     $(if $(filter 1,$(TRACE)),-ldl) \
		     $(if $(filter 1,$(CUDA)),-L$(CUDA_HOME)/lib64 -lcudart) -pthread)

$(PCFILE): lib/librsd.pc.in FORCE
	@mkdir -p $(@D)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	     -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	     -e 's|@REQUIRES_PRIVATE@|$(PC_REQUIRES)|g' -e 's|@LIBS_PRIVATE@|$(PC_LIBS)|g' \
	     $< >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else \
		$(if $(Q),printf '  %-7s %s\n' GEN $(notdir $@);) mv $@.tmp $@; fi

# ---------------------------------------------------------------------------
# Programs link the static library (tests may call rsd__ helpers). The
# tracepoint provider objects are named explicitly so their probes are
# registered even when no archive member pulls them in.
PROG_LIBS	= $(TP_OBJS) $(CUDA_PRELIBS) $(LIBA) $(EXTRA_LIBS) $(LIB_LDLIBS) -lm $(LDLIBS) $(LDLIBS_$(notdir $@))

# The CUDA runtime double (CUDA=sim only): exports only the runtime's names
# and its rsd_cudasim_* controls (tests/cudasim/cudasim.map).
ifneq ($(CUDASIM_SO),)
$(CUDASIM_SO): $(CUDASIM_OBJS) tests/cudasim/cudasim.map $(B)/.flags
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) -shared -Wl,-soname,$(notdir $@) -Wl,--version-script=tests/cudasim/cudasim.map \
		$(RSD_CFLAGS) $(RSD_LDFLAGS) -o $@ $(filter %.o,$^) -pthread

$(LIBSO) $(TOOL_PROGS) $(TEST_C_PROGS) $(TEST_AUX_PROGS): $(CUDASIM_SO)
endif

define tool_rule
$(call prog_of,$(1)): $(B)/$(1:.c=.o) $(LIBA) $(TP_OBJS)
	$$(call msg,CCLD,$$@)
	$$(Q)$$(CC) $$(RSD_CFLAGS) $$(RSD_LDFLAGS) -o $$@ $$< $$(PROG_LIBS)
endef
$(foreach s,$(TOOL_SRCS),$(eval $(call tool_rule,$(s))))

test_helpers_of = $(filter $(B)/$(patsubst %/,%,$(dir $(patsubst $(B)/%,%,$(1))))/%,$(TEST_HELPER_OBJS))

.SECONDEXPANSION:
$(TEST_C_PROGS): $(B)/%: $(B)/%.o $$(call test_helpers_of,$$@) $(LIBA) $(TP_OBJS)
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(RSD_CFLAGS) $(RSD_LDFLAGS) -o $@ $< $(call test_helpers_of,$@) \
		$(ATF_LIBS) $(PROG_LIBS)

$(TEST_AUX_PROGS): $(B)/%: $(B)/%.o $(LIBA) $(TP_OBJS)
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(RSD_CFLAGS) $(RSD_LDFLAGS) -o $@ $< $(ATF_LIBS) $(PROG_LIBS)

# atf-sh test programs: installed without .sh, executable, with a shebang.
$(TEST_SH_PROGS): $(B)/%: %.sh
	$(call msg,GEN,$@)
	@mkdir -p $(@D)
	$(Q)if [ "$$(head -c2 $<)" = '#!' ]; then cat $< >$@; \
	else { echo '#! /usr/bin/env atf-sh'; cat $<; } >$@; fi; chmod 755 $@

$(TEST_SCRIPTS:%=$(B)/%) $(TOOL_SCRIPTS:%=$(B)/%): $(B)/%: %
	$(call msg,CP,$@)
	@mkdir -p $(@D)
	$(Q)$(INSTALL) -m 755 $< $@

$(TEST_KYUAFILES:%=$(B)/%) $(TEST_DATA:%=$(B)/%): $(B)/%: %
	$(call msg,CP,$@)
	@mkdir -p $(@D)
	$(Q)cp -p $< $@

# The top-level Kyuafile is generated from the areas that have a Kyuafile,
# so an area added by anyone is run without editing a list.
define kyuafile_top
printf 'syntax(2)\n\ntest_suite("rsd")\n\n'; \
for a in $(TEST_AREAS); do printf 'include("%s/Kyuafile")\n' "$$a"; done
endef

$(B)/tests/Kyuafile: FORCE
	@mkdir -p $(@D)
	@{ $(kyuafile_top); } >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else \
		$(if $(Q),printf '  %-7s %s\n' GEN tests/Kyuafile;) mv $@.tmp $@; fi

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
# $(B)/tests-vg/valgrind.supp silences what is not librsd's: atf-c's own
# allocations (malloc called directly from libatf-c or libcudart) and the
# thread-local blocks of helper threads (liblttng-ust, liburcu's call_rcu)
# still running at exit. A leak whose allocation a test body or librsd makes
# is never matched by these.
define VG_SUPP
{
   rsd-atf-c-internal
   Memcheck:Leak
   match-leak-kinds: definite,indirect,possible
   fun:*alloc
   obj:*/libatf-c.so*
}
{
   rsd-atf-c-internal-libc
   Memcheck:Leak
   match-leak-kinds: definite,indirect,possible
   fun:*alloc
   obj:*/libc.so*
   obj:*/libatf-c.so*
}
{
   rsd-cudart-internal
   Memcheck:Leak
   match-leak-kinds: definite,indirect,possible
   fun:*alloc
   obj:*/libcudart.so*
}
{
   rsd-running-thread-tls
   Memcheck:Leak
   match-leak-kinds: possible
   fun:calloc
   ...
   fun:_dl_allocate_tls
}
endef

# --fair-sched: valgrind runs one thread at a time; without fair scheduling a
# thread polling for the transition lock can starve the one holding it.
VALGRIND_CMD	?= valgrind --error-exitcode=99 --leak-check=full --quiet --fair-sched=try \
		   --suppressions=$(abspath $(B))/tests-vg/valgrind.supp $(VALGRIND_ARGS)
ifeq ($(VALGRIND),1)
KDIR		:= $(B)/tests-vg
RESULTS		:= $(B)/kyua-vg.db
VG_FILES	:= $(TEST_C_PROGS:$(B)/tests/%=$(KDIR)/%) $(TEST_SH_PROGS:$(B)/tests/%=$(KDIR)/%) \
		   $(TEST_KYUAFILES:tests/%=$(KDIR)/%) $(KDIR)/Kyuafile $(KDIR)/valgrind.supp

$(KDIR)/valgrind.supp: FORCE
	@mkdir -p $(@D)
	$(file >$@,$(VG_SUPP))

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
# let it; LeakSanitizer ignores atf-c's own never-freed test-case tables (by
# the atf functions that allocate them, so a leak in a test body or in
# librsd, which atf_tc_run merely calls, is still reported).
define LSAN_SUPP
leak:atf_tp_get_tcs
leak:atf_tc_init
leak:atf_list_init
leak:atf_list_append
leak:atf_map_init_charpp
leak:atf_map_insert
endef

define UBSAN_SUPP
alignment:_lttng_ust_urcu_read_lock
alignment:_lttng_ust_urcu_read_unlock
alignment:*/lttng/urcu/static/urcu-ust.h
endef

SAN_FILES	:= $(if $(strip $(SANITIZE)),$(B)/tests/lsan.supp $(B)/tests/ubsan.supp)
CHECK_ENV	:= $(if $(and $(filter 1,$(CUDA)),$(findstring address,$(SANITIZE))),\
		   ASAN_OPTIONS="protect_shadow_gap=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}") \
		   $(if $(SAN_FILES),LSAN_OPTIONS="suppressions=$(abspath $(B))/tests/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}") \
		   UBSAN_OPTIONS="print_stacktrace=1$(if $(SAN_FILES),:halt_on_error=1:suppressions=$(abspath $(B))/tests/ubsan.supp)$${UBSAN_OPTIONS:+:$$UBSAN_OPTIONS}" \
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

$(B)/tests/lsan.supp: FORCE
	@mkdir -p $(@D)
	$(file >$@,$(LSAN_SUPP))

$(B)/tests/ubsan.supp: FORCE
	@mkdir -p $(@D)
	$(file >$@,$(UBSAN_SUPP))

check: all $(VG_FILES) $(SAN_FILES)
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

# ---------------------------------------------------------------------------
# Programs users run. Scripts get the build directory in RSD_BUILD_DIR.
RUN_ENV		:= RSD_BUILD_DIR=$(abspath $(B)) O=$(B)

# The demo's workload, tools/demo/*.c, is linked into rsd-demo, into
# rsd-demo-mpi (the MPI side of it) and into rsd-bench (its policy cases). Program links name the library before
# EXTRA_LIBS, so the library follows the workload again for what it calls.
DEMO_SRCS	:= $(sort $(wildcard tools/demo/*.c))
DEMO_OBJS	:= $(DEMO_SRCS:%.c=$(B)/%.o)
DEMO_PROGS	:= $(filter $(B)/tools/rsd-demo $(B)/tools/rsd-demo-mpi $(B)/tools/rsd-bench,$(TOOL_PROGS))
$(DEMO_PROGS): $(DEMO_OBJS)
$(DEMO_PROGS): EXTRA_LIBS += $(DEMO_OBJS) $(LIBA)
-include $(DEMO_OBJS:.o=.d)

# RANKS=N: the demo as an MPI job of N ranks (tools/rsd-demo-mpi).
demo: lib tools
	$(Q)if [ -f tools/rsd-demo.sh ]; then \
		$(RUN_ENV) RSD_DEMO_RANKS=$(RANKS) bash tools/rsd-demo.sh $(DEMO_ARGS); \
	elif [ -x $(B)/tools/rsd-demo ]; then \
		$(RUN_ENV) $(B)/tools/rsd-demo $(DEMO_ARGS); \
	else echo 'demo: neither tools/rsd-demo.sh nor tools/rsd-demo.c exists'; exit 1; fi

bench: lib tools
	$(Q)if [ -x $(B)/tools/rsd-bench ]; then $(RUN_ENV) $(B)/tools/rsd-bench $(BENCH_ARGS); \
	else echo 'bench: tools/rsd-bench.c does not exist'; exit 1; fi

soak: lib tools
	$(Q)if [ -f tools/rsd-soak.sh ]; then $(RUN_ENV) bash tools/rsd-soak.sh $(SOAK_ARGS); \
	elif [ -x $(B)/tools/rsd-soak ]; then $(RUN_ENV) $(B)/tools/rsd-soak $(SOAK_ARGS); \
	else echo 'soak: no tools/rsd-soak.c or tools/rsd-soak.sh; nothing to run'; fi

# The multi-threaded linearizability check (tests/model/linearize.c), long.
soak-threads: lib tools
	$(Q)$(RUN_ENV) $(B)/tools/rsd-soak -T 0 $(SOAK_ARGS)

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

ifeq ($(FUZZ_SRCS),)
fuzz:
	@echo 'fuzz: no fuzz targets in tests/fuzz/*.c; skipping'
else ifeq ($(HAVE_CLANG),)
fuzz:
	@echo 'fuzz: $(CLANG) not found (tools/install-deps installs clang); skipping'
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
# Install (honors DESTDIR and PREFIX). Tests go to $(TESTSDIR) in the atf
# layout, so `kyua test -k $(TESTSDIR)/Kyuafile` runs the installed suite;
# tools/examples programs (and their sources) go to $(EXAMPLESDIR).
D		:= $(DESTDIR)
INSTALL_TESTS	:= $(patsubst $(B)/tests/%,%,$(TEST_FILES))

install: lib tools tests
	$(if $(filter sim,$(CUDA)),$(error make install: a CUDA=sim build runs on the test-only CUDA runtime double; install a CUDA=0 or CUDA=1 build))
	$(call msg,INSTALL,$(D)$(PREFIX))
	$(Q)$(INSTALL) -d $(D)$(LIBDIR) $(D)$(PKGCONFIGDIR) $(D)$(INCLUDEDIR)/rsd $(D)$(BINDIR) \
		$(D)$(TESTSDIR)
	$(Q)$(INSTALL) -m 644 $(LIBA) $(D)$(LIBDIR)/
	$(Q)$(INSTALL) -m 755 $(LIBSO) $(D)$(LIBDIR)/
	$(Q)ln -sfn $(REALNAME) $(D)$(LIBDIR)/$(SONAME)
	$(Q)ln -sfn $(SONAME) $(D)$(LIBDIR)/librsd.so
	$(Q)$(INSTALL) -m 644 $(PCFILE) $(D)$(PKGCONFIGDIR)/
	$(Q)$(INSTALL) -m 644 $(sort $(wildcard include/rsd/*.h)) $(D)$(INCLUDEDIR)/rsd/
	$(Q)$(if $(BIN_TOOLS)$(TOOL_SCRIPTS),$(INSTALL) -m 755 $(BIN_TOOLS) $(TOOL_SCRIPTS) $(D)$(BINDIR)/)
	$(Q)$(if $(EXAMPLE_PROGS),$(INSTALL) -d $(D)$(EXAMPLESDIR) && \
		$(INSTALL) -m 755 $(EXAMPLE_PROGS) $(D)$(EXAMPLESDIR)/ && \
		$(INSTALL) -m 644 $(EXAMPLE_SRCS) $(D)$(EXAMPLESDIR)/)
	$(Q)for f in $(INSTALL_TESTS); do \
		if [ -x $(B)/tests/$$f ]; then m=755; else m=644; fi; \
		$(INSTALL) -D -m $$m $(B)/tests/$$f $(D)$(TESTSDIR)/$$f || exit 1; \
	done

uninstall:
	$(call msg,RM,$(D)$(PREFIX))
	$(Q)rm -f $(D)$(LIBDIR)/librsd.a $(D)$(LIBDIR)/$(REALNAME) $(D)$(LIBDIR)/$(SONAME) \
		$(D)$(LIBDIR)/librsd.so $(D)$(PKGCONFIGDIR)/librsd.pc \
		$(addprefix $(D)$(BINDIR)/,$(notdir $(BIN_TOOLS) $(TOOL_SCRIPTS)))
	$(Q)rm -rf $(D)$(INCLUDEDIR)/rsd $(D)$(TESTSDIR) $(D)$(EXAMPLESDIR)

# ---------------------------------------------------------------------------
# Man pages: tools/kdoc2man.py writes the section-3 pages from the kernel-doc
# comments of include/rsd/*.h (one page per DOC: group, a .so link page for
# every name in it) and copies Documentation/man/*.[1-9] (librsd(7) and the
# tools' pages) with their page table and SEE ALSO filled in. A header or
# page added later is picked up by the wildcards. `make install` installs
# them under $(MANDIR); tests/doc checks them.
MANDIR		?= $(PREFIX)/share/man
MAN_HEADERS	:= $(sort $(wildcard include/rsd/*.h))
MAN_SRCS	:= $(sort $(wildcard Documentation/man/*.[1-9]))
MAN_STAMP	:= $(B)/man/.stamp
PYTHON3		?= python3

.PHONY: man install-man uninstall-man
man: $(MAN_STAMP)
check: man

$(MAN_STAMP): tools/kdoc2man.py $(MAN_HEADERS) $(MAN_SRCS)
	$(call msg,MAN,$(B)/man)
	$(Q)rm -rf $(B)/man && mkdir -p $(B)/man
	$(Q)$(PYTHON3) tools/kdoc2man.py -o $(B)/man --version $(VERSION) --pages Documentation/man \
		$(MAN_HEADERS)
	$(Q)touch $@

install: install-man
install-man: $(MAN_STAMP)
	$(Q)for d in $(B)/man/man[1-9]; do \
		$(INSTALL) -d $(D)$(MANDIR)/$${d##*/} && \
		cp -P $$d/* $(D)$(MANDIR)/$${d##*/}/ || exit 1; \
	done
	$(Q)printf '%s\n' $$(cd $(B)/man && ls -d man[1-9]/*) >$(B)/man/installed.txt

uninstall: uninstall-man
uninstall-man:
	$(Q)if [ -f $(B)/man/installed.txt ]; then \
		while read -r f; do rm -f $(D)$(MANDIR)/$$f; done <$(B)/man/installed.txt; \
	else \
		rm -f $(D)$(MANDIR)/man7/librsd.7 $(D)$(MANDIR)/man1/rsd-*.1 \
			$(D)$(MANDIR)/man3/rsd_*.3 $(D)$(MANDIR)/man3/rsd.3 $(D)$(MANDIR)/man3/RSD_*.3; \
	fi

# ---------------------------------------------------------------------------
clean:
	$(call msg,CLEAN,$(B))
	$(Q)rm -rf -- $(B)

distclean:
	$(call msg,CLEAN,build build-san build-tsan build-cudasim build-cudasim-san build-cudasim-tsan)
	$(Q)rm -rf -- build build-san build-tsan build-cudasim build-cudasim-san build-cudasim-tsan \
		$(filter-out build build-san build-tsan build-cudasim build-cudasim-san \
		build-cudasim-tsan,$(B)) $(wildcard build-tsan-mut-*)

help:
	@echo 'librsd $(VERSION) build'
	@echo
	@echo 'Targets:'
	@echo '  all (default)  library, tools and tests'
	@echo '  lib tools tests  one part of all'
	@echo '  check          build, run the suite with kyua, print the report and'
	@echo '                 "N passed, N failed, N skipped"; fails when kyua test fails'
	@echo '  demo           run tools/rsd-demo.sh or tools/rsd-demo (DEMO_ARGS=..., RANKS=N: MPI job)'
	@echo '  bench          run tools/rsd-bench (BENCH_ARGS=...)'
	@echo '  soak           run tools/rsd-soak if there is one (SOAK_ARGS=...)'
	@echo '  soak-threads   rsd-soak -T 0: threads against the model (SOAK_ARGS=...)'
	@echo '  fuzz           build tests/fuzz/*.c with libFuzzer, run each FUZZ_SECONDS (60)'
	@echo '  lint           clang-tidy and cppcheck over lib/ and tools/'
	@echo '  tsan-mutations three TSan builds, each missing one RCU edge, must report'
	@echo '  install        into DESTDIR/PREFIX (/usr/local): lib, headers, librsd.pc,'
	@echo '                 tools in bin/, examples in share/rsd/examples/, tests in tests/rsd/'
	@echo '  man            man pages from the headers'"'"' kernel-doc into $(B)/man'
	@echo '  uninstall      remove what install put there'
	@echo '  clean          remove the build directory; distclean: every default one'
	@echo
	@echo 'Knobs:'
	@echo '  V=1            print full commands'
	@echo '  O=dir          build directory (now $(B))'
	@echo '  CUDA=0|1|sim   CUDA runtime driver (detected: $(CUDA)); sim: against the'
	@echo '                 test-only CUDA runtime double, default O build-cudasim'
	@echo '  TRACE=0|1      LTTng-UST tracepoints (detected: $(TRACE))'
	@echo '  SANITIZE=list  -fsanitize=list; default O becomes build-san (build-tsan'
	@echo '                 for thread, whose check counts ThreadSanitizer reports)'
	@echo '  VALGRIND=1     make check runs each atf-c program under valgrind'
	@echo '  LIB_EXCLUDE= TEST_EXCLUDE=  make patterns of sources to leave out'
	@echo '  CFLAGS CPPFLAGS LDFLAGS LDLIBS  appended to the built-in flags;'
	@echo '                 CFLAGS_<file>.o and LDLIBS_<program> for one file'
	@echo '  RSD_SKIP_DEPS=1  do not run tools/install-deps when dependencies are missing'

FORCE:
