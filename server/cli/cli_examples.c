/* cli_examples.c - `dcmserve run --input_examples`, as saved_model_cli has it:
 *
 *   --input_examples 'inputs=[{"x":[5.1,3.5,1.4,0.2]},{"x":[6.7,3.0,5.2,2.3]}]'
 *
 * The value is a JSON list of objects, one tf.Example each; an object maps a
 * feature name to a list of numbers or strings (a single value may stand
 * alone). A list of strings becomes a bytes_list, a list with any
 * number written with a '.' or an exponent a float_list, a list of integers
 * written as such an int64_list (saved_model_cli decides by Python's float
 * and int; JSON keeps no such type, so the number's text decides: 3.0 is a
 * float, 3 an int). The Examples are serialized into one DT_STRING
 * vector. (saved_model_cli reads Python literals; here the text is JSON, so
 * strings take double quotes.) */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_examples.h"
#include "tf_serving.pb-c.h"

/* Number tokens of the JSON text in document order: 1 for those written
 * with '.', 'e' or 'E'. cJSON keeps only the value; the walk below visits
 * numbers in the same order and reads these flags. */
typedef struct {
    unsigned char *isf;
    size_t n, next;
} num_flags;

static int scan_numbers(const char *t, num_flags *nf) {
    size_t cap = strlen(t) + 1;
    nf->isf = malloc(cap);
    nf->n = nf->next = 0;
    if (nf->isf == NULL) return -1;
    for (const char *p = t; *p;) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            int f = 0;
            while (*p && strchr("+-0123456789.eE", *p)) {
                if (*p == '.' || *p == 'e' || *p == 'E') f = 1;
                p++;
            }
            nf->isf[nf->n++] = (unsigned char)f;
        } else {
            p++;
        }
    }
    return 0;
}

static ms_status bad(const char *key, const char *what) {
    return ms_errf(MS_EINVAL, "--input_examples %s: %s", key, what);
}

/* One feature from a JSON value (array or scalar). Allocations go to *mem. */
static ms_status feature(const char *key, const cJSON *v, Tensorflow__Serving__Feature *f,
                         void **mem, num_flags *nf) {
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    int strs = 0, nums = 0, ints = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v;
        if (cJSON_IsString(e)) {
            strs++;
        } else if (cJSON_IsNumber(e)) {
            nums++;
            double d = e->valuedouble;
            int isf = nf->next < nf->n ? nf->isf[nf->next++] : 1;
            if (isf || d != floor(d) || fabs(d) > 9.0e15) ints = 0;
        } else {
            return bad(key, "feature values must be numbers or strings");
        }
    }
    if (strs && nums) return bad(key, "a feature mixes strings and numbers");
    *mem = calloc((size_t)n + 1, sizeof(ProtobufCBinaryData) > sizeof(int64_t)
                                     ? sizeof(ProtobufCBinaryData) : sizeof(int64_t));
    if (*mem == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    if (strs) {
        Tensorflow__Serving__Feature__BytesList *l = malloc(sizeof(*l));
        if (l == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        tensorflow__serving__feature__bytes_list__init(l);
        ProtobufCBinaryData *b = *mem;
        for (int i = 0; i < n; i++) {
            const cJSON *e = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v;
            b[i].data = (uint8_t *)e->valuestring;
            b[i].len = strlen(e->valuestring);
        }
        l->n_value = (size_t)n;
        l->value = b;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_BYTES_LIST;
        f->bytes_list = l;
    } else if (!ints) {
        Tensorflow__Serving__Feature__FloatList *l = malloc(sizeof(*l));
        if (l == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        tensorflow__serving__feature__float_list__init(l);
        float *x = *mem;
        for (int i = 0; i < n; i++)
            x[i] = (float)(cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v)->valuedouble;
        l->n_value = (size_t)n;
        l->value = x;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_FLOAT_LIST;
        f->float_list = l;
    } else {
        Tensorflow__Serving__Feature__Int64List *l = malloc(sizeof(*l));
        if (l == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        tensorflow__serving__feature__int64_list__init(l);
        int64_t *x = *mem;
        for (int i = 0; i < n; i++)
            x[i] = (int64_t)(cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : v)->valuedouble;
        l->n_value = (size_t)n;
        l->value = x;
        f->kind_case = TENSORFLOW__SERVING__FEATURE__KIND_INT64_LIST;
        f->int64_list = l;
    }
    return MS_OK;
}

static void free_features(Tensorflow__Serving__Features__FeatureEntry *ents, int n, void **mem) {
    for (int i = 0; i < n; i++) {
        Tensorflow__Serving__Feature *f = ents[i].value;
        if (f) { /* the kinds are a oneof: one union member */
            if (f->kind_case == TENSORFLOW__SERVING__FEATURE__KIND_BYTES_LIST) free(f->bytes_list);
            if (f->kind_case == TENSORFLOW__SERVING__FEATURE__KIND_FLOAT_LIST) free(f->float_list);
            if (f->kind_case == TENSORFLOW__SERVING__FEATURE__KIND_INT64_LIST) free(f->int64_list);
            free(f);
        }
        free(mem[i]);
    }
}

/* Serializes one JSON object into *out (malloc'ed). */
static ms_status one_example(const char *key, const cJSON *obj, uint8_t **out, size_t *len,
                             num_flags *nf) {
    if (!cJSON_IsObject(obj)) return bad(key, "each example must be a JSON object");
    int n = cJSON_GetArraySize(obj);
    Tensorflow__Serving__Features__FeatureEntry *ents = calloc((size_t)n + 1, sizeof(*ents));
    Tensorflow__Serving__Features__FeatureEntry **ep = calloc((size_t)n + 1, sizeof(*ep));
    void **mem = calloc((size_t)n + 1, sizeof(void *));
    ms_status st = MS_OK;
    int done = 0;
    if (ents == NULL || ep == NULL || mem == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
    for (int i = 0; i < n && st == MS_OK; i++, done++) {
        const cJSON *item = cJSON_GetArrayItem(obj, i);
        tensorflow__serving__features__feature_entry__init(&ents[i]);
        ents[i].key = item->string;
        Tensorflow__Serving__Feature *f = malloc(sizeof(*f));
        if (f == NULL) {
            st = ms_errf(MS_ENOMEM, "out of memory");
            break;
        }
        tensorflow__serving__feature__init(f);
        ents[i].value = f;
        ep[i] = &ents[i];
        st = feature(key, item, f, &mem[i], nf);
    }
    if (st == MS_OK) {
        Tensorflow__Serving__Features feats = TENSORFLOW__SERVING__FEATURES__INIT;
        feats.n_feature = (size_t)n;
        feats.feature = ep;
        Tensorflow__Serving__Example ex = TENSORFLOW__SERVING__EXAMPLE__INIT;
        ex.features = &feats;
        *len = tensorflow__serving__example__get_packed_size(&ex);
        *out = malloc(*len + 1);
        if (*out == NULL)
            st = ms_errf(MS_ENOMEM, "out of memory");
        else
            tensorflow__serving__example__pack(&ex, *out);
    }
    if (ents && mem) free_features(ents, done + (st != MS_OK && done < n ? 1 : 0), mem);
    free(ents);
    free(ep);
    free(mem);
    return st;
}

ms_status cli_examples_tensor(const char *key, const char *json, rt_tensor **out) {
    cJSON *root = cJSON_Parse(json);
    if (root == NULL || !cJSON_IsArray(root) || cJSON_GetArraySize(root) == 0) {
        cJSON_Delete(root);
        return bad(key, "expected a non-empty JSON list of objects, "
                        "e.g. [{\"x\":[1.0,2.0]}]");
    }
    int n = cJSON_GetArraySize(root);
    num_flags nf;
    if (scan_numbers(json, &nf) != 0) {
        cJSON_Delete(root);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    uint8_t **bytes = calloc((size_t)n, sizeof(*bytes));
    rt_str *strs = calloc((size_t)n, sizeof(*strs));
    ms_status st = MS_OK;
    if (bytes == NULL || strs == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
    for (int i = 0; i < n && st == MS_OK; i++) {
        size_t len = 0;
        st = one_example(key, cJSON_GetArrayItem(root, i), &bytes[i], &len, &nf);
        if (st == MS_OK) strs[i] = (rt_str){bytes[i], len};
    }
    if (st == MS_OK) {
        rt_shape s = {.rank = 1, .dim = {n}};
        st = rt_tensor_new_strings(&s, strs, out);
    }
    for (int i = 0; bytes && i < n; i++) free(bytes[i]);
    free(bytes);
    free(strs);
    free(nf.isf);
    cJSON_Delete(root);
    return st;
}
