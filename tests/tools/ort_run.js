// ort_run.js - runs one ONNX model in onnxruntime-node (the reference for
// gen_onnx_models.py, it_onnx_arch.py and it_onnx_wild.py's batch check).
// stdin: {"model": path, "outdir": dir, "inputs": [{"name", "dims", "file",
// "type"}]} with little-endian raw input files of ORT tensor type "type"
// (float32 when absent: float32, float64, int32, int64, uint8, int8, bool);
// stdout: {"outputs": [{"name", "dims", "type", "file"}]} with the outputs
// written as raw files of that type in outdir. Optional "opt": ORT's
// graphOptimizationLevel ('all' when absent; 'disabled', 'basic',
// 'extended'), to tell ORT's own fusions from the operators' arithmetic.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const ARRAYS = {
    float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
    uint8: Uint8Array, int8: Int8Array, bool: Uint8Array,
};

async function main() {
    const spec = JSON.parse(fs.readFileSync(0, 'utf8'));
    const sess = await ort.InferenceSession.create(spec.model, {
        intraOpNumThreads: 1,
        graphOptimizationLevel: spec.opt || 'all',
    });
    const feeds = {};
    for (const i of spec.inputs) {
        const type = i.type || 'float32';
        const A = ARRAYS[type];
        if (!A) throw new Error('input ' + i.name + ': type ' + type + ' is not handled');
        const buf = fs.readFileSync(i.file);
        // copied: the file's buffer need not be aligned for A
        const data = new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
        feeds[i.name] = new ort.Tensor(type, data, i.dims);
    }
    const res = await sess.run(feeds);
    const outs = [];
    for (const name of sess.outputNames) {
        const t = res[name];
        const file = path.join(spec.outdir, 'out_' + outs.length + '.bin');
        fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        outs.push({name: name, dims: Array.from(t.dims), type: t.type, file: file});
    }
    process.stdout.write(JSON.stringify({outputs: outs}));
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
