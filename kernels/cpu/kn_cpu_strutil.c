/* kn_cpu_strutil.c - budget-checked string outputs and temporaries of the
 * CPU string kernels (kn_cpu_str.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_str.h"
#include "kn_cpu_util.h"
#include "kn_ctx.h"

ms_status kn__need_str(const kn_node *n, const rt_tensor *t, const char *what) {
    if (t == NULL) return KN_EINVAL(n, "%s is missing", what);
    if (t->dtype != RT_DT_STRING)
        return KN_EINVAL(n, "%s must be a string tensor, got %s", what, rt_dtype_name(t->dtype));
    return MS_OK;
}

/* The budget's refusal of `bytes`, naming the node; MS_OK when they fit. */
static ms_status budget_check(kn_ctx *ctx, const kn_node *n, uint64_t bytes, const char *what) {
    if (ctx == NULL || ctx->budget == NULL) return MS_OK;
    ms_status st = ms_budget_check(ctx->budget, bytes, what);
    return st == MS_OK ? MS_OK : kn__errf(st, n, "%s", ms_errmsg());
}

ms_status kn__str_output(kn_ctx *ctx, const kn_node *n, int idx, const rt_shape *shape,
                         rt_tensor **out) {
    int64_t ne = rt_shape_nelem(shape);
    if (ne < 0) return KN_EINVAL(n, "output %d: invalid shape %s", idx, kn__shp(shape));
    if ((uint64_t)ne > UINT64_MAX / sizeof(rt_str))
        return kn__errf(MS_ENOMEM, n, "output %d of shape %s is too large", idx, kn__shp(shape));
    ms_status st = budget_check(ctx, n, (uint64_t)ne * sizeof(rt_str), "a string output");
    if (st != MS_OK) return st;
    return kn__output(ctx, n, idx, RT_DT_STRING, shape, out);
}

ms_status kn__str_own(kn_ctx *ctx, const kn_node *n, rt_tensor *t) {
    rt_str *s = rt_tensor_strs(t);
    uint64_t total = 0;
    for (int64_t i = 0; i < t->nelem; i++) {
        if (s[i].len > UINT64_MAX - total)
            return kn__errf(MS_ENOMEM, n, "the output's strings overflow 64 bits");
        total += s[i].len;
    }
    ms_status st = budget_check(ctx, n, total, "the bytes of a string output");
    if (st != MS_OK) return st;
    if (total >= SIZE_MAX)
        return kn__errf(MS_ENOMEM, n, "%llu bytes of strings do not fit in memory",
                        (unsigned long long)total);
    rt_buf *b = rt_buf_alloc((size_t)total + 1);
    if (b == NULL)
        return kn__errf(MS_ENOMEM, n, "out of memory for %llu bytes of strings",
                        (unsigned long long)total);
    uint8_t *p = b->data;
    for (int64_t i = 0; i < t->nelem; i++) {
        if (s[i].data != NULL && s[i].len) memcpy(p, s[i].data, (size_t)s[i].len);
        s[i].data = p;
        p += s[i].len;
    }
    rt_buf_unref(t->strbuf);
    t->strbuf = b;
    return MS_OK;
}

ms_status kn__tmp_take(kn_ctx *ctx, const kn_node *n, uint64_t bytes, const char *what, void **p) {
    *p = NULL;
    if (bytes == 0) bytes = 1;
    if (bytes >= SIZE_MAX)
        return kn__errf(MS_ENOMEM, n, "%s of %llu bytes does not fit in memory", what,
                        (unsigned long long)bytes);
    ms_budget *b = ctx ? ctx->budget : NULL;
    if (b != NULL) {
        ms_status st = ms_budget_take(b, bytes, what);
        if (st != MS_OK) return kn__errf(st, n, "%s", ms_errmsg());
    }
    *p = malloc((size_t)bytes);
    if (*p == NULL) {
        if (b != NULL) ms_budget_give(b, bytes);
        return kn__errf(MS_ENOMEM, n, "out of memory for %s of %llu bytes", what,
                        (unsigned long long)bytes);
    }
    return MS_OK;
}

void kn__tmp_give(kn_ctx *ctx, uint64_t bytes, void *p) {
    if (p == NULL) return;
    free(p);
    if (bytes == 0) bytes = 1;
    if (ctx != NULL && ctx->budget != NULL) ms_budget_give(ctx->budget, bytes);
}
