# Entry points for people and CI. Each target first installs missing Debian
# packages (scripts/install_deps.sh), then configures and builds with CMake.
#   make          install what is missing, build build/dcmserve
#   make run      build, then serve the bundled demo model
#   make test     build, then run every test (unit + integration)
#   make test-asan  the same suite built with ASan+UBSan in build-asan/
#   make image    the cpu container image, offline (podman + mmdebstrap bases)
#   make test-image  make image, then tests/it_image.py runs it hardened
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CTEST_ARGS ?=

.PHONY: all deps deps-build build run test test-asan fuzz image test-image clean

all: build

deps:
	@sh scripts/install_deps.sh all

# build + runtime packages only: enough for `make` and `make run`.
deps-build:
	@sh scripts/install_deps.sh build

build: deps-build
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@sh scripts/run_demo.sh $(BUILD)/dcmserve

test: deps build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMS_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for
# FUZZ_SECONDS, seeded with Debian's pydicom test files. CI runs it briefly.
# FUZZ_TARGETS="fuzz_wire fuzz_dicom" runs only those.
FUZZ_SECONDS ?= 60
fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DMS_FUZZ=ON -DMS_SANITIZE=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_dicom fuzz_sstable fuzz_onnx fuzz_codecs fuzz_wire fuzz_handlers \
	  fuzz_example fuzz_rest_examples fuzz_rest_predict fuzz_config fuzz_rest_http fuzz_model_folder
	@sh scripts/run_fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The Dockerfile's cpu target as IMAGE, built with no container registry:
# podman build from two Debian 12 bases that mmdebstrap makes from Debian's
# packages once per set of inputs (scripts/build_image.sh; docs/deploy.md).
IMAGE ?= dcmserve:cpu
image:
	@sh scripts/install_deps.sh image
	@sh scripts/build_image.sh $(IMAGE)

# Runs IMAGE read-only, non-root, without capabilities: health, a DICOM
# Predict, a SIGTERM drain (tests/it_image.py; skipped under plain ctest).
test-image: deps image
	@DCM_IMAGE_TEST=1 DCM_IMAGE=$(IMAGE) /usr/bin/python3 tests/it_image.py

clean:
	rm -rf build build-asan build-fuzz
