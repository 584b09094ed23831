# SPDX-License-Identifier: MIT
#
# make all, lib, tools, tests: what is built and how. Sources are found by
# wildcard, so a new lib/<layer>/*.c, tests/<area>/t_*.c or tools/*.c is
# built without touching this file.

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
# tools/ holds the programs users run: C programs (tools/NAME.c, with their
# parts in tools/NAME/ or tools/bench/, tools/demo/) and executable scripts
# (tools/NAME). The scripts run in place and are copied to $(B)/tools/, so a
# test finds one at $(atf_get_srcdir)/../../tools/NAME in any build dir.
# tools/build/ holds the build and CI scripts (these makefiles,
# install-deps, kdoc2man.py, gpu-check, rsd-demo.sh, rsd-trace-bench), run
# from the source tree and never installed; tools/examples/ the example programs. Only tools with a
# man page (Documentation/man/NAME.1) are installed into BINDIR.
TOOL_SCRIPTS	:= $(sort $(shell find tools -maxdepth 1 -type f -perm -u+x ! -name '*.c' 2>/dev/null))
INSTALL_BIN	:= $(foreach t,$(BIN_TOOLS) $(TOOL_SCRIPTS),\
		     $(if $(wildcard Documentation/man/$(notdir $(t)).1),$(t)))

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
# (tools/build/install-deps installs it); only rsd-bench links it, never the library.
STARPU_PC	:= $(shell pkg-config --exists starpu-1.3 2>/dev/null && echo starpu-1.3)
ifneq ($(STARPU_PC),)
CFLAGS_rsd-bench.o += -DRSD_BENCH_STARPU=1 $(shell pkg-config --cflags $(STARPU_PC))
LDLIBS_rsd-bench += $(shell pkg-config --libs $(STARPU_PC))
endif

# ---------------------------------------------------------------------------
# Rebuild everything when the flags change: $(B)/.flags holds the last set
# and is rewritten (bumping its mtime) only when it differs.
FLAGS_SIG	:= $(CC) $(RSD_CPPFLAGS) $(RSD_CFLAGS) $(RSD_LDFLAGS) $(LIB_LDLIBS) $(VERSION)

$(B)/.flags: FORCE
	@mkdir -p $(@D)
	@if [ '$(call sq,$(FLAGS_SIG))' != "$$(cat $@ 2>/dev/null)" ]; then \
		if [ -f $@ ]; then echo '  FLAGS   changed: rebuilding $(B)'; fi; \
		printf '%s\n' '$(call sq,$(FLAGS_SIG))' >$@; \
	fi

# ---------------------------------------------------------------------------
# Top-level targets.
.PHONY: all lib tools tests FORCE

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
PC_LIBS		:= $(strip \
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
# The demo's workload, tools/demo/*.c, is linked into rsd-demo, into
# rsd-demo-mpi (the MPI side of it) and into rsd-bench (its policy cases).
# Program links name the library before EXTRA_LIBS, so the library follows
# the workload again for what it calls.
DEMO_SRCS	:= $(sort $(wildcard tools/demo/*.c))
DEMO_OBJS	:= $(DEMO_SRCS:%.c=$(B)/%.o)
DEMO_PROGS	:= $(filter $(B)/tools/rsd-demo $(B)/tools/rsd-demo-mpi $(B)/tools/rsd-bench,$(TOOL_PROGS))
$(DEMO_PROGS): $(DEMO_OBJS)
$(DEMO_PROGS): EXTRA_LIBS += $(DEMO_OBJS) $(LIBA)
-include $(DEMO_OBJS:.o=.d)
# tests/tools checks the demo's offline figures (the key-trace bounds).
$(B)/tests/tools/t_keytrace: $(DEMO_OBJS)
$(B)/tests/tools/t_keytrace: EXTRA_LIBS += $(DEMO_OBJS) $(LIBA)
