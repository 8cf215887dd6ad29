/* rt_ops_tensorlist.c - host ops: TF2's TensorList (TensorListReserve,
 * EmptyTensorList, TensorListFromTensor, TensorListGetItem,
 * TensorListSetItem, TensorListStack, TensorListLength,
 * TensorListElementShape, TensorListPushBack, TensorListPopBack,
 * TensorListConcatV2, TensorListGather, TensorListScatterIntoExistingList,
 * TensorListResize), what Keras RNN loops and tf.TensorArray compile to,
 * and TF1's TensorArrayV3 family (V3 create / Write / Read / Gather /
 * Scatter / Concat / Split / Size / Close; see the section below).
 *
 * A list is a DT_VARIANT scalar whose buffer is the list itself: element
 * dtype, element shape (rank -1 = unknown; dims -1 = unknown) and a vector of
 * element tensors (references; NULL = not set yet). Lists are values, as in
 * TensorFlow: an op that changes one makes a new list sharing the elements
 * (their references), so the input list stays as it was. FromTensor's
 * elements are views of the input's buffer (no copy). Reading an element
 * never set gives zeros when the element shape is fully known (TensorFlow
 * does the same), else INVALID_ARGUMENT. Element tensors must be plain
 * numbers or bools (no strings). */
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "rt_ops.h"

#define MAX_LIST_LEN (1 << 24)

typedef struct tlist {
    struct tlist *self; /* what the variant tensor's data points at */
    rt_dtype dt;
    rt_shape eshape;    /* rank -1: unknown */
    int n, cap;
    rt_tensor **items;
    int dynamic;        /* TensorArray: writes past the end grow it */
} tlist;

static void tlist_release(rt_buf *b) {
    tlist *l = b->owner;
    for (int i = 0; i < l->n; i++) rt_tensor_unref(l->items[i]);
    free(l->items);
    free(l);
}

/* A new list of n unset elements (capacity cap >= n), wrapped in a variant scalar. */
static ms_status tlist_new(rt_dtype dt, const rt_shape *es, int n, int cap, tlist **lout,
                           rt_tensor **out) {
    if (n < 0 || n > MAX_LIST_LEN || cap > MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "tensor list length %d is out of range [0, %d]", n, MAX_LIST_LEN);
    if (cap < n) cap = n;
    tlist *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->items = calloc((size_t)cap + 1, sizeof(rt_tensor *))) == NULL) {
        free(l);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    l->self = l;
    l->dt = dt;
    l->eshape = *es;
    l->n = n;
    l->cap = cap;
    rt_buf *b = rt_buf_wrap(&l->self, sizeof(l->self), tlist_release, l);
    if (b == NULL) {
        free(l->items);
        free(l);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    rt_shape scalar = {0};
    ms_status st = rt_tensor_new_on(RT_DT_VARIANT, &scalar, b, 0, out);
    rt_buf_unref(b);
    if (st != MS_OK) return st;
    *lout = l;
    return MS_OK;
}

static int is_tlist(const rt_tensor *t) {
    return t->dtype == RT_DT_VARIANT && t->nelem == 1 && t->buf && t->buf->release == tlist_release &&
           t->data == t->buf->data;
}

static ms_status list_in(const kn_node *n, const rt_tensor *t, const tlist **out) {
    if (!is_tlist(t))
        return ms_errf(MS_EINVAL, "'%s' (%s): input 0 is not a tensor list", n->name, n->op);
    *out = *(tlist *const *)t->data;
    return MS_OK;
}

/* Copy of l with room for cap elements (element references shared). */
static ms_status tlist_copy(const tlist *l, int cap, tlist **lout, rt_tensor **out) {
    ms_status st = tlist_new(l->dt, &l->eshape, l->n, cap, lout, out);
    if (st != MS_OK) return st;
    for (int i = 0; i < l->n; i++) (*lout)->items[i] = l->items[i] ? rt_tensor_ref(l->items[i]) : NULL;
    return MS_OK;
}

/* An element_shape input: int32/int64; a scalar -1 = unknown rank. */
static ms_status shape_in(const kn_node *n, const rt_tensor *t, rt_shape *s) {
    if (t->dtype != RT_DT_INT32 && t->dtype != RT_DT_INT64)
        return ms_errf(MS_EINVAL, "'%s' (%s): element_shape must be int32 or int64, got %s",
                       n->name, n->op, rt_dtype_name(t->dtype));
    if (t->shape.rank == 0) {
        int64_t v = t->dtype == RT_DT_INT32 ? *(const int32_t *)t->data : *(const int64_t *)t->data;
        if (v != -1)
            return ms_errf(MS_EINVAL, "'%s' (%s): a scalar element_shape must be -1 (unknown)",
                           n->name, n->op);
        s->rank = -1;
        return MS_OK;
    }
    if (t->shape.rank != 1 || t->nelem > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "'%s' (%s): element_shape must be a vector of at most %d dims",
                       n->name, n->op, RT_MAX_RANK);
    s->rank = (int)t->nelem;
    for (int i = 0; i < s->rank; i++) {
        int64_t v = t->dtype == RT_DT_INT32 ? ((const int32_t *)t->data)[i]
                                            : ((const int64_t *)t->data)[i];
        if (v < -1) return ms_errf(MS_EINVAL, "'%s' (%s): element_shape dim %lld", n->name, n->op,
                                   (long long)v);
        s->dim[i] = v;
    }
    return MS_OK;
}

static int shape_known(const rt_shape *s) {
    if (s->rank < 0) return 0;
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] < 0) return 0;
    return 1;
}

/* Merges two partial shapes; -1 on conflict. */
static int shape_merge(const rt_shape *a, const rt_shape *b, rt_shape *out) {
    if (a->rank < 0) return *out = *b, 0;
    if (b->rank < 0) return *out = *a, 0;
    if (a->rank != b->rank) return -1;
    out->rank = a->rank;
    for (int i = 0; i < a->rank; i++) {
        if (a->dim[i] >= 0 && b->dim[i] >= 0 && a->dim[i] != b->dim[i]) return -1;
        out->dim[i] = a->dim[i] >= 0 ? a->dim[i] : b->dim[i];
    }
    return 0;
}

static ms_status check_item(const kn_node *n, const tlist *l, const rt_tensor *t) {
    if (t->dtype != l->dt)
        return ms_errf(MS_EINVAL, "'%s' (%s): element dtype %s, the list holds %s", n->name, n->op,
                       rt_dtype_name(t->dtype), rt_dtype_name(l->dt));
    if (!rt_dtype_is_pod(t->dtype))
        return ms_errf(MS_ENOTSUP, "'%s' (%s): tensor lists of %s are not supported", n->name,
                       n->op, rt_dtype_name(t->dtype));
    rt_shape m;
    if (shape_merge(&l->eshape, &t->shape, &m) != 0) {
        char a[96], b[96];
        return ms_errf(MS_EINVAL, "'%s' (%s): element of shape %s, the list's element shape is %s",
                       n->name, n->op, rt_shape_str(&t->shape, a, sizeof a),
                       l->eshape.rank < 0 ? "unknown" : rt_shape_str(&l->eshape, b, sizeof b));
    }
    return MS_OK;
}

static ms_status index_in(const kn_node *n, const rt_tensor *t, int64_t *out) {
    if ((t->dtype != RT_DT_INT32 && t->dtype != RT_DT_INT64) || t->nelem != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): index must be an int32 scalar", n->name, n->op);
    *out = t->dtype == RT_DT_INT32 ? *(const int32_t *)t->data : *(const int64_t *)t->data;
    return MS_OK;
}

/* The element shape to use for unset elements: the list's merged with the op's. */
static ms_status fill_shape(const kn_node *n, const tlist *l, const rt_tensor *es_in, rt_shape *s) {
    rt_shape op = {.rank = -1};
    ms_status st = es_in ? shape_in(n, es_in, &op) : MS_OK;
    if (st != MS_OK) return st;
    if (shape_merge(&l->eshape, &op, s) != 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): element_shape does not match the list's", n->name,
                       n->op);
    return MS_OK;
}

/* ---- ops ---- */

static ms_status reserve_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)ctx, (void)st_;
    rt_shape es;
    int64_t num;
    ms_status st = shape_in(n, in[0], &es);
    if (st == MS_OK) st = index_in(n, in[1], &num);
    if (st != MS_OK) return st;
    int empty = strcmp(n->op, "EmptyTensorList") == 0; /* in[1] is max_num_elements */
    if (!empty && (num < 0 || num > MAX_LIST_LEN))
        return ms_errf(MS_EINVAL, "'%s' (%s): num_elements %lld is out of range [0, %d]", n->name,
                       n->op, (long long)num, MAX_LIST_LEN);
    tlist *l;
    return tlist_new(kn_attr_type(n, "element_dtype", RT_DT_FLOAT), &es, empty ? 0 : (int)num,
                     empty ? 4 : (int)num, &l, &out[0]);
}

static ms_status from_tensor_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                     rt_tensor *const *in, rt_tensor **out) {
    (void)ctx, (void)st_;
    const rt_tensor *t = in[0];
    rt_shape es;
    ms_status st = shape_in(n, in[1], &es);
    if (st != MS_OK) return st;
    if (t->shape.rank < 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): the tensor must have rank >= 1", n->name, n->op);
    if (!rt_dtype_is_pod(t->dtype))
        return ms_errf(MS_ENOTSUP, "'%s' (%s): tensor lists of %s are not supported", n->name,
                       n->op, rt_dtype_name(t->dtype));
    rt_shape item = {.rank = t->shape.rank - 1};
    for (int i = 1; i < t->shape.rank; i++) item.dim[i - 1] = t->shape.dim[i];
    rt_shape m;
    if (shape_merge(&es, &item, &m) != 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): element_shape does not match the tensor's", n->name,
                       n->op);
    int64_t len = t->shape.dim[0];
    if (len > MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): %lld elements, at most %d", n->name, n->op,
                       (long long)len, MAX_LIST_LEN);
    tlist *l;
    if ((st = tlist_new(t->dtype, &es, (int)len, (int)len, &l, &out[0])) != MS_OK) return st;
    size_t per = (size_t)rt_shape_nelem(&item) * rt_dtype_size(t->dtype);
    size_t base = (size_t)((const char *)t->data - (const char *)t->buf->data);
    for (int64_t i = 0; i < len; i++) {
        if ((st = rt_tensor_new_on(t->dtype, &item, t->buf, base + (size_t)i * per, &l->items[i])) !=
            MS_OK) {
            rt_tensor_unref(out[0]);
            out[0] = NULL;
            return st;
        }
    }
    return MS_OK;
}

/* A zero element of shape s (fully known) for an unset slot. */
static ms_status zero_item(kn_ctx *ctx, const kn_node *n, rt_dtype dt, const rt_shape *s,
                           int idx, rt_tensor **out) {
    if (!shape_known(s))
        return ms_errf(MS_EINVAL,
                       "'%s' (%s): element %d was never set and the element shape is not fully "
                       "known",
                       n->name, n->op, idx);
    ms_status st = kn_ctx_output(ctx, 0, dt, s, out);
    if (st != MS_OK) return st;
    memset((*out)->data, 0, rt_tensor_nbytes(*out));
    return MS_OK;
}

static ms_status get_item_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    int64_t i;
    ms_status st = list_in(n, in[0], &l);
    if (st == MS_OK) st = index_in(n, in[1], &i);
    if (st != MS_OK) return st;
    if (i < 0 || i >= l->n)
        return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range for a list of %d",
                       n->name, n->op, (long long)i, l->n);
    if (l->items[i]) {
        out[0] = rt_tensor_ref(l->items[i]);
        return MS_OK;
    }
    rt_shape s;
    if ((st = fill_shape(n, l, n->nin > 2 ? in[2] : NULL, &s)) != MS_OK) return st;
    return zero_item(ctx, n, l->dt, &s, (int)i, &out[0]);
}

static ms_status set_item_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)ctx, (void)st_;
    const tlist *l = NULL;
    int64_t i;
    ms_status st = list_in(n, in[0], &l);
    if (st == MS_OK) st = index_in(n, in[1], &i);
    if (st == MS_OK) st = check_item(n, l, in[2]);
    if (st != MS_OK) return st;
    int resize = kn_attr_b(n, "resize_if_index_out_of_bounds", 0);
    if (i < 0 || (i >= l->n && !resize) || i >= MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range for a list of %d",
                       n->name, n->op, (long long)i, l->n);
    tlist *c;
    if ((st = tlist_copy(l, i >= l->n ? (int)i + 1 : l->n, &c, &out[0])) != MS_OK) return st;
    if (i >= c->n) c->n = (int)i + 1;
    rt_tensor_unref(c->items[i]);
    c->items[i] = rt_tensor_ref(in[2]);
    return MS_OK;
}

static ms_status push_back_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)ctx, (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st == MS_OK) st = check_item(n, l, in[1]);
    if (st != MS_OK) return st;
    if (l->n >= MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): the list already holds %d elements", n->name, n->op,
                       l->n);
    tlist *c;
    if ((st = tlist_copy(l, l->n + 1, &c, &out[0])) != MS_OK) return st;
    c->items[c->n++] = rt_tensor_ref(in[1]);
    return MS_OK;
}

static ms_status pop_back_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    if (l->n == 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): the list is empty", n->name, n->op);
    if (l->items[l->n - 1]) {
        out[1] = rt_tensor_ref(l->items[l->n - 1]);
    } else {
        rt_shape s;
        if ((st = fill_shape(n, l, n->nin > 1 ? in[1] : NULL, &s)) != MS_OK) return st;
        if ((st = zero_item(ctx, n, l->dt, &s, l->n - 1, &out[1])) != MS_OK) return st;
    }
    tlist *c;
    if ((st = tlist_copy(l, l->n, &c, &out[0])) != MS_OK) {
        rt_tensor_unref(out[1]);
        out[1] = NULL;
        return st;
    }
    c->n--;
    rt_tensor_unref(c->items[c->n]);
    c->items[c->n] = NULL;
    return MS_OK;
}

static ms_status length_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    rt_shape scalar = {0};
    if (st == MS_OK) st = kn_ctx_output(ctx, 0, RT_DT_INT32, &scalar, &out[0]);
    if (st != MS_OK) return st;
    *(int32_t *)out[0]->data = l->n;
    return MS_OK;
}

static ms_status element_shape_compute(kn_ctx *ctx, const kn_node *n, void *st_,
                                       rt_tensor *const *in, rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    rt_dtype dt = kn_attr_type(n, "shape_type", RT_DT_INT32);
    if (dt != RT_DT_INT32 && dt != RT_DT_INT64)
        return ms_errf(MS_EINVAL, "'%s' (%s): shape_type must be int32 or int64", n->name, n->op);
    rt_shape os = {.rank = l->eshape.rank < 0 ? 0 : 1, .dim = {l->eshape.rank < 0 ? 0 : l->eshape.rank}};
    if ((st = kn_ctx_output(ctx, 0, dt, &os, &out[0])) != MS_OK) return st;
    int nd = l->eshape.rank < 0 ? 1 : l->eshape.rank;
    for (int i = 0; i < nd; i++) {
        int64_t v = l->eshape.rank < 0 ? -1 : l->eshape.dim[i];
        if (dt == RT_DT_INT32) ((int32_t *)out[0]->data)[i] = (int32_t)v;
        else ((int64_t *)out[0]->data)[i] = v;
    }
    return MS_OK;
}

/* The shape of every element of l (all set ones must agree); unset ones use
 * the list's and the op's element shape. */
static ms_status common_shape(const kn_node *n, const tlist *l, const rt_tensor *es_in,
                              rt_shape *s) {
    ms_status st = fill_shape(n, l, es_in, s);
    if (st != MS_OK) return st;
    for (int i = 0; i < l->n; i++) {
        if (l->items[i] == NULL) continue;
        rt_shape m;
        if (shape_merge(s, &l->items[i]->shape, &m) != 0)
            return ms_errf(MS_EINVAL, "'%s' (%s): the list's elements differ in shape (element %d)",
                           n->name, n->op, i);
        *s = m;
    }
    return MS_OK;
}

static ms_status stack_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                               rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    rt_dtype dt = kn_attr_type(n, "element_dtype", l->dt);
    if (dt != l->dt)
        return ms_errf(MS_EINVAL, "'%s' (%s): element_dtype %s, the list holds %s", n->name, n->op,
                       rt_dtype_name(dt), rt_dtype_name(l->dt));
    int64_t want = kn_attr_i(n, "num_elements", -1);
    if (want >= 0 && want != l->n)
        return ms_errf(MS_EINVAL, "'%s' (%s): num_elements %lld, the list holds %d", n->name,
                       n->op, (long long)want, l->n);
    rt_shape s;
    if ((st = common_shape(n, l, n->nin > 1 ? in[1] : NULL, &s)) != MS_OK) return st;
    if (!shape_known(&s))
        return ms_errf(MS_EINVAL,
                       "'%s' (%s): the element shape is not fully known (empty list or unset "
                       "elements)",
                       n->name, n->op);
    if (s.rank + 1 > RT_MAX_RANK)
        return ms_errf(MS_ENOTSUP, "'%s' (%s): rank %d", n->name, n->op, s.rank + 1);
    rt_shape os = {.rank = s.rank + 1, .dim = {l->n}};
    for (int i = 0; i < s.rank; i++) os.dim[i + 1] = s.dim[i];
    if ((st = kn_ctx_output(ctx, 0, dt, &os, &out[0])) != MS_OK) return st;
    size_t per = (size_t)rt_shape_nelem(&s) * rt_dtype_size(dt);
    char *dst = out[0]->data;
    for (int i = 0; i < l->n; i++, dst += per) {
        if (l->items[i]) memcpy(dst, l->items[i]->data, per);
        else memset(dst, 0, per);
    }
    return MS_OK;
}

/* TensorListConcatV2(input_handle, element_shape, leading_dims) ->
 * (tensor, lengths): the elements joined along their first dim. */
static ms_status concat_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    rt_shape s = {.rank = -1};
    if (n->nin > 1 && (st = shape_in(n, in[1], &s)) != MS_OK) return st;
    int64_t total = 0;
    rt_shape inner = {.rank = -1};
    for (int i = 0; i < l->n; i++) {
        const rt_tensor *t = l->items[i];
        if (t == NULL)
            return ms_errf(MS_EINVAL, "'%s' (%s): element %d was never set", n->name, n->op, i);
        if (t->shape.rank < 1)
            return ms_errf(MS_EINVAL, "'%s' (%s): element %d is a scalar", n->name, n->op, i);
        rt_shape r = {.rank = t->shape.rank - 1};
        for (int d = 1; d < t->shape.rank; d++) r.dim[d - 1] = t->shape.dim[d];
        rt_shape m;
        if (shape_merge(&inner, &r, &m) != 0)
            return ms_errf(MS_EINVAL, "'%s' (%s): elements differ beyond the first dim", n->name,
                           n->op);
        inner = m;
        total += t->shape.dim[0];
    }
    if (inner.rank < 0) {
        if (s.rank < 1 || !shape_known(&s))
            return ms_errf(MS_EINVAL, "'%s' (%s): empty list and the element shape is not known",
                           n->name, n->op);
        inner.rank = s.rank - 1;
        for (int d = 1; d < s.rank; d++) inner.dim[d - 1] = s.dim[d];
    }
    rt_shape os = {.rank = inner.rank + 1, .dim = {total}};
    for (int d = 0; d < inner.rank; d++) os.dim[d + 1] = inner.dim[d];
    rt_shape ls = {.rank = 1, .dim = {l->n}};
    if ((st = kn_ctx_output(ctx, 0, l->dt, &os, &out[0])) != MS_OK) return st;
    if ((st = kn_ctx_output(ctx, 1, RT_DT_INT64, &ls, &out[1])) != MS_OK) return st;
    char *dst = out[0]->data;
    for (int i = 0; i < l->n; i++) {
        size_t nb = rt_tensor_nbytes(l->items[i]);
        memcpy(dst, l->items[i]->data, nb);
        dst += nb;
        ((int64_t *)out[1]->data)[i] = l->items[i]->shape.dim[0];
    }
    return MS_OK;
}


/* Stacks the elements indices[k] (checked in range) of l into out[0], of
 * element shape s; unset elements are zeros. Gather of TensorList and of
 * TensorArrayV3. */
static ms_status gather_items(kn_ctx *ctx, const kn_node *n, const tlist *l, const rt_tensor *ix,
                              rt_shape s, rt_tensor **out) {
    ms_status st;
    if (!shape_known(&s) || s.rank + 1 > RT_MAX_RANK)
        return ms_errf(MS_EINVAL, "'%s' (%s): the element shape is not fully known", n->name, n->op);
    rt_shape os = {.rank = s.rank + 1, .dim = {ix->nelem}};
    for (int d = 0; d < s.rank; d++) os.dim[d + 1] = s.dim[d];
    if ((st = kn_ctx_output(ctx, 0, l->dt, &os, &out[0])) != MS_OK) return st;
    size_t per = (size_t)rt_shape_nelem(&s) * rt_dtype_size(l->dt);
    char *dst = out[0]->data;
    for (int64_t k = 0; k < ix->nelem; k++, dst += per) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        if (l->items[i]) memcpy(dst, l->items[i]->data, per);
        else memset(dst, 0, per);
    }
    return MS_OK;
}

/* TensorListGather(handle, indices, element_shape) -> values [len(indices), elem...]. */
static ms_status gather_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[1];
    if ((ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) || ix->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): indices must be an int32 vector", n->name, n->op);
    rt_shape s;
    if ((st = common_shape(n, l, n->nin > 2 ? in[2] : NULL, &s)) != MS_OK) return st;
    for (int64_t k = 0; k < ix->nelem; k++) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        if (i < 0 || i >= l->n)
            return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range for a list of %d",
                           n->name, n->op, (long long)i, l->n);
    }
    return gather_items(ctx, n, l, ix, s, out);
}

/* TensorListScatterIntoExistingList(handle, tensor, indices): a new list with
 * element indices[k] = tensor[k] (grown when an index is past the end). */
static ms_status scatter_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)ctx, (void)st_;
    const tlist *l = NULL;
    ms_status st = list_in(n, in[0], &l);
    if (st != MS_OK) return st;
    const rt_tensor *v = in[1], *ix = in[2];
    if ((ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) || ix->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): indices must be an int32 vector", n->name, n->op);
    if (v->shape.rank < 1 || v->shape.dim[0] != ix->nelem)
        return ms_errf(MS_EINVAL, "'%s' (%s): the tensor's first dim must equal the %lld indices",
                       n->name, n->op, (long long)ix->nelem);
    if (v->dtype != l->dt || !rt_dtype_is_pod(v->dtype))
        return ms_errf(MS_EINVAL, "'%s' (%s): tensor of %s for a list of %s", n->name, n->op,
                       rt_dtype_name(v->dtype), rt_dtype_name(l->dt));
    int64_t need = l->n;
    for (int64_t k = 0; k < ix->nelem; k++) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        if (i < 0 || i >= MAX_LIST_LEN)
            return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range", n->name, n->op,
                           (long long)i);
        if (i + 1 > need) need = i + 1;
    }
    rt_shape item = {.rank = v->shape.rank - 1};
    for (int d = 1; d < v->shape.rank; d++) item.dim[d - 1] = v->shape.dim[d];
    rt_shape m;
    if (shape_merge(&l->eshape, &item, &m) != 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): elements do not match the list's element shape",
                       n->name, n->op);
    tlist *c;
    if ((st = tlist_copy(l, (int)need, &c, &out[0])) != MS_OK) return st;
    c->n = (int)need;
    size_t per = (size_t)rt_shape_nelem(&item) * rt_dtype_size(v->dtype);
    size_t base = (size_t)((const char *)v->data - (const char *)v->buf->data);
    for (int64_t k = 0; k < ix->nelem; k++) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        rt_tensor *e;
        if ((st = rt_tensor_new_on(v->dtype, &item, v->buf, base + (size_t)k * per, &e)) != MS_OK) {
            rt_tensor_unref(out[0]);
            out[0] = NULL;
            return st;
        }
        rt_tensor_unref(c->items[i]);
        c->items[i] = e;
    }
    return MS_OK;
}

/* TensorListResize(handle, size): truncated or padded with unset elements. */
static ms_status resize_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)ctx, (void)st_;
    const tlist *l = NULL;
    int64_t size;
    ms_status st = list_in(n, in[0], &l);
    if (st == MS_OK) st = index_in(n, in[1], &size);
    if (st != MS_OK) return st;
    if (size < 0 || size > MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): size %lld is out of range [0, %d]", n->name, n->op,
                       (long long)size, MAX_LIST_LEN);
    tlist *c;
    if ((st = tlist_copy(l, (int)size > l->n ? (int)size : l->n, &c, &out[0])) != MS_OK) return st;
    for (int i = (int)size; i < c->n; i++) {
        rt_tensor_unref(c->items[i]);
        c->items[i] = NULL;
    }
    c->n = (int)size;
    return MS_OK;
}

/* ---- TF1 TensorArrayV3 family ----
 *
 * A TensorArray is mutable state reached through a handle (TensorFlow: a
 * resource): a list whose writes change it in place. Its handle here is a
 * DT_VARIANT scalar owning the array (not interchangeable with a TensorList);
 * each run of the TensorArrayV3 node makes a new, empty array. The float
 * "flow" scalars only order the ops and carry 0. Reads of an element never
 * written give zeros when the element shape is fully known. */

static void ta_release(rt_buf *b) {
    tlist_release(b);
}

static ms_status ta_in(const kn_node *n, const rt_tensor *t, tlist **out) {
    if (t->dtype != RT_DT_VARIANT || t->nelem != 1 || t->buf == NULL ||
        t->buf->release != ta_release || t->data != t->buf->data)
        return ms_errf(MS_EINVAL, "'%s' (%s): input 0 is not a TensorArray handle", n->name, n->op);
    *out = *(tlist *const *)t->data;
    return MS_OK;
}

/* Grows a to hold n elements (new ones unset). */
static ms_status ta_grow(const kn_node *n, tlist *a, int64_t want) {
    if (want <= a->n) return MS_OK;
    if (want > MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): size %lld is over %d", n->name, n->op,
                       (long long)want, MAX_LIST_LEN);
    if (want > a->cap) {
        int ncap = a->cap * 2 > want ? a->cap * 2 : (int)want;
        rt_tensor **ni = realloc(a->items, sizeof(*ni) * ((size_t)ncap + 1));
        if (ni == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        memset(ni + a->cap, 0, sizeof(*ni) * (size_t)(ncap - a->cap + 1));
        a->items = ni;
        a->cap = ncap;
    }
    a->n = (int)want;
    return MS_OK;
}

static ms_status flow_out(kn_ctx *ctx, int idx, rt_tensor **out) {
    rt_shape scalar = {0};
    ms_status st = kn_ctx_output(ctx, idx, RT_DT_FLOAT, &scalar, out);
    if (st == MS_OK) *(float *)(*out)->data = 0.0f;
    return st;
}

static ms_status ta_new_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                rt_tensor **out) {
    (void)st_;
    int64_t size;
    ms_status st = index_in(n, in[0], &size);
    if (st != MS_OK) return st;
    if (size < 0 || size > MAX_LIST_LEN)
        return ms_errf(MS_EINVAL, "'%s' (%s): size %lld is out of range [0, %d]", n->name, n->op,
                       (long long)size, MAX_LIST_LEN);
    rt_shape es = {.rank = -1};
    if (kn_attr_has(n, "element_shape") && kn_attr_shape(n, "element_shape", &es) != MS_OK) {
        ms_err_clear();
        es.rank = -1;
    }
    tlist *l;
    if ((st = tlist_new(kn_attr_type(n, "dtype", RT_DT_FLOAT), &es, (int)size, (int)size, &l,
                        &out[0])) != MS_OK)
        return st;
    out[0]->buf->release = ta_release;
    l->dynamic = kn_attr_b(n, "dynamic_size", 0);
    if ((st = flow_out(ctx, 1, &out[1])) != MS_OK) {
        rt_tensor_unref(out[0]);
        out[0] = NULL;
    }
    return st;
}

static ms_status ta_write_one(const kn_node *n, tlist *a, int64_t i, const rt_tensor *v) {
    ms_status st = check_item(n, a, v);
    if (st != MS_OK) return st;
    if (i < 0) return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is negative", n->name, n->op,
                              (long long)i);
    if (i >= a->n) {
        if (!a->dynamic)
            return ms_errf(MS_EINVAL,
                           "'%s' (%s): index %lld is out of range for a TensorArray of %d "
                           "(dynamic_size is false)",
                           n->name, n->op, (long long)i, a->n);
        if ((st = ta_grow(n, a, i + 1)) != MS_OK) return st;
    }
    rt_tensor_unref(a->items[i]);
    a->items[i] = rt_tensor_ref((rt_tensor *)v);
    return MS_OK;
}

static ms_status ta_write_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    int64_t i;
    ms_status st = ta_in(n, in[0], &a);
    if (st == MS_OK) st = index_in(n, in[1], &i);
    if (st == MS_OK) st = ta_write_one(n, a, i, in[2]);
    if (st == MS_OK) st = flow_out(ctx, 0, &out[0]);
    return st;
}

static ms_status ta_read_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    int64_t i;
    ms_status st = ta_in(n, in[0], &a);
    if (st == MS_OK) st = index_in(n, in[1], &i);
    if (st != MS_OK) return st;
    if (i < 0 || i >= a->n)
        return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range for a TensorArray of %d",
                       n->name, n->op, (long long)i, a->n);
    if (a->items[i]) {
        out[0] = rt_tensor_ref(a->items[i]);
        return MS_OK;
    }
    return zero_item(ctx, n, a->dt, &a->eshape, (int)i, &out[0]);
}

static ms_status ta_size_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                 rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    rt_shape scalar = {0};
    ms_status st = ta_in(n, in[0], &a);
    if (st == MS_OK) st = kn_ctx_output(ctx, 0, RT_DT_INT32, &scalar, &out[0]);
    if (st == MS_OK) *(int32_t *)out[0]->data = a->n;
    return st;
}

static ms_status ta_close_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)ctx, (void)st_, (void)out;
    tlist *a = NULL;
    return ta_in(n, in[0], &a);
}

/* Gather(handle, indices, flow) -> value [len(indices), elem...]. */
static ms_status ta_gather_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    ms_status st = ta_in(n, in[0], &a);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[1];
    if ((ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) || ix->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): indices must be an int32 vector", n->name, n->op);
    rt_shape s = a->eshape;
    rt_shape op = {.rank = -1};
    if (kn_attr_has(n, "element_shape") && kn_attr_shape(n, "element_shape", &op) == MS_OK) {
        rt_shape m;
        if (shape_merge(&s, &op, &m) == 0) s = m;
    }
    ms_err_clear();
    for (int64_t k = 0; k < ix->nelem; k++) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        if (i < 0 || i >= a->n)
            return ms_errf(MS_EINVAL, "'%s' (%s): index %lld is out of range for a TensorArray of %d",
                           n->name, n->op, (long long)i, a->n);
        if (a->items[i] == NULL) continue;
        rt_shape m;
        if (shape_merge(&s, &a->items[i]->shape, &m) != 0)
            return ms_errf(MS_EINVAL, "'%s' (%s): elements differ in shape", n->name, n->op);
        s = m;
    }
    return gather_items(ctx, n, a, ix, s, out);
}

/* Scatter(handle, indices, value, flow): value[k] goes to element indices[k]. */
static ms_status ta_scatter_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                    rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    ms_status st = ta_in(n, in[0], &a);
    if (st != MS_OK) return st;
    const rt_tensor *ix = in[1], *v = in[2];
    if ((ix->dtype != RT_DT_INT32 && ix->dtype != RT_DT_INT64) || ix->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): indices must be an int32 vector", n->name, n->op);
    if (v->shape.rank < 1 || v->shape.dim[0] != ix->nelem)
        return ms_errf(MS_EINVAL, "'%s' (%s): value's first dim must equal the %lld indices",
                       n->name, n->op, (long long)ix->nelem);
    if (!rt_dtype_is_pod(v->dtype))
        return ms_errf(MS_ENOTSUP, "'%s' (%s): %s is not supported", n->name, n->op,
                       rt_dtype_name(v->dtype));
    rt_shape item = {.rank = v->shape.rank - 1};
    for (int d = 1; d < v->shape.rank; d++) item.dim[d - 1] = v->shape.dim[d];
    size_t per = (size_t)rt_shape_nelem(&item) * rt_dtype_size(v->dtype);
    size_t base = (size_t)((const char *)v->data - (const char *)v->buf->data);
    for (int64_t k = 0; k < ix->nelem && st == MS_OK; k++) {
        int64_t i = ix->dtype == RT_DT_INT32 ? ((const int32_t *)ix->data)[k]
                                             : ((const int64_t *)ix->data)[k];
        rt_tensor *e;
        if ((st = rt_tensor_new_on(v->dtype, &item, v->buf, base + (size_t)k * per, &e)) != MS_OK)
            break;
        st = ta_write_one(n, a, i, e);
        rt_tensor_unref(e);
    }
    if (st == MS_OK) st = flow_out(ctx, 0, &out[0]);
    return st;
}

/* The rows of shape s past its first dim (s of rank >= 1). */
static rt_shape shape_except0(const rt_shape *s) {
    rt_shape r = {.rank = s->rank - 1};
    for (int d = 1; d < s->rank; d++) r.dim[d - 1] = s->dim[d];
    return r;
}

/* ConcatV3(handle, flow_in) -> (value, lengths): every element joined along
 * its first dim (tf.TensorArray.concat); lengths[i] is element i's first dim.
 * An element never written is zeros of the array's element shape when that
 * is fully known (as a read), else the op fails. An empty array needs the
 * element_shape_except0 attr (or the array's element shape) fully known, as
 * in TensorFlow. The output is charged to the request's budget. */
static ms_status ta_concat_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                   rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    ms_status st = ta_in(n, in[0], &a);
    if (st != MS_OK) return st;
    if (a->eshape.rank == 0)
        return ms_errf(MS_EINVAL, "'%s' (%s): the elements are scalars; concat needs vectors or more",
                       n->name, n->op);
    rt_shape inner = {.rank = -1}, m;
    if (kn_attr_has(n, "element_shape_except0") &&
        kn_attr_shape(n, "element_shape_except0", &inner) != MS_OK)
        inner.rank = -1;
    ms_err_clear();
    if (a->eshape.rank > 0) {
        rt_shape r = shape_except0(&a->eshape);
        if (shape_merge(&inner, &r, &m) != 0)
            return ms_errf(MS_EINVAL,
                           "'%s' (%s): element_shape_except0 does not match the array's element "
                           "shape",
                           n->name, n->op);
        inner = m;
    }
    int64_t total = 0;
    for (int i = 0; i < a->n; i++) {
        const rt_shape *es = a->items[i] ? &a->items[i]->shape : &a->eshape;
        if (a->items[i] == NULL && !shape_known(es))
            return ms_errf(MS_EINVAL,
                           "'%s' (%s): element %d was never written and the element shape is "
                           "not fully known",
                           n->name, n->op, i);
        if (es->rank < 1)
            return ms_errf(MS_EINVAL, "'%s' (%s): element %d is a scalar; concat needs vectors "
                           "or more", n->name, n->op, i);
        rt_shape r = shape_except0(es);
        if (shape_merge(&inner, &r, &m) != 0) {
            char b[96];
            return ms_errf(MS_EINVAL, "'%s' (%s): element %d of shape %s differs from the others "
                           "past the first dim", n->name, n->op, i, rt_shape_str(es, b, sizeof b));
        }
        inner = m;
        if (es->dim[0] > INT64_MAX / 2 - total)
            return ms_errf(MS_EINVAL, "'%s' (%s): the elements' first dims overflow", n->name, n->op);
        total += es->dim[0];
    }
    if (!shape_known(&inner))
        return ms_errf(MS_EINVAL,
                       "'%s' (%s): the TensorArray is empty and element_shape_except0 is not fully "
                       "known",
                       n->name, n->op);
    if (inner.rank + 1 > RT_MAX_RANK)
        return ms_errf(MS_ENOTSUP, "'%s' (%s): rank %d", n->name, n->op, inner.rank + 1);
    rt_shape os = {.rank = inner.rank + 1, .dim = {total}};
    for (int d = 0; d < inner.rank; d++) os.dim[d + 1] = inner.dim[d];
    rt_shape ls = {.rank = 1, .dim = {a->n}};
    if ((st = kn_ctx_output(ctx, 0, a->dt, &os, &out[0])) != MS_OK) return st;
    if ((st = kn_ctx_output(ctx, 1, RT_DT_INT64, &ls, &out[1])) != MS_OK) return st;
    size_t row = (size_t)rt_shape_nelem(&inner) * rt_dtype_size(a->dt);
    char *dst = out[0]->data;
    for (int i = 0; i < a->n; i++) {
        const rt_tensor *t = a->items[i];
        int64_t rows = t ? t->shape.dim[0] : a->eshape.dim[0];
        size_t nb = (size_t)rows * row;
        if (t) memcpy(dst, t->data, nb);
        else memset(dst, 0, nb);
        dst += nb;
        ((int64_t *)out[1]->data)[i] = rows;
    }
    return MS_OK;
}

/* SplitV3(handle, value, lengths, flow_in) -> flow_out: element i becomes
 * value's rows [sum(lengths[:i]), sum(lengths[:i + 1])) (a view of value, no
 * copy; tf.TensorArray.split). The lengths must sum to value's first dim
 * and, unless the array has dynamic_size, be as many as its elements. */
static ms_status ta_split_compute(kn_ctx *ctx, const kn_node *n, void *st_, rt_tensor *const *in,
                                  rt_tensor **out) {
    (void)st_;
    tlist *a = NULL;
    ms_status st = ta_in(n, in[0], &a);
    if (st != MS_OK) return st;
    const rt_tensor *v = in[1], *len = in[2];
    if ((len->dtype != RT_DT_INT32 && len->dtype != RT_DT_INT64) || len->shape.rank != 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): lengths must be an int64 vector", n->name, n->op);
    if (v->shape.rank < 1)
        return ms_errf(MS_EINVAL, "'%s' (%s): value must be at least a vector", n->name, n->op);
    if (!rt_dtype_is_pod(v->dtype))
        return ms_errf(MS_ENOTSUP, "'%s' (%s): %s is not supported", n->name, n->op,
                       rt_dtype_name(v->dtype));
    int64_t k = len->nelem, sum = 0;
    for (int64_t i = 0; i < k; i++) {
        int64_t l = len->dtype == RT_DT_INT32 ? ((const int32_t *)len->data)[i]
                                              : ((const int64_t *)len->data)[i];
        if (l < 0 || l > v->shape.dim[0] - sum)
            return ms_errf(MS_EINVAL,
                           "'%s' (%s): lengths[%lld] = %lld: the lengths must be >= 0 and sum to "
                           "value's first dim %lld",
                           n->name, n->op, (long long)i, (long long)l,
                           (long long)v->shape.dim[0]);
        sum += l;
    }
    if (sum != v->shape.dim[0])
        return ms_errf(MS_EINVAL, "'%s' (%s): the lengths sum to %lld, value's first dim is %lld",
                       n->name, n->op, (long long)sum, (long long)v->shape.dim[0]);
    if (!a->dynamic && k != a->n)
        return ms_errf(MS_EINVAL,
                       "'%s' (%s): %lld lengths for a TensorArray of %d (dynamic_size is false)",
                       n->name, n->op, (long long)k, a->n);
    if ((st = ta_grow(n, a, k)) != MS_OK) return st;
    rt_shape item = v->shape; /* dim 0 set per element */
    rt_shape r = shape_except0(&v->shape);
    size_t row = (size_t)rt_shape_nelem(&r) * rt_dtype_size(v->dtype);
    size_t off = (size_t)((const char *)v->data - (const char *)v->buf->data);
    for (int64_t i = 0; i < k && st == MS_OK; i++) {
        if ((i & 4095) == 4095 && kn_ctx_cancelled(ctx))
            return ms_errf(MS_ECANCELED, "'%s' (%s): cancelled", n->name, n->op);
        item.dim[0] = len->dtype == RT_DT_INT32 ? ((const int32_t *)len->data)[i]
                                                : ((const int64_t *)len->data)[i];
        rt_tensor *e;
        if ((st = rt_tensor_new_on(v->dtype, &item, v->buf, off, &e)) != MS_OK) break;
        st = ta_write_one(n, a, i, e);
        rt_tensor_unref(e);
        off += (size_t)item.dim[0] * row;
    }
    if (st == MS_OK) st = flow_out(ctx, 0, &out[0]);
    return st;
}

const kn_kernel rt_ops_tensorlist_kernels[] = {
    {.op = "TensorListReserve", .compute = reserve_compute},
    {.op = "EmptyTensorList", .compute = reserve_compute},
    {.op = "TensorListFromTensor", .compute = from_tensor_compute},
    {.op = "TensorListGetItem", .compute = get_item_compute},
    {.op = "TensorListSetItem", .compute = set_item_compute},
    {.op = "TensorListPushBack", .compute = push_back_compute},
    {.op = "TensorListPopBack", .compute = pop_back_compute},
    {.op = "TensorListLength", .compute = length_compute},
    {.op = "TensorListElementShape", .compute = element_shape_compute},
    {.op = "TensorListStack", .compute = stack_compute},
    {.op = "TensorListConcatV2", .compute = concat_compute},
    {.op = "TensorListGather", .compute = gather_compute},
    {.op = "TensorListScatterIntoExistingList", .compute = scatter_compute},
    {.op = "TensorListResize", .compute = resize_compute},
    {.op = "TensorArrayV3", .compute = ta_new_compute, .stateful = 1},
    {.op = "TensorArrayWriteV3", .compute = ta_write_compute, .stateful = 1},
    {.op = "TensorArrayReadV3", .compute = ta_read_compute, .stateful = 1},
    {.op = "TensorArrayGatherV3", .compute = ta_gather_compute, .stateful = 1},
    {.op = "TensorArrayScatterV3", .compute = ta_scatter_compute, .stateful = 1},
    {.op = "TensorArrayConcatV3", .compute = ta_concat_compute, .stateful = 1},
    {.op = "TensorArraySplitV3", .compute = ta_split_compute, .stateful = 1},
    {.op = "TensorArraySizeV3", .compute = ta_size_compute, .stateful = 1},
    {.op = "TensorArrayCloseV3", .compute = ta_close_compute, .stateful = 1},
    {.op = NULL},
};
