// ort_bench_dynamic.js - the ONNX Runtime side of bench/bench_onnx_dynamic.sh:
// one session, then for each input shape in the list (in order; a shape may
// come again) the first session.run at that shape timed on its own, WARMUP
// untimed runs, ITERATIONS timed runs. Same input values as ort_bench.js
// (ort_input.js).
// Prints one JSON line for the session's creation, then one per shape.
// usage: node ort_bench_dynamic.js MODEL.onnx THREADS ITERATIONS WARMUP SHAPE[,SHAPE...]
//   SHAPE: the input's dims joined by 'x', e.g. 1x3x320x320
'use strict';
const ort = require('onnxruntime-node');
const {syntheticInput} = require('./ort_input.js');

async function main() {
    const [model, threadsS, itersS, warmS, shapesS] = process.argv.slice(2);
    const threads = +threadsS, iters = +itersS, warm = +warmS;
    const t0 = process.hrtime.bigint();
    const sess = await ort.InferenceSession.create(model, {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
    });
    const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
    process.stdout.write(JSON.stringify({load_ms: +loadMs.toFixed(3), intra_op_threads: threads,
        engine: 'onnxruntime-node ' + require('onnxruntime-node/package.json').version}) + '\n');
    const name = sess.inputNames[0];
    for (const shape of shapesS.split(',')) {
        const feeds = {[name]: syntheticInput(ort, shape.split('x').map(Number))};
        let s = process.hrtime.bigint();
        await sess.run(feeds);
        const first = Number(process.hrtime.bigint() - s) / 1e6;
        for (let i = 0; i < warm; i++) await sess.run(feeds);
        const lat = [];
        const tt = process.hrtime.bigint();
        for (let i = 0; i < iters; i++) {
            s = process.hrtime.bigint();
            await sess.run(feeds);
            lat.push(Number(process.hrtime.bigint() - s) / 1e6);
        }
        const total = Number(process.hrtime.bigint() - tt) / 1e6;
        lat.sort((a, b) => a - b);
        const median = iters % 2 ? lat[(iters - 1) / 2]
                                 : (lat[iters / 2 - 1] + lat[iters / 2]) / 2;
        const p99 = lat[Math.min(iters - 1, Math.max(0, Math.ceil(0.99 * iters) - 1))];
        process.stdout.write(JSON.stringify({
            shape, first_ms: +first.toFixed(3), median_ms: +median.toFixed(3),
            p99_ms: +p99.toFixed(3), min_ms: +lat[0].toFixed(3),
            mean_ms: +(total / iters).toFixed(3), iterations: iters, warmup: warm,
            peak_rss_mb: +(process.resourceUsage().maxRSS / 1024).toFixed(1),
        }) + '\n');
    }
}

main().catch((e) => {
    process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
