/* rt_ops_restore.c - RestoreV2: reads named tensors from a tensor bundle.
 * The saver's restore op runs it once at model load (docs: SavedModel
 * loading); partial slices are not supported and say so. */
#include <stdlib.h>
#include <string.h>

#include "rt_bundle.h"
#include "rt_exec.h"

static ms_status restore_compute(kn_ctx *ctx, const kn_node *n, void *st, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)st;
    if (in[0]->dtype != RT_DT_STRING || in[0]->nelem != 1)
        return ms_errf(MS_EINVAL, "'%s': prefix must be a string scalar", n->name);
    if (in[1]->dtype != RT_DT_STRING || in[1]->nelem != n->nout)
        return ms_errf(MS_EINVAL, "'%s': %lld tensor names for %d outputs", n->name,
                       (long long)in[1]->nelem, n->nout);
    const rt_str *pre = rt_tensor_strs(in[0]);
    char prefix[4096];
    if (pre->len >= sizeof prefix) return ms_errf(MS_EINVAL, "'%s': prefix too long", n->name);
    memcpy(prefix, pre->data, (size_t)pre->len);
    prefix[pre->len] = '\0';
    const rt_str *names = rt_tensor_strs(in[1]);
    const rt_str *slices = in[2]->dtype == RT_DT_STRING ? rt_tensor_strs(in[2]) : NULL;
    /* The prefix comes from the graph: only a bundle inside the model folder
     * is read (rt_vars.files). */
    rt_hostctx *hc = rt_hostctx_of(ctx);
    const ms_dir *root = hc && hc->vars ? hc->vars->files : NULL;
    if (root == NULL)
        return ms_errf(MS_EINVAL, "'%s': RestoreV2 needs a loaded model's folder", n->name);
    /* one dtype per restored tensor: as many as the checkpoint holds */
    rt_dtype *want = malloc(sizeof(*want) * (size_t)(n->nout > 0 ? n->nout : 1));
    if (want == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    int nt = kn_attr_typelist(n, "dtypes", want, n->nout);
    if (nt > n->nout) nt = n->nout;
    const char *rel;
    rt_bundle *b;
    ms_status s = ms_dir_inside(root, prefix, &rel);
    if (s == MS_OK) s = rt_bundle_open_in(root, rel, &b);
    if (s != MS_OK) {
        free(want);
        return ms_errwrap(s, "'%s'", n->name);
    }
    for (int i = 0; i < n->nout && s == MS_OK; i++) {
        char key[1024];
        if (names[i].len >= sizeof key) {
            s = ms_errf(MS_EINVAL, "'%s': tensor name too long", n->name);
            break;
        }
        memcpy(key, names[i].data, (size_t)names[i].len);
        key[names[i].len] = '\0';
        if (slices && i < in[2]->nelem && slices[i].len != 0) {
            s = ms_errf(MS_ENOTSUP, "'%s': partitioned (sliced) variable '%s' is not supported",
                        n->name, key);
            break;
        }
        s = rt_bundle_read(b, key, &out[i]);
        if (s == MS_OK && i < nt && out[i]->dtype != want[i])
            s = ms_errf(MS_EINVAL, "'%s': checkpoint tensor '%s' is %s, the graph expects %s",
                        n->name, key, rt_dtype_name(out[i]->dtype), rt_dtype_name(want[i]));
    }
    rt_bundle_close(b);
    free(want);
    return s;
}

const kn_kernel rt_ops_restore_kernels[] = {
    {.op = "RestoreV2", .compute = restore_compute, .stateful = 1},
    {.op = NULL},
};
