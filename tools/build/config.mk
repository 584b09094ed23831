# SPDX-License-Identifier: MIT
#
# Build configuration, read by every job: the toolchain and install layout,
# the features (CUDA, TRACE) detected once, the external libraries'
# flags through pkg-config, and the compiler and linker flags.

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
DATADIR		?= $(PREFIX)/share/rsd
EXAMPLESDIR	?= $(DATADIR)/examples
DOCDIR		?= $(PREFIX)/share/doc/librsd

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

# liburcu, memb flavor, and atf-c: through pkg-config (mk/deps.mk makes
# sure they are there).
URCU_PC		:= liburcu-memb
URCU_CFLAGS	:= $(call pc_cflags,$(URCU_PC))
URCU_LIBS	:= $(call pc_libs,$(URCU_PC))

ATF_CFLAGS	:= $(call pc_cflags,atf-c)
ATF_LIBS	:= $(call pc_libs,atf-c)

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
LTTNG_LIBS	:= $(call pc_libs,lttng-ust)
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
# made recoverable so tests/supp/ubsan.supp can name that one site; with
# halt_on_error=1 any other misaligned access still stops the test.
SAN_ALIGN_FIX	:= $(if $(and $(filter 1,$(TRACE)),$(filter undefined alignment,$(subst $(comma), ,$(SANITIZE)))),y)
SAN_FLAGS	+= $(if $(SAN_ALIGN_FIX),-fsanitize-recover=alignment)

# NVTX ranges (lib/nvtx.h): CUDA builds whose toolkit has the header-only
# NVTX 3.
NVTX		:= $(if $(and $(filter-out 0,$(CUDA)),$(wildcard $(CUDA_HOME)/include/nvtx3/nvToolsExt.h)),1,0)
RSD_CPPFLAGS	:= -D_GNU_SOURCE -Iinclude -Ilib -I. \
		   -DRSD_HAVE_CUDA=$(if $(filter 0,$(CUDA)),0,1) -DRSD_TRACE=$(TRACE) -DRSD_NVTX=$(NVTX) \
		   $(URCU_CFLAGS) $(CUDA_CPPFLAGS) $(LTTNG_CFLAGS) $(CPPFLAGS)
RSD_CFLAGS	:= -std=c11 -Wall -Wextra -Werror -O2 -g -fPIC -pthread \
		   $(SAN_FLAGS) $(CFLAGS)
RSD_LDFLAGS	:= -pthread $(SAN_FLAGS) $(LDFLAGS)
LIB_LDLIBS	:= $(URCU_LIBS) $(LTTNG_LIBS) $(CUDA_LIBS) -pthread
# A sanitized shared library leaves the runtime's symbols to the executable.
NOUNDEF		:= $(if $(strip $(SANITIZE)),,-Wl,--no-undefined)
