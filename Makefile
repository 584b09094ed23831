# SPDX-License-Identifier: MIT
#
# librsd: the one build entry. Non-recursive: this file sets the version,
# the verbosity and the build directory, and includes one makefile per job
# from tools/build/: config, deps, build, bench (and demo), check, install
# (and man), lint, soak (and fuzz). `make help` lists the targets by job.
#
#   make [V=1] [O=builddir] [CUDA=0|1|sim] [TRACE=0|1] [SANITIZE=address,undefined]
#
# Outputs land in $(O) (default build/, build-san/ for a sanitized build,
# build-tsan/ for SANITIZE=thread, build-cudasim/ and build-cudasim-san/ for
# CUDA=sim, when O is not given), never in the source tree.

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

# Quote for a single-quoted shell word.
sq		= $(subst ','\'',$(1))

# ---------------------------------------------------------------------------
# The jobs. Order matters only for variables that later files read while
# they are parsed: config first, then what build defines.
include tools/build/config.mk
include tools/build/deps.mk
include tools/build/build.mk
include tools/build/bench.mk
include tools/build/check.mk
include tools/build/install.mk
include tools/build/lint.mk
include tools/build/soak.mk

# ---------------------------------------------------------------------------
.PHONY: clean distclean help
clean:
	$(call msg,CLEAN,$(B))
	$(Q)rm -rf -- $(B)

distclean:
	$(call msg,CLEAN,build build-san build-tsan build-cudasim build-cudasim-san build-cudasim-tsan)
	$(Q)rm -rf -- build build-san build-tsan build-cudasim build-cudasim-san build-cudasim-tsan \
		$(filter-out build build-san build-tsan build-cudasim build-cudasim-san \
		build-cudasim-tsan,$(B)) $(wildcard build-tsan-mut-*)

help:
	@echo 'librsd $(VERSION) build; targets by job (tools/build/<job>.mk):'
	@echo
	@echo 'Set-up (tools/build/deps.mk)'
	@echo '  deps           install the Debian packages build, tests and tools need'
	@echo '                 (tools/build/install-deps; make check and make demo do it'
	@echo '                 themselves when liburcu, atf-c or kyua is missing)'
	@echo 'Build (tools/build/build.mk)'
	@echo '  all (default)  library, tools and tests'
	@echo '  lib tools tests  one part of all'
	@echo 'Check (tools/build/check.mk)'
	@echo '  check          build, run the suite with kyua, print the report and'
	@echo '                 "N passed, N failed, N skipped"; fails when kyua test fails'
	@echo '                 (SANITIZE=list: sanitized build; VALGRIND=1: under valgrind)'
	@echo '  tsan-mutations three TSan builds, each missing one RCU edge, must report'
	@echo 'Demo and bench (tools/build/bench.mk)'
	@echo '  demo           run rsd-demo recorded with LTTng and summarized'
	@echo '                 (tools/build/rsd-demo.sh; DEMO_ARGS=..., RANKS=N: an MPI job)'
	@echo '  demo-report    make demo, then a PNG screenshot of its report page (chromium)'
	@echo '  bench          run rsd-bench: each figure beside its baseline (BENCH_ARGS=...)'
	@echo 'Install and man pages (tools/build/install.mk)'
	@echo '  install        into DESTDIR/PREFIX (/usr/local): lib, headers, librsd.pc,'
	@echo '                 tools with a man page in bin/, man pages, docs in'
	@echo '                 share/doc/librsd/, examples and librsd.supp in share/rsd/,'
	@echo '                 tests in tests/rsd/'
	@echo '  uninstall      remove what install put there'
	@echo '  man            man pages from the headers'"'"' kernel-doc into $(B)/man'
	@echo 'Lint (tools/build/lint.mk)'
	@echo '  lint           clang-tidy and cppcheck over lib/ and tools/'
	@echo 'Fuzz and soak (tools/build/soak.mk)'
	@echo '  soak           rsd-soak: random operations against the model (SOAK_ARGS=...)'
	@echo '  soak-threads   rsd-soak -T 0: threads against the model, in commit order'
	@echo '  soak-hostile   rsd-soak -H: 4-8 threads, not-waiting calls, GPU leases,'
	@echo '                 faults at random (HOSTILE_FAULTS=, HOSTILE_CHECKS= lists)'
	@echo '  fuzz           build tests/fuzz/*.c with libFuzzer, run each FUZZ_SECONDS (60)'
	@echo 'Clean (Makefile)'
	@echo '  clean          remove the build directory; distclean: every default one'
	@echo '  help           this list'
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
	@echo '  PREFIX DESTDIR BINDIR LIBDIR INCLUDEDIR MANDIR DOCDIR  the install layout'
	@echo '  RSD_SKIP_DEPS=1  never install or check dependencies'

FORCE:
