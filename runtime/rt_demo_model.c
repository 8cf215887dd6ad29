/* rt_demo_model.c - builds the demo SavedModel (see rt_demo_model.h) with the
 * graph builder. */
#include "rt_demo_model.h"

#include <string.h>

#include "rt_graphbuild.h"

/* clang-format off */
static const float demo_w[4 * 2] = {
     0.5f,  -1.0f,
     0.25f,  0.5f,
    -0.5f,   1.0f,
     1.0f,  -0.25f,
};
/* clang-format on */
static const float demo_b[2] = {0.1f, -0.2f};

static ms_status floats(int rank, const int64_t *dims, const float *v, rt_tensor **out) {
    rt_shape s = rt_shape_make(rank, dims);
    ms_status st = rt_tensor_new(RT_DT_FLOAT, &s, out);
    if (st == MS_OK)
        memcpy((*out)->data, v, rt_tensor_nbytes(*out));
    return st;
}

ms_status rt_demo_model_write(const char *version_dir) {
    rt_gb *g = NULL;
    rt_tensor *w = NULL, *b = NULL;
    ms_status st;
    if ((st = floats(2, (int64_t[]){4, 2}, demo_w, &w)) != MS_OK ||
        (st = floats(1, (int64_t[]){2}, demo_b, &b)) != MS_OK || (st = rt_gb_new(&g)) != MS_OK)
        goto done;

    rt_shape xs = rt_shape_make(2, (int64_t[]){-1, 4});
    rt_shape ys = rt_shape_make(2, (int64_t[]){-1, 2});
    rt_gb_placeholder(g, "x", RT_DT_FLOAT, &xs);
    Tensorflow__NodeDef *wr = rt_gb_variable(g, "W", w);
    Tensorflow__NodeDef *br = rt_gb_variable(g, "b", b);
    Tensorflow__NodeDef *mm =
        wr ? rt_gb_matmul(g, "MatMul", "x", wr->name, 0, 0, RT_DT_FLOAT) : NULL;
    Tensorflow__NodeDef *add =
        mm && br ? rt_gb_binary(g, "Add", "add", mm->name, br->name, RT_DT_FLOAT) : NULL;
    if (add)
        rt_gb_unary(g, "Relu", "y", add->name, RT_DT_FLOAT);
    Tensorflow__SignatureDef *sig = rt_gb_signature(g, "serving_default", RT_GB_PREDICT);
    rt_gb_sig_input(g, sig, "x", "x:0", RT_DT_FLOAT, &xs);
    rt_gb_sig_output(g, sig, "y", "y:0", RT_DT_FLOAT, &ys);
    st = rt_savedmodel_write(version_dir, g);
    if (st != MS_OK)
        st = ms_errwrap(st, "writing the demo model to %s", version_dir);
done:
    rt_gb_free(g);
    rt_tensor_unref(w);
    rt_tensor_unref(b);
    return st;
}
