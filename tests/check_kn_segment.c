/* check_kn_segment.c - SparseSegmentSum/Mean/SqrtN(+WithNumSegments) and
 * TensorScatterUpdate (kernels/cpu/kn_cpu_segment.c) against values worked
 * out by hand from TensorFlow's op documentation. */
#include <check.h>
#include <math.h>

#include "util_node.h"

START_TEST(test_sparse_segment) {
    /* data rows r0 = [1, 2], r1 = [3, 4], r2 = [5, 6]; rows 0, 2 -> segment 0,
     * row 1 -> segment 1, row 2 -> segment 3 (segment 2 empty). */
    rt_tensor *in[4] = {TU_F32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6), TU_I32(TU_SHAPE(4), 0, 2, 1, 2),
                        TU_I64(TU_SHAPE(4), 0, 0, 1, 3), TU_I32(TU_SCALAR, 5)};
    rt_tensor *o = tu_run1(tu_node_new("SparseSegmentSum", "ss"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(4, 2), 0, 6, 8, 3, 4, 0, 0, 5, 6);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("SparseSegmentMean", "sm"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(4, 2), 1e-6f, 3, 4, 3, 4, 0, 0, 5, 6);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("SparseSegmentSqrtN", "sq"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(4, 2), 1e-6f, 6 / sqrtf(2), 8 / sqrtf(2), 3, 4, 0, 0, 5, 6);
    rt_tensor_unref(o);
    o = tu_run1(tu_node_new("SparseSegmentSumWithNumSegments", "ssn"), in, 4);
    TU_CHECK_F32(o, TU_SHAPE(5, 2), 0, 6, 8, 3, 4, 0, 0, 5, 6, 0, 0);
    rt_tensor_unref(o);
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(4), 0, 3, 1, 2);
    tu_run_fail(tu_node_new("SparseSegmentSum", "ss_idx"), in, 3, 1, MS_EINVAL, "out of range");
    rt_tensor_unref(in[1]);
    in[1] = TU_I32(TU_SHAPE(4), 0, 2, 1, 2);
    rt_tensor_unref(in[2]);
    in[2] = TU_I64(TU_SHAPE(4), 1, 0, 1, 3);
    tu_run_fail(tu_node_new("SparseSegmentSum", "ss_ord"), in, 3, 1, MS_EINVAL, "not increasing");
    tu_unref(in, 4);
}
END_TEST

START_TEST(test_tensor_scatter_update) {
    /* TensorFlow's documented example: tensor [0]*8, indices [[4],[3],[1],[7]],
     * updates [9, 10, 11, 12] -> [0, 11, 0, 10, 9, 0, 0, 12]. */
    rt_tensor *in[3] = {TU_F32(TU_SHAPE(8), 0, 0, 0, 0, 0, 0, 0, 0),
                        TU_I32(TU_SHAPE(4, 1), 4, 3, 1, 7), TU_F32(TU_SHAPE(4), 9, 10, 11, 12)};
    rt_tensor *o = tu_run1(tu_node_new("TensorScatterUpdate", "tsu"), in, 3);
    TU_CHECK_F32(o, TU_SHAPE(8), 0, 0, 11, 0, 10, 9, 0, 0, 12);
    rt_tensor_unref(o);
    tu_unref(in, 3);
    /* Rows of a matrix: index depth 1 of a (3, 2) tensor replaces whole rows. */
    rt_tensor *m[3] = {TU_I32(TU_SHAPE(3, 2), 1, 2, 3, 4, 5, 6), TU_I64(TU_SHAPE(1, 1), 2),
                       TU_I32(TU_SHAPE(1, 2), 70, 80)};
    o = tu_run1(tu_node_new("TensorScatterUpdate", "tsu_rows"), m, 3);
    TU_CHECK_INT(o, RT_DT_INT32, TU_SHAPE(3, 2), 1, 2, 3, 4, 70, 80);
    rt_tensor_unref(o);
    rt_tensor_unref(m[1]);
    m[1] = TU_I64(TU_SHAPE(1, 1), 3);
    tu_run_fail(tu_node_new("TensorScatterUpdate", "tsu_oob"), m, 3, 1, MS_EINVAL,
                "does not index into shape");
    tu_unref(m, 3);
}
END_TEST

int main(void) {
    const tu_case cases[] = {
        {"sparse_segment", test_sparse_segment},
        {"tensor_scatter_update", test_tensor_scatter_update},
    };
    return tu_suite_main("kn_segment", cases, sizeof(cases) / sizeof(cases[0]));
}
