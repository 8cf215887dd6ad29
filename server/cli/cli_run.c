/* cli_run.c - `dcmserve run`: load a SavedModel, run one signature on inputs
 * given on the command line, print (and optionally save) the outputs, as
 * `saved_model_cli run` does.
 *
 * Inputs come from three flags, each a ';'-separated list of key=value:
 *   --inputs      k=file.npy  or  k=file.npz[name]  (NumPy files)
 *   --input_exprs k=[[1],[2],[5]]  (nested list literals; see parse_literal), or
 *                 saved_model_cli's np.ones((2,3)) / zeros / full / array forms
 *                 (parse_numpy); trailing unit dimensions may be left out
 *   --input_files k=a.dcm,b.dcm    (DT_STRING: each file's raw bytes)
 * Values are never cast: a literal becomes the signature input's dtype when
 * it is exactly representable in it (an int literal for DT_FLOAT is fine, a
 * float literal for DT_INT32 is an error); a .npy file must already have the
 * signature's dtype.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_dirs.h"
#include "cli_flags.h"
#include "kn_cpu_backend.h"
#include "ms_log.h"
#include "ms_status.h"
#include "rt_model.h"
#include "rt_npy.h"
#include "sig_signature.h"
#include "cli.h"
#include "cli_examples.h"
#include "cli_device.h"
#include "cli_npformat.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dcmserve run --dir DIR [--tag_set serve] [--signature_def KEY]\n"
            "                    [--inputs 'k=f.npy;k2=f.npz[name]'] [--input_exprs "
            "'k=[[1],[2]]']\n"
            "                    [--input_files 'k=a.dcm,b.dcm'] [--outdir DIR] [--overwrite]\n"
            "\n"
            "  --dir DIR            SavedModel directory (or one holding model.onnx), or a\n"
            "                       base directory (its highest numeric version is used)\n"
            "  --tag_set TAGS       comma-separated tag-set of the graph to load (default serve)\n"
            "  --signature_def KEY  signature to run (default serving_default)\n"
            "  --inputs SPEC        'key=file.npy' or 'key=file.npz[array]', ';'-separated\n"
            "  --input_exprs SPEC   'key=<nested list literal>', ';'-separated; numbers, True/"
            "False,\n"
            "                       quoted strings; typed by the signature input's dtype; or\n"
            "                       np.ones(shape), np.zeros(shape), np.full(shape, v),\n"
            "                       np.array(list) (dtype= must name the input's dtype);\n"
            "                       left-out trailing unit dimensions are added ([1,2] for (-1,1))\n"
            "  --input_files SPEC   'key=f1,f2,...': a DT_STRING input of the files' bytes\n"
            "  --input_examples SPEC 'key=[{\"x\":[1.0,2.0]},...]', ';'-separated: a DT_STRING\n"
            "                       input of serialized tf.Examples (JSON list of objects)\n"
            "  --outdir DIR         also save each output as DIR/<output_key>.npy\n"
            "  --overwrite          replace existing files in --outdir\n"
            "  --log_level LEVEL    debug, info, warn, error (default) or off\n"
            "  --device DEV         auto (default), cpu, cuda or cuda:N (docs/gpu.md)\n"
            "  --precision P        fp32 (default) or tf32: the GPU's matrix products and\n"
            "                       convolutions (docs/gpu.md); fp16 is refused\n");
}

/* ---- input list ---- */

typedef struct run_inputs {
    sig_input *v;
    char **keys; /* owned copies, parallel to v */
    int n, cap;
} run_inputs;

static void inputs_free(run_inputs *in) {
    for (int i = 0; i < in->n; i++) {
        free(in->keys[i]);
        if (in->v[i].tensor) rt_tensor_unref(in->v[i].tensor);
    }
    free(in->keys);
    free(in->v);
    memset(in, 0, sizeof(*in));
}

/* Adds key -> t (takes t's reference, also on error). */
static ms_status inputs_add(run_inputs *in, const char *key, rt_tensor *t) {
    for (int i = 0; i < in->n; i++)
        if (strcmp(in->keys[i], key) == 0) {
            rt_tensor_unref(t);
            return ms_errf(MS_EINVAL, "input key \"%s\" is given more than once", key);
        }
    if (in->n == in->cap) {
        int cap = in->cap ? in->cap * 2 : 8;
        sig_input *v = realloc(in->v, (size_t)cap * sizeof(*v));
        if (v != NULL) in->v = v;
        char **k = realloc(in->keys, (size_t)cap * sizeof(*k));
        if (k != NULL) in->keys = k;
        if (v == NULL || k == NULL) {
            rt_tensor_unref(t);
            return ms_errf(MS_ENOMEM, "out of memory");
        }
        in->cap = cap;
    }
    char *kc = strdup(key);
    if (kc == NULL) {
        rt_tensor_unref(t);
        return ms_errf(MS_ENOMEM, "out of memory");
    }
    in->keys[in->n] = kc;
    in->v[in->n].key = kc;
    in->v[in->n].tensor = t;
    in->n++;
    return MS_OK;
}

/* Splits "k=v" in place; trims spaces around the key. */
static ms_status split_kv(const char *flag, char *item, char **key, char **val) {
    char *eq = strchr(item, '=');
    if (eq == NULL)
        return ms_errf(MS_EINVAL, "%s \"%s\" format is incorrect: expected <input_key>=<value>",
                       flag, item);
    *eq = '\0';
    char *k = item;
    while (*k == ' ') k++;
    char *e = k + strlen(k);
    while (e > k && e[-1] == ' ') *--e = '\0';
    if (*k == '\0')
        return ms_errf(MS_EINVAL, "%s \"%s=%s\" has an empty input key", flag, item, eq + 1);
    *key = k;
    *val = eq + 1;
    return MS_OK;
}

static const Tensorflow__TensorInfo *
need_input(const char *flag, const char *sig, const Tensorflow__SignatureDef *sd, const char *key) {
    const Tensorflow__TensorInfo *ti = sig_input_info(sd, key);
    if (ti != NULL) return ti;
    char set[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < sd->n_inputs && len < sizeof(set); i++)
        len += (size_t)snprintf(set + len, sizeof(set) - len, "%s\"%s\"", i ? ", " : "",
                                sd->inputs[i]->key);
    ms_errf(MS_EINVAL, "%s: \"%s\" is not an input of signature \"%s\"; its inputs are: %s", flag,
            key, sig, sd->n_inputs ? set : "(none)");
    return NULL;
}

/* ---- --inputs ---- */

static ms_status load_npy_inputs(char *spec, run_inputs *in) {
    char *save = NULL;
    for (char *item = strtok_r(spec, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (item[strspn(item, " ")] == '\0') continue;
        char *key, *file;
        ms_status st = split_kv("--inputs", item, &key, &file);
        if (st != MS_OK) return st;
        char *name = NULL;
        size_t fl = strlen(file);
        if (fl > 0 && file[fl - 1] == ']') {
            char *lb = strrchr(file, '[');
            if (lb == NULL || lb == file)
                return ms_errf(MS_EINVAL,
                               "--inputs \"%s=%s\" format is incorrect: expected "
                               "<input_key>=<filename> or <input_key>=<filename>[<variable>]",
                               key, file);
            *lb = '\0';
            file[fl - 1] = '\0';
            name = lb + 1;
        }
        rt_tensor *t = NULL;
        if (rt_npy_is_zip_file(file)) {
            st = rt_npz_read_file(file, name, &t);
        } else {
            if (name != NULL)
                fprintf(stderr,
                        "dcmserve run: warning: input file %s holds a single array; name \"%s\" "
                        "ignored\n",
                        file, name);
            st = rt_npy_read_file(file, &t);
        }
        if (st != MS_OK) return ms_errwrap(st, "--inputs %s", key);
        if ((st = inputs_add(in, key, t)) != MS_OK) return st;
    }
    return MS_OK;
}

/* ---- --input_exprs: nested list literals ---- */

typedef enum lit_kind { LIT_INT, LIT_FLOAT, LIT_BOOL, LIT_STR } lit_kind;

typedef struct lit_leaf {
    lit_kind kind;
    const char *text; /* numbers: the literal text (sign included) */
    size_t len;
    int bval;
    char *sval; /* LIT_STR: decoded bytes (owned) */
    size_t slen;
} lit_leaf;

typedef struct lit_parser {
    const char *p, *start;
    const char *key;
    lit_leaf *leaves;
    size_t n, cap;
} lit_parser;

static void skip_ws(lit_parser *lp) {
    while (*lp->p == ' ' || *lp->p == '\t' || *lp->p == '\n') lp->p++;
}

static ms_status lit_err(lit_parser *lp, const char *what) {
    return ms_errf(MS_EINVAL, "--input_exprs %s: %s at offset %ld of \"%s\"", lp->key, what,
                   (long)(lp->p - lp->start), lp->start);
}

static ms_status push_leaf(lit_parser *lp, lit_leaf l) {
    if (lp->n == lp->cap) {
        size_t cap = lp->cap ? lp->cap * 2 : 64;
        lit_leaf *v = realloc(lp->leaves, cap * sizeof(*v));
        if (v == NULL) {
            free(l.sval);
            return ms_errf(MS_ENOMEM, "out of memory");
        }
        lp->leaves = v;
        lp->cap = cap;
    }
    lp->leaves[lp->n++] = l;
    return MS_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static ms_status parse_string(lit_parser *lp) {
    if (*lp->p == 'b') lp->p++;
    char q = *lp->p++;
    size_t cap = strlen(lp->p) + 1, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    while (*lp->p && *lp->p != q) {
        char c = *lp->p++;
        if (c == '\\') {
            char e = *lp->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '0': c = '\0'; break;
            case '\\':
            case '\'':
            case '"': c = e; break;
            case 'x': {
                int h = hexval(lp->p[0]), l = h >= 0 ? hexval(lp->p[1]) : -1;
                if (h < 0 || l < 0) {
                    free(buf);
                    return lit_err(lp, "bad \\x escape");
                }
                c = (char)(h * 16 + l);
                lp->p += 2;
                break;
            }
            default: free(buf); return lit_err(lp, "unsupported escape in string");
            }
        }
        buf[n++] = c;
    }
    if (*lp->p != q) {
        free(buf);
        return lit_err(lp, "unterminated string");
    }
    lp->p++;
    lit_leaf l = {.kind = LIT_STR, .sval = buf, .slen = n};
    return push_leaf(lp, l);
}

static ms_status parse_number(lit_parser *lp) {
    const char *s = lp->p;
    int neg = 0;
    char *sign_end;
    if (*lp->p == '-' || *lp->p == '+') {
        neg = *lp->p == '-';
        lp->p++;
        skip_ws(lp);
    }
    sign_end = (char *)lp->p;
    (void)neg;
    if (strncmp(lp->p, "nan", 3) == 0 || strncmp(lp->p, "inf", 3) == 0) {
        lp->p += 3;
        lit_leaf l = {.kind = LIT_FLOAT, .text = s, .len = (size_t)(lp->p - s)};
        return push_leaf(lp, l);
    }
    int isfloat = 0, digits = 0;
    while ((*lp->p >= '0' && *lp->p <= '9') || *lp->p == '_') digits += *lp->p++ != '_';
    if (*lp->p == '.') {
        isfloat = 1;
        lp->p++;
        while (*lp->p >= '0' && *lp->p <= '9') {
            lp->p++;
            digits++;
        }
    }
    if (digits == 0) {
        lp->p = sign_end;
        return lit_err(lp, "expected a number, True/False, a string or '['");
    }
    if (*lp->p == 'e' || *lp->p == 'E') {
        isfloat = 1;
        lp->p++;
        if (*lp->p == '+' || *lp->p == '-') lp->p++;
        if (!(*lp->p >= '0' && *lp->p <= '9')) return lit_err(lp, "bad exponent");
        while (*lp->p >= '0' && *lp->p <= '9') lp->p++;
    }
    lit_leaf l = {.kind = isfloat ? LIT_FLOAT : LIT_INT, .text = s, .len = (size_t)(lp->p - s)};
    return push_leaf(lp, l);
}

/* Parses one value; *shape receives its shape. */
static ms_status parse_value(lit_parser *lp, rt_shape *shape, int depth) {
    skip_ws(lp);
    if (depth > RT_MAX_RANK) return lit_err(lp, "nested deeper than the maximum rank");
    char open = *lp->p;
    if (open == '[' || open == '(') {
        char close = open == '[' ? ']' : ')';
        lp->p++;
        rt_shape first = {0}, cur;
        int64_t count = 0;
        for (;;) {
            skip_ws(lp);
            if (*lp->p == close) {
                lp->p++;
                break;
            }
            ms_status st = parse_value(lp, &cur, depth + 1);
            if (st != MS_OK) return st;
            if (count == 0) {
                first = cur;
            } else if (!rt_shape_equal(&first, &cur)) {
                return lit_err(lp, "ragged nested list (elements of different lengths)");
            }
            count++;
            skip_ws(lp);
            if (*lp->p == ',') {
                lp->p++;
                continue;
            }
            if (*lp->p == close) continue;
            return lit_err(lp, open == '[' ? "expected ',' or ']'" : "expected ',' or ')'");
        }
        if (count > 0 && first.rank + 1 > RT_MAX_RANK)
            return lit_err(lp, "nested deeper than the maximum rank");
        shape->rank = (count > 0 ? first.rank : 0) + 1;
        shape->dim[0] = count;
        for (int i = 0; count > 0 && i < first.rank; i++) shape->dim[i + 1] = first.dim[i];
        return MS_OK;
    }
    shape->rank = 0;
    if (strncmp(lp->p, "True", 4) == 0 || strncmp(lp->p, "False", 5) == 0) {
        int v = lp->p[0] == 'T';
        lp->p += v ? 4 : 5;
        lit_leaf l = {.kind = LIT_BOOL, .bval = v};
        return push_leaf(lp, l);
    }
    if (open == '\'' || open == '"' || (open == 'b' && (lp->p[1] == '\'' || lp->p[1] == '"')))
        return parse_string(lp);
    return parse_number(lp);
}

/* Number text without '_' and spaces after the sign, for strto*. */
static void clean_number(const lit_leaf *l, char *buf, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < l->len && k + 1 < n; i++)
        if (l->text[i] != '_' && l->text[i] != ' ' && l->text[i] != '\t') buf[k++] = l->text[i];
    buf[k] = '\0';
}

static const char *kind_name(lit_kind k) {
    switch (k) {
    case LIT_INT: return "an integer";
    case LIT_FLOAT: return "a float";
    case LIT_BOOL: return "a bool";
    default: return "a string";
    }
}

/* Stores leaf i into the tensor, or fails when its value does not fit the
 * dtype exactly. */
static ms_status store_leaf(const char *key, const lit_leaf *l, rt_tensor *t, int64_t i) {
    char num[128];
    rt_dtype dt = t->dtype;
    const char *dn = sig_dtype_name((int)dt);
    int is_float = dt == RT_DT_FLOAT || dt == RT_DT_DOUBLE;
    int is_bool = dt == RT_DT_BOOL;
    int is_int = !is_float && !is_bool && dt != RT_DT_STRING;
    int ok = (is_float && (l->kind == LIT_INT || l->kind == LIT_FLOAT)) ||
             (is_int && l->kind == LIT_INT) || (is_bool && l->kind == LIT_BOOL) ||
             (dt == RT_DT_STRING && l->kind == LIT_STR);
    if (!ok) {
        if (l->kind == LIT_INT || l->kind == LIT_FLOAT)
            clean_number(l, num, sizeof(num));
        else
            snprintf(num, sizeof(num), "%s",
                     l->kind == LIT_BOOL ? (l->bval ? "True" : "False") : "'...'");
        return ms_errf(MS_EINVAL,
                       "--input_exprs %s: the signature input is %s, but %s is %s literal (no "
                       "implicit conversion)",
                       key, dn, num, kind_name(l->kind));
    }
    if (is_float) {
        clean_number(l, num, sizeof(num));
        errno = 0;
        double v = strtod(num, NULL);
        if (errno == ERANGE && isinf(v))
            return ms_errf(MS_EINVAL, "--input_exprs %s: %s is out of range for %s", key, num, dn);
        if (dt == RT_DT_FLOAT) {
            float f = (float)v;
            if (isinf(f) && !isinf(v))
                return ms_errf(MS_EINVAL, "--input_exprs %s: %s is out of range for %s", key, num,
                               dn);
            ((float *)t->data)[i] = f;
        } else {
            ((double *)t->data)[i] = v;
        }
        return MS_OK;
    }
    if (is_bool) {
        ((uint8_t *)t->data)[i] = (uint8_t)l->bval;
        return MS_OK;
    }
    if (is_int) {
        clean_number(l, num, sizeof(num));
        int is_unsigned =
            dt == RT_DT_UINT8 || dt == RT_DT_UINT16 || dt == RT_DT_UINT32 || dt == RT_DT_UINT64;
        errno = 0;
        char *end;
        if (is_unsigned) {
            if (num[0] == '-' && strspn(num + 1, "0") != strlen(num + 1))
                return ms_errf(MS_EINVAL, "--input_exprs %s: %s is out of range for %s", key, num,
                               dn);
            unsigned long long v =
                strtoull(num[0] == '-' || num[0] == '+' ? num + 1 : num, &end, 10);
            unsigned long long max = dt == RT_DT_UINT8    ? 0xffull
                                     : dt == RT_DT_UINT16 ? 0xffffull
                                     : dt == RT_DT_UINT32 ? 0xffffffffull
                                                          : ~0ull;
            if (errno == ERANGE || *end != '\0' || v > max)
                return ms_errf(MS_EINVAL, "--input_exprs %s: %s is out of range for %s", key, num,
                               dn);
            switch (dt) {
            case RT_DT_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
            case RT_DT_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
            case RT_DT_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
            default: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
            }
            return MS_OK;
        }
        long long v = strtoll(num, &end, 10);
        long long lo, hi;
        switch (dt) {
        case RT_DT_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
        case RT_DT_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
        case RT_DT_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
        case RT_DT_INT64: lo = INT64_MIN, hi = INT64_MAX; break;
        default:
            return ms_errf(MS_ENOTSUP,
                           "--input_exprs %s: signature input dtype %s cannot be given as a "
                           "literal",
                           key, dn);
        }
        if (errno == ERANGE || *end != '\0' || v < lo || v > hi)
            return ms_errf(MS_EINVAL, "--input_exprs %s: %s is out of range for %s", key, num, dn);
        switch (dt) {
        case RT_DT_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
        case RT_DT_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
        case RT_DT_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
        default: ((int64_t *)t->data)[i] = (int64_t)v; break;
        }
        return MS_OK;
    }
    return MS_OK; /* strings are handled by the caller */
}

/* Parses a literal into a new tensor of dtype dt. */
static ms_status parse_literal(const char *key, const char *expr, rt_dtype dt, rt_tensor **out) {
    *out = NULL;
    switch (dt) {
    case RT_DT_FLOAT:
    case RT_DT_DOUBLE:
    case RT_DT_INT8:
    case RT_DT_INT16:
    case RT_DT_INT32:
    case RT_DT_INT64:
    case RT_DT_UINT8:
    case RT_DT_UINT16:
    case RT_DT_UINT32:
    case RT_DT_UINT64:
    case RT_DT_BOOL:
    case RT_DT_STRING: break;
    default:
        return ms_errf(MS_ENOTSUP,
                       "--input_exprs %s: signature input dtype %s cannot be given as a literal",
                       key, sig_dtype_name((int)dt));
    }
    lit_parser lp = {.p = expr, .start = expr, .key = key};
    rt_shape shape;
    ms_status st = parse_value(&lp, &shape, 0);
    if (st == MS_OK) {
        skip_ws(&lp);
        if (*lp.p != '\0') st = lit_err(&lp, "unexpected text after the value");
    }
    if (st == MS_OK && dt == RT_DT_STRING) {
        rt_str *strs = calloc(lp.n + 1, sizeof(*strs));
        if (strs == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
        for (size_t i = 0; st == MS_OK && i < lp.n; i++) {
            if (lp.leaves[i].kind != LIT_STR) {
                /* store_leaf reports the kind mismatch; nothing is stored. */
                rt_tensor probe = {.dtype = RT_DT_STRING};
                st = store_leaf(key, &lp.leaves[i], &probe, (int64_t)i);
                break;
            }
            strs[i].data = (const uint8_t *)lp.leaves[i].sval;
            strs[i].len = lp.leaves[i].slen;
        }
        if (st == MS_OK) st = rt_tensor_new_strings(&shape, strs, out);
        free(strs);
    } else if (st == MS_OK) {
        st = rt_tensor_new(dt, &shape, out);
        for (size_t i = 0; st == MS_OK && i < lp.n; i++)
            st = store_leaf(key, &lp.leaves[i], *out, (int64_t)i);
        if (st != MS_OK && *out != NULL) {
            rt_tensor_unref(*out);
            *out = NULL;
        }
    }
    for (size_t i = 0; i < lp.n; i++) free(lp.leaves[i].sval);
    free(lp.leaves);
    return st;
}

/* ---- --input_exprs: saved_model_cli's numpy forms ---- */

/* The numpy dtype names a `dtype=` may give, with the signature dtype each
 * one is (values are never cast: a dtype= naming another one is an error). */
static const struct {
    const char *name;
    rt_dtype dt;
} NP_DTYPES[] = {
    {"float32", RT_DT_FLOAT}, {"single", RT_DT_FLOAT}, {"float64", RT_DT_DOUBLE},
    {"double", RT_DT_DOUBLE}, {"float", RT_DT_DOUBLE}, {"int8", RT_DT_INT8},
    {"int16", RT_DT_INT16},   {"int32", RT_DT_INT32},  {"int64", RT_DT_INT64},
    {"int", RT_DT_INT64},     {"uint8", RT_DT_UINT8},  {"uint16", RT_DT_UINT16},
    {"uint32", RT_DT_UINT32}, {"uint64", RT_DT_UINT64}, {"bool", RT_DT_BOOL},
    {"bool_", RT_DT_BOOL},    {"object", RT_DT_STRING}, {"bytes_", RT_DT_STRING},
    {"str_", RT_DT_STRING},
};

#define NP_MAX_ARGS 4

/* One call's arguments: positional text and keyword (name=) text, split at
 * the top-level commas (quotes, (), [] nest). */
typedef struct np_args {
    char *pos[NP_MAX_ARGS];
    int npos;
    char *dtype, *fill_value, *shape;
} np_args;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

/* Splits `body` (modified) into a; returns 0 or -1 with *why set. */
static int np_split(char *body, np_args *a, const char **why) {
    int depth = 0;
    char q = 0;
    char *start = body;
    for (char *p = body;; p++) {
        if (q) {
            if (*p == '\0') return (*why = "unterminated string", -1);
            if (*p == '\\' && p[1]) p++;
            else if (*p == q) q = 0;
            continue;
        }
        if (*p == '\'' || *p == '"') q = *p;
        else if (*p == '(' || *p == '[') depth++;
        else if (*p == ')' || *p == ']') depth--;
        if (*p != '\0' && (*p != ',' || depth > 0)) continue;
        int end = *p == '\0';
        *p = '\0';
        char *arg = trim(start);
        start = p + 1;
        if (arg[0] != '\0') {
            char *eq = strchr(arg, '=');
            size_t kl = strspn(arg, "abcdefghijklmnopqrstuvwxyz_");
            if (eq != NULL && arg + kl >= eq && kl > 0) { /* keyword */
                *eq = '\0';
                char *v = trim(eq + 1), *k = trim(arg);
                if (strcmp(k, "dtype") == 0) a->dtype = v;
                else if (strcmp(k, "fill_value") == 0) a->fill_value = v;
                else if (strcmp(k, "shape") == 0) a->shape = v;
                else return (*why = "unsupported keyword argument (dtype, shape, fill_value)", -1);
            } else if (a->npos == NP_MAX_ARGS) {
                return (*why = "too many arguments", -1);
            } else {
                a->pos[a->npos++] = arg;
            }
        }
        if (end) return 0;
    }
}

/* dtype= text (np.float32, numpy.float32, 'float32', "float32") against dt. */
static ms_status np_check_dtype(const char *key, const char *text, rt_dtype dt) {
    char name[32];
    const char *s = text;
    if (strncmp(s, "np.", 3) == 0) s += 3;
    else if (strncmp(s, "numpy.", 6) == 0) s += 6;
    size_t n = strlen(s);
    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0]) {
        s++;
        n -= 2;
    }
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), s);
    for (size_t i = 0; i < sizeof NP_DTYPES / sizeof NP_DTYPES[0]; i++)
        if (strcmp(name, NP_DTYPES[i].name) == 0) {
            if (NP_DTYPES[i].dt == dt) return MS_OK;
            return ms_errf(MS_EINVAL,
                           "--input_exprs %s: dtype=%s, but the signature input is %s (values are "
                           "not cast: leave dtype out or name %s)",
                           key, text, sig_dtype_name((int)dt), sig_dtype_name((int)dt));
        }
    return ms_errf(MS_EINVAL, "--input_exprs %s: unknown dtype=%s", key, text);
}

/* A shape argument: an int, or a tuple/list of ints. */
static ms_status np_shape(const char *key, const char *text, rt_shape *shape) {
    rt_tensor *t = NULL;
    ms_status st = parse_literal(key, text, RT_DT_INT64, &t);
    if (st != MS_OK) return ms_errwrap(st, "--input_exprs %s: shape %s", key, text);
    if (t->shape.rank > 1 || t->nelem > RT_MAX_RANK) {
        rt_tensor_unref(t);
        return ms_errf(MS_EINVAL, "--input_exprs %s: shape %s is not an int or a tuple of at "
                                  "most %d ints", key, text, RT_MAX_RANK);
    }
    const int64_t *d = t->data;
    shape->rank = t->shape.rank == 0 ? 1 : (int)t->nelem;
    for (int i = 0; i < shape->rank; i++) {
        if (d[i] < 0) {
            rt_tensor_unref(t);
            return ms_errf(MS_EINVAL, "--input_exprs %s: shape %s has a negative dimension", key,
                           text);
        }
        shape->dim[i] = d[i];
    }
    rt_tensor_unref(t);
    return MS_OK;
}

/* A tensor of `shape`, every element the scalar literal `value`. */
static ms_status np_fill(const char *key, const rt_shape *shape, const char *value, rt_dtype dt,
                         rt_tensor **out) {
    rt_tensor *v = NULL;
    ms_status st = parse_literal(key, value, dt, &v);
    if (st != MS_OK) return st;
    if (v->shape.rank != 0) {
        rt_tensor_unref(v);
        return ms_errf(MS_EINVAL, "--input_exprs %s: the fill value %s is not a scalar", key,
                       value);
    }
    int64_t n = rt_shape_nelem(shape);
    if (dt == RT_DT_STRING) {
        rt_str *strs = n > 0 ? calloc((size_t)n, sizeof *strs) : NULL;
        if (n > 0 && strs == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
        for (int64_t i = 0; st == MS_OK && i < n; i++) strs[i] = rt_tensor_strs(v)[0];
        if (st == MS_OK) st = rt_tensor_new_strings(shape, strs, out);
        free(strs);
    } else if ((st = rt_tensor_new(dt, shape, out)) == MS_OK) {
        size_t es = rt_dtype_size(dt);
        for (int64_t i = 0; i < n; i++) memcpy((char *)(*out)->data + (size_t)i * es, v->data, es);
    }
    rt_tensor_unref(v);
    return st;
}

/* np.ones(S) / np.zeros(S) / np.full(S, V) / np.array(L) (or numpy.), with
 * dtype= optional; *handled = 0 (and nothing else done) when expr is not
 * one of them. */
static ms_status parse_numpy(const char *key, const char *expr, rt_dtype dt, rt_tensor **out,
                             int *handled) {
    static const char *const fns[] = {"ones", "zeros", "full", "array", "asarray"};
    const char *p = expr;
    *handled = 0;
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, "np.", 3) == 0) p += 3;
    else if (strncmp(p, "numpy.", 6) == 0) p += 6;
    else return MS_OK;
    int fn = -1;
    for (int i = 0; i < (int)(sizeof fns / sizeof fns[0]) && fn < 0; i++) {
        size_t n = strlen(fns[i]);
        if (strncmp(p, fns[i], n) == 0 && p[n] == '(') fn = i;
    }
    *handled = 1;
    if (fn < 0)
        return ms_errf(MS_EINVAL, "--input_exprs %s: \"%s\": of numpy, only np.ones(shape), "
                                  "np.zeros(shape), np.full(shape, value) and np.array(list) "
                                  "are understood (or give a nested list)", key, expr);
    p += strlen(fns[fn]) + 1;
    char *body = strdup(p);
    if (body == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    char *close = strrchr(body, ')');
    ms_status st = MS_OK;
    np_args a = {0};
    const char *why = NULL;
    if (close == NULL || trim(close + 1)[0] != '\0') {
        st = ms_errf(MS_EINVAL, "--input_exprs %s: \"%s\": no closing ')'", key, expr);
    } else {
        *close = '\0';
        if (np_split(body, &a, &why) != 0)
            st = ms_errf(MS_EINVAL, "--input_exprs %s: \"%s\": %s", key, expr, why);
    }
    if (st == MS_OK && a.dtype != NULL) st = np_check_dtype(key, a.dtype, dt);
    const char *shape_text = a.shape ? a.shape : a.npos > 0 ? a.pos[0] : NULL;
    int want_pos = fn == 2 ? (a.fill_value ? 1 : 2) : 1;
    if (st == MS_OK && (a.npos > want_pos || shape_text == NULL ||
                        (fn == 2 && a.fill_value == NULL && a.npos < 2)))
        st = ms_errf(MS_EINVAL, "--input_exprs %s: \"%s\": expected %s", key, expr,
                     fn == 2 ? "np.full(shape, value)" : fn >= 3 ? "np.array(list)" : "a shape");
    if (st == MS_OK && fn >= 3) {
        st = parse_literal(key, shape_text, dt, out);
    } else if (st == MS_OK) {
        rt_shape shape;
        const char *value = fn == 2 ? (a.fill_value ? a.fill_value : a.pos[1])
                            : dt == RT_DT_BOOL ? (fn == 0 ? "True" : "False")
                            : dt == RT_DT_STRING ? NULL
                                                 : (fn == 0 ? "1" : "0");
        if (value == NULL)
            st = ms_errf(MS_EINVAL, "--input_exprs %s: the signature input is DT_STRING: "
                                    "np.full(shape, b'...') or a list of strings", key);
        else if ((st = np_shape(key, shape_text, &shape)) == MS_OK)
            st = np_fill(key, &shape, value, dt, out);
    }
    free(body);
    return st;
}

static ms_status load_expr_inputs(char *spec, const char *sig, const Tensorflow__SignatureDef *sd,
                                  run_inputs *in) {
    char *save = NULL;
    for (char *item = strtok_r(spec, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (item[strspn(item, " ")] == '\0') continue;
        char *key, *expr;
        ms_status st = split_kv("--input_exprs", item, &key, &expr);
        if (st != MS_OK) return st;
        const Tensorflow__TensorInfo *ti = need_input("--input_exprs", sig, sd, key);
        if (ti == NULL) return MS_EINVAL;
        rt_tensor *t = NULL;
        int numpy = 0;
        st = parse_numpy(key, expr, rt_dtype_base((int)ti->dtype), &t, &numpy);
        if (st == MS_OK && !numpy) st = parse_literal(key, expr, rt_dtype_base((int)ti->dtype), &t);
        if (st != MS_OK) return st;
        /* [1, 2] for x of shape (-1, 1): the left-out unit dimensions, as REST. */
        int add = t->shape.rank > 0 ? sig_unit_tail(ti, t->shape.rank) : 0;
        for (int k = 0; k < add; k++)
            t->shape.dim[t->shape.rank++] = 1;
        if ((st = inputs_add(in, key, t)) != MS_OK) return st;
    }
    return MS_OK;
}

/* ---- --input_examples ---- */

static ms_status load_example_inputs(char *spec, const char *sig,
                                     const Tensorflow__SignatureDef *sd, run_inputs *in) {
    char *save = NULL;
    for (char *item = strtok_r(spec, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (item[strspn(item, " ")] == '\0') continue;
        char *key, *json;
        ms_status st = split_kv("--input_examples", item, &key, &json);
        if (st != MS_OK) return st;
        const Tensorflow__TensorInfo *ti = need_input("--input_examples", sig, sd, key);
        if (ti == NULL) return MS_EINVAL;
        if (rt_dtype_base((int)ti->dtype) != RT_DT_STRING)
            return ms_errf(MS_EINVAL, "--input_examples %s: the signature input is not DT_STRING",
                           key);
        rt_tensor *t = NULL;
        if ((st = cli_examples_tensor(key, json, &t)) != MS_OK) return st;
        if ((st = inputs_add(in, key, t)) != MS_OK) return st;
    }
    return MS_OK;
}

/* ---- --input_files ---- */

static ms_status slurp(const char *path, uint8_t **out, size_t *n) {
    FILE *f = fopen(path, "rb");
    *out = NULL;
    *n = 0;
    if (f == NULL)
        return ms_errf(errno == ENOENT ? MS_ENOTFOUND : MS_EINVAL, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return ms_errf(MS_EINVAL, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *b = malloc(size ? size : 1);
    if (b == NULL) {
        fclose(f);
        return ms_errf(MS_ENOMEM, "%s: out of memory", path);
    }
    size_t got = fread(b, 1, size, f);
    fclose(f);
    if (got != size) {
        free(b);
        return ms_errf(MS_EINVAL, "%s: read error", path);
    }
    *out = b;
    *n = size;
    return MS_OK;
}

static ms_status load_file_inputs(char *spec, const char *sig, const Tensorflow__SignatureDef *sd,
                                  run_inputs *in) {
    char *save = NULL;
    for (char *item = strtok_r(spec, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (item[strspn(item, " ")] == '\0') continue;
        char *key, *list;
        ms_status st = split_kv("--input_files", item, &key, &list);
        if (st != MS_OK) return st;
        const Tensorflow__TensorInfo *ti = need_input("--input_files", sig, sd, key);
        if (ti == NULL) return MS_EINVAL;
        if (rt_dtype_base((int)ti->dtype) != RT_DT_STRING)
            return ms_errf(MS_EINVAL,
                           "--input_files %s: the signature input is %s; files can only feed a "
                           "DT_STRING input",
                           key, sig_dtype_name((int)ti->dtype));
        size_t nf = 0, cap = 8;
        rt_str *strs = calloc(cap, sizeof(*strs));
        if (strs == NULL) return ms_errf(MS_ENOMEM, "out of memory");
        char *s2 = NULL;
        for (char *f = strtok_r(list, ",", &s2); f && st == MS_OK; f = strtok_r(NULL, ",", &s2)) {
            while (*f == ' ') f++;
            if (*f == '\0') continue;
            if (nf == cap) {
                rt_str *v = realloc(strs, cap * 2 * sizeof(*strs));
                if (v == NULL) {
                    st = ms_errf(MS_ENOMEM, "out of memory");
                    break;
                }
                strs = v;
                cap *= 2;
            }
            uint8_t *b;
            size_t n;
            st = slurp(f, &b, &n);
            if (st != MS_OK) {
                st = ms_errwrap(st, "--input_files %s", key);
                break;
            }
            strs[nf].data = b;
            strs[nf].len = n;
            nf++;
        }
        if (st == MS_OK && nf == 0)
            st = ms_errf(MS_EINVAL, "--input_files %s: no file names given", key);
        rt_tensor *t = NULL;
        if (st == MS_OK) {
            /* A scalar when the signature asks for one, else a vector. */
            const Tensorflow__TensorShapeProto *sp = ti->tensor_shape;
            rt_shape shape = {.rank = 1, .dim = {(int64_t)nf}};
            if (sp != NULL && !sp->unknown_rank && sp->n_dim == 0 && nf == 1) shape.rank = 0;
            st = rt_tensor_new_strings(&shape, strs, &t);
        }
        for (size_t i = 0; i < nf; i++) free((void *)strs[i].data);
        free(strs);
        if (st != MS_OK) return st;
        if ((st = inputs_add(in, key, t)) != MS_OK) return st;
    }
    return MS_OK;
}

/* ---- outputs ---- */

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    return stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

/* DIR/<key>.npy, as saved_model_cli joins them: a '/' in the key (an ONNX
 * output named "logits/Softmax:0" ...) is a subfolder of DIR, made when the
 * file is written. 0 when the key would leave DIR or name no file (an empty,
 * "." or ".." part, or a leading '/') or the path does not fit. */
static int out_path(const char *outdir, const char *key, char *buf, size_t n) {
    for (const char *p = key;;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.')) return 0;
        if (e == NULL) break;
        p = e + 1;
    }
    size_t l = strlen(outdir);
    int w = snprintf(buf, n, "%s%s%s.npy", outdir, (l > 0 && outdir[l - 1] == '/') ? "" : "/",
                     key);
    return w > 0 && (size_t)w < n;
}

/* Makes the folders of path's key below outdir (mkdir_p of its dirname). */
static int out_parent(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) return 0;
    *slash = '\0';
    return mkdir_p(dir);
}

static int fail(const char *what) {
    fprintf(stderr, "dcmserve run: %s\n", what);
    return 1;
}

int cli_run(int argc, char **argv) {
    const char *dir = NULL, *tag_set = "serve", *sig_arg = NULL, *inputs = NULL, *exprs = NULL,
               *files = NULL, *outdir = NULL, *log_level = "error", *examples = NULL,
               *device = NULL, *precision = NULL;
    int overwrite = 0, help = 0;
    cli_flag flags[] = {
        {"dir", CLI_FLAG_STR, &dir, NULL},
        {"tag_set", CLI_FLAG_STR, &tag_set, NULL},
        {"signature_def", CLI_FLAG_STR, &sig_arg, NULL},
        {"inputs", CLI_FLAG_STR, &inputs, NULL},
        {"input_exprs", CLI_FLAG_STR, &exprs, NULL},
        {"input_files", CLI_FLAG_STR, &files, NULL},
        {"input_examples", CLI_FLAG_STR, &examples, NULL},
        {"outdir", CLI_FLAG_STR, &outdir, NULL},
        {"overwrite", CLI_FLAG_BOOL, NULL, &overwrite},
        {"log_level", CLI_FLAG_STR, &log_level, NULL},
        {"device", CLI_FLAG_STR, &device, NULL},
        {"precision", CLI_FLAG_STR, &precision, NULL},
        {"help", CLI_FLAG_BOOL, NULL, &help},
        {NULL, 0, NULL, NULL},
    };
    if (cli_flags_parse("run", argc, argv, flags) != 0) return 2;
    if (help) {
        usage(stdout);
        return 0;
    }
    if (dir == NULL) {
        fprintf(stderr, "dcmserve run: --dir is required (see dcmserve run --help)\n");
        return 2;
    }
    const char *sig = (sig_arg && sig_arg[0]) ? sig_arg : SIG_DEFAULT_KEY;
    /* Load-time warnings (signatures this build cannot run) would bury the
     * result; they show with --log_level=warn. */
    ms_log_level lvl;
    if (ms_log_parse_level(log_level, &lvl) != 0) {
        fprintf(stderr, "dcmserve run: bad --log_level '%s' (debug, info, warn, error, off)\n",
                log_level);
        return 2;
    }
    ms_log_set_level(lvl);
    int gpu = -1, drc = cli_device_choose("run", device, 0, precision, &gpu);
    if (drc != 0) return drc;

    char tagbuf[1024];
    const char *tags[64];
    int ntags = 0;
    snprintf(tagbuf, sizeof(tagbuf), "%s", tag_set);
    char *save = NULL;
    for (char *t = strtok_r(tagbuf, ",", &save); t && ntags < 64; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        if (*t) tags[ntags++] = t;
    }

    int rc = 1;
    kn_backend *be = NULL, *dev = NULL;
    rt_model *m = NULL;
    run_inputs in = {0};
    sig_output *outs = NULL;
    int nouts = 0;
    char *spec = NULL;
    ms_status st;
    char msg[1400];

    be = kn_cpu_backend_new(0);
    if (be == NULL) {
        rc = fail("cannot create the CPU backend");
        goto done;
    }
    char export_dir[4096];
    if (cli_export_dir(dir, export_dir, sizeof export_dir) == 0) dir = export_dir;
    if (cli_device_open("run", device, gpu, be, &dev) != 0) goto done;
    if ((st = rt_model_load_on(dir, tags, ntags, be, dev, &m)) != MS_OK) {
        rc = fail(ms_errmsg());
        goto done;
    }
    const Tensorflow__SignatureDef *sd;
    if ((st = sig_find(rt_model_meta_graph(m), sig, &sd)) != MS_OK) {
        rc = fail(ms_errmsg());
        goto done;
    }
    const char *specs[4] = {inputs, exprs, files, examples};
    for (int k = 0; k < 4; k++) {
        if (specs[k] == NULL) continue;
        free(spec);
        spec = strdup(specs[k]);
        if (spec == NULL) {
            rc = fail("out of memory");
            goto done;
        }
        st = k == 0   ? load_npy_inputs(spec, &in)
             : k == 1 ? load_expr_inputs(spec, sig, sd, &in)
             : k == 2 ? load_file_inputs(spec, sig, sd, &in)
                      : load_example_inputs(spec, sig, sd, &in);
        if (st != MS_OK) {
            rc = fail(ms_errmsg());
            goto done;
        }
    }
    /* Refuse to clobber before anything runs. */
    for (size_t i = 0; outdir != NULL && i < sd->n_outputs; i++) {
        char path[4096];
        if (!out_path(outdir, sd->outputs[i]->key, path, sizeof(path))) {
            snprintf(msg, sizeof(msg), "output key \"%s\" names no file below --outdir (an "
                     "empty, \".\" or \"..\" part, or too long)", sd->outputs[i]->key);
            rc = fail(msg);
            goto done;
        }
    }
    if (outdir != NULL && !overwrite) {
        for (size_t i = 0; i < sd->n_outputs; i++) {
            char path[4096];
            struct stat sb;
            out_path(outdir, sd->outputs[i]->key, path, sizeof(path));
            if (stat(path, &sb) == 0) {
                fprintf(stderr,
                        "dcmserve run: Output file %s already exists. Add \"--overwrite\" to "
                        "overwrite the existing output files.\n",
                        path);
                rc = 1;
                goto done;
            }
        }
    }
    if ((st = sig_run(m, sig, in.v, in.n, NULL, 0, NULL, &outs, &nouts)) != MS_OK) {
        rc = fail(ms_errmsg());
        goto done;
    }
    if (outdir != NULL && nouts > 0 && mkdir_p(outdir) != 0) {
        snprintf(msg, sizeof(msg), "cannot create --outdir %s: %s", outdir, strerror(errno));
        rc = fail(msg);
        goto done;
    }
    for (int i = 0; i < nouts; i++) {
        char *text = cli_npformat(outs[i].tensor);
        if (text == NULL) {
            rc = fail("out of memory");
            goto done;
        }
        printf("Result for output key %s:\n%s\n", outs[i].key, text);
        free(text);
        if (outdir != NULL) {
            char path[4096];
            out_path(outdir, outs[i].key, path, sizeof(path));
            if (out_parent(path) != 0) {
                fflush(stdout);
                snprintf(msg, sizeof(msg), "cannot create the folder of %.1024s: %s", path,
                         strerror(errno));
                rc = fail(msg);
                goto done;
            }
            if ((st = rt_npy_write_file(path, outs[i].tensor)) != MS_OK) {
                fflush(stdout);
                rc = fail(ms_errmsg());
                goto done;
            }
            printf("Output %s is saved to %s\n", outs[i].key, path);
        }
    }
    fflush(stdout);
    rc = 0;
done:
    free(spec);
    sig_outputs_free(outs, nouts);
    inputs_free(&in);
    if (m) rt_model_unref(m);
    kn_backend_free(dev);
    if (be) kn_backend_free(be);
    return rc;
}
