/* check_kn_einsum.c - Einsum (kernels/cpu/kn_cpu_einsum.c).
 *
 * Small cases are worked out by hand from the definition (numpy / TF
 * einsum: products summed over the labels the output drops); the
 * transformer forms (Keras MultiHeadAttention's projection, score and
 * combine equations, with and without transposes, batch broadcasting) are
 * checked against plain nested loops written out for each equation here. */
#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_backend.h"
#include "kn_ctx.h"
#include "rt_graph.h"
#include "util_node.h"

static Tensorflow__NodeDef *eq_node(const char *name, const char *eq) {
    Tensorflow__NodeDef *d = tu_node_new("Einsum", name);
    tu_attr_s(d, "equation", eq);
    tu_attr_i(d, "N", 2);
    return d;
}

START_TEST(test_einsum_by_hand) {
    rt_tensor *ab[2] = {TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4), TU_F32(TU_SHAPE(2, 2), 5, 6, 7, 8)};
    rt_tensor *o = tu_run1(eq_node("mm", "ij,jk->ik"), ab, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 19, 22, 43, 50);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("mm_implicit", "ij,jk"), ab, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 19, 22, 43, 50);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("mm_bt", "ij,kj->ik"), ab, 2); /* A B^T */
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 17, 23, 39, 53);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("mm_out_t", "ij,jk->ki"), ab, 2); /* (A B)^T */
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 19, 43, 22, 50);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("full", "ij,ij->"), ab, 2); /* 5 + 12 + 21 + 32 */
    TU_CHECK_F32(o, TU_SCALAR, 0, 70);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("rowsum_dot", "ij,kl->ik"), ab, 2); /* rows of A sum x rows of B sum */
    TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 3 * 11, 3 * 15, 7 * 11, 7 * 15);
    rt_tensor_unref(o);
    tu_unref(ab, 2);
    rt_tensor *uv[2] = {TU_F32(TU_SHAPE(3), 1, 2, 3), TU_F32(TU_SHAPE(2), 10, 20)};
    o = tu_run1(eq_node("outer", "i,j->ij"), uv, 2);
    TU_CHECK_F32(o, TU_SHAPE(3, 2), 0, 10, 20, 20, 40, 30, 60);
    rt_tensor_unref(o);
    tu_unref(uv, 2);
    /* one input: diagonal, trace, transpose, sums */
    rt_tensor *m = TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4);
    Tensorflow__NodeDef *d;
    const char *eqs[] = {"ii->i", "ii", "ij->ji", "ij->", "ij->j", "ij"};
    for (int i = 0; i < 6; i++) {
        d = tu_node_new("Einsum", "one");
        tu_attr_s(d, "equation", eqs[i]);
        o = tu_run1(d, &m, 1);
        switch (i) {
        case 0: TU_CHECK_F32(o, TU_SHAPE(2), 0, 1, 4); break;
        case 1: TU_CHECK_F32(o, TU_SCALAR, 0, 5); break;
        case 2: TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 1, 3, 2, 4); break;
        case 3: TU_CHECK_F32(o, TU_SCALAR, 0, 10); break;
        case 4: TU_CHECK_F32(o, TU_SHAPE(2), 0, 4, 6); break;
        default: TU_CHECK_F32(o, TU_SHAPE(2, 2), 0, 1, 2, 3, 4); break;
        }
        rt_tensor_unref(o);
    }
    rt_tensor_unref(m);
}
END_TEST

START_TEST(test_einsum_batch_broadcast) {
    /* batch "bij,bjk->bik": batch 0 = the matmul above, batch 1 = I * B */
    rt_tensor *ab[2] = {TU_F32(TU_SHAPE(2, 2, 2), 1, 2, 3, 4, 1, 0, 0, 1),
                        TU_F32(TU_SHAPE(2, 2, 2), 5, 6, 7, 8, 5, 6, 7, 8)};
    rt_tensor *o = tu_run1(eq_node("bmm", "bij,bjk->bik"), ab, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 2, 2), 0, 19, 22, 43, 50, 5, 6, 7, 8);
    rt_tensor_unref(o);
    tu_unref(ab, 2);
    /* "...ij,...jk->...ik" with ellipsis dims [2, 1] and [3]: broadcast to
     * [2, 3]; lhs batch (p, 0) = p * I, rhs batch q = (q + 1) * ones */
    float lhs[2 * 2 * 2], rhs[3 * 2 * 2];
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 4; i++) lhs[p * 4 + i] = (i == 0 || i == 3) ? (float)(p + 1) : 0;
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < 4; i++) rhs[q * 4 + i] = (float)(q + 1) * (float)(i + 1);
    rt_tensor *x[2] = {tu_t(RT_DT_FLOAT, TU_SHAPE(2, 1, 2, 2), lhs, 8),
                       tu_t(RT_DT_FLOAT, TU_SHAPE(3, 2, 2), rhs, 12)};
    o = tu_run1(eq_node("ell", "...ij,...jk->...ik"), x, 2);
    float want[2 * 3 * 4];
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
            for (int i = 0; i < 4; i++) want[(p * 3 + q) * 4 + i] = (float)(p + 1) * rhs[q * 4 + i];
    tu_check_f32(o, TU_SHAPE(2, 3, 2, 2), want, 24, 0);
    rt_tensor_unref(o);
    /* implicit output puts the ellipsis first */
    o = tu_run1(eq_node("ell_implicit", "...ij,...jk"), x, 2);
    tu_check_f32(o, TU_SHAPE(2, 3, 2, 2), want, 24, 0);
    rt_tensor_unref(o);
    tu_unref(x, 2);
}
END_TEST

static float val(int i, int salt) {
    return (float)((i * 37 + salt * 11) % 17) / 8.0f - 1.0f;
}

static rt_tensor *filled(rt_shape s, int salt) {
    rt_tensor *t = NULL;
    ck_assert_int_eq(rt_tensor_new(RT_DT_FLOAT, &s, &t), MS_OK);
    for (int64_t i = 0; i < t->nelem; i++) ((float *)t->data)[i] = val((int)i, salt);
    return t;
}

/* Keras MultiHeadAttention: a = batch, b = query, c = heads, d = head size,
 * e = key positions (projections "abc,cde->abde", scores
 * "aecd,abcd->acbe", combine "acbe,aecd->abcd", output "abcd,cde->abe"). */
START_TEST(test_einsum_attention) {
    enum { A = 2, B = 5, C = 3, D = 4, E = 6, F = 7 };
    /* projection: x [A, B, F] . w [F, C, D] -> [A, B, C, D] */
    rt_tensor *p[2] = {filled(TU_SHAPE(A, B, F), 1), filled(TU_SHAPE(F, C, D), 2)};
    rt_tensor *o = tu_run1(eq_node("proj", "abc,cde->abde"), p, 2);
    static float want[A * B * C * D * E];
    const float *x = p[0]->data, *w = p[1]->data;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++)
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int f = 0; f < F; f++)
                        s += (double)x[(a * B + b) * F + f] * w[(f * C + c) * D + d];
                    want[((a * B + b) * C + c) * D + d] = (float)s;
                }
    tu_check_f32(o, TU_SHAPE(A, B, C, D), want, A * B * C * D, 1e-5f);
    rt_tensor_unref(o);
    tu_unref(p, 2);
    /* scores: k [A, E, C, D], q [A, B, C, D] -> [A, C, B, E] */
    rt_tensor *s2[2] = {filled(TU_SHAPE(A, E, C, D), 3), filled(TU_SHAPE(A, B, C, D), 4)};
    o = tu_run1(eq_node("scores", "aecd,abcd->acbe"), s2, 2);
    const float *k = s2[0]->data, *q = s2[1]->data;
    for (int a = 0; a < A; a++)
        for (int c = 0; c < C; c++)
            for (int b = 0; b < B; b++)
                for (int e = 0; e < E; e++) {
                    double s = 0;
                    for (int d = 0; d < D; d++)
                        s += (double)k[((a * E + e) * C + c) * D + d] *
                             q[((a * B + b) * C + c) * D + d];
                    want[((a * C + c) * B + b) * E + e] = (float)s;
                }
    tu_check_f32(o, TU_SHAPE(A, C, B, E), want, A * C * B * E, 1e-5f);
    rt_tensor_unref(o);
    tu_unref(s2, 2);
    /* combine: probs [A, C, B, E], v [A, E, C, D] -> [A, B, C, D] */
    rt_tensor *c2[2] = {filled(TU_SHAPE(A, C, B, E), 5), filled(TU_SHAPE(A, E, C, D), 6)};
    o = tu_run1(eq_node("combine", "acbe,aecd->abcd"), c2, 2);
    const float *pr = c2[0]->data, *v = c2[1]->data;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++)
                for (int d = 0; d < D; d++) {
                    double s = 0;
                    for (int e = 0; e < E; e++)
                        s += (double)pr[((a * C + c) * B + b) * E + e] *
                             v[((a * E + e) * C + c) * D + d];
                    want[((a * B + b) * C + c) * D + d] = (float)s;
                }
    tu_check_f32(o, TU_SHAPE(A, B, C, D), want, A * B * C * D, 1e-5f);
    rt_tensor_unref(o);
    tu_unref(c2, 2);
    /* output projection: [A, B, C, D] . [C, D, F] -> [A, B, F] (two contracted labels) */
    rt_tensor *op[2] = {filled(TU_SHAPE(A, B, C, D), 7), filled(TU_SHAPE(C, D, F), 8)};
    o = tu_run1(eq_node("out_proj", "abcd,cde->abe"), op, 2);
    x = op[0]->data;
    w = op[1]->data;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int f = 0; f < F; f++) {
                double s = 0;
                for (int c = 0; c < C; c++)
                    for (int d = 0; d < D; d++)
                        s += (double)x[((a * B + b) * C + c) * D + d] * w[(c * D + d) * F + f];
                want[(a * B + b) * F + f] = (float)s;
            }
    tu_check_f32(o, TU_SHAPE(A, B, F), want, A * B * F, 1e-5f);
    rt_tensor_unref(o);
    tu_unref(op, 2);
}
END_TEST

START_TEST(test_einsum_double_and_errors) {
    rt_tensor *ab[2] = {TU_F64(TU_SHAPE(2, 2), 1, 2, 3, 4), TU_F64(TU_SHAPE(2, 2), 5, 6, 7, 8)};
    rt_tensor *o = tu_run1(eq_node("mm64", "ij,kj->ik"), ab, 2);
    TU_CHECK_F64(o, TU_SHAPE(2, 2), 0, 17, 23, 39, 53);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("mm64_at", "ji,jk->ik"), ab, 2); /* A^T B */
    TU_CHECK_F64(o, TU_SHAPE(2, 2), 0, 26, 30, 38, 44);
    rt_tensor_unref(o);
    tu_unref(ab, 2);
    /* an empty contraction gives zeros; an empty output nothing */
    rt_tensor *z[2] = {tu_t(RT_DT_FLOAT, TU_SHAPE(2, 0), NULL, 0),
                       tu_t(RT_DT_FLOAT, TU_SHAPE(0, 3), NULL, 0)};
    o = tu_run1(eq_node("empty_k", "ij,jk->ik"), z, 2);
    TU_CHECK_F32(o, TU_SHAPE(2, 3), 0, 0, 0, 0, 0, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("empty_out", "ij,jk->ji"), z, 2);
    tu_check_shape(o, RT_DT_FLOAT, TU_SHAPE(0, 2));
    rt_tensor_unref(o);
    tu_unref(z, 2);
    rt_tensor *bad[2] = {TU_F32(TU_SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
                         TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4)};
    tu_run_fail(eq_node("mismatch", "ij,jk->ik"), bad, 2, 1, MS_EINVAL, "label 'j'");
    tu_run_fail(eq_node("rank", "ijk,jk->ik"), bad, 2, 1, MS_EINVAL, "rank 2");
    tu_run_fail(eq_node("char", "i#,jk->ik"), bad, 2, 1, MS_EINVAL, "invalid character");
    tu_unref(bad, 2);
    rt_tensor *ok[2] = {TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4), TU_F32(TU_SHAPE(2, 2), 1, 2, 3, 4)};
    tu_run_fail(eq_node("unknown_out", "ij,jk->iz"), ok, 2, 1, MS_EINVAL, "in no input");
    tu_run_fail(eq_node("dup_out", "ij,jk->ii"), ok, 2, 1, MS_EINVAL, "more than once");
    tu_run_fail(eq_node("three", "ij,jk,kl->il"), ok, 2, 1, MS_EINVAL, "1 or 2 inputs");
    tu_unref(ok, 2);
    rt_tensor *bytes[2] = {TU_U8(TU_SHAPE(1), 1), TU_U8(TU_SHAPE(1), 2)};
    tu_run_fail(eq_node("uint8", "i,i->"), bytes, 2, 1, MS_ENOTSUP, "not supported");
    tu_unref(bytes, 2);
    rt_tensor *mixed[2] = {TU_I32(TU_SHAPE(1), 1), TU_I64(TU_SHAPE(1), 2)};
    tu_run_fail(eq_node("mixed", "i,i->"), mixed, 2, 1, MS_EINVAL, "different dtypes");
    tu_unref(mixed, 2);
}
END_TEST

/* Integer Einsum (TensorFlow's CPU kernel takes int32 and int64): the float
 * cases above by hand, two's-complement wrapping, empty and broadcast
 * shapes, cancellation. */
START_TEST(test_einsum_int) {
    rt_tensor *ab[2] = {TU_I32(TU_SHAPE(2, 2), 1, 2, 3, 4), TU_I32(TU_SHAPE(2, 2), 5, 6, 7, 8)};
    rt_tensor *o = tu_run1(eq_node("imm", "ij,jk->ik"), ab, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 19, 22, 43, 50);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("imm_bt_out_t", "ij,kj->ki"), ab, 2); /* (A B^T)^T */
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 17, 39, 23, 53);
    rt_tensor_unref(o);
    rt_tensor *vec = TU_I32(TU_SHAPE(2), 10, 20);
    o = tu_run1(eq_node("irowsum", "ij,k->ik"), (rt_tensor *[]){ab[0], vec}, 2);
    tu_unref(ab, 2);
    rt_tensor_unref(vec);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 2), 30, 60, 70, 140); /* row sums of A times b */
    rt_tensor_unref(o);
    rt_tensor *m = TU_I64(TU_SHAPE(2, 2), 1, 2, 3, 4);
    const char *eqs[] = {"ii->i", "ii", "ij->ji", "ij->j"};
    for (int i = 0; i < 4; i++) {
        Tensorflow__NodeDef *d = tu_node_new("Einsum", "ione");
        tu_attr_s(d, "equation", eqs[i]);
        o = tu_run1(d, &m, 1);
        switch (i) {
        case 0: TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2), 1, 4); break;
        case 1: TU_CHECK_INT(o, RT_DT_INT64, TU_SCALAR, 5); break;
        case 2: TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2, 2), 1, 3, 2, 4); break;
        default: TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2), 4, 6); break;
        }
        rt_tensor_unref(o);
    }
    rt_tensor_unref(m);
    /* batch; the implicit output keeps only the labels seen once (ik), so
     * the batches' products are summed: A B + I B */
    rt_tensor *bb[2] = {TU_I64(TU_SHAPE(2, 2, 2), 1, 2, 3, 4, 1, 0, 0, 1),
                        TU_I64(TU_SHAPE(2, 2, 2), 5, 6, 7, 8, 5, 6, 7, 8)};
    o = tu_run1(eq_node("ibmm", "bij,bjk->bik"), bb, 2);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2, 2, 2), 19, 22, 43, 50, 5, 6, 7, 8);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("ibmm_implicit", "bij,bjk"), bb, 2);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SHAPE(2, 2), 24, 28, 50, 58);
    rt_tensor_unref(o);
    tu_unref(bb, 2);
    /* ellipsis [2, 1] x [3] broadcast to [2, 3]: out[p, q] = lhs[p] . rhs[q] */
    rt_tensor *el[2] = {TU_I32(TU_SHAPE(2, 1, 2), 1, 2, 3, 4),
                        TU_I32(TU_SHAPE(3, 2), 1, 0, 0, 1, 1, 1)};
    o = tu_run1(eq_node("iell", "...i,...i->..."), el, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 3), 1, 2, 3, 3, 4, 7);
    rt_tensor_unref(o);
    tu_unref(el, 2);
    /* 16 summed labels (rank 8 each, none kept): 3 * 5 */
    rt_tensor *r8[2] = {TU_I32(TU_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 3),
                        TU_I32(TU_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 5)};
    o = tu_run1(eq_node("irank8", "abcdefgh,ijklmnop->"), r8, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 15);
    rt_tensor_unref(o);
    tu_unref(r8, 2);
    /* wrapping: 65536 * 65536 = 2^32 is 0 in int32; INT32_MAX + 1 is INT32_MIN;
     * INT64_MAX * 2 is -2 in int64 */
    rt_tensor *w[2] = {TU_I32(TU_SHAPE(2), 65536, 3), TU_I32(TU_SHAPE(2), 65536, 1)};
    o = tu_run1(eq_node("wrap32", "i,i->"), w, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 3);
    rt_tensor_unref(o);
    tu_unref(w, 2);
    rt_tensor *w2[2] = {TU_I32(TU_SHAPE(2), INT32_MAX, 1), TU_I32(TU_SHAPE(2), 1, 1)};
    o = tu_run1(eq_node("wrap32_sum", "i,i->"), w2, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, INT32_MIN);
    rt_tensor_unref(o);
    tu_unref(w2, 2);
    rt_tensor *w3[2] = {TU_I64(TU_SHAPE(1), INT64_MAX), TU_I64(TU_SHAPE(1), 2)};
    o = tu_run1(eq_node("wrap64", "i,i->"), w3, 2);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SCALAR, -2);
    rt_tensor_unref(o);
    tu_unref(w3, 2);
    /* empty: a contraction over 0 gives zeros, an empty output nothing; a
     * sum over huge labels with one of size 0 is 0 at once */
    rt_tensor *z[2] = {tu_t(RT_DT_INT32, TU_SHAPE(2, 0), NULL, 0),
                       tu_t(RT_DT_INT32, TU_SHAPE(0, 3), NULL, 0)};
    o = tu_run1(eq_node("iempty_k", "ij,jk->ik"), z, 2);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(2, 3), 0, 0, 0, 0, 0, 0);
    rt_tensor_unref(o);
    o = tu_run1(eq_node("iempty_out", "ij,jk->ji"), z, 2);
    tu_check_shape(o, RT_DT_INT32, TU_SHAPE(0, 2));
    rt_tensor_unref(o);
    tu_unref(z, 2);
    rt_tensor *hz = tu_t(RT_DT_INT64, TU_SHAPE((int64_t)1 << 31, (int64_t)1 << 31, 0), NULL, 0);
    Tensorflow__NodeDef *d = tu_node_new("Einsum", "ihuge_empty");
    tu_attr_s(d, "equation", "ijk->");
    o = tu_run1(d, &hz, 1);
    TU_CHECK_INT(o, RT_DT_INT64, TU_SCALAR, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(hz);
    /* 2^18 products: a cancelled request stops inside the loop (the first
     * look comes after 2^16), an uncancelled one counts them all */
    int32_t one[512];
    for (int i = 0; i < 512; i++) one[i] = 1;
    rt_tensor *ones[2] = {tu_t(RT_DT_INT32, TU_SHAPE(512), one, 512),
                          tu_t(RT_DT_INT32, TU_SHAPE(512), one, 512)};
    kn_backend *be = kn_cpu_backend_new(1);
    const kn_kernel *k = kn_backend_kernel(be, "Einsum");
    ck_assert_ptr_nonnull(k);
    d = eq_node("icancel", "i,j->");
    kn_node node = {.name = "icancel", .op = "Einsum", .def = d, .attrs = &rt_nodedef_attrs,
                    .nin = 2, .nout = 1};
    atomic_int cancel = 1;
    kn_ctx ctx = {.nthreads = 1, .cancelled = &cancel};
    o = NULL;
    ck_assert_int_eq(k->compute(&ctx, &node, NULL, ones, &o), MS_ECANCELED);
    ck_assert_msg(strstr(ms_errmsg(), "icancel") != NULL, "%s", ms_errmsg());
    rt_tensor_unref(o);
    o = NULL;
    atomic_store(&cancel, 0);
    ck_assert_int_eq(k->compute(&ctx, &node, NULL, ones, &o), MS_OK);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SCALAR, 512 * 512);
    rt_tensor_unref(o);
    tu_node_free(d);
    kn_backend_free(be);
    tu_unref(ones, 2);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"einsum_by_hand", test_einsum_by_hand},
        {"einsum_batch_broadcast", test_einsum_batch_broadcast},
        {"einsum_attention", test_einsum_attention},
        {"einsum_double_and_errors", test_einsum_double_and_errors},
        {"einsum_int", test_einsum_int},
    };
    return tu_suite_main("kn_einsum", cases, sizeof(cases) / sizeof(cases[0]));
}
