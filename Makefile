# minidc: plain GNU make. `make` builds the libraries and the CLI; `make check` runs the tests;
# `make demo` runs the main job; `make bench` the benchmarks. SANITIZE=1 builds with ASan+UBSan
# into build-san/. Every target first makes sure the Debian packages it needs are there.

# macOS (docs/README.md, "Platforms"): Homebrew's MPICH (its wrappers have the plain names:
# give them as MPICC and MPIEXEC), OpenBLAS and libomp (under their own prefixes) and cJSON,
# with Apple clang, which takes OpenMP only as -Xpreprocessor -fopenmp plus libomp. Each is a
# variable; on Linux they keep their defaults.
ifeq ($(shell uname -s),Darwin)
BREW        ?= $(shell brew --prefix 2>/dev/null)
OMP_CFLAGS  ?= -Xpreprocessor -fopenmp -I$(BREW)/opt/libomp/include
OMP_LDFLAGS ?= -L$(BREW)/opt/libomp/lib -lomp
DEP_CFLAGS  ?= -I$(BREW)/opt/openblas/include -I$(BREW)/include
DEP_LDFLAGS ?= -L$(BREW)/opt/openblas/lib -L$(BREW)/lib
AS_NEEDED   ?= -Wl,-dead_strip_dylibs
endif

# The compiler behind mpicc.mpich: gcc, or `make MPICH_CC=clang` (MPICH's wrapper reads
# MPICH_CC; the build then goes to build-clang/). OPT sets the optimization (-O0, -O2,
# "-O3 -march=native"); exact mode's bits are the same with every choice (docs/exactness.md).
MPICC   ?= mpicc.mpich
MPIEXEC ?= mpiexec.mpich
PREFIX  ?= /usr/local
SANITIZE ?= 0
PORTABLE ?= 0

OPT     ?= -O2
# PORTABLE=1: device/platform.c's POSIX fallback (what macOS builds: polling doorbells,
# no "stopped" state) on Linux, into build-portable/ (-clang with MPICH_CC=clang), for the tests.
ifeq ($(PORTABLE),1)
BUILD   ?= build-portable$(if $(filter clang,$(MPICH_CC)),-clang)
PORT_CFLAGS = -DMDC_PORTABLE
endif
ifeq ($(MPICH_CC),clang)
export MPICH_CC
BUILD   ?= build-clang
endif
ifeq ($(SANITIZE),1)
BUILD   ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD   ?= build
SANFLAGS =
endif

BLAS_INC := $(shell pkg-config --cflags openblas 2>/dev/null || pkg-config --cflags blas-openblas 2>/dev/null)
IS_CLANG := $(shell $(if $(MPICH_CC),MPICH_CC=$(MPICH_CC)) $(MPICC) --version 2>/dev/null | grep -qi clang && echo 1)
# -ffp-contract=off: no fused multiply-add unless the source asks for one (clang contracts by
# default; gcc does in its GNU modes), so every compiler and ISA rounds the same operations.
# OMP_CFLAGS / OMP_LDFLAGS: OpenMP's flags; DEP_CFLAGS / DEP_LDFLAGS: include and library
# directories the compiler does not search itself; AS_NEEDED: the linker's "only the libraries
# used" (GNU ld's spelling). macOS's values are above.
OMP_CFLAGS  ?= -fopenmp
OMP_LDFLAGS ?= -fopenmp
AS_NEEDED   ?= -Wl,--as-needed
MDC_CFLAGS = $(OPT) -std=c11 -D_GNU_SOURCE -g -fPIC $(OMP_CFLAGS) -ffp-contract=off -Wall -Wextra -Wshadow \
           -Wstrict-prototypes -Wmissing-prototypes -Werror -Iinclude $(BLAS_INC) $(DEP_CFLAGS) $(PORT_CFLAGS) \
           $(SANFLAGS) $(CFLAGS)
LDLIBS  = -lopenblas -lcjson -lm
LDFLAGS += $(OMP_LDFLAGS) $(DEP_LDFLAGS) $(SANFLAGS)

# interposer/ is libminidc_mpi.so's alone (an LD_PRELOAD library on top of libminidc.a).
LIB_DIRS := device collectives numerics kernels datasets
# ref/ is a tree (model/, parallel/<scheme>/, train/): its sources at every depth
LIB_SRC  := $(sort $(wildcard $(addsuffix /*.c,$(LIB_DIRS))) $(shell find ref -name '*.c'))
IP_SRC   := $(sort $(wildcard interposer/*.c))
TOOL_SRC := $(sort $(wildcard tools/*.c))
# tests/<kind>/: the C tests and benchmarks build flat into $(BUILD)/tests/
TEST_DIRS := unit mesh interposer bench
TEST_SRC := $(sort $(wildcard $(addprefix tests/,$(addsuffix /*.c,$(TEST_DIRS)))))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
IP_OBJ   := $(IP_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(addprefix $(BUILD)/tests/,$(notdir $(TEST_SRC:.c=)))
HEADERS  := $(wildcard include/minidc/*.h)
INTERPOSER := $(if $(IP_SRC),$(BUILD)/libminidc_mpi.so)

.PHONY: all deps deps-check check check-long check-aarch64 demo bench install clean lab
all: deps $(BUILD)/libminidc.a $(BUILD)/libminidc.so $(BUILD)/minidc $(INTERPOSER)

deps:
	@tools/deps.sh build
deps-check: deps
	@tools/deps.sh check

# -MMD: each object also depends on every header it includes (written to a .d file beside it).
# Order-only on deps: under make -j nothing compiles before the packages are there.
$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(MPICC) $(MDC_CFLAGS) $(FILE_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libminidc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libminidc.so: $(LIB_OBJ)
	$(MPICC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The interposer takes from the archive only the objects it uses (collectives, the device
# clock): a preloaded library must not bring OpenBLAS, cJSON or libgomp into the program,
# where they would start threads and could take over the program's own BLAS symbols.
$(BUILD)/libminidc_mpi.so: $(IP_OBJ) $(BUILD)/libminidc.a
	$(MPICC) -shared $(LDFLAGS) -o $@ $(IP_OBJ) $(BUILD)/libminidc.a $(AS_NEEDED) $(LDLIBS)

$(BUILD)/minidc: $(TOOL_OBJ) $(BUILD)/libminidc.a
	$(MPICC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libminidc.a $(LDLIBS)

define test_rule
$(BUILD)/tests/%: tests/$(1)/%.c $(BUILD)/libminidc.a | deps
	@mkdir -p $$(dir $$@) $$(BUILD)/tests/deps/$(1)
	$$(MPICC) $$(MDC_CFLAGS) -Itests -MMD -MP -MF $$(BUILD)/tests/deps/$(1)/$$*.d $$(LDFLAGS) -o $$@ $$< $$(BUILD)/libminidc.a $$(LDLIBS)
endef
$(foreach d,$(TEST_DIRS),$(eval $(call test_rule,$(d))))

tests: all $(TEST_BIN)

# The tests are tests/manifest's lines. `make check TESTS=name` runs only the tests whose name
# matches (a grep pattern: 'test_tp\|tp_cli'); `make check KIND=unit` one kind (unit, mesh, cli,
# interposer, xcheck, docs; a comma list for several); CASE='pattern' only the scenarios of the
# scripts whose label matches (tests/cli/scenario.sh).
TESTS ?=
CASE  ?=
KIND  ?=
check: deps-check all $(TEST_BIN)
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) SANITIZE=$(SANITIZE) PORTABLE=$(PORTABLE) KINDS='$(KIND)' CASE='$(CASE)' tests/run.sh '$(TESTS)'

# The longer sweep (.ci/run runs it after check): the mesh fuzzer's 40 cases up to 32 ranks.
check-long: deps-check all $(TEST_BIN)
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) SANITIZE=$(SANITIZE) PORTABLE=$(PORTABLE) MANIFEST=tests/long/manifest tests/run.sh

# The course's labs (docs/course/): `make lab N=1` builds lab 1's grader (labs/graders/lab1.c) with the
# student's file (labs/lab1_*.c, or LAB_SRC=path) and minidc's library into $(BUILD)/labs/lab1, then
# grades it at several rank counts (labs/grade.sh). The student's file is compiled with warnings
# but without -Werror.
N       ?=
LAB_SRC ?= $(wildcard labs/lab$(N)_*.c)
LAB_CFLAGS = $(filter-out -Werror -Wmissing-prototypes -Wstrict-prototypes,$(MDC_CFLAGS)) -Ilabs -Ilabs/graders
lab: deps-check $(BUILD)/libminidc.a
	@test -n "$(N)" -a -f "labs/graders/lab$(N).c" || { echo "make lab N=<lab>: the labs are" $(patsubst labs/graders/lab%.c,%,$(wildcard labs/graders/lab[0-9]*.c)); exit 2; }
	@test -n "$(LAB_SRC)" -a -z "$(word 2,$(LAB_SRC))" || { echo "lab $(N): no single student file (labs/lab$(N)_*.c; LAB_SRC=path)"; exit 2; }
	@mkdir -p $(BUILD)/labs
	$(MPICC) $(LAB_CFLAGS) $(LDFLAGS) -o $(BUILD)/labs/lab$(N) labs/graders/lab$(N).c labs/graders/grade.c $(LAB_SRC) $(BUILD)/libminidc.a $(LDLIBS)
	@MPIEXEC=$(MPIEXEC) labs/grade.sh $(N) $(BUILD)/labs/lab$(N) $(LAB_SRC)

# Cross-builds for aarch64 into build-aarch64/ (the rules above, aarch64-linux-gnu-gcc and an
# arm64 sysroot), runs tests under qemu, and checks exact mode saves this build's bytes.
check-aarch64: all
	@MAKE="$(MAKE)" NATIVE=$(BUILD) MPIEXEC=$(MPIEXEC) tools/check_aarch64.sh

demo: all
	@tools/demo.sh $(BUILD) $(MPIEXEC)

bench: deps-check all $(BUILD)/tests/bench_spin $(BUILD)/tests/bench_interposer $(BUILD)/tests/bench_p2p $(BUILD)/tests/bench_after $(BUILD)/tests/bench_bare
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) tools/bench.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/include/minidc $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/minidc/*.h $(DESTDIR)$(PREFIX)/include/minidc/
	install -m 644 $(BUILD)/libminidc.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libminidc.so $(INTERPOSER) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/minidc $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' tools/minidc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/minidc.pc

clean:
	rm -rf build build-san build-clang build-portable build-aarch64

# kernels/: sqrtf compiles to the sqrtps instruction (correctly rounded like sqrtf; only errno is
# not set) so the AdamW loop vectorizes; no-trapping-math lets gcc if-convert and vectorize
# loops with comparisons; gcc's -O3 cost model (dynamic) allows runtime alias checks and
# epilogues. Not fast-math: none of these changes a rounding (kernels/internal.h).
KERNEL_CFLAGS := -fno-math-errno -fno-trapping-math $(if $(IS_CLANG),,-fvect-cost-model=dynamic)
$(BUILD)/obj/kernels/%.o: FILE_CFLAGS = $(KERNEL_CFLAGS)
# The element-wise reductions and exact sums: -O3's vectorizer (exact for element-wise IEEE
# operations and integer limbs), unless the build asked for -O0.
HOT_OBJ := $(addprefix $(BUILD)/obj/numerics/,exact.o exact_sum.o) $(BUILD)/obj/collectives/reduce_op.o
$(HOT_OBJ): FILE_CFLAGS = $(if $(filter -O0,$(OPT)),,-O3)

-include $(LIB_OBJ:.o=.d) $(IP_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(wildcard $(BUILD)/tests/deps/*/*.d)
