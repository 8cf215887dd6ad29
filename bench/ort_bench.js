// ort_bench.js - times one ONNX model in onnxruntime-node, like `dcmserve
// benchmark`: fixed synthetic input (uniform [-1, 1)), warm-up, then timed
// session.run calls. Prints one JSON line: median_ms, p99_ms, min_ms, mean_ms,
// images_per_s, peak_rss_mb.
// usage: node ort_bench.js MODEL.onnx BATCH THREADS ITERATIONS WARMUP
'use strict';
const ort = require('onnxruntime-node');
const {syntheticInput} = require('./ort_input.js');

async function main() {
    const [model, batchS, threadsS, itersS, warmS] = process.argv.slice(2);
    const batch = +batchS, threads = +threadsS, iters = +itersS, warm = +warmS;
    const sess = await ort.InferenceSession.create(model, {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
    });
    const meta = sess.inputMetadata ? sess.inputMetadata[0] : null;
    const name = sess.inputNames[0];
    let dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1))
                                  : null;
    if (!dims) throw new Error('cannot read the input shape of ' + model);
    dims[0] = batch;
    const feeds = {[name]: syntheticInput(ort, dims)};
    for (let i = 0; i < warm; i++) await sess.run(feeds);
    const lat = [];
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iters; i++) {
        const s = process.hrtime.bigint();
        await sess.run(feeds);
        lat.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    const total = Number(process.hrtime.bigint() - t0) / 1e6;
    lat.sort((a, b) => a - b);
    const median = iters % 2 ? lat[(iters - 1) / 2] : (lat[iters / 2 - 1] + lat[iters / 2]) / 2;
    const p99 = lat[Math.min(iters - 1, Math.max(0, Math.ceil(0.99 * iters) - 1))];
    process.stdout.write(JSON.stringify({
        engine: 'onnxruntime-node ' + require('onnxruntime-node/package.json').version,
        batch, intra_op_threads: threads, iterations: iters,
        median_ms: +median.toFixed(3), p99_ms: +p99.toFixed(3), min_ms: +lat[0].toFixed(3),
        mean_ms: +(total / iters).toFixed(3),
        images_per_s: +(batch * iters / (total / 1e3)).toFixed(2),
        peak_rss_mb: +(process.resourceUsage().maxRSS / 1024).toFixed(1),
    }) + '\n');
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
