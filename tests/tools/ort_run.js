// ort_run.js - runs one ONNX model in onnxruntime-node for gen_onnx_models.py.
// stdin: {"model": path, "outdir": dir, "inputs": [{"name", "dims", "file"}]}
// with float32 little-endian raw input files; stdout: {"outputs": [{"name",
// "dims", "file"}]} with the outputs written as raw float32 files in outdir.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

async function main() {
    const spec = JSON.parse(fs.readFileSync(0, 'utf8'));
    const sess = await ort.InferenceSession.create(spec.model, {
        intraOpNumThreads: 1,
        graphOptimizationLevel: 'all',
    });
    const feeds = {};
    for (const i of spec.inputs) {
        const buf = fs.readFileSync(i.file);
        const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
        feeds[i.name] = new ort.Tensor('float32', Float32Array.from(data), i.dims);
    }
    const res = await sess.run(feeds);
    const outs = [];
    for (const name of sess.outputNames) {
        const t = res[name];
        const file = path.join(spec.outdir, 'out_' + outs.length + '.bin');
        fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
        outs.push({name: name, dims: Array.from(t.dims), file: file});
    }
    process.stdout.write(JSON.stringify({outputs: outs}));
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
