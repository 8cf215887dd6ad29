/* rt_ops_sw.c - host op _SlidingWindow: a 3-D model run over a whole volume
 * in overlapping patches, its predictions blended, as MONAI's
 * SlidingWindowInferer (sliding_window_inference) defines it.
 *
 * The wrapped model lives in the same graph: a Placeholder (attr `patch`)
 * the patches are fed at and a tensor (attr `pred`) its prediction is
 * fetched from. import-onnx builds such graphs (--sliding_window); the main
 * plan never reaches the model's nodes (nothing consumes `pred` by an edge),
 * this op runs them as a plan of its own, as a TF1 cond runs its branches.
 *
 * Input: the volume, float32 (1, D, H, W, 1) as DcmDecodeVolume gives it.
 * Attrs: roi list(int) [z, y, x]; scan_interval list(int) [z, y, x] (the
 * step where the padded axis is longer than roi: max(int(roi * (1 -
 * overlap)), 1), computed by import-onnx in double from the overlap the
 * user typed, so it floors as MONAI does); blend "constant" | "gaussian";
 * sigma_scale float (0.125); sw_batch int (patches per model run);
 * data_format "NCDHW" | "NDHWC" (the model's input and output layout);
 * channels int (the model's output channels when static at import, else 0).
 * Output: float32 (1, C, D, H, W) or (1, D, H, W, C): the blended answer
 * for every voxel, Sum(w * p) / Sum(w) over the windows covering it.
 *
 * Memory: one batch of patches and its prediction at a time, the output
 * (the accumulator when the volume needs no padding, else one padded
 * accumulator cropped into it) and one float weight sum per voxel, all
 * charged to the request's budget before they are allocated: all of them
 * before the first patch runs when `channels` is known, else the
 * accumulators once the first prediction gives the channel count.
 * Cancellation is checked before every batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "rt_ops.h"

typedef struct sw_state {
    rt_plan *plan;
    int64_t roi[3], interval[3];
    int64_t batch;
    int64_t channels; /* the model's output channels when static, else 0 */
    int ndhwc;
    float *wmap; /* roi[0] * roi[1] * roi[2] importance weights */
} sw_state;

static void sw_release(void *p) {
    sw_state *s = p;
    if (s == NULL) return;
    rt_plan_free(s->plan);
    free(s->wmap);
    free(s);
}

/* A string attr as a NUL-terminated copy (malloc'ed), or NULL. */
static char *attr_str(const kn_node *n, const char *key) {
    size_t len = 0;
    const char *v = kn_attr_s(n, key, &len);
    if (v == NULL) return NULL;
    char *s = malloc(len + 1);
    if (s == NULL) return NULL;
    memcpy(s, v, len);
    s[len] = '\0';
    return s;
}

/* MONAI's compute_importance_map: constant 1, or per axis
 * g(x) = exp(-x^2 / (2 sigma^2)) at x = -(r-1)/2 .. (r-1)/2, sigma =
 * sigma_scale * r, the map their outer product, then every weight raised to
 * at least max(min(map), 1e-3) (its guard against a zero weight sum). */
static ms_status importance_map(sw_state *s, int gaussian, double sigma_scale) {
    int64_t n = s->roi[0] * s->roi[1] * s->roi[2];
    s->wmap = malloc(sizeof(float) * (size_t)n);
    float *g[3] = {NULL, NULL, NULL};
    ms_status st = MS_OK;
    for (int a = 0; a < 3 && s->wmap; a++)
        if ((g[a] = malloc(sizeof(float) * (size_t)s->roi[a])) == NULL) break;
    if (s->wmap == NULL || g[0] == NULL || g[1] == NULL || g[2] == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int a = 0; a < 3; a++) {
        double sig = sigma_scale * (double)s->roi[a];
        for (int64_t i = 0; i < s->roi[a]; i++) {
            double x = (double)i - (double)(s->roi[a] - 1) / 2.0;
            g[a][i] = gaussian ? (float)exp(-(x * x) / (2.0 * sig * sig)) : 1.0f;
        }
    }
    float lo = INFINITY;
    for (int64_t z = 0, k = 0; z < s->roi[0]; z++)
        for (int64_t y = 0; y < s->roi[1]; y++)
            for (int64_t x = 0; x < s->roi[2]; x++, k++) {
                s->wmap[k] = g[0][z] * g[1][y] * g[2][x];
                if (s->wmap[k] < lo) lo = s->wmap[k];
            }
    if (gaussian) {
        float floor_w = lo > 1e-3f ? lo : 1e-3f;
        for (int64_t k = 0; k < n; k++)
            if (s->wmap[k] < floor_w) s->wmap[k] = floor_w;
    }
done:
    for (int a = 0; a < 3; a++) free(g[a]);
    return st;
}

static ms_status sw_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    rt_graph *g = rt_preparing_graph();
    if (g == NULL) return kn__errf(MS_EINVAL, n, "runs only inside a graph");
    if (n->nin != 1 || n->nout != 1)
        return kn__errf(MS_EINVAL, n, "takes 1 input and gives 1 output, has %d and %d", n->nin,
                        n->nout);
    sw_state *s = calloc(1, sizeof(*s));
    char *patch = attr_str(n, "patch"), *pred = attr_str(n, "pred");
    ms_status st = MS_OK;
    if (s == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    if (patch == NULL || pred == NULL) {
        st = kn__errf(MS_EINVAL, n, "needs the attrs 'patch' and 'pred' (the model it runs)");
        goto done;
    }
    if (kn_attr_ilist(n, "roi", s->roi, 3) != 3 ||
        kn_attr_ilist(n, "scan_interval", s->interval, 3) != 3) {
        st = kn__errf(MS_EINVAL, n, "needs 'roi' and 'scan_interval' of 3 values [z, y, x]");
        goto done;
    }
    for (int a = 0; a < 3; a++)
        if (s->roi[a] < 1 || s->roi[a] > INT32_MAX || s->interval[a] < 1 ||
            s->interval[a] > s->roi[a]) {
            st = kn__errf(MS_EINVAL, n, "roi [%lld, %lld, %lld] and scan_interval [%lld, %lld, "
                          "%lld]: each roi > 0, each interval 1..roi",
                          (long long)s->roi[0], (long long)s->roi[1], (long long)s->roi[2],
                          (long long)s->interval[0], (long long)s->interval[1],
                          (long long)s->interval[2]);
            goto done;
        }
    if (s->roi[0] * s->roi[1] > INT32_MAX / s->roi[2]) {
        st = kn__errf(MS_EINVAL, n, "roi of %lld x %lld x %lld voxels is too large",
                      (long long)s->roi[0], (long long)s->roi[1], (long long)s->roi[2]);
        goto done;
    }
    s->channels = kn_attr_i(n, "channels", 0);
    if (s->channels < 0 || s->channels > INT32_MAX) {
        st = kn__errf(MS_EINVAL, n, "channels %lld: want 0 (unknown) or more",
                      (long long)s->channels);
        goto done;
    }
    s->batch = kn_attr_i(n, "sw_batch", 1);
    if (s->batch < 1 || s->batch > 4096) {
        st = kn__errf(MS_EINVAL, n, "sw_batch %lld: want 1..4096", (long long)s->batch);
        goto done;
    }
    int gaussian = kn_attr_s_eq(n, "blend", "gaussian", "constant");
    if (!gaussian && !kn_attr_s_eq(n, "blend", "constant", "constant")) {
        st = kn__errf(MS_EINVAL, n, "blend must be \"constant\" or \"gaussian\"");
        goto done;
    }
    double sigma = kn_attr_f(n, "sigma_scale", 0.125f);
    if (!(sigma > 0)) {
        st = kn__errf(MS_EINVAL, n, "sigma_scale must be > 0");
        goto done;
    }
    s->ndhwc = kn_attr_s_eq(n, "data_format", "NDHWC", "NCDHW");
    if (!s->ndhwc && !kn_attr_s_eq(n, "data_format", "NCDHW", "NCDHW")) {
        st = kn__errf(MS_EINVAL, n, "data_format must be \"NCDHW\" or \"NDHWC\"");
        goto done;
    }
    if ((st = importance_map(s, gaussian, sigma)) != MS_OK) goto done;
    rt_edge feed, fetch;
    int pi = rt_graph_find(g, patch);
    if (pi < 0) {
        st = kn__errf(MS_EINVAL, n, "patch input '%s' is not in the graph", patch);
        goto done;
    }
    feed = (rt_edge){pi, 0};
    if ((st = rt_graph_tensor(g, pred, &fetch)) != MS_OK) {
        st = kn__errf(MS_EINVAL, n, "prediction '%s' is not in the graph", pred);
        goto done;
    }
    if ((st = rt_plan_build(g, &feed, 1, &fetch, 1, NULL, 0, &s->plan)) != MS_OK)
        st = ms_errwrap(st, "node '%s' (%s), the model it runs over the patches", n->name, n->op);
done:
    free(patch);
    free(pred);
    if (st != MS_OK) {
        sw_release(s);
        return st;
    }
    *state = s;
    return MS_OK;
}

/* The window starts along one axis of padded length len (MONAI's
 * _get_scan_interval and dense_patch_slices): step roi when roi == len,
 * else the interval; starts k * step until one reaches the end, each moved
 * back to at most len - roi. Returns their count; starts may be NULL. */
static int64_t axis_starts(int64_t len, int64_t roi, int64_t interval, int64_t *starts) {
    int64_t step = roi == len ? roi : interval, k = 0;
    for (;; k++) {
        int64_t b = k * step;
        if (starts) starts[k] = b + roi > len ? len - roi : b;
        if (b + roi >= len) break;
    }
    return k + 1;
}

typedef struct sw_run {
    const sw_state *s;
    const float *vol;
    int64_t dim[3], pad[3], len[3]; /* volume, padding before, padded length */
    int64_t *starts[3], count[3];
    int64_t nwin;
    int64_t c;        /* output channels (after the first batch) */
    float *acc;       /* len[0..2] x c, in the output's layout */
    float *wsum;      /* len[0..2] */
} sw_run;

/* The window w's start along each axis (z slowest, as itertools.product). */
static void win_start(const sw_run *r, int64_t w, int64_t *o) {
    int64_t x = w % r->count[2], y = (w / r->count[2]) % r->count[1],
            z = w / (r->count[2] * r->count[1]);
    o[0] = r->starts[0][z];
    o[1] = r->starts[1][y];
    o[2] = r->starts[2][x];
}

/* Copies window w of the zero-padded volume into patch (roi voxels, 1 channel). */
static void cut_patch(const sw_run *r, int64_t w, float *patch) {
    const int64_t *roi = r->s->roi;
    int64_t o[3];
    win_start(r, w, o);
    for (int64_t z = 0; z < roi[0]; z++) {
        int64_t vz = o[0] + z - r->pad[0];
        for (int64_t y = 0; y < roi[1]; y++) {
            int64_t vy = o[1] + y - r->pad[1];
            float *dst = patch + (z * roi[1] + y) * roi[2];
            if (vz < 0 || vz >= r->dim[0] || vy < 0 || vy >= r->dim[1]) {
                memset(dst, 0, sizeof(float) * (size_t)roi[2]);
                continue;
            }
            const float *src = r->vol + (vz * r->dim[1] + vy) * r->dim[2];
            for (int64_t x = 0; x < roi[2]; x++) {
                int64_t vx = o[2] + x - r->pad[2];
                dst[x] = vx < 0 || vx >= r->dim[2] ? 0.0f : src[vx];
            }
        }
    }
}

/* One step of the run split over the intra-op pool: patches of a batch cut,
 * a window's z rows added, the output's z slices divided. Each range writes
 * its own elements, so the sums keep their window order whatever the split. */
typedef struct sw_job {
    sw_run *r;
    int64_t w;       /* cut: the batch's first window; add: the window */
    float *patch;    /* cut: the batch */
    const float *p;  /* add: the window's prediction */
    float *o;        /* divide: the output */
} sw_job;

static void cut_range(void *arg, int64_t b, int64_t e) {
    const sw_job *j = arg;
    const int64_t *roi = j->r->s->roi, pvox = roi[0] * roi[1] * roi[2];
    for (int64_t i = b; i < e; i++) cut_patch(j->r, j->w + i, j->patch + i * pvox);
}

/* acc += w * p and wsum += w over z rows [b, e) of window j->w; p is one
 * prediction in the model's layout. */
static void add_range(void *arg, int64_t b, int64_t e) {
    const sw_job *j = arg;
    sw_run *r = j->r;
    const sw_state *s = r->s;
    const int64_t *roi = s->roi, c = r->c;
    const int64_t vox = roi[0] * roi[1] * roi[2], plane = r->len[0] * r->len[1] * r->len[2];
    const float *p = j->p;
    int64_t o[3];
    win_start(r, j->w, o);
    for (int64_t z = b; z < e; z++)
        for (int64_t y = 0; y < roi[1]; y++) {
            int64_t row = ((o[0] + z) * r->len[1] + o[1] + y) * r->len[2] + o[2];
            int64_t k = (z * roi[1] + y) * roi[2];
            for (int64_t x = 0; x < roi[2]; x++, k++) {
                float wt = s->wmap[k];
                int64_t v = row + x;
                r->wsum[v] += wt;
                if (s->ndhwc)
                    for (int64_t ch = 0; ch < c; ch++) r->acc[v * c + ch] += wt * p[k * c + ch];
                else
                    for (int64_t ch = 0; ch < c; ch++) r->acc[ch * plane + v] += wt * p[ch * vox + k];
            }
        }
}

/* Sum(w * p) / Sum(w) for z slices [b, e) of the volume, cropped from the
 * padded accumulator (or in place when it is the output). */
static void divide_range(void *arg, int64_t b, int64_t e) {
    const sw_job *j = arg;
    const sw_run *r = j->r;
    const int64_t c = r->c, vox = r->len[0] * r->len[1] * r->len[2];
    const int64_t ov = r->dim[0] * r->dim[1] * r->dim[2];
    for (int64_t z = b; z < e; z++)
        for (int64_t y = 0; y < r->dim[1]; y++) {
            int64_t k = (z * r->dim[1] + y) * r->dim[2];
            for (int64_t x = 0; x < r->dim[2]; x++, k++) {
                int64_t pv =
                    ((z + r->pad[0]) * r->len[1] + y + r->pad[1]) * r->len[2] + x + r->pad[2];
                float ws = r->wsum[pv];
                for (int64_t ch = 0; ch < c; ch++) {
                    if (r->s->ndhwc)
                        j->o[k * c + ch] = r->acc[pv * c + ch] / ws;
                    else
                        j->o[ch * ov + k] = r->acc[ch * vox + pv] / ws;
                }
            }
        }
}

/* The output (1, C, D, H, W) (or NDHWC) and, for a padded volume, the
 * padded accumulator, zeroed; their bytes taken from the request's budget
 * (added to *held: the output's is held while the patches run, the executor
 * charges it as an output once the op returns). Sets r->c and r->acc. */
static ms_status alloc_acc(kn_ctx *ctx, sw_run *r, int64_t c, int padded, float **acc_pad,
                           rt_tensor **acc_t, uint64_t *held) {
    ms_budget *budget = ctx ? ctx->budget : NULL;
    const int64_t vox = r->len[0] * r->len[1] * r->len[2];
    int64_t od[5] = {1, c, r->dim[0], r->dim[1], r->dim[2]};
    if (r->s->ndhwc) od[1] = r->dim[0], od[2] = r->dim[1], od[3] = r->dim[2], od[4] = c;
    rt_shape os = rt_shape_make(5, od);
    ms_status st = MS_OK;
    r->c = c;
    if (padded) {
        uint64_t ab = (uint64_t)vox * (uint64_t)c * sizeof(float);
        if ((st = ms_budget_take(budget, ab, "the sliding window's padded accumulator")) != MS_OK)
            return st;
        *held += ab;
        if ((*acc_pad = calloc((size_t)vox, sizeof(float) * (size_t)c)) == NULL)
            return ms_errf(MS_ENOMEM, "out of memory");
        r->acc = *acc_pad;
    }
    /* Checked (naming it), allocated (kn_ctx_output checks again), then
     * taken: taken first, the second check would count it twice. */
    uint64_t ob = (uint64_t)rt_shape_nelem(&os) * sizeof(float);
    if ((st = ms_budget_check(budget, ob, "the sliding window's output")) != MS_OK ||
        (st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &os, acc_t)) != MS_OK)
        return st;
    if ((st = ms_budget_take(budget, ob, "the sliding window's output")) != MS_OK) return st;
    *held += ob;
    if (!padded) {
        r->acc = (*acc_t)->data;
        memset(r->acc, 0, sizeof(float) * (size_t)(*acc_t)->nelem);
    }
    return MS_OK;
}

static ms_status sw_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                            rt_tensor **out) {
    const sw_state *s = st_;
    const rt_tensor *v = in[0];
    ms_budget *budget = ctx ? ctx->budget : NULL;
    if (v->dtype != RT_DT_FLOAT || v->shape.rank != 5 || v->shape.dim[0] != 1 ||
        v->shape.dim[4] != 1) {
        char b[96];
        return kn__errf(MS_EINVAL, n, "wants a float volume (1, D, H, W, 1), got %s %s",
                        rt_dtype_name(v->dtype), rt_shape_str(&v->shape, b, sizeof(b)));
    }
    sw_run r = {.s = s, .vol = v->data};
    uint64_t held = 0, batch_held = 0;
    rt_tensor *batch = NULL, *acc_t = NULL;
    float *acc_pad = NULL;
    ms_status st = MS_OK;
    int64_t vox = 1;
    for (int a = 0; a < 3; a++) {
        r.dim[a] = v->shape.dim[a + 1];
        int64_t diff = s->roi[a] > r.dim[a] ? s->roi[a] - r.dim[a] : 0;
        r.pad[a] = diff / 2;
        r.len[a] = r.dim[a] + diff;
        vox *= r.len[a];
    }
    int padded = r.len[0] != r.dim[0] || r.len[1] != r.dim[1] || r.len[2] != r.dim[2];
    for (int a = 0; a < 3 && st == MS_OK; a++) {
        r.count[a] = axis_starts(r.len[a], s->roi[a], s->interval[a], NULL);
        if ((r.starts[a] = malloc(sizeof(int64_t) * (size_t)r.count[a])) == NULL)
            st = ms_errf(MS_ENOMEM, "out of memory");
        else
            axis_starts(r.len[a], s->roi[a], s->interval[a], r.starts[a]);
    }
    if (st != MS_OK) goto done;
    r.nwin = r.count[0] * r.count[1] * r.count[2];
    const int64_t pvox = s->roi[0] * s->roi[1] * s->roi[2];
    /* The weight sum and one batch of patches now; the accumulators once the
     * first prediction gives the channels. */
    uint64_t wbytes = (uint64_t)vox * sizeof(float);
    if ((st = ms_budget_take(budget, wbytes, "the sliding window's weight sum")) != MS_OK)
        goto done;
    held = wbytes;
    if ((r.wsum = calloc((size_t)vox, sizeof(float))) == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    /* With the model's channel count known at load, every buffer is taken
     * before the first patch runs. */
    if (s->channels > 0 &&
        (st = alloc_acc(ctx, &r, s->channels, padded, &acc_pad, &acc_t, &held)) != MS_OK)
        goto done;
    for (int64_t w0 = 0; w0 < r.nwin; w0 += s->batch) {
        if (kn_ctx_cancelled(ctx)) {
            st = ms_errf(MS_ECANCELED, "request cancelled");
            goto done;
        }
        int64_t nb = r.nwin - w0 < s->batch ? r.nwin - w0 : s->batch;
        int64_t bd[5] = {nb, 1, s->roi[0], s->roi[1], s->roi[2]};
        if (s->ndhwc) bd[1] = s->roi[0], bd[2] = s->roi[1], bd[3] = s->roi[2], bd[4] = 1;
        rt_shape bs = rt_shape_make(5, bd);
        if (batch == NULL || batch->shape.dim[0] != nb) {
            if (batch != NULL) ms_budget_give(budget, batch_held);
            rt_tensor_unref(batch);
            batch = NULL;
            batch_held = 0;
            if ((st = kn_ctx_output(ctx, 0, RT_DT_FLOAT, &bs, &batch)) != MS_OK) goto done;
            uint64_t bb = (uint64_t)nb * (uint64_t)pvox * sizeof(float);
            if ((st = ms_budget_take(budget, bb, "a batch of sliding-window patches")) != MS_OK)
                goto done;
            batch_held = bb;
        }
        sw_job cj = {.r = &r, .w = w0, .patch = batch->data};
        kn_ctx_parallel_for(ctx, nb, 1, cut_range, &cj);
        rt_tensor *p = NULL;
        if ((st = rt_plan_run(s->plan, ctx, rt_hostctx_of(ctx) ? rt_hostctx_of(ctx)->vars : NULL,
                              &batch, &p)) != MS_OK) {
            st = ms_errwrap(st, "node '%s' (%s), patches %lld..%lld of %lld", n->name, n->op,
                            (long long)w0, (long long)(w0 + nb - 1), (long long)r.nwin);
            goto done;
        }
        int cx = s->ndhwc ? 4 : 1, sx = s->ndhwc ? 1 : 2;
        int ok = p->dtype == RT_DT_FLOAT && p->shape.rank == 5 && p->shape.dim[0] == nb &&
                 p->shape.dim[sx] == s->roi[0] && p->shape.dim[sx + 1] == s->roi[1] &&
                 p->shape.dim[sx + 2] == s->roi[2] && p->shape.dim[cx] >= 1 &&
                 (r.c == 0 || p->shape.dim[cx] == r.c);
        if (!ok) {
            char b[96];
            st = kn__errf(MS_EINVAL, n, "the model's prediction for %lld patches of %lld x %lld x "
                          "%lld is %s %s; the sliding window needs float32 of the patches' own "
                          "size (%s)",
                          (long long)nb, (long long)s->roi[0], (long long)s->roi[1],
                          (long long)s->roi[2], rt_dtype_name(p->dtype),
                          rt_shape_str(&p->shape, b, sizeof(b)), s->ndhwc ? "NDHWC" : "NCDHW");
            rt_tensor_unref(p);
            goto done;
        }
        if (r.c == 0 && (st = alloc_acc(ctx, &r, p->shape.dim[cx], padded, &acc_pad, &acc_t,
                                        &held)) != MS_OK) {
            rt_tensor_unref(p);
            goto done;
        }
        /* Windows in order (they overlap); one window's rows in parallel,
         * when it is worth a hand-off. */
        const int64_t min_z = (KN_PAR_MIN_VALUES + s->roi[1] * s->roi[2] * r.c - 1) /
                              (s->roi[1] * s->roi[2] * r.c);
        for (int64_t i = 0; i < nb; i++) {
            sw_job aj = {.r = &r, .w = w0 + i, .p = (const float *)p->data + i * pvox * r.c};
            kn_ctx_parallel_for(ctx, s->roi[0], min_z, add_range, &aj);
        }
        rt_tensor_unref(p);
    }
    sw_job dj = {.r = &r, .o = acc_t->data};
    kn_ctx_parallel_for(ctx, r.dim[0], 1, divide_range, &dj);
    out[0] = acc_t;
    acc_t = NULL;
done:
    rt_tensor_unref(batch);
    rt_tensor_unref(acc_t);
    free(acc_pad);
    free(r.wsum);
    for (int a = 0; a < 3; a++) free(r.starts[a]);
    ms_budget_give(budget, held + batch_held);
    return st;
}

const kn_kernel rt_ops_sw_kernels[] = {
    {.op = RT_SW_OP, .prepare = sw_prepare, .compute = sw_compute, .release = sw_release},
    {.op = NULL},
};
