/* kn_cuda_attrs.c - the CUDA table's load-time attribute reading: which
 * GPU kernel a node runs and with what attributes, or why it must run the
 * CPU kernel instead (kn_cuda__parse_attrs).
 * Part of the CUDA backend (kn_cuda_backend.h; internals in kn_cuda.h). */
#include "kn_cuda.h"
#include "kn_cuda_backend.h"

#ifdef DCMSERVE_HAVE_CUDA

static int str_is(const char *s, size_t len, const char *want) {
    return s != NULL && strlen(want) == len && memcmp(s, want, len) == 0;
}

/* NHWC [1, a, b, 1] list attribute (ksize, strides, dilations). */
static int nhwc_pair(const kn_node *n, const char *key, int64_t dflt, int64_t *a, int64_t *b) {
    int64_t v[8];
    int c = kn_attr_ilist(n, key, v, 8);
    if (c < 0) {
        *a = *b = dflt;
        return 1;
    }
    if (c != 4 || v[0] != 1 || v[3] != 1) return 0;
    *a = v[1];
    *b = v[2];
    return 1;
}

/* padding / explicit_paddings; 0 when the GPU path cannot take them. */
static int padding_attr(const kn_node *n, kn_cuda_op *s) {
    if (kn_attr_s_eq(n, "padding", "SAME", "VALID")) {
        s->same = 1;
        return 1;
    }
    if (kn_attr_s_eq(n, "padding", "VALID", "VALID")) return 1;
    if (kn_attr_s_eq(n, "padding", "EXPLICIT", "VALID")) {
        int64_t p[8];
        if (kn_attr_ilist(n, "explicit_paddings", p, 8) != 8) return 0;
        if (p[0] || p[1] || p[6] || p[7]) return 0; /* batch / channel padding */
        s->explicit_pad = 1;
        memcpy(s->pads, p + 2, sizeof s->pads);
        return 1;
    }
    return 0;
}

/* Conv3D / MaxPool3D / AvgPool3D (NDHWC) and Conv2DBackpropInput (NHWC):
 * the spatial strides, dilations, ksize and padding; 0 with *why set when
 * the GPU path cannot take them. */
static int ndhwc_attrs(const kn_node *n, kn_cuda_op *s, const char **why) {
    const int r = s->rank3 ? 3 : 2, nd = r + 2;
    const char *fmt = s->rank3 ? "NDHWC" : "NHWC";
    if (!kn_attr_s_eq(n, "data_format", fmt, fmt)) {
        *why = s->rank3 ? "data_format is not NDHWC" : "data_format is not NHWC";
        return 0;
    }
    const char *keys[3] = {"strides", "dilations", s->kind == KN_CUDA_K_POOL3D ? "ksize" : NULL};
    int64_t *dst[3] = {s->s3, s->d3, s->k3};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 3; i++)
            dst[k][i] = 1;
        if (keys[k] == NULL) continue;
        int64_t v[8];
        int c = kn_attr_ilist(n, keys[k], v, 8);
        if (c < 0) continue;
        if (c != nd || v[0] != 1 || v[nd - 1] != 1) {
            *why = k == 0   ? "strides on batch / channels"
                   : k == 1 ? "dilations on batch / channels"
                            : "ksize on batch / channels";
            return 0;
        }
        for (int i = 0; i < r; i++)
            dst[k][i] = v[1 + i];
    }
    if (!padding_attr(n, s) || s->explicit_pad) {
        *why = "padding";
        return 0;
    }
    return 1;
}

/* Reads the attributes the GPU path needs; sets *why when the node must run
 * the CPU kernel (decided at load). */
ms_status kn_cuda__parse_attrs(const kn_node *n, kn_cuda_op *s, const char **why) {
    const char *op = n->op;
    *why = NULL;
    s->act = KN_CUDA_ACT_NONE;
    if (strcmp(op, "Add") == 0 || strcmp(op, "AddV2") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_ADD, s->commutative = 1;
    } else if (strcmp(op, "Sub") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_SUB;
    } else if (strcmp(op, "Mul") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_MUL, s->commutative = 1;
    } else if (strcmp(op, "RealDiv") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_DIV;
    } else if (strcmp(op, "Maximum") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_MAX, s->commutative = 1;
    } else if (strcmp(op, "Minimum") == 0) {
        s->kind = KN_CUDA_K_BINARY, s->binop = KN_CUDA_MIN, s->commutative = 1;
    } else if (kn_cuda__act(op, strlen(op)) > 0) {
        s->kind = KN_CUDA_K_ACT, s->act = (kn_cuda_act)kn_cuda__act(op, strlen(op));
    } else if (strcmp(op, KN_DCM_XFORM_OP) == 0) {
        s->kind = KN_CUDA_K_DCMXFORM;
        ms_status st = kn_dcm_xform_attrs_read(n, &s->dcm);
        if (st != MS_OK) return st;
    } else if (strcmp(op, "BiasAdd") == 0) {
        s->kind = KN_CUDA_K_BIAS;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
    } else if (strcmp(op, "Softmax") == 0) {
        s->kind = KN_CUDA_K_SOFTMAX;
    } else if (strcmp(op, "MatMul") == 0 || strcmp(op, "_FusedMatMul") == 0) {
        s->kind = KN_CUDA_K_MATMUL;
        s->adj_x = kn_attr_b(n, "transpose_a", 0);
        s->adj_y = kn_attr_b(n, "transpose_b", 0);
    } else if (strcmp(op, "Square") == 0 || strcmp(op, "Rsqrt") == 0 ||
               strcmp(op, "LeakyRelu") == 0 || strcmp(op, "Elu") == 0) {
        s->kind = KN_CUDA_K_UNARY;
        s->unop = op[0] == 'S'   ? KN_CUDA_SQUARE
                  : op[0] == 'R' ? KN_CUDA_RSQRT
                  : op[0] == 'L' ? KN_CUDA_LEAKY_RELU
                                 : KN_CUDA_ELU;
        s->alpha = kn_attr_f(n, "alpha", 0.2f);
    } else if (strcmp(op, "Conv2DBackpropInput") == 0 || strcmp(op, "Conv3D") == 0 ||
               strcmp(op, "MaxPool3D") == 0 || strcmp(op, "AvgPool3D") == 0) {
        s->rank3 = strstr(op, "3D") != NULL;
        s->backward = strcmp(op, "Conv2DBackpropInput") == 0;
        s->kind = strstr(op, "Pool3D") != NULL ? KN_CUDA_K_POOL3D : KN_CUDA_K_CONVND;
        if (s->kind == KN_CUDA_K_POOL3D) s->binop = op[0] == 'M' ? KN_CUDA_MAX : KN_CUDA_ADD;
        if (!ndhwc_attrs(n, s, why)) return MS_OK;
    } else if (strstr(op, "Conv2D") != NULL || strstr(op, "DepthwiseConv2dNative") != NULL) {
        s->kind = KN_CUDA_K_CONV;
        s->depthwise = strstr(op, "Depthwise") != NULL;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC"))
            *why = "data_format is not NHWC";
        else if (!nhwc_pair(n, "strides", 1, &s->sh, &s->sw))
            *why = "strides on batch / channels";
        else if (!nhwc_pair(n, "dilations", 1, &s->dh, &s->dw))
            *why = "dilations on batch / channels";
        else if (!padding_attr(n, s))
            *why = "padding";
    } else if (strncmp(op, "FusedBatchNorm", 14) == 0) {
        s->kind = KN_CUDA_K_BN;
        s->eps = kn_attr_f(n, "epsilon", 0.0001f);
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC")) *why = "data_format is not NHWC";
    } else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AvgPool") == 0) {
        s->kind = op[0] == 'M' ? KN_CUDA_K_MAXPOOL : KN_CUDA_K_AVGPOOL;
        if (!kn_attr_s_eq(n, "data_format", "NHWC", "NHWC"))
            *why = "data_format is not NHWC";
        else if (!nhwc_pair(n, "ksize", 1, &s->kh, &s->kw))
            *why = "ksize on batch / channels";
        else if (!nhwc_pair(n, "strides", 1, &s->sh, &s->sw))
            *why = "strides on batch / channels";
        else if (!padding_attr(n, s) || (s->explicit_pad && s->kind != KN_CUDA_K_MAXPOOL))
            *why = "padding"; /* EXPLICIT: MaxPool only, as on the CPU */
    } else if (strcmp(op, "Sum") == 0 || strcmp(op, "Mean") == 0 || strcmp(op, "Max") == 0 ||
               strcmp(op, "Min") == 0 || strcmp(op, "Prod") == 0) {
        s->kind = KN_CUDA_K_REDUCE;
        s->redop = op[0] == 'S'   ? KN_CUDA_RED_SUM
                   : op[0] == 'P' ? KN_CUDA_RED_PROD
                   : op[1] == 'e' ? KN_CUDA_RED_MEAN
                   : op[1] == 'a' ? KN_CUDA_RED_MAX
                                  : KN_CUDA_RED_MIN;
        s->keep_dims = kn_attr_b(n, "keep_dims", 0);
    } else if (strncmp(op, "BatchMatMul", 11) == 0) {
        s->kind = KN_CUDA_K_BMM;
        s->adj_x = kn_attr_b(n, "adj_x", 0);
        s->adj_y = kn_attr_b(n, "adj_y", 0);
        s->same_batch = strcmp(op, "BatchMatMul") == 0;
    } else if (strcmp(op, "GatherV2") == 0 || strcmp(op, "Gather") == 0) {
        s->kind = KN_CUDA_K_GATHER;
        s->v2 = op[6] == 'V';
        s->batch_dims = s->v2 ? kn_attr_i(n, "batch_dims", 0) : 0;
    } else if (strcmp(op, "ResizeNearestNeighbor") == 0) {
        s->kind = KN_CUDA_K_NEAREST;
        s->align_corners = kn_attr_b(n, "align_corners", 0);
        s->half_pixel = kn_attr_b(n, "half_pixel_centers", 0);
    } else if (strcmp(op, "Slice") == 0) {
        s->kind = KN_CUDA_K_SLICE;
    } else if (strcmp(op, "StridedSlice") == 0) {
        static const char *const keys[5] = {"begin_mask", "end_mask", "ellipsis_mask",
                                            "new_axis_mask", "shrink_axis_mask"};
        s->kind = KN_CUDA_K_SSLICE;
        for (int i = 0; i < 5; i++)
            s->masks[i] = kn_attr_i(n, keys[i], 0);
    } else if (strcmp(op, "ConcatV2") == 0) {
        s->kind = KN_CUDA_K_CONCAT;
    } else if (strcmp(op, "ResizeBilinear") == 0) {
        s->kind = KN_CUDA_K_RESIZE;
        s->align_corners = kn_attr_b(n, "align_corners", 0);
        s->half_pixel = kn_attr_b(n, "half_pixel_centers", 0);
    } else if (strcmp(op, "Transpose") == 0) {
        s->kind = KN_CUDA_K_TRANSPOSE;
    } else if (strcmp(op, "Pad") == 0 || strcmp(op, "PadV2") == 0) {
        s->kind = KN_CUDA_K_PAD;
    } else if (strcmp(op, "Reshape") == 0) {
        s->kind = KN_CUDA_K_RESHAPE;
    } else {
        return ms_errf(MS_EINTERNAL, "CUDA backend: no kernel for op %s", op);
    }
    if (n->op[0] == '_' && *why == NULL) { /* _FusedConv2D / _FusedMatMul: fused_ops */
        const char *ops[4];
        size_t lens[4];
        int cnt = kn_attr_slist(n, "fused_ops", ops, lens, 4), i = 0;
        if (cnt < 0) cnt = 0;
        if (cnt > 3) {
            *why = "fused_ops";
            return MS_OK;
        }
        if (i < cnt && str_is(ops[i], lens[i], "BiasAdd")) {
            s->fuse_bias = 1, s->nargs = 1, i++;
        } else if (i < cnt && s->kind == KN_CUDA_K_CONV &&
                   str_is(ops[i], lens[i], "FusedBatchNorm")) {
            s->fuse_bn = 1, s->nargs = 4, i++;
            s->eps = kn_attr_f(n, "epsilon", 0.0001f);
        }
        if (s->nargs > 0 && i < cnt && str_is(ops[i], lens[i], "Add"))
            s->fuse_add = 1, s->nargs++, i++;
        if (i < cnt) {
            int a = kn_cuda__act(ops[i], lens[i]);
            if (a < 0)
                *why = "a fused activation without a GPU kernel (LeakyRelu, Elu)";
            else
                s->act = (kn_cuda_act)a, i++;
        }
        if (*why == NULL && i != cnt) *why = "fused_ops";
    }
    return MS_OK;
}

#endif /* DCMSERVE_HAVE_CUDA */
