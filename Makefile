# minidc: plain GNU make. `make` builds the libraries and the CLI; `make check` runs the tests;
# `make demo` runs the main job; `make bench` the benchmarks. SANITIZE=1 builds with ASan+UBSan
# into build-san/. Every target first makes sure the Debian packages it needs are there.

MPICC   ?= mpicc.mpich
MPIEXEC ?= mpiexec.mpich
PREFIX  ?= /usr/local
SANITIZE ?= 0

ifeq ($(SANITIZE),1)
BUILD   ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD   ?= build
SANFLAGS =
endif

BLAS_INC := $(shell pkg-config --cflags openblas 2>/dev/null || pkg-config --cflags blas-openblas 2>/dev/null)
CFLAGS  ?= -O2
CFLAGS  += -std=c11 -D_GNU_SOURCE -g -fPIC -fopenmp -Wall -Wextra -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Werror -Iinclude $(BLAS_INC) $(SANFLAGS)
LDLIBS  = -lopenblas -lcjson -lm
LDFLAGS += -fopenmp $(SANFLAGS)

# interposer/ is libminidc_mpi.so's alone (an LD_PRELOAD library on top of libminidc.a).
LIB_DIRS := device collectives kernels ref datasets
LIB_SRC  := $(sort $(wildcard $(addsuffix /*.c,$(LIB_DIRS))))
IP_SRC   := $(sort $(wildcard interposer/*.c))
TOOL_SRC := $(sort $(wildcard tools/*.c))
TEST_SRC := $(sort $(wildcard tests/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
IP_OBJ   := $(IP_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HEADERS  := $(wildcard include/minidc/*.h)
INTERPOSER := $(if $(IP_SRC),$(BUILD)/libminidc_mpi.so)

.PHONY: all deps deps-check check check-long demo bench install clean
all: deps $(BUILD)/libminidc.a $(BUILD)/libminidc.so $(BUILD)/minidc $(INTERPOSER)

deps:
	@tools/deps.sh build
deps-check:
	@tools/deps.sh check

# -MMD: each object also depends on every header it includes (written to a .d file beside it).
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libminidc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libminidc.so: $(LIB_OBJ)
	$(MPICC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The interposer takes from the archive only the objects it uses (collectives, the device
# clock): a preloaded library must not bring OpenBLAS, cJSON or libgomp into the program,
# where they would start threads and could take over the program's own BLAS symbols.
$(BUILD)/libminidc_mpi.so: $(IP_OBJ) $(BUILD)/libminidc.a
	$(MPICC) -shared $(LDFLAGS) -o $@ $(IP_OBJ) $(BUILD)/libminidc.a -Wl,--as-needed $(LDLIBS)

$(BUILD)/minidc: $(TOOL_OBJ) $(BUILD)/libminidc.a
	$(MPICC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libminidc.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libminidc.a
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $< $(BUILD)/libminidc.a $(LDLIBS)

tests: all $(TESTS)

check: deps-check all $(TESTS)
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) SANITIZE=$(SANITIZE) tests/run.sh $(TESTS_ONLY)

# The longer sweep (.ci/run runs it after check): the mesh fuzzer's 40 cases up to 32 ranks.
check-long: deps-check all $(TESTS)
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) SANITIZE=$(SANITIZE) LISTS="tests/long/*.list" tests/run.sh

demo: all
	@tools/demo.sh $(BUILD) $(MPIEXEC)

bench: deps-check all $(BUILD)/tests/bench_interposer $(BUILD)/tests/bench_p2p $(BUILD)/tests/bench_after $(BUILD)/tests/bench_bare
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) tools/bench.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/include/minidc $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/minidc/*.h $(DESTDIR)$(PREFIX)/include/minidc/
	install -m 644 $(BUILD)/libminidc.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libminidc.so $(INTERPOSER) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/minidc $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' tools/minidc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/minidc.pc

clean:
	rm -rf build build-san

# kernels/: sqrtf compiles to the sqrtps instruction (correctly rounded like sqrtf; only errno is
# not set) so the AdamW loop vectorizes. Not fast-math: no rounding changes (kernels/internal.h).
$(BUILD)/obj/kernels/%.o: CFLAGS += -fno-math-errno

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/tests/*.d)
