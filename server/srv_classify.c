/* srv_classify.c - TF Serving's Classify and Regress gRPC APIs.
 *
 * The request's Input (example_list, or example_list_with_context) becomes a
 * DT_STRING vector of serialized tf.Examples: each Example is packed again
 * from the parsed request; with a context, the context's bytes come first, so
 * protobuf merging lets an example's own features win over the context's
 * (TF Serving's rule). That vector is fed to the signature's single input
 * `inputs`, and the signature runs through sig_run as Predict does (the graph
 * parses the examples with ParseExample).
 *
 * Classify: method_name tensorflow/serving/classify, outputs `classes`
 * (DT_STRING [batch, num_classes]) and / or `scores` (DT_FLOAT
 * [batch, num_classes]); the answer has per example one Class {label, score}
 * per column (label empty without classes, score 0 without scores).
 * Regress: method_name tensorflow/serving/regress, output `outputs`
 * (DT_FLOAT [batch] or [batch, 1]). Error texts follow TF Serving's. */
#include <stdlib.h>
#include <string.h>

#include "sig_signature.h"
#include "srv_app.h"
#include "tf_serving.pb-c.h"

#define CLASSIFY_METHOD "tensorflow/serving/classify"
#define REGRESS_METHOD "tensorflow/serving/regress"

/* The serialized examples of an Input as a DT_STRING [n] tensor. */
static ms_status input_tensor(const Tensorflow__Serving__Input *input, rt_tensor **out) {
    Tensorflow__Serving__Example **ex = NULL;
    const Tensorflow__Serving__Example *ctx = NULL;
    size_t n = 0;
    if (input != NULL && input->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST &&
        input->example_list != NULL) {
        ex = input->example_list->examples;
        n = input->example_list->n_examples;
    } else if (input != NULL &&
               input->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST_WITH_CONTEXT &&
               input->example_list_with_context != NULL) {
        ex = input->example_list_with_context->examples;
        n = input->example_list_with_context->n_examples;
        ctx = input->example_list_with_context->context;
    }
    if (n == 0) return ms_errf(MS_EINVAL, "Input is empty.");
    size_t clen = ctx ? tensorflow__serving__example__get_packed_size(ctx) : 0, total = 0;
    for (size_t i = 0; i < n; i++) total += clen + tensorflow__serving__example__get_packed_size(ex[i]);
    uint8_t *bytes = malloc(total + 1);
    rt_str *strs = calloc(n, sizeof(rt_str));
    ms_status st = MS_OK;
    if (bytes == NULL || strs == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
    } else {
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            size_t start = off;
            if (ctx) off += tensorflow__serving__example__pack(ctx, bytes + off);
            off += tensorflow__serving__example__pack(ex[i], bytes + off);
            strs[i] = (rt_str){bytes + start, off - start};
        }
        rt_shape s = {.rank = 1, .dim = {(int64_t)n}};
        st = rt_tensor_new_strings(&s, strs, out);
    }
    free(bytes);
    free(strs);
    return st;
}

/* Finds and checks the signature, feeds the examples to `inputs` and runs
 * it. *sig_key_out: the key used (borrowed). */
static ms_status run_examples(srv_app *app, srv_call *call,
                              const Tensorflow__Serving__ModelSpec *spec,
                              const Tensorflow__Serving__Input *input, const char *method,
                              srv_servable *sv, const char **sig_key_out, sig_output **outs,
                              int *nouts) {
    ms_status st = srv_tfs_resolve(app, call, spec, sv);
    if (st != MS_OK) return st;
    const char *key = spec->signature_name && spec->signature_name[0] ? spec->signature_name
                                                                       : SIG_DEFAULT_KEY;
    *sig_key_out = key;
    const Tensorflow__SignatureDef *sd = NULL;
    if ((st = sig_find(rt_model_meta_graph(sv->model), key, &sd)) != MS_OK) return st;
    if (sd->method_name == NULL || strcmp(sd->method_name, method) != 0)
        return ms_errf(MS_EINVAL, "Expected %s signature method_name to be %s. Was: %s",
                       strcmp(method, CLASSIFY_METHOD) == 0 ? "classification" : "regression",
                       method, sd->method_name ? sd->method_name : "");
    if (sd->n_inputs != 1) return ms_errf(MS_EINVAL, "Expected one input Tensor.");
    if (sig_input_info(sd, "inputs") == NULL)
        return ms_errf(MS_EINVAL, "No %s inputs found in SignatureDef: %s",
                       strcmp(method, CLASSIFY_METHOD) == 0 ? "classification" : "regression",
                       key);
    rt_tensor *t = NULL;
    if ((st = input_tensor(input, &t)) != MS_OK) return st;
    sig_input in = {.key = "inputs", .tensor = t};
    rt_run_opts opts = {.cancelled = srv_call_cancel_flag(call)};
    st = sig_run(sv->model, key, &in, 1, NULL, 0, &opts, outs, nouts);
    rt_tensor_unref(t);
    return st;
}

static const rt_tensor *find_out(const sig_output *outs, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(outs[i].key, key) == 0) return outs[i].tensor;
    return NULL;
}

static void fill_spec(Tensorflow__Serving__ModelSpec *spec, Tensorflow__Serving__Int64Value *ver,
                      const char *name, int64_t version, const char *sig) {
    spec->name = (char *)name;
    ver->value = version;
    spec->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    spec->version = ver;
    spec->signature_name = (char *)sig;
}

static ms_status check_2d(const rt_tensor *t, const char *what, rt_dtype dt, const char *dtn,
                          int64_t batch) {
    if (t->dtype != dt) return ms_errf(MS_EINVAL, "Expected %s Tensor of %s.", what, dtn);
    if (t->shape.rank != 2)
        return ms_errf(MS_EINVAL, "Expected Tensor shape: [batch_size num_classes] but got a "
                       "tensor of rank %d", t->shape.rank);
    if (t->shape.dim[0] != batch)
        return ms_errf(MS_EINVAL, "Expected %s output batch size of %lld. Got %lld", what,
                       (long long)batch, (long long)t->shape.dim[0]);
    return MS_OK;
}

ms_status srv_tfs_classify(void *appv, srv_call *call, const uint8_t *req, size_t n,
                           srv_bytes *out) {
    Tensorflow__Serving__ClassificationRequest *rq =
        srv_tfs_unpack(&tensorflow__serving__classification_request__descriptor, req, n);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse ClassificationRequest (%zu bytes)", n);
    srv_servable sv = {0};
    sig_output *outs = NULL;
    int nouts = 0;
    const char *key = NULL;
    Tensorflow__Serving__Classifications *cls = NULL, **clsp = NULL;
    Tensorflow__Serving__Class *items = NULL, **itemp = NULL;
    ms_status st = run_examples(appv, call, rq->model_spec, rq->input, CLASSIFY_METHOD, &sv, &key,
                                &outs, &nouts);
    if (st != MS_OK) goto done;
    int64_t batch = 0;
    if (rq->input->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST)
        batch = (int64_t)rq->input->example_list->n_examples;
    else
        batch = (int64_t)rq->input->example_list_with_context->n_examples;
    const rt_tensor *classes = find_out(outs, nouts, "classes");
    const rt_tensor *scores = find_out(outs, nouts, "scores");
    if (classes == NULL && scores == NULL) {
        st = ms_errf(MS_EINVAL, "Expected classification signature outputs to contain classes "
                     "or scores");
        goto done;
    }
    if (classes && (st = check_2d(classes, "classes", RT_DT_STRING, "DT_STRING", batch)) != MS_OK)
        goto done;
    if (scores && (st = check_2d(scores, "scores", RT_DT_FLOAT, "DT_FLOAT", batch)) != MS_OK)
        goto done;
    if (classes && scores && classes->shape.dim[1] != scores->shape.dim[1]) {
        st = ms_errf(MS_EINVAL, "Tensors class and score should match in dim[1]. Got %lld vs. "
                     "%lld", (long long)classes->shape.dim[1], (long long)scores->shape.dim[1]);
        goto done;
    }
    int64_t k = classes ? classes->shape.dim[1] : scores->shape.dim[1];
    size_t total = (size_t)(batch * k);
    cls = calloc((size_t)batch + 1, sizeof(*cls));
    clsp = calloc((size_t)batch + 1, sizeof(*clsp));
    items = calloc(total + 1, sizeof(*items));
    itemp = calloc(total + 1, sizeof(*itemp));
    char **labels = NULL;
    if (cls == NULL || clsp == NULL || items == NULL || itemp == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < batch; i++) {
        Tensorflow__Serving__Classifications c0 = TENSORFLOW__SERVING__CLASSIFICATIONS__INIT;
        cls[i] = c0;
        cls[i].n_classes = (size_t)k;
        cls[i].classes = itemp + i * k;
        clsp[i] = &cls[i];
        for (int64_t j = 0; j < k; j++) {
            Tensorflow__Serving__Class c = TENSORFLOW__SERVING__CLASS__INIT;
            size_t idx = (size_t)(i * k + j);
            items[idx] = c;
            items[idx].label = (char *)"";
            if (scores) items[idx].score = ((const float *)scores->data)[idx];
            itemp[idx] = &items[idx];
        }
    }
    if (classes) {
        /* Labels must be NUL-terminated strings for protobuf-c: one copy each. */
        labels = calloc(total + 1, sizeof(char *));
        if (labels == NULL) st = ms_errf(MS_ENOMEM, "out of memory");
        for (size_t idx = 0; labels != NULL && idx < total && st == MS_OK; idx++) {
            const rt_str *s = &((const rt_str *)classes->data)[idx];
            labels[idx] = malloc((size_t)s->len + 1);
            if (labels[idx] == NULL) {
                st = ms_errf(MS_ENOMEM, "out of memory");
                break;
            }
            memcpy(labels[idx], s->data, (size_t)s->len);
            labels[idx][s->len] = '\0';
            items[idx].label = labels[idx];
        }
    }
    if (st == MS_OK) {
        Tensorflow__Serving__ClassificationResult res =
            TENSORFLOW__SERVING__CLASSIFICATION_RESULT__INIT;
        res.n_classifications = (size_t)batch;
        res.classifications = clsp;
        Tensorflow__Serving__ClassificationResponse resp =
            TENSORFLOW__SERVING__CLASSIFICATION_RESPONSE__INIT;
        Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
        Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
        fill_spec(&spec, &ver, rq->model_spec->name, sv.version, key);
        resp.model_spec = &spec;
        resp.result = &res;
        st = srv_pack(&resp.base, out);
    }
    if (labels)
        for (size_t idx = 0; idx < total; idx++) free(labels[idx]);
    free(labels);
done:
    free(cls);
    free(clsp);
    free(items);
    free(itemp);
    sig_outputs_free(outs, nouts);
    if (sv.model) srv_servable_release(&sv);
    tensorflow__serving__classification_request__free_unpacked(rq, NULL);
    return st;
}

ms_status srv_tfs_regress(void *appv, srv_call *call, const uint8_t *req, size_t n,
                          srv_bytes *out) {
    Tensorflow__Serving__RegressionRequest *rq =
        srv_tfs_unpack(&tensorflow__serving__regression_request__descriptor, req, n);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse RegressionRequest (%zu bytes)", n);
    srv_servable sv = {0};
    sig_output *outs = NULL;
    int nouts = 0;
    const char *key = NULL;
    Tensorflow__Serving__Regression *regs = NULL, **regp = NULL;
    ms_status st = run_examples(appv, call, rq->model_spec, rq->input, REGRESS_METHOD, &sv, &key,
                                &outs, &nouts);
    if (st != MS_OK) goto done;
    int64_t batch = rq->input->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST
                        ? (int64_t)rq->input->example_list->n_examples
                        : (int64_t)rq->input->example_list_with_context->n_examples;
    const rt_tensor *o = find_out(outs, nouts, "outputs");
    if (o == NULL) {
        st = ms_errf(MS_EINVAL, "No regression outputs found in SignatureDef: %s", key);
        goto done;
    }
    if (o->dtype != RT_DT_FLOAT) {
        st = ms_errf(MS_EINVAL, "Expected output Tensor of DT_FLOAT.");
        goto done;
    }
    if (!((o->shape.rank == 1 && o->shape.dim[0] == batch) ||
          (o->shape.rank == 2 && o->shape.dim[0] == batch && o->shape.dim[1] == 1))) {
        st = ms_errf(MS_EINVAL, "Expected output Tensor shape to be either [batch_size] or "
                     "[batch_size, 1] with batch_size %lld", (long long)batch);
        goto done;
    }
    regs = calloc((size_t)batch + 1, sizeof(*regs));
    regp = calloc((size_t)batch + 1, sizeof(*regp));
    if (regs == NULL || regp == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < batch; i++) {
        Tensorflow__Serving__Regression r = TENSORFLOW__SERVING__REGRESSION__INIT;
        regs[i] = r;
        regs[i].value = ((const float *)o->data)[i];
        regp[i] = &regs[i];
    }
    Tensorflow__Serving__RegressionResult res = TENSORFLOW__SERVING__REGRESSION_RESULT__INIT;
    res.n_regressions = (size_t)batch;
    res.regressions = regp;
    Tensorflow__Serving__RegressionResponse resp = TENSORFLOW__SERVING__REGRESSION_RESPONSE__INIT;
    Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    fill_spec(&spec, &ver, rq->model_spec->name, sv.version, key);
    resp.model_spec = &spec;
    resp.result = &res;
    st = srv_pack(&resp.base, out);
done:
    free(regs);
    free(regp);
    sig_outputs_free(outs, nouts);
    if (sv.model) srv_servable_release(&sv);
    tensorflow__serving__regression_request__free_unpacked(rq, NULL);
    return st;
}
