# attn.h - build, test, bench. `make test` is what CI runs.
CC      ?= gcc
CXX     ?= g++
WARN    := -std=c99 -pedantic -Wall -Wextra -Werror
OPT     ?= -O2
LDLIBS  := -lm
B       := build
TEST_SRC := tests/test_main.c
TEST_DEPS := attn.h $(wildcard tests/*.h tests/*.c)

# Each configuration of the suite: name and flags. No -march anywhere: the AVX2/AVX-512 paths
# are compiled in through target regions and chosen at run time. The openmp configuration also
# puts decode's logits on the (emulated) tiles for every query dtype (ATTN_DECODE_TILES).
CONFIGS := default openmp nosimd sanitize
FLAGS_default  := $(OPT)
FLAGS_openmp   := $(OPT) -fopenmp -DATTN_TEST_DECODE_TILES_ALL
FLAGS_nosimd   := $(OPT) -DATTN_NO_SIMD
FLAGS_sanitize := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

# The oneDNN engine (ATTN_USE_ONEDNN): built and tested whenever oneDNN's header is installed
# (CI installs libdnnl-dev, so CI always runs it); ATTN_ONEDNN=0 or 1 overrides the detection.
ATTN_ONEDNN ?= $(shell printf '\043include <oneapi/dnnl/dnnl.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(ATTN_ONEDNN),1)
CONFIGS += onednn onednn_sanitize
FLAGS_onednn := $(OPT) -fopenmp -DATTN_USE_ONEDNN
LIBS_onednn  := -ldnnl
FLAGS_onednn_sanitize := $(FLAGS_sanitize) -fopenmp -DATTN_USE_ONEDNN
LIBS_onednn_sanitize  := -ldnnl
endif

# The NEON pass, cross-built for aarch64 and run under qemu-user, when both tools are on PATH
# (.ci/run installs them; tests/run_all.sh prints "skipped" without them). Static, so qemu needs
# no aarch64 sysroot at run time.
AARCH64_CC ?= aarch64-linux-gnu-gcc
QEMU_AARCH64 ?= qemu-aarch64
ifneq ($(shell command -v $(AARCH64_CC) 2>/dev/null),)
ifneq ($(shell command -v $(QEMU_AARCH64) 2>/dev/null),)
NEON_TEST := $(B)/test_neon
endif
endif
$(B)/test_neon: $(TEST_DEPS) | $(B)
	$(AARCH64_CC) $(WARN) $(OPT) -I. $(TEST_SRC) -o $@ -static $(LDLIBS)

# The whole suite built by clang too (its target attributes and intrinsics differ from gcc's),
# when clang is on PATH (.ci/run installs it).
ifneq ($(shell command -v clang 2>/dev/null),)
CONFIGS += clang
CC_clang    := clang
FLAGS_clang := $(OPT)
endif

.PHONY: all run test test-builds sanitize bench bench-kv-accuracy bench-onednn bench-decode-tiles bench-ggml examples clean \
        compile-checks bitwise compile-time install uninstall fuzz fuzz-seeds stress valgrind
all: $(B)/test_default $(B)/quickstart $(B)/ex_llama

$(B):
	@mkdir -p $(B)

$(B)/test_%: $(TEST_DEPS) | $(B)
	$(or $(CC_$*),$(CC)) $(WARN) $(FLAGS_$*) -I. $(TEST_SRC) -o $@ $(LDLIBS) $(LIBS_$*)

$(B)/quickstart: examples/quickstart.c attn.h | $(B)
	$(CC) $(WARN) $(OPT) -I. $< -o $@ $(LDLIBS)

# `make run`: a generated checkpoint (dim 512, 6 layers, 8 heads / 2 KV heads, vocab 4096, with
# its toy tokenizer) served by the llama runner: six prompts arriving over the first steps,
# prefill in chunks of 32 tokens, two samples of each prompt (forks), then the text and the
# throughput. It says what it builds, that the weights are random, and the ISA, threads and KV
# dtype it ran with. RUN_FLAGS adds runner options (e.g. RUN_FLAGS="--kv-dtype bf16 --threads 1").
# OpenMP's waiting threads spin 100,000 rounds (GOMP_SPINCOUNT; GNU's default 300,000) before they
# sleep, unless the environment sets GOMP_SPINCOUNT or OMP_WAIT_POLICY: the gaps between a small
# model's many short parallel regions pass without a wake-up (a passive policy's woken thread
# cost 2 threads their gain on idle cores), and a thread that waits longer sleeps.
RUN_FLAGS ?=
$(B)/model.bin: $(B)/ex_make_checkpoint
	$(B)/ex_make_checkpoint -o $@ -z $(B)/tokenizer.bin
run:
	@$(MAKE) --no-print-directory -q $(B)/ex_llama $(B)/model.bin 2>/dev/null || \
	  echo "building the runner (examples/llama.c) and a checkpoint: about 20 s of one core, once"
	@$(MAKE) --no-print-directory -s $(B)/ex_llama $(B)/model.bin
	@echo "$(B)/model.bin has RANDOM weights (examples/make_checkpoint.c): the text is noise;" \
	  "what counts is the serving loop and the timing lines at the end"
	[ -n "$${OMP_WAIT_POLICY}$${GOMP_SPINCOUNT}" ] || export GOMP_SPINCOUNT=100000; \
	  $(B)/ex_llama $(B)/model.bin -z $(B)/tokenizer.bin -m 48 -n 2 --chunk 32 --temp 0.8 \
	  --system "You are a storyteller for children." \
	  --arrive 0,0,2,4,6,8 -p "Once upon a time" -p "The little dog ran to the park" \
	  -p "In the morning the sun was warm and the birds sang in the tall trees" \
	  -p "She said hello" -p "A cat sat on the mat" -p "The king had three sons" $(RUN_FLAGS)

EXAMPLES := $(patsubst examples/%.c,$(B)/ex_%,$(wildcard examples/*.c))
$(B)/ex_%: examples/%.c attn.h | $(B)
	$(CC) $(WARN) $(OPT) -fopenmp -I. $< -o $@ $(LDLIBS)
examples: $(EXAMPLES)
# The vendored-build example as its comment builds it: -Os, no OpenMP; and cross-built for
# aarch64 where the NEON suite is (run under qemu by tests/run_all.sh).
$(B)/ex_embedded: examples/embedded.c attn.h | $(B)
	$(CC) $(WARN) -Os -I. $< -o $@ $(LDLIBS)
ifneq ($(NEON_TEST),)
EMBEDDED_AARCH64 := $(B)/embedded_aarch64
endif
$(B)/embedded_aarch64: examples/embedded.c attn.h | $(B)
	$(AARCH64_CC) $(WARN) -Os -static -I. $< -o $@ $(LDLIBS)

# The runner tensor-parallel over MPI (examples/llama.c -DLLAMA_MPI; `mpirun -np N $(B)/llama_mpi
# model.bin ...`, see the README), built for tests/llama_mpi_check.sh whenever mpicc is on PATH
# (.ci/run installs Open MPI); without it the test says "skipped".
MPICC ?= mpicc
ifneq ($(shell command -v $(MPICC) 2>/dev/null),)
MPI_RUNNER := $(B)/llama_mpi
endif
$(B)/llama_mpi: examples/llama.c attn.h | $(B)
	$(MPICC) $(WARN) $(OPT) -fopenmp -DLLAMA_MPI -I. $< -o $@ $(LDLIBS)

# Compile checks: the header as users will build it (C++, strict C99, declarations-only unit
# linked with an implementation unit, ATTN_STATIC in two units).
compile-checks: | $(B)
	@sh tests/compile_checks.sh "$(CC)" "$(CXX)" $(B)

# Seconds (user + system) and peak memory of the implementation unit, gcc and clang at -O0 and
# -O2; fails over 1 GB (MAX_MB) or, when set, MAX_SECS. Not part of `make test` (about a minute
# of one core). ATTN_CT_FLAGS="-DATTN_NO_AVX512" measures a configuration.
compile-time: | $(B)
	@sh tests/compile_time.sh $(B) $(CC) $(if $(filter-out clang,$(CC)),$(if $(shell command -v clang 2>/dev/null),clang))

# Runs every configuration (and the examples), prints each one's results and, last, the sum.
# The builds run JOBS at a time (all cores: each is one compiler process), then the suites run
# one after another.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
TEST_BUILDS := $(addprefix $(B)/test_,$(CONFIGS)) $(EXAMPLES) $(NEON_TEST) $(EMBEDDED_AARCH64) \
               $(MPI_RUNNER)
test-builds: $(TEST_BUILDS)
test:
	@$(MAKE) --no-print-directory -j$(JOBS) test-builds
	@QEMU_AARCH64="$(if $(NEON_TEST),$(QEMU_AARCH64))" \
	  SKIP_CONFIGS="$(if $(filter 1,$(ATTN_ONEDNN)),,onednn onednn_sanitize)" \
	  SKIP_WHY="no <oneapi/dnnl/dnnl.h>; apt-get install libdnnl-dev" \
	  sh tests/run_all.sh $(B) "$(CC)" "$(CXX)" $(CONFIGS)

# Every kernel's output bits against those of revision BASE (tests/bitwise.sh; not part of test).
BASE ?= 4c678e4
bitwise:
	@$(if $(filter default,$(origin CC)),,CC="$(CC)") sh tests/bitwise.sh $(BASE)

sanitize: $(B)/test_sanitize
	./$(B)/test_sanitize

# Fuzzing with libFuzzer (clang; Debian: libclang-rt-14-dev): `make fuzz` runs each harness of
# tests/fuzz/ for FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/NAME; new inputs go to
# $(B)/fuzz-work, not to the repository) and fails on a crash or a broken invariant. The library
# is compiled once with the harnesses' instrumentation and linked into each, at -O0: at -O1,
# where the kernels' helpers are forced inline, clang 14 spends over 7 minutes and 2 GB on it
# with ASan and coverage (at -O0: 4 s).
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SEED ?=
FUZZ_FLAGS := -std=c99 -Wall -Wextra -Werror -g -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_IMPL_OPT ?= -O0
FUZZERS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
$(B)/fuzz_impl.o: tests/fuzz/impl.c attn.h | $(B)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(FUZZ_IMPL_OPT) -fsanitize=fuzzer-no-link -c $< -o $@
$(B)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/ref.h attn.h $(B)/fuzz_impl.o
	$(FUZZ_CC) $(FUZZ_FLAGS) -O1 -fsanitize=fuzzer -I. $< $(B)/fuzz_impl.o -o $@ -lm
fuzz: $(addprefix $(B)/,$(FUZZERS))
	@FUZZ_SEED=$(FUZZ_SEED) sh tests/fuzz/run.sh $(B) $(FUZZ_SECONDS) $(FUZZERS)
# Remakes the seed corpora from a run of FUZZ_SECONDS each (tests/fuzz/seed.sh); commit the result.
fuzz-seeds: $(addprefix $(B)/,$(FUZZERS))
	@sh tests/fuzz/seed.sh $(B) $(FUZZ_SECONDS) $(FUZZERS)

# memcheck (valgrind) over the examples and a reduced suite (the tests whose names contain one of
# VALGRIND_TESTS): zero errors, or the target fails. The suite is built without OpenMP and
# sanitizers, at -O1 -g for readable reports; the caller-pool tests still run real threads.
VALGRIND ?= valgrind
VALGRIND_TESTS ?= reject ref_ write_kv swap_blocks copy_blocks block_pool seq_ prefix_cache convert bias merge_states \
    forward_ sdpa_causal sdpa_isas sdpa_sequence_alone paged_prefill_keys paged_contents guard_pages \
    determinism_write_kv decode_keys_and_values fp8 kv_ isa_ threading status version dtype_sizes \
    params_check encode_ simd_ pair_conflicts logits_on_tiles_are
FLAGS_valgrind := -O1 -g
valgrind: $(B)/test_valgrind $(EXAMPLES)
	@sh tests/valgrind.sh $(B) "$(VALGRIND)" $(VALGRIND_TESTS)

# Long and large runs against the reference: a 131072-token context, 1,024 sequences in one
# decode batch, 10,000 steps of continuous batching (tests/stress.c). Not part of `make test`.
$(B)/stress: tests/stress.c tests/ref.h attn.h | $(B)
	$(CC) $(WARN) $(OPT) -fopenmp -I. $< -o $@ $(LDLIBS)
stress: $(B)/stress
	$(B)/stress

BENCH_FLAGS ?= -O3 -fopenmp
$(B)/attn_bench: bench/attn_bench.c attn.h | $(B)
	$(CC) -std=c99 -Wall -Wextra $(BENCH_FLAGS) -I. $< -o $@ $(LDLIBS) $(BENCH_LIBS)
bench: $(B)/attn_bench $(B)/kv_accuracy
	./$(B)/attn_bench

# The KV cache formats' own error, by dtype (bench/kv_accuracy.c; docs/PERF.md#kv-accuracy).
$(B)/kv_accuracy: bench/kv_accuracy.c attn.h | $(B)
	$(CC) $(WARN) -O2 -fopenmp -I. $< -o $@ $(LDLIBS)
bench-kv-accuracy: $(B)/kv_accuracy
	./$(B)/kv_accuracy

# The bench with both GEMM engines (--gemm native|onednn).
$(B)/attn_bench_onednn: bench/attn_bench.c attn.h | $(B)
	$(CC) -std=c99 -Wall -Wextra -O3 -fopenmp -DATTN_USE_ONEDNN -I. $< -o $@ $(LDLIBS) -ldnnl
bench-onednn: $(B)/attn_bench_onednn

# The bench with decode's logits on the AMX tiles (ATTN_DECODE_TILES), to set beside attn_bench.
$(B)/attn_bench_decode_tiles: bench/attn_bench.c attn.h | $(B)
	$(CC) -std=c99 -Wall -Wextra $(BENCH_FLAGS) -DATTN_DECODE_TILES -I. $< -o $@ $(LDLIBS) $(BENCH_LIBS)
bench-decode-tiles: $(B)/attn_bench_decode_tiles

# llama.cpp's CPU flash attention as a peer (bench/peer_ggml.c): GGML_INC is ggml's include
# directory, GGML_LIB the directory of its static libraries (ggml, ggml-cpu, ggml-base).
GGML_INC ?= ggml/include
GGML_LIB ?= ggml/build/src
$(B)/peer_ggml: bench/peer_ggml.c | $(B)
	$(CC) -std=c99 -Wall -Wextra -O2 -fopenmp -I$(GGML_INC) $< -o $@ $(GGML_LIB)/libggml.a \
	  $(GGML_LIB)/libggml-cpu.a $(GGML_LIB)/libggml-base.a -lstdc++ -lpthread $(LDLIBS)
bench-ggml: $(B)/peer_ggml

# Installs attn.h, a pkg-config file (attn.pc: share/pkgconfig) and the CMake package
# (share/cmake/attn: find_package(attn) gives attn::attn), the same files as `cmake --install`,
# each locating the prefix relative to itself, so the tree can be moved; DESTDIR stages it.
PREFIX ?= /usr/local
ATTN_VERSION := $(shell sed -n 's/^\#define ATTN_VERSION_STRING "\(.*\)"/\1/p' attn.h)
ATTN_MAJOR_MINOR := $(shell echo $(ATTN_VERSION) | cut -d. -f1,2)
install:
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/pkgconfig \
	    $(DESTDIR)$(PREFIX)/share/cmake/attn
	install -m 644 attn.h $(DESTDIR)$(PREFIX)/include/attn.h
	sed -e 's|@VERSION@|$(ATTN_VERSION)|' attn.pc.in > $(DESTDIR)$(PREFIX)/share/pkgconfig/attn.pc
	install -m 644 cmake/attnConfig.cmake $(DESTDIR)$(PREFIX)/share/cmake/attn/attnConfig.cmake
	sed -e 's|@VERSION@|$(ATTN_VERSION)|' -e 's|@MAJOR_MINOR@|$(ATTN_MAJOR_MINOR)|' \
	    cmake/attnConfigVersion.cmake.in > $(DESTDIR)$(PREFIX)/share/cmake/attn/attnConfigVersion.cmake
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/attn.h $(DESTDIR)$(PREFIX)/share/pkgconfig/attn.pc \
	    $(DESTDIR)$(PREFIX)/share/cmake/attn/attnConfig.cmake \
	    $(DESTDIR)$(PREFIX)/share/cmake/attn/attnConfigVersion.cmake

clean:
	rm -rf $(B)
