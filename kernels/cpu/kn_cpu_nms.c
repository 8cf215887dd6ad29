/* kn_cpu_nms.c - CPU kernels of TensorFlow's non-max suppression ops
 * (tf.image.non_max_suppression*, tf.image.combined_non_max_suppression).
 *
 * NonMaxSuppressionV2 (boxes, scores, max_output_size, iou_threshold)
 *   -> selected_indices int32 [k]
 * NonMaxSuppressionV3 (... , score_threshold) -> selected_indices
 * NonMaxSuppressionV4 (as V3; attr pad_to_max_output_size = false)
 *   -> selected_indices, valid_outputs int32 scalar
 * NonMaxSuppressionV5 (as V3, soft_nms_sigma; attr pad_to_max_output_size)
 *   -> selected_indices, selected_scores float [k], valid_outputs
 * CombinedNonMaxSuppression (boxes [B, N, q, 4], scores [B, N, C],
 *   max_output_size_per_class, max_total_size, iou_threshold, score_threshold;
 *   attrs pad_per_class = false, clip_boxes = true)
 *   -> nmsed_boxes [B, M, 4], nmsed_scores [B, M], nmsed_classes [B, M]
 *      (float), valid_detections int32 [B]
 *
 * float32 only (a half T / T_threshold is refused at load). Semantics are
 * TensorFlow's CPU kernel's, step for step:
 *  - a box is [y1, x1, y2, x2] with the corners in either order; IoU is taken
 *    on the normalised corners and is 0 when either box has no area;
 *  - a box is a candidate when score > score_threshold (strict; V2 has the
 *    lowest finite float as threshold). So NaN scores are never selected,
 *    and in V2 neither are -inf scores, exactly as in TensorFlow;
 *  - candidates leave a priority queue by score, ties by lower index; one is
 *    suppressed when its IoU with a kept box is > iou_threshold (hard NMS),
 *    or, with soft_nms_sigma > 0, its score is multiplied by
 *    exp(-0.5 * iou^2 / soft_nms_sigma) for each kept box it was not yet
 *    compared with, and it goes back into the queue while the new score is
 *    still > score_threshold;
 *  - max_output_size is a run-time int32 scalar (negative: refused).
 * CombinedNonMaxSuppression runs hard NMS per (batch, class) keeping at most
 * min(max_output_size_per_class, N) boxes, then the best max_total_size over
 * the classes (per_batch = min(max_total_size, per_class * C) with
 * pad_per_class), clipping the boxes to [0, 1] with clip_boxes. TensorFlow
 * leaves the order of equal scores there to its heap and unstable sort; here
 * equal scores keep the lower box index within a class and the lower class
 * across classes (the order of TensorFlow's candidate list, sorted stably).
 * Its quirk is kept too: the unused slots of that list have score -1, so with
 * a score_threshold below -1 they can be picked before lower real scores.
 *
 * Memory: the candidate queue and kept lists are temporaries of the request:
 * taken from the request's budget (kn_ctx.budget) before they are allocated,
 * so 10^6 boxes either fit the budget or are refused with MS_ENOMEM naming
 * it; no O(n^2) IoU matrix is built. The greedy loop polls cancellation (a
 * request's deadline bounds its O(n * kept) comparisons).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu.h"
#include "kn_cpu_util.h"
#include "kn_ctx.h"

/* std::min / std::max as TensorFlow's IoU uses them (NaN order included). */
static inline float mn(float a, float b) {
    return b < a ? b : a;
}
static inline float mx(float a, float b) {
    return a < b ? b : a;
}

static float nms_iou(const float *a, const float *b) {
    const float ay1 = mn(a[0], a[2]), ax1 = mn(a[1], a[3]);
    const float ay2 = mx(a[0], a[2]), ax2 = mx(a[1], a[3]);
    const float by1 = mn(b[0], b[2]), bx1 = mn(b[1], b[3]);
    const float by2 = mx(b[0], b[2]), bx2 = mx(b[1], b[3]);
    const float area_a = (ay2 - ay1) * (ax2 - ax1);
    const float area_b = (by2 - by1) * (bx2 - bx1);
    if (area_a <= 0 || area_b <= 0) return 0.0f;
    const float iy1 = mx(ay1, by1), ix1 = mx(ax1, bx1);
    const float iy2 = mn(ay2, by2), ix2 = mn(ax2, bx2);
    const float inter = mx(iy2 - iy1, 0.0f) * mx(ix2 - ix1, 0.0f);
    return inter / (area_a + area_b - inter);
}

/* ---- temporaries charged to the request's budget ---- */

typedef struct nms_tmp {
    kn_ctx *ctx;
    uint64_t taken;
} nms_tmp;

static ms_status tmp_alloc(nms_tmp *t, const kn_node *n, uint64_t count, size_t es, void **p) {
    *p = NULL;
    if (count == 0) count = 1;
    if (count > SIZE_MAX / es)
        return kn__errf(MS_ENOMEM, n, "%llu temporaries of %zu bytes do not fit in memory",
                        (unsigned long long)count, es);
    uint64_t bytes = count * es;
    ms_budget *b = t->ctx ? t->ctx->budget : NULL;
    if (b != NULL) {
        ms_status st = ms_budget_take(b, bytes, "the non-max suppression's candidate list");
        if (st != MS_OK) return kn__errf(st, n, "%s", ms_errmsg());
    }
    *p = malloc((size_t)bytes);
    if (*p == NULL) {
        if (b != NULL) ms_budget_give(b, bytes);
        return kn__errf(MS_ENOMEM, n, "out of memory for %llu bytes of temporaries",
                        (unsigned long long)bytes);
    }
    t->taken += bytes;
    return MS_OK;
}

/* Frees what tmp_alloc gave (any order) and gives every byte back at once. */
static void tmp_done(nms_tmp *t, void **ps, int np) {
    for (int i = 0; i < np; i++) {
        free(ps[i]);
        ps[i] = NULL;
    }
    if (t->ctx && t->ctx->budget && t->taken) ms_budget_give(t->ctx->budget, t->taken);
    t->taken = 0;
}

/* ---- the greedy loop ---- */

typedef struct nms_cand {
    int32_t idx;
    float score;
    int32_t begin; /* kept boxes [0, begin) were already compared with it */
} nms_cand;

/* a leaves the queue before b. Scores in the queue are never NaN. */
static inline int cand_first(const nms_cand *a, const nms_cand *b) {
    return a->score > b->score || (a->score == b->score && a->idx < b->idx);
}

static void heap_down(nms_cand *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, best = i;
        if (l < n && cand_first(&h[l], &h[best])) best = l;
        if (l + 1 < n && cand_first(&h[l + 1], &h[best])) best = l + 1;
        if (best == i) return;
        nms_cand t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
}

static void heap_up(nms_cand *h, int64_t i) {
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!cand_first(&h[i], &h[p])) return;
        nms_cand t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

typedef struct nms_job {
    const float *boxes; /* box i at boxes + i * box_stride (4 floats) */
    int64_t box_stride;
    const float *scores; /* score i at scores[i * score_stride] */
    int64_t score_stride;
    int64_t n;
    int64_t max_out;
    float iou_thr, score_thr, sigma;
    int combined; /* CombinedNonMaxSuppression's loop (no soft NMS) */
} nms_job;

/* Runs one NMS; heap has room for n candidates, sel/sel_score for
 * min(max_out, n) entries. Sets *nsel. */
static ms_status nms_greedy(kn_ctx *ctx, const kn_node *node, const nms_job *j, nms_cand *heap,
                            int32_t *sel, float *sel_score, int64_t *nsel) {
    int64_t hn = 0, ns = 0;
    for (int64_t i = 0; i < j->n; i++) {
        float s = j->scores[i * j->score_stride];
        if (s > j->score_thr) heap[hn++] = (nms_cand){(int32_t)i, s, 0};
    }
    for (int64_t i = hn / 2; i-- > 0;)
        heap_down(heap, hn, i);
    const int soft = !j->combined && j->sigma > 0;
    const float scale = soft ? -0.5f / j->sigma : 0.0f;
    /* IoUs since the last look at the request's deadline: one look per
     * ~2^20, so a hostile 10^6 kept boxes still stops within milliseconds. */
    int64_t work = 0;
    while (ns < j->max_out && hn > 0) {
        work += 1 + ns; /* at most ns IoUs for this candidate */
        if (work >= ((int64_t)1 << 20)) {
            work = 0;
            if (kn_ctx_cancelled(ctx)) return kn__errf(MS_ECANCELED, node, "cancelled");
        }
        nms_cand c = heap[0];
        heap[0] = heap[--hn];
        heap_down(heap, hn, 0);
        const float orig = c.score;
        const float *cb = j->boxes + c.idx * j->box_stride;
        int hard = 0;
        for (int64_t k = ns - 1; k >= c.begin; k--) {
            float iou = nms_iou(cb, j->boxes + sel[k] * j->box_stride);
            if (j->combined) {
                if (iou > j->iou_thr) {
                    hard = 1;
                    break;
                }
                continue;
            }
            float w = expf(scale * iou * iou);
            c.score *= (soft || iou <= j->iou_thr) ? w : 0.0f;
            if (!soft && iou > j->iou_thr) {
                hard = 1;
                break;
            }
            if (c.score <= j->score_thr) break;
        }
        c.begin = (int32_t)ns;
        if (hard) continue;
        if (c.score == orig) {
            sel[ns] = c.idx;
            if (sel_score) sel_score[ns] = c.score;
            ns++;
        } else if (c.score > j->score_thr) {
            heap[hn] = c;
            heap_up(heap, hn++);
        }
    }
    *nsel = ns;
    return MS_OK;
}

/* ---- input checks ---- */

static ms_status scalar_f(const kn_node *n, const rt_tensor *t, const char *what, float *v) {
    if (t->shape.rank != 0) return KN_EINVAL(n, "%s must be 0-D, got %s", what, kn__shp(&t->shape));
    if (t->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, n, "%s must be float32 (%s is not implemented)", what,
                        rt_dtype_name(t->dtype));
    *v = rt_tensor_f32(t)[0];
    return MS_OK;
}

static ms_status scalar_i(const kn_node *n, const rt_tensor *t, const char *what, int64_t *v) {
    if (t->shape.rank != 0) return KN_EINVAL(n, "%s must be 0-D, got %s", what, kn__shp(&t->shape));
    return kn__read_int1(n, t, what, v);
}

static ms_status check_iou(const kn_node *n, float iou) {
    if (!(iou >= 0 && iou <= 1))
        return KN_EINVAL(n, "iou_threshold must be in [0, 1], got %g", iou);
    return MS_OK;
}

/* ---- NonMaxSuppressionV2..V5 ---- */

static ms_status nms_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                             rt_tensor **out) {
    (void)state;
    const int ver = n->op[strlen(n->op) - 1] - '0'; /* NonMaxSuppressionV2..V5 */
    const int nin = ver == 2 ? 4 : ver == 5 ? 6 : 5;
    ms_status st = kn__need_inputs(n, in, nin);
    if (st != MS_OK) return st;
    const rt_tensor *boxes = in[0], *scores = in[1];
    if (boxes->dtype != RT_DT_FLOAT || scores->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, n,
                        "boxes and scores must be float32 (%s, %s is not implemented)",
                        rt_dtype_name(boxes->dtype), rt_dtype_name(scores->dtype));
    if (boxes->shape.rank != 2)
        return KN_EINVAL(n, "boxes must be 2-D, got %s", kn__shp(&boxes->shape));
    if (boxes->shape.dim[1] != 4)
        return KN_EINVAL(n, "boxes must have 4 columns, got %s", kn__shp(&boxes->shape));
    if (scores->shape.rank != 1 || scores->shape.dim[0] != boxes->shape.dim[0])
        return KN_EINVAL(n, "scores has incompatible shape %s for boxes %s",
                         kn__shp(&scores->shape), kn__shp(&boxes->shape));
    const int64_t num = boxes->shape.dim[0];
    if (num > INT32_MAX) return KN_EINVAL(n, "%lld boxes: indices are int32", (long long)num);
    int64_t max_out;
    float iou, sthr = -INFINITY, sigma = 0;
    if ((st = scalar_i(n, in[2], "max_output_size", &max_out)) != MS_OK) return st;
    if ((st = scalar_f(n, in[3], "iou_threshold", &iou)) != MS_OK) return st;
    if (ver >= 3 && (st = scalar_f(n, in[4], "score_threshold", &sthr)) != MS_OK) return st;
    if (ver == 2) sthr = -FLT_MAX; /* TensorFlow: numeric_limits<float>::lowest() */
    if (ver == 5 && (st = scalar_f(n, in[5], "soft_nms_sigma", &sigma)) != MS_OK) return st;
    if (max_out < 0 || max_out > INT32_MAX)
        return KN_EINVAL(n, "max_output_size must be in [0, 2^31), got %lld", (long long)max_out);
    if ((st = check_iou(n, iou)) != MS_OK) return st;
    if (!(sigma >= 0)) return KN_EINVAL(n, "soft_nms_sigma must be non-negative, got %g", sigma);
    const int pad = ver >= 4 && kn_attr_b(n, "pad_to_max_output_size", 0);

    const int64_t cap = max_out < num ? max_out : num;
    nms_tmp tmp = {.ctx = ctx};
    void *mem[3] = {0};
    nms_cand *heap = NULL;
    int32_t *sel = NULL;
    float *sel_score = NULL;
    int64_t ns = 0;
    if ((st = tmp_alloc(&tmp, n, (uint64_t)num, sizeof(nms_cand), &mem[0])) != MS_OK) goto done;
    if ((st = tmp_alloc(&tmp, n, (uint64_t)cap, sizeof(int32_t), &mem[1])) != MS_OK) goto done;
    if ((st = tmp_alloc(&tmp, n, (uint64_t)cap, sizeof(float), &mem[2])) != MS_OK) goto done;
    heap = mem[0], sel = mem[1], sel_score = mem[2];
    nms_job job = {.boxes = rt_tensor_f32(boxes),
                   .box_stride = 4,
                   .scores = rt_tensor_f32(scores),
                   .score_stride = 1,
                   .n = num,
                   .max_out = max_out,
                   .iou_thr = iou,
                   .score_thr = sthr,
                   .sigma = sigma};
    if ((st = nms_greedy(ctx, n, &job, heap, sel, sel_score, &ns)) != MS_OK) goto done;

    const int64_t len = pad ? max_out : ns;
    rt_shape s1 = rt_shape_make(1, (int64_t[]){len});
    if ((st = kn__output(ctx, n, 0, RT_DT_INT32, &s1, &out[0])) != MS_OK) goto done;
    int32_t *oi = (int32_t *)out[0]->data;
    memcpy(oi, sel, (size_t)ns * sizeof(int32_t));
    memset(oi + ns, 0, (size_t)(len - ns) * sizeof(int32_t));
    int oidx = 1;
    if (ver == 5) {
        if ((st = kn__output(ctx, n, 1, RT_DT_FLOAT, &s1, &out[1])) != MS_OK) goto done;
        float *os = rt_tensor_f32(out[1]);
        memcpy(os, sel_score, (size_t)ns * sizeof(float));
        memset(os + ns, 0, (size_t)(len - ns) * sizeof(float));
        oidx = 2;
    }
    if (ver >= 4) {
        rt_shape s0 = rt_shape_make(0, NULL);
        if ((st = kn__output(ctx, n, oidx, RT_DT_INT32, &s0, &out[oidx])) != MS_OK) goto done;
        ((int32_t *)out[oidx]->data)[0] = (int32_t)ns;
    }
done:
    tmp_done(&tmp, mem, 3);
    if (st != MS_OK)
        for (int i = 0; i < n->nout && i < 3; i++) {
            rt_tensor_unref(out[i]);
            out[i] = NULL;
        }
    return st;
}

/* ---- CombinedNonMaxSuppression ---- */

typedef struct comb_rc {
    int32_t box; /* -1: an unused slot (score -1, class -1, box 0) */
    float score;
    int32_t cls;
    int32_t pos; /* slot in the candidate list: the stable sort's tie-break */
    float coord[4];
} comb_rc;

static int rc_cmp(const void *pa, const void *pb) {
    const comb_rc *a = pa, *b = pb;
    if (a->score > b->score) return -1;
    if (b->score > a->score) return 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static ms_status comb_compute(kn_ctx *ctx, const kn_node *n, void *state, rt_tensor *const *in,
                              rt_tensor **out) {
    (void)state;
    ms_status st = kn__need_inputs(n, in, 6);
    if (st != MS_OK) return st;
    const rt_tensor *boxes = in[0], *scores = in[1];
    if (boxes->dtype != RT_DT_FLOAT || scores->dtype != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, n,
                        "boxes and scores must be float32 (%s, %s is not implemented)",
                        rt_dtype_name(boxes->dtype), rt_dtype_name(scores->dtype));
    int64_t per_class, total;
    float iou, sthr;
    if ((st = scalar_i(n, in[2], "max_output_size_per_class", &per_class)) != MS_OK) return st;
    if ((st = scalar_i(n, in[3], "max_total_size", &total)) != MS_OK) return st;
    if ((st = scalar_f(n, in[4], "iou_threshold", &iou)) != MS_OK) return st;
    if ((st = scalar_f(n, in[5], "score_threshold", &sthr)) != MS_OK) return st;
    if (per_class <= 0 || per_class > INT32_MAX)
        return KN_EINVAL(n, "max_size_per_class must be positive (int32), got %lld",
                         (long long)per_class);
    if (total <= 0 || total > INT32_MAX)
        return KN_EINVAL(n, "max_total_size must be > 0 (int32), got %lld", (long long)total);
    if ((st = check_iou(n, iou)) != MS_OK) return st;
    if (boxes->shape.rank != 4)
        return KN_EINVAL(n, "boxes must be 4-D, got %s", kn__shp(&boxes->shape));
    if (scores->shape.rank != 3)
        return KN_EINVAL(n, "scores must be 3-D, got %s", kn__shp(&scores->shape));
    const int64_t B = boxes->shape.dim[0], N = boxes->shape.dim[1], q = boxes->shape.dim[2];
    const int64_t C = scores->shape.dim[2];
    if (q != 1 && q != C)
        return KN_EINVAL(n,
                         "third dimension of boxes must be either 1 or num classes (%lld), got %s",
                         (long long)C, kn__shp(&boxes->shape));
    if (boxes->shape.dim[3] != 4)
        return KN_EINVAL(n, "boxes must have 4 columns, got %s", kn__shp(&boxes->shape));
    if (scores->shape.dim[0] != B || scores->shape.dim[1] != N)
        return KN_EINVAL(n, "scores has incompatible shape %s for boxes %s",
                         kn__shp(&scores->shape), kn__shp(&boxes->shape));
    if (N > INT32_MAX || C > INT32_MAX) return KN_EINVAL(n, "more than 2^31 boxes or classes");
    const int pad_per_class = kn_attr_b(n, "pad_per_class", 0);
    const int clip = kn_attr_b(n, "clip_boxes", 1);
    const int64_t size_per_class = per_class < N ? per_class : N;
    int64_t max_all = per_class * C; /* both < 2^31: no overflow in int64 */
    if (max_all > INT32_MAX) max_all = INT32_MAX;
    const int64_t per_batch = pad_per_class && max_all < total ? max_all : total;
    const uint64_t nrc = (uint64_t)size_per_class * (uint64_t)C;

    nms_tmp tmp = {.ctx = ctx};
    void *mem[3] = {0};
    if ((st = tmp_alloc(&tmp, n, (uint64_t)N, sizeof(nms_cand), &mem[0])) != MS_OK) goto done;
    if ((st = tmp_alloc(&tmp, n, (uint64_t)size_per_class, sizeof(int32_t), &mem[1])) != MS_OK)
        goto done;
    if ((st = tmp_alloc(&tmp, n, nrc, sizeof(comb_rc), &mem[2])) != MS_OK) goto done;
    nms_cand *heap = mem[0];
    int32_t *sel = mem[1];
    comb_rc *rc = mem[2];
    rt_shape sb = rt_shape_make(3, (int64_t[]){B, per_batch, 4});
    rt_shape ss = rt_shape_make(2, (int64_t[]){B, per_batch});
    rt_shape sv = rt_shape_make(1, (int64_t[]){B});
    if ((st = kn__output(ctx, n, 0, RT_DT_FLOAT, &sb, &out[0])) != MS_OK) goto done;
    if ((st = kn__output(ctx, n, 1, RT_DT_FLOAT, &ss, &out[1])) != MS_OK) goto done;
    if ((st = kn__output(ctx, n, 2, RT_DT_FLOAT, &ss, &out[2])) != MS_OK) goto done;
    if ((st = kn__output(ctx, n, 3, RT_DT_INT32, &sv, &out[3])) != MS_OK) goto done;
    float *ob = rt_tensor_f32(out[0]), *os = rt_tensor_f32(out[1]), *oc = rt_tensor_f32(out[2]);
    int32_t *ov = (int32_t *)out[3]->data;
    const float *bx = rt_tensor_f32(boxes), *sc = rt_tensor_f32(scores);
    for (int64_t b = 0; b < B; b++) {
        for (uint64_t i = 0; i < nrc; i++)
            rc[i] = (comb_rc){.box = -1, .score = -1.0f, .cls = -1, .pos = (int32_t)i};
        for (int64_t c = 0; c < C; c++) {
            const float *cb = bx + (b * N * q + (q > 1 ? c : 0)) * 4;
            nms_job job = {.boxes = cb,
                           .box_stride = q * 4,
                           .scores = sc + b * N * C + c,
                           .score_stride = C,
                           .n = N,
                           .max_out = size_per_class,
                           .iou_thr = iou,
                           .score_thr = sthr,
                           .combined = 1};
            int64_t ns = 0;
            if ((st = nms_greedy(ctx, n, &job, heap, sel, NULL, &ns)) != MS_OK) goto done;
            for (int64_t k = 0; k < ns; k++) {
                comb_rc *r = &rc[c * size_per_class + k];
                const float *p = cb + sel[k] * q * 4;
                r->box = sel[k];
                r->score = sc[(b * N + sel[k]) * C + c];
                r->cls = (int32_t)c;
                memcpy(r->coord, p, sizeof(r->coord));
            }
        }
        qsort(rc, (size_t)nrc, sizeof(comb_rc), rc_cmp);
        int64_t valid = 0;
        for (uint64_t i = 0; i < nrc; i++)
            valid += rc[i].box > -1;
        const int64_t lim = pad_per_class ? per_batch : total;
        if (valid > lim) valid = lim;
        ov[b] = (int32_t)valid;
        float *pb = ob + b * per_batch * 4, *ps = os + b * per_batch, *pc = oc + b * per_batch;
        for (int64_t k = 0; k < valid; k++) {
            for (int e = 0; e < 4; e++)
                pb[k * 4 + e] = clip ? mx(mn(rc[k].coord[e], 1.0f), 0.0f) : rc[k].coord[e];
            ps[k] = rc[k].score;
            pc[k] = (float)rc[k].cls;
        }
        memset(pb + valid * 4, 0, (size_t)(per_batch - valid) * 4 * sizeof(float));
        memset(ps + valid, 0, (size_t)(per_batch - valid) * sizeof(float));
        memset(pc + valid, 0, (size_t)(per_batch - valid) * sizeof(float));
    }
done:
    tmp_done(&tmp, mem, 3);
    if (st != MS_OK)
        for (int i = 0; i < 4; i++) {
            rt_tensor_unref(out[i]);
            out[i] = NULL;
        }
    return st;
}

/* At load: TensorFlow's T (boxes, scores, V5's thresholds) and V4's
 * T_threshold may be half; only float32 is implemented, so a half model is
 * refused by name before it serves. */
static ms_status nms_prepare(const kn_node *n, rt_tensor *const *cin, void **state) {
    (void)cin;
    *state = NULL;
    rt_dtype t = kn_attr_type(n, "T", RT_DT_FLOAT),
             tt = kn_attr_type(n, "T_threshold", RT_DT_FLOAT);
    if (t != RT_DT_FLOAT || tt != RT_DT_FLOAT)
        return kn__errf(MS_ENOTSUP, n, "T %s, T_threshold %s: only float32 is implemented",
                        rt_dtype_name(t), rt_dtype_name(tt));
    return MS_OK;
}

const kn_kernel kn_cpu_nms_kernels[] = {
    {.op = "NonMaxSuppressionV2", .prepare = nms_prepare, .compute = nms_compute},
    {.op = "NonMaxSuppressionV3", .prepare = nms_prepare, .compute = nms_compute},
    {.op = "NonMaxSuppressionV4", .prepare = nms_prepare, .compute = nms_compute},
    {.op = "NonMaxSuppressionV5", .prepare = nms_prepare, .compute = nms_compute},
    {.op = "CombinedNonMaxSuppression", .compute = comb_compute},
    {.op = NULL},
};
