# SPDX-License-Identifier: MIT
#
# Dependencies. `make deps` installs every Debian package the build, the
# tests and the tools use (tools/build/install-deps, as root or through
# sudo). Only the README's two commands, `make check` and `make demo`, do
# that set-up by themselves, on a machine that lacks liburcu, atf-c or
# kyua; any other goal that cannot build without liburcu stops and says to
# run `make deps`. Nothing is installed while the makefiles are read: the
# set-up is the recipe of $(B)/.deps, a makefile included for those two
# goals only when something is missing, so make runs it first and then
# reads every makefile again, detecting the features (TRACE, Open MPI,
# StarPU) with the packages in place. RSD_SKIP_DEPS=1 turns all this off.

DEPS_SETUP_GOALS := check demo
DEPS_FREE_GOALS	:= help clean distclean uninstall deps man
DEPS_GOALS	:= $(filter-out $(DEPS_FREE_GOALS),$(or $(MAKECMDGOALS),all))

.PHONY: deps
deps:
	$(Q)bash tools/build/install-deps

have_pc = $(shell command -v $(PKG_CONFIG) >/dev/null 2>&1 && \
		  $(PKG_CONFIG) --exists $(1) 2>/dev/null && echo y)

ifneq ($(DEPS_GOALS),)
ifneq ($(RSD_SKIP_DEPS),1)
ifneq ($(filter $(DEPS_SETUP_GOALS),$(DEPS_GOALS)),)
deps_ok := $(and $(call have_pc,liburcu-memb atf-c),$(shell command -v $(KYUA) 2>/dev/null))
ifeq ($(deps_ok),)
ifeq ($(MAKE_RESTARTS),)
$(info librsd: liburcu, atf-c or kyua missing: installing them first (tools/build/install-deps))
include $(B)/.deps
$(B)/.deps: FORCE
	@mkdir -p $(@D)
	$(Q)bash tools/build/install-deps
	@touch $@
else
$(error librsd: tools/build/install-deps ran, yet liburcu, atf-c or kyua is still missing)
endif
endif
else ifneq ($(call have_pc,liburcu-memb),y)
$(error librsd: liburcu is missing: run `make deps` (tools/build/install-deps, as root or through sudo), or `make check`, which installs what is missing)
endif
endif
endif
