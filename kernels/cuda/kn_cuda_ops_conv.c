/* kn_cuda_ops_conv.c - the CUDA table's convolutions: Conv2D, depthwise and
 * fused (cuDNN, 2-D), Conv3D and Conv2DBackpropInput (cuDNN N-d), and the
 * load-time upload of their constant filters in cuDNN's order.
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

/* A constant filter (HWIO, or depthwise HWCM) to cuDNN's OHWI, uploaded once. */
ms_status kn_cuda__upload_conv_filter(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s,
                                      const rt_tensor *f) {
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != 4) return MS_OK; /* the request path checks */
    int kh = (int)f->shape.dim[0], kw = (int)f->shape.dim[1], ci = (int)f->shape.dim[2],
        co = (int)f->shape.dim[3];
    size_t cnt = (size_t)f->nelem;
    float *ohwi = malloc((cnt ? cnt : 1) * sizeof(float));
    if (ohwi == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    kn_cuda_conv_filter_from_tf(f->data, kh, kw, ci, co, s->depthwise, ohwi);
    char what[300];
    snprintf(what, sizeof what, "the filter of node '%s'", n->name);
    const float *parts[1] = {ohwi};
    ms_status st = kn_cuda__upload_floats(w, what, parts, &cnt, 1, &s->wmem, &s->w_ohwi);
    free(ohwi);
    return st;
}

/* A constant Conv3D filter (DHWIO) or Conv2DBackpropInput filter (HWIO,
 * I = the output's channels, O = out_backprop's) to cuDNN's K[D]RSC with
 * K = O, C = I: the Conv2D conversion with the spatial axes flattened. */
ms_status kn_cuda__upload_convnd_filter(kn_cuda_worker *w, const kn_node *n, kn_cuda_op *s,
                                        const rt_tensor *f) {
    const int r = s->rank3 ? 3 : 2;
    if (f->dtype != RT_DT_FLOAT || f->shape.rank != r + 2)
        return MS_OK; /* the request path checks */
    int64_t sp = 1;
    for (int i = 0; i < r; i++)
        sp *= f->shape.dim[i];
    int ci = (int)f->shape.dim[r], co = (int)f->shape.dim[r + 1];
    size_t cnt = (size_t)f->nelem;
    float *krsc = malloc((cnt ? cnt : 1) * sizeof(float));
    if (krsc == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    kn_cuda_conv_filter_from_tf(f->data, (int)sp, 1, ci, co, 0, krsc);
    char what[300];
    snprintf(what, sizeof what, "the filter of node '%s'", n->name);
    const float *parts[1] = {krsc};
    ms_status st = kn_cuda__upload_floats(w, what, parts, &cnt, 1, &s->wmem, &s->w_ohwi);
    free(krsc);
    return st;
}

ms_status kn_cuda__op_conv(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                           kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const rt_tensor *x = in[0], *f = in[1];
    if (!kn_cuda__is_f32(x) || !kn_cuda__is_f32(f) || x->shape.rank != 4 || f->shape.rank != 4)
        KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t N = x->shape.dim[0], H = x->shape.dim[1], W = x->shape.dim[2], C = x->shape.dim[3];
    int64_t kh = f->shape.dim[0], kw = f->shape.dim[1];
    if (f->shape.dim[2] != C) KN_CUDA_FALLBACK("grouped convolution");
    int64_t oc = s->depthwise ? C * f->shape.dim[3] : f->shape.dim[3];
    int64_t oh, ow, pt = s->pads[0], pb = s->pads[1], pl = s->pads[2], pr = s->pads[3];
    int mode = s->same ? 1 : s->explicit_pad ? -1 : 0;
    if (kn_cuda__spatial(H, kh, s->sh, s->dh, mode, &oh, &pt, &pb) != MS_OK ||
        kn_cuda__spatial(W, kw, s->sw, s->dw, mode, &ow, &pl, &pr) != MS_OK)
        KN_CUDA_FALLBACK("window larger than the input");
    if (N * H * W * C == 0 || oc == 0 || oh <= 0 || ow <= 0) KN_CUDA_FALLBACK("empty tensors");
    if (N > INT32_MAX || H + pt + pb > INT32_MAX || W + pl + pr > INT32_MAX || C > INT32_MAX ||
        oc > INT32_MAX)
        KN_CUDA_FALLBACK("sizes beyond cuDNN's int");
    const rt_tensor *bias = s->fuse_bias ? in[2] : NULL;
    const rt_tensor *add = s->fuse_add ? in[1 + s->nargs] : NULL;
    if (bias && (!kn_cuda__is_f32(bias) || bias->nelem != oc)) KN_CUDA_FALLBACK("bias shape");
    if (add && (!kn_cuda__is_f32(add) || add->nelem != N * oh * ow * oc))
        KN_CUDA_FALLBACK("addend shape");
    if (s->fuse_bn)
        for (int i = 2; i < 6; i++)
            if (!kn_cuda__is_f32(in[i]) || in[i]->nelem != oc)
                KN_CUDA_FALLBACK("batch-norm argument shapes");
    int uneven = pt != pb || pl != pr;
    kn_cuda_conv_shape cs = {.n = (int)N,
                             .h = (int)(uneven ? H + pt + pb : H),
                             .w = (int)(uneven ? W + pl + pr : W),
                             .c = (int)C,
                             .kh = (int)kh,
                             .kw = (int)kw,
                             .oc = (int)oc,
                             .groups = s->depthwise ? (int)C : 1,
                             .sh = (int)s->sh,
                             .sw = (int)s->sw,
                             .dh = (int)s->dh,
                             .dw = (int)s->dw,
                             .pad_top = uneven ? 0 : (int)pt,
                             .pad_bottom = uneven ? 0 : (int)pb,
                             .pad_left = uneven ? 0 : (int)pl,
                             .pad_right = uneven ? 0 : (int)pr};
    ms_status st = MS_OK;
    kn_cuda_block *xpad = NULL, *wt = NULL, *ws = NULL, *bn = NULL;
    kn_cuda_conv *plan = NULL;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconv; i++)
        if (memcmp(&s->conv[i].shape, &cs, sizeof cs) == 0) plan = s->conv[i].plan;
    if (plan == NULL && s->nconv < KN_CUDA_MAX_PLANS) {
        st = kn_cuda_conv_plan(&cs, &plan);
        if (st == MS_OK) s->conv[s->nconv++] = (kn_cuda_conv_entry){cs, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) KN_CUDA_FALLBACK("more shapes than the plan cache holds");
    int poh = 0, pow_ = 0;
    kn_cuda_conv_out_hw(plan, &poh, &pow_);
    if (poh != oh || pow_ != ow)
        return ms_errf(MS_EINTERNAL, "node '%s': cuDNN gives %dx%d, TensorFlow %lldx%lld",
                       node->name, poh, pow_, (long long)oh, (long long)ow);
    rt_shape os = {.rank = 4, .dim = {N, oh, ow, oc}};
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, &os, &out[0])) != MS_OK) return st;
    float *y = (float *)out[0]->data;
    const float *xp = kn_cuda__fp(x), *wp = s->w_ohwi;
    if (uneven) { /* TensorFlow's uneven SAME: pad explicitly, then a VALID convolution */
        uint64_t nb = (uint64_t)N * cs.h * cs.w * C * sizeof(float);
        if ((st = kn_cuda__tmp_get(be, w, nb, "a padded convolution input", &xpad)) != MS_OK)
            goto done;
        if ((st = kn_cuda_pad_nhwc(xp, (int)N, (int)H, (int)W, (int)C, (int)pt, (int)pb, (int)pl,
                                   (int)pr, 0.0f, xpad->ptr, w->stream)) != MS_OK)
            goto done;
        xp = xpad->ptr;
    }
    if (wp == NULL) { /* a filter computed in the graph: reorder it on the GPU */
        if ((st = kn_cuda__tmp_get(be, w, (uint64_t)f->nelem * sizeof(float), "a reordered filter",
                                   &wt)) != MS_OK)
            goto done;
        int64_t dims[4] = {kh, kw, f->shape.dim[2], f->shape.dim[3]};
        static const int conv_perm[4] = {3, 0, 1, 2}, dw_perm[3] = {2, 0, 1};
        if (s->depthwise) {
            int64_t d3[3] = {kh, kw, oc};
            st = kn_cuda_transpose(kn_cuda__fp(f), 3, d3, dw_perm, wt->ptr, w->stream);
        } else {
            st = kn_cuda_transpose(kn_cuda__fp(f), 4, dims, conv_perm, wt->ptr, w->stream);
        }
        if (st != MS_OK) goto done;
        wp = wt->ptr;
    }
    uint64_t wsb = kn_cuda_conv_workspace(plan);
    if (wsb > 0 && (st = kn_cuda__tmp_get(be, w, wsb, "a cuDNN workspace", &ws)) != MS_OK)
        goto done;
    pthread_mutex_lock(&s->mu);
    st = kn_cuda_conv_run(plan, xp, wp, y, ws ? ws->ptr : NULL, w->stream);
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) goto done;
    int64_t rows = N * oh * ow;
    if (s->fuse_bn) {
        const float *mul = s->bn_mul, *addc = s->bn_add;
        if (mul == NULL) { /* coefficients from tensors of the graph: on the host */
            rt_tensor *h[4] = {0};
            float *coef = malloc((size_t)(2 * oc) * sizeof(float));
            for (int i = 0; i < 4 && st == MS_OK; i++)
                st = kn_cuda__host_input(w, s, in, 2 + i, &h[i]);
            if (st == MS_OK && coef == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
            if (st == MS_OK) {
                kn_cuda__bn_coefs(1, kn_cuda__fp(h[0]), kn_cuda__fp(h[1]), kn_cuda__fp(h[2]),
                                  kn_cuda__fp(h[3]), s->eps, oc, coef, coef + oc);
                st = kn_cuda__tmp_get(be, w, (uint64_t)(2 * oc) * sizeof(float),
                                      "batch-norm coefficients", &bn);
            }
            if (w->capturing) w->capture_bad = 1; /* host values of this request: no graph */
            if (st == MS_OK)
                st = kn_cuda_h2d(bn->ptr, coef, (size_t)(2 * oc) * sizeof(float), w->stream,
                                 "batch-norm coefficients");
            if (st == MS_OK) st = kn_cuda_stream_sync(w->stream, "batch-norm coefficients");
            for (int i = 0; i < 4; i++)
                rt_tensor_unref(h[i]);
            free(coef);
            if (st != MS_OK) goto done;
            mul = bn->ptr;
            addc = mul + oc;
        }
        st = kn_cuda_channel_affine(y, mul, addc, add ? KN_CUDA_ACT_NONE : s->act, y, rows, oc,
                                    w->stream);
        if (st == MS_OK && add)
            st = kn_cuda__epilogue(s, w, y, rows, oc, NULL, kn_cuda__fp(add), 0);
    } else {
        st = kn_cuda__epilogue(s, w, y, rows, oc, bias ? kn_cuda__fp(bias) : NULL,
                               add ? kn_cuda__fp(add) : NULL, 0);
    }
done:
    kn_cuda__block_put(xpad);
    kn_cuda__block_put(wt);
    kn_cuda__block_put(ws);
    kn_cuda__block_put(bn);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

/* Conv3D (x, filter) and Conv2DBackpropInput (input_sizes, filter,
 * out_backprop) through one cuDNN Nd plan per shape. */
ms_status kn_cuda__op_convnd(kn_cuda_be *be, kn_cuda_worker *w, kn_ctx *ctx, const kn_node *node,
                             kn_cuda_op *s, rt_tensor *const *in, rt_tensor **out) {
    const int r = s->rank3 ? 3 : 2;
    const rt_tensor *f = in[1], *src = s->backward ? in[2] : in[0];
    if (!kn_cuda__is_f32(f) || !kn_cuda__is_f32(src) || f->shape.rank != r + 2 ||
        src->shape.rank != r + 2)
        KN_CUDA_FALLBACK("shapes or dtypes");
    int64_t xs[5]; /* the forward convolution's input x: N, spatial..., C */
    ms_status st = MS_OK;
    if (s->backward) {
        rt_tensor *sz = NULL;
        if ((st = kn_cuda__host_input(w, s, in, 0, &sz)) != MS_OK) return st;
        int cnt = kn_cuda__int_values(sz, xs, 5);
        rt_tensor_unref(sz);
        if (cnt != r + 2) KN_CUDA_FALLBACK("input_sizes"); /* the CPU kernel gives the error */
    } else {
        for (int i = 0; i < r + 2; i++)
            xs[i] = src->shape.dim[i];
    }
    const int64_t C = xs[r + 1], OC = f->shape.dim[r + 1];
    if (f->shape.dim[r] != C) KN_CUDA_FALLBACK("filter channels");
    kn_cuda_convnd_shape cs;
    memset(&cs, 0, sizeof cs);
    cs.rank = r, cs.backward_data = s->backward;
    int64_t osp[3] = {1, 1, 1}, total = xs[0] * C * OC;
    for (int i = 0; i < r; i++) {
        int64_t lo = 0, hi = 0;
        if (kn_cuda__spatial(xs[1 + i], f->shape.dim[i], s->s3[i], s->d3[i], s->same, &osp[i], &lo,
                             &hi) != MS_OK)
            KN_CUDA_FALLBACK("window larger than the input");
        if (lo != hi) KN_CUDA_FALLBACK("uneven SAME padding (cuDNN pads symmetrically)");
        if (xs[1 + i] > INT32_MAX || f->shape.dim[i] > INT32_MAX || s->s3[i] > INT32_MAX ||
            s->d3[i] > INT32_MAX || lo > INT32_MAX)
            KN_CUDA_FALLBACK("sizes beyond cuDNN's int");
        cs.in[i] = (int)xs[1 + i], cs.k[i] = (int)f->shape.dim[i], cs.stride[i] = (int)s->s3[i];
        cs.dil[i] = (int)s->d3[i], cs.pad_lo[i] = cs.pad_hi[i] = (int)lo;
        total *= xs[1 + i] * osp[i];
    }
    if (total == 0) KN_CUDA_FALLBACK("empty tensors");
    if (xs[0] > INT32_MAX || C > INT32_MAX || OC > INT32_MAX)
        KN_CUDA_FALLBACK("sizes beyond cuDNN's int");
    cs.n = (int)xs[0], cs.c = (int)C, cs.oc = (int)OC;
    rt_shape ys = {.rank = r + 2}, xshape = {.rank = r + 2};
    ys.dim[0] = xs[0], ys.dim[r + 1] = OC;
    for (int i = 0; i < r + 2; i++)
        xshape.dim[i] = xs[i];
    for (int i = 0; i < r; i++)
        ys.dim[1 + i] = osp[i];
    if (s->backward && !rt_shape_equal(&src->shape, &ys)) KN_CUDA_FALLBACK("out_backprop shape");
    kn_cuda_convnd *plan = NULL;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconvnd; i++)
        if (memcmp(&s->convnd[i].shape, &cs, sizeof cs) == 0) plan = s->convnd[i].plan;
    if (plan == NULL && s->nconvnd < KN_CUDA_MAX_PLANS) {
        st = kn_cuda_convnd_plan(&cs, &plan);
        if (st == MS_OK) s->convnd[s->nconvnd++] = (kn_cuda_convnd_entry){cs, plan};
    }
    pthread_mutex_unlock(&s->mu);
    if (st != MS_OK) return st;
    if (plan == NULL) KN_CUDA_FALLBACK("more shapes than the plan cache holds");
    int po[3];
    kn_cuda_convnd_out(plan, po);
    for (int i = 0; i < r; i++)
        if (po[i] != osp[i])
            return ms_errf(MS_EINTERNAL,
                           "node '%s': cuDNN's output size %d on axis %d, TensorFlow's %lld",
                           node->name, po[i], i, (long long)osp[i]);
    if ((st = kn_cuda__dev_tensor(be, w, node, RT_DT_FLOAT, s->backward ? &xshape : &ys,
                                  &out[0])) != MS_OK)
        return st;
    kn_cuda_block *wt = NULL, *ws = NULL;
    const float *wp = s->w_ohwi;
    if (wp == NULL) { /* a filter computed in the graph: [spatial, C, OC] -> [OC, spatial, C] */
        if ((st = kn_cuda__tmp_get(be, w, (uint64_t)f->nelem * sizeof(float), "a reordered filter",
                                   &wt)) != MS_OK)
            goto done;
        int64_t sp = f->nelem / (C * OC), d3[3] = {sp, C, OC};
        static const int perm[3] = {2, 0, 1};
        if ((st = kn_cuda_transpose(kn_cuda__fp(f), 3, d3, perm, wt->ptr, w->stream)) != MS_OK)
            goto done;
        wp = wt->ptr;
    }
    uint64_t wsb = kn_cuda_convnd_workspace(plan);
    if (wsb > 0 && (st = kn_cuda__tmp_get(be, w, wsb, "a cuDNN workspace", &ws)) != MS_OK)
        goto done;
    pthread_mutex_lock(&s->mu);
    st = kn_cuda_convnd_run(plan, kn_cuda__fp(src), wp, (float *)out[0]->data, ws ? ws->ptr : NULL,
                            w->stream);
    pthread_mutex_unlock(&s->mu);
done:
    kn_cuda__block_put(wt);
    kn_cuda__block_put(ws);
    if (st != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

#endif /* DCMSERVE_HAVE_CUDA */
