#!/bin/sh
# Runs every built libFuzzer target for a bounded time. Usage:
#   scripts/run_fuzz.sh BUILD_DIR SECONDS [TARGET...]
# (with TARGETs, only those run: e.g. two shells each running half of them)
# Seeds: Debian's pydicom test files for the DICOM target, the tensor bundles
# of tests/data/savedmodels (and of ../shared/testdata when it is there) for
# the SSTable target, tests/data/onnx for the ONNX target;
# the codec and request pre-scan (wire) targets start empty; the handler target
# starts from requests for half_plus_two (tests/fuzz/seed_handlers.py); the
# tf.Example and REST :classify/:regress targets from tests/fuzz/seed_examples.py;
# the REST :predict / KServe v2 infer target and the config target from the
# bodies and files written below; the REST connection target (fuzz_rest_http)
# from tests/fuzz/seed_rest_http.py's requests, the model folder target from the version
# folders of tests/data/savedmodels (and ../shared/testdata/wild when there),
# packed by tests/fuzz/seed_model_folder.py.
# Corpora grow under BUILD_DIR/corpus.
set -eu
BUILD=$1
SECS=$2
shift 2
ONLY=" $* "
cd "$(dirname "$0")/.."
PYDICOM_DATA=$(/usr/bin/python3 -c 'import os, pydicom.data; print(os.path.join(os.path.dirname(pydicom.data.__file__), "test_files"))')
mkdir -p "$BUILD/corpus/dicom" "$BUILD/corpus/sstable" "$BUILD/seeds/sstable" "$BUILD/corpus/onnx" \
    "$BUILD/corpus/codecs"
find tests/data/savedmodels ../shared/testdata -name '*.index' 2>/dev/null | while read -r f; do
    cp "$f" "$BUILD/seeds/sstable/$(echo "$f" | tr '/' '_')"
done
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# run NAME CORPUS [SEEDS...]: fails (non-zero) when the fuzzer finds a crash or leak.
run() {
    name=$1
    shift
    if [ "$ONLY" != "  " ] && [ "${ONLY#* $name }" = "$ONLY" ]; then return 0; fi
    echo "$name: $SECS s"
    log="$BUILD/$name.log"
    rc=0
    "$BUILD/$name" -max_total_time="$SECS" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$BUILD/$name-" "$@" >"$log" 2>&1 || rc=$?
    grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$log" || true
    if [ "$rc" != 0 ]; then
        tail -n 40 "$log"
        echo "$name: FAILED (exit $rc); the input is saved as $BUILD/$name-*"
        exit "$rc"
    fi
}
run fuzz_dicom "$BUILD/corpus/dicom" "$PYDICOM_DATA"
run fuzz_sstable "$BUILD/corpus/sstable" "$BUILD/seeds/sstable"
run fuzz_onnx "$BUILD/corpus/onnx" tests/data/onnx
mkdir -p "$BUILD/corpus/wire"
run fuzz_wire "$BUILD/corpus/wire"
mkdir -p "$BUILD/corpus/handlers"
/usr/bin/python3 tests/fuzz/seed_handlers.py "$BUILD/seeds/handlers"
run fuzz_handlers "$BUILD/corpus/handlers" "$BUILD/seeds/handlers"
# The codec target's seeds (tests/fuzz/seed_codecs.py) need the frames that
# check_codecs extracts; without them it starts from an empty corpus.
run fuzz_codecs "$BUILD/corpus/codecs"
/usr/bin/python3 tests/fuzz/seed_examples.py "$BUILD/seeds"
mkdir -p "$BUILD/corpus/example" "$BUILD/corpus/rest_examples"
run fuzz_example "$BUILD/corpus/example" "$BUILD/seeds/example"
run fuzz_rest_examples "$BUILD/corpus/rest_examples" "$BUILD/seeds/rest_examples"
mkdir -p "$BUILD/corpus/rest_predict" "$BUILD/seeds/rest_predict"
# Byte 0 picks the API (bit 0: KServe v2), bit 3 with KServe: byte 1 is the
# JSON part's length and binary tensor data follows (fuzz_rest_predict.c).
seed() { printf "$2" > "$BUILD/seeds/rest_predict/$1"; }
seed tfs_rows '\000{"instances": [1.0, 2.0, 5.0]}'
seed tfs_rows_obj '\000{"signature_name": "serving_default", "instances": [{"x": [1.0]}, {"x": [2.0]}]}'
seed tfs_cols '\000{"inputs": {"x": [[1.0], [2.0], [5.0]]}}'
seed tfs_b64 '\000{"instances": [{"b64": "AAAA"}]}'
seed v2_json '\001{"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32", "data": [1, 2, 5]}]}'
seed v2_outputs '\001{"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [[1]]}], "outputs": [{"name": "y", "parameters": {"binary_data": true}}]}'
seed v2_binary '\011\150{"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32", "parameters": {"binary_data_size": 12}}]}\000\000\200\077\000\000\000\100\000\000\240\100'
run fuzz_rest_predict "$BUILD/corpus/rest_predict" "$BUILD/seeds/rest_predict"
mkdir -p "$BUILD/corpus/config" "$BUILD/seeds/config"
# Byte 0 (mod 4): 0 JSON model config, 1 text-format model config, 2 SSLConfig,
# 3 a ReloadConfigRequest's bytes (fuzz_config.c).
cseed() { printf "$2" > "$BUILD/seeds/config/$1"; }
cseed json '\000{"model_config_list": {"config": [{"name": "m", "base_path": "/models/m", "model_platform": "tensorflow", "model_version_policy": {"specific": {"versions": [1, 2]}}, "version_labels": {"stable": 1}}]}}'
cseed text '\001model_config_list {\n  config {\n    name: "m"\n    base_path: "/models/m"\n    model_platform: "tensorflow"\n    model_version_policy { latest { num_versions: 2 } }\n  }\n}\n'
cseed ssl '\002server_key: "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----"\nserver_cert: "-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----"\ncustom_ca: ""\nclient_verify: false\n'
/usr/bin/python3 - "$BUILD/seeds/config/reload" <<'PY'
import sys
def ld(field, payload):  # a length-delimited field
    return bytes([field << 3 | 2, len(payload)]) + payload
model = ld(1, b"m") + ld(2, b"/models/m") + ld(4, b"tensorflow")
req = ld(1, ld(1, ld(1, model)))  # ReloadConfigRequest.config.model_config_list.config
open(sys.argv[1], "wb").write(b"\x03" + req)
PY
run fuzz_config "$BUILD/corpus/config" "$BUILD/seeds/config"
mkdir -p "$BUILD/corpus/rest_http"
/usr/bin/python3 tests/fuzz/seed_rest_http.py "$BUILD/seeds/rest_http"
run fuzz_rest_http "$BUILD/corpus/rest_http" "$BUILD/seeds/rest_http"
mkdir -p "$BUILD/corpus/model_folder"
/usr/bin/python3 tests/fuzz/seed_model_folder.py "$BUILD/seeds/model_folder" tests/data/savedmodels \
    ../shared/testdata/wild >/dev/null
run fuzz_model_folder "$BUILD/corpus/model_folder" "$BUILD/seeds/model_folder"
