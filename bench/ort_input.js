// ort_input.js - the synthetic input of bench/ort_bench*.js: float32 values
// uniform in [-1, 1) from the same 64-bit LCG and seed as `dcmserve
// benchmark` and bench/bench_onnx_dynamic.c, so that both engines see the
// same tensor.
'use strict';

function syntheticInput(ort, dims) {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    let seed = 42n;
    for (let i = 0; i < n; i++) {
        seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        data[i] = Number(seed >> 40n) / 16777216 * 2 - 1;
    }
    return new ort.Tensor('float32', data, dims);
}

module.exports = {syntheticInput};
