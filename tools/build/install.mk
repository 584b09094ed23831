# SPDX-License-Identifier: MIT
#
# make install and uninstall (DESTDIR, PREFIX), and the man pages (make man,
# built from the headers' kernel-doc).

# ---------------------------------------------------------------------------
# Install (honors DESTDIR and PREFIX). Tests go to $(TESTSDIR) in the atf
# layout, so `kyua test -k $(TESTSDIR)/Kyuafile` runs the installed suite;
# tools/examples programs (and their sources) go to $(EXAMPLESDIR).
D		:= $(DESTDIR)
INSTALL_TESTS	:= $(patsubst $(B)/tests/%,%,$(TEST_FILES))

# The documentation a user reads (the man pages cite it by this path).
DOC_FILES	:= $(sort $(wildcard Documentation/*.md))

.PHONY: install uninstall
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
	$(Q)$(INSTALL) -m 755 $(INSTALL_BIN) $(D)$(BINDIR)/
	$(Q)$(if $(EXAMPLE_PROGS),$(INSTALL) -d $(D)$(EXAMPLESDIR) && \
		$(INSTALL) -m 755 $(EXAMPLE_PROGS) $(D)$(EXAMPLESDIR)/ && \
		$(INSTALL) -m 644 $(EXAMPLE_SRCS) $(D)$(EXAMPLESDIR)/)
	$(Q)for f in $(INSTALL_TESTS); do \
		if [ -x $(B)/tests/$$f ]; then m=755; else m=644; fi; \
		$(INSTALL) -D -m $$m $(B)/tests/$$f $(D)$(TESTSDIR)/$$f || exit 1; \
	done
	$(Q)$(INSTALL) -d $(D)$(DOCDIR) $(D)$(DATADIR)
	$(Q)$(INSTALL) -m 644 $(DOC_FILES) $(D)$(DOCDIR)/
	$(Q)$(INSTALL) -m 644 tests/supp/librsd.supp $(D)$(DATADIR)/
	@echo '  librsd is in $(PREFIX); build a program against it with'
	@echo '    cc prog.c $$(PKG_CONFIG_PATH=$(PKGCONFIGDIR) pkg-config --cflags --libs librsd)'
	@echo '  (librsd.pc puts $(LIBDIR) in the program'"'"'s run path: it runs as built)'

uninstall:
	$(call msg,RM,$(D)$(PREFIX))
	$(Q)rm -f $(D)$(LIBDIR)/librsd.a $(D)$(LIBDIR)/$(REALNAME) $(D)$(LIBDIR)/$(SONAME) \
		$(D)$(LIBDIR)/librsd.so $(D)$(PKGCONFIGDIR)/librsd.pc \
		$(addprefix $(D)$(BINDIR)/,$(notdir $(INSTALL_BIN)))
	$(Q)rm -rf $(D)$(INCLUDEDIR)/rsd $(D)$(TESTSDIR) $(D)$(EXAMPLESDIR) $(D)$(DOCDIR)
	$(Q)rm -f $(D)$(DATADIR)/librsd.supp

# ---------------------------------------------------------------------------
# Man pages: tools/build/kdoc2man.py writes the section-3 pages from the kernel-doc
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

# The pages name the installed documentation, $(DOCDIR): rebuilt when it
# changes ($(B)/man.docdir holds the last one).
$(B)/man.docdir: FORCE
	@mkdir -p $(@D)
	@if [ '$(call sq,$(DOCDIR))' != "$$(cat $@ 2>/dev/null)" ]; then \
		printf '%s\n' '$(call sq,$(DOCDIR))' >$@; fi

$(MAN_STAMP): tools/build/kdoc2man.py $(MAN_HEADERS) $(MAN_SRCS) $(B)/man.docdir
	$(call msg,MAN,$(B)/man)
	$(Q)rm -rf $(B)/man && mkdir -p $(B)/man
	$(Q)$(PYTHON3) tools/build/kdoc2man.py -o $(B)/man --version $(VERSION) --pages Documentation/man \
		--docdir '$(call sq,$(DOCDIR))' $(MAN_HEADERS)
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
