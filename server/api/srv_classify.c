/* srv_classify.c - TF Serving's Classify, Regress and MultiInference gRPC APIs.
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
 * (DT_FLOAT [batch] or [batch, 1]). Error texts follow TF Serving's.
 *
 * MultiInference: tasks of classify / regress over one model (the servable of
 * the first task's ModelSpec), each on its own signature, all sharing the
 * signatures' single input tensor. The Input is packed once and the graph runs
 * once, fetching the union of every task's outputs; each task's result is
 * then made as Classify / Regress make theirs (the same code). */
#include <stdlib.h>
#include <string.h>

#include "sig_signature.h"
#include "srv_app.h"
#include "srv_stats.h"
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

/* One task: a signature checked for its method. */
typedef struct ex_task {
    const char *key;                    /* signature key (borrowed) */
    int regress;                        /* 0: classify, 1: regress */
    const Tensorflow__SignatureDef *sd; /* borrowed from the model */
    const char *input_name;             /* graph tensor of `inputs` (borrowed) */
    const char *out_name[2];            /* classify: classes, scores; regress: outputs */
    int fetch[2];                       /* index into the run's fetches, -1 = none */
} ex_task;

/* Blocks of one answer, freed together after it is packed. */
typedef struct ex_mem {
    void **p;
    size_t n, cap;
} ex_mem;

static void *mem_calloc(ex_mem *m, size_t n, size_t size) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        void **p = realloc(m->p, cap * sizeof(*p));
        if (p == NULL) return NULL;
        m->p = p;
        m->cap = cap;
    }
    void *b = calloc(n + 1, size);
    if (b != NULL) m->p[m->n++] = b;
    return b;
}

static void mem_free(ex_mem *m) {
    for (size_t i = 0; i < m->n; i++) free(m->p[i]);
    free(m->p);
    m->p = NULL;
    m->n = m->cap = 0;
}

/* The graph tensor name of a signature output; NULL when absent. A sparse or
 * composite output cannot be fetched: MS_ENOTSUP. */
static ms_status out_name(const Tensorflow__SignatureDef *sd, const char *key, const char *sig,
                          const char **name) {
    const Tensorflow__TensorInfo *ti = sig_output_info(sd, key);
    *name = NULL;
    if (ti == NULL) return MS_OK;
    if (ti->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME || ti->name == NULL)
        return ms_errf(MS_ENOTSUP, "signature \"%s\": output \"%s\" is a sparse or composite "
                       "tensor, which is not supported", sig, key);
    *name = ti->name;
    return MS_OK;
}

/* Checks signature sd (key) for the method as TF Serving's PreProcessClassification /
 * PreProcessRegression do and fills *t. */
static ms_status check_task(const Tensorflow__SignatureDef *sd, const char *key, int regress,
                            ex_task *t) {
    const char *method = regress ? REGRESS_METHOD : CLASSIFY_METHOD;
    const char *what = regress ? "regression" : "classification";
    memset(t, 0, sizeof(*t));
    t->key = key;
    t->regress = regress;
    t->sd = sd;
    t->fetch[0] = t->fetch[1] = -1;
    if (sd->method_name == NULL || strcmp(sd->method_name, method) != 0)
        return ms_errf(MS_EINVAL, "Expected %s signature method_name to be %s. Was: %s", what,
                       method, sd->method_name ? sd->method_name : "");
    if (sd->n_inputs != 1) return ms_errf(MS_EINVAL, "Expected one input Tensor.");
    const Tensorflow__TensorInfo *in = sig_input_info(sd, "inputs");
    if (in == NULL) return ms_errf(MS_EINVAL, "No %s inputs found in SignatureDef: %s", what, key);
    if (in->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME || in->name == NULL)
        return ms_errf(MS_ENOTSUP, "signature \"%s\": input \"inputs\" is a sparse or composite "
                       "tensor, which is not supported", key);
    t->input_name = in->name;
    ms_status st;
    if (regress) {
        if ((st = out_name(sd, "outputs", key, &t->out_name[0])) != MS_OK) return st;
        if (t->out_name[0] == NULL)
            return ms_errf(MS_EINVAL, "No regression outputs found in SignatureDef: %s", key);
        return MS_OK;
    }
    if ((st = out_name(sd, "classes", key, &t->out_name[0])) != MS_OK) return st;
    if ((st = out_name(sd, "scores", key, &t->out_name[1])) != MS_OK) return st;
    if (t->out_name[0] == NULL && t->out_name[1] == NULL)
        return ms_errf(MS_EINVAL, "Expected classification signature outputs to contain classes "
                       "or scores");
    return MS_OK;
}

/* Feeds the examples to the tasks' common input and runs the graph once for
 * the union of their outputs. res[] gets nfetch owned references (*nres). */
static ms_status run_tasks(srv_call *call, rt_model *m, ex_task *tasks, int ntasks,
                           rt_tensor *examples, rt_tensor ***res, int *nres) {
    const char **fetches = calloc((size_t)ntasks * 2 + 1, sizeof(*fetches));
    int nf = 0;
    ms_status st = MS_OK;
    *res = NULL;
    *nres = 0;
    if (fetches == NULL) return ms_errf(MS_ENOMEM, "out of memory");
    for (int i = 0; i < ntasks; i++) {
        sig_input in = {.key = "inputs", .tensor = examples};
        if ((st = sig_validate(tasks[i].key, tasks[i].sd, &in, 1)) != MS_OK) goto done;
        for (int j = 0; j < 2; j++) {
            const char *name = tasks[i].out_name[j];
            if (name == NULL) continue;
            int k = 0;
            while (k < nf && strcmp(fetches[k], name) != 0) k++;
            if (k == nf) fetches[nf++] = name;
            tasks[i].fetch[j] = k;
        }
    }
    rt_tensor **r = calloc((size_t)nf + 1, sizeof(*r));
    if (r == NULL) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    rt_feed feed = {.name = tasks[0].input_name, .tensor = examples};
    rt_run_opts opts = {.cancelled = srv_call_cancel_flag(call)};
    st = rt_model_run(m, &feed, 1, fetches, nf, NULL, 0, &opts, r);
    if (st != MS_OK) {
        st = ntasks == 1 ? ms_errwrap(st, "signature \"%s\"", tasks[0].key)
                         : ms_errwrap(st, "MultiInference over %d signatures", ntasks);
        free(r);
        goto done;
    }
    *res = r;
    *nres = nf;
done:
    free(fetches);
    return st;
}

static void free_results(rt_tensor **res, int n) {
    for (int i = 0; res != NULL && i < n; i++) rt_tensor_unref(res[i]);
    free(res);
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

/* A task's ClassificationResult, every block from mem. */
static ms_status classification_result(ex_mem *mem, const ex_task *t, rt_tensor *const *res,
                                       int64_t batch, Tensorflow__Serving__ClassificationResult **out) {
    const rt_tensor *classes = t->fetch[0] >= 0 ? res[t->fetch[0]] : NULL;
    const rt_tensor *scores = t->fetch[1] >= 0 ? res[t->fetch[1]] : NULL;
    ms_status st;
    if (classes && (st = check_2d(classes, "classes", RT_DT_STRING, "DT_STRING", batch)) != MS_OK)
        return st;
    if (scores && (st = check_2d(scores, "scores", RT_DT_FLOAT, "DT_FLOAT", batch)) != MS_OK)
        return st;
    if (classes && scores && classes->shape.dim[1] != scores->shape.dim[1])
        return ms_errf(MS_EINVAL, "Tensors class and score should match in dim[1]. Got %lld vs. "
                       "%lld", (long long)classes->shape.dim[1], (long long)scores->shape.dim[1]);
    int64_t k = classes ? classes->shape.dim[1] : scores->shape.dim[1];
    size_t total = (size_t)(batch * k);
    Tensorflow__Serving__ClassificationResult *res_msg = mem_calloc(mem, 1, sizeof(*res_msg));
    Tensorflow__Serving__Classifications *cls = mem_calloc(mem, (size_t)batch, sizeof(*cls));
    Tensorflow__Serving__Classifications **clsp = mem_calloc(mem, (size_t)batch, sizeof(*clsp));
    Tensorflow__Serving__Class *items = mem_calloc(mem, total, sizeof(*items));
    Tensorflow__Serving__Class **itemp = mem_calloc(mem, total, sizeof(*itemp));
    if (!res_msg || !cls || !clsp || !items || !itemp) return ms_errf(MS_ENOMEM, "out of memory");
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
            if (classes) {
                /* Labels must be NUL-terminated strings for protobuf-c: one copy each. */
                const rt_str *s = &((const rt_str *)classes->data)[idx];
                char *l = mem_calloc(mem, (size_t)s->len, 1);
                if (l == NULL) return ms_errf(MS_ENOMEM, "out of memory");
                memcpy(l, s->data, (size_t)s->len);
                items[idx].label = l;
            }
            itemp[idx] = &items[idx];
        }
    }
    Tensorflow__Serving__ClassificationResult r0 = TENSORFLOW__SERVING__CLASSIFICATION_RESULT__INIT;
    *res_msg = r0;
    res_msg->n_classifications = (size_t)batch;
    res_msg->classifications = clsp;
    *out = res_msg;
    return MS_OK;
}

/* A task's RegressionResult, every block from mem. */
static ms_status regression_result(ex_mem *mem, const ex_task *t, rt_tensor *const *res,
                                   int64_t batch, Tensorflow__Serving__RegressionResult **out) {
    const rt_tensor *o = res[t->fetch[0]];
    if (o->dtype != RT_DT_FLOAT) return ms_errf(MS_EINVAL, "Expected output Tensor of DT_FLOAT.");
    if (!((o->shape.rank == 1 && o->shape.dim[0] == batch) ||
          (o->shape.rank == 2 && o->shape.dim[0] == batch && o->shape.dim[1] == 1)))
        return ms_errf(MS_EINVAL, "Expected output Tensor shape to be either [batch_size] or "
                       "[batch_size, 1] with batch_size %lld", (long long)batch);
    Tensorflow__Serving__RegressionResult *res_msg = mem_calloc(mem, 1, sizeof(*res_msg));
    Tensorflow__Serving__Regression *regs = mem_calloc(mem, (size_t)batch, sizeof(*regs));
    Tensorflow__Serving__Regression **regp = mem_calloc(mem, (size_t)batch, sizeof(*regp));
    if (!res_msg || !regs || !regp) return ms_errf(MS_ENOMEM, "out of memory");
    for (int64_t i = 0; i < batch; i++) {
        Tensorflow__Serving__Regression r = TENSORFLOW__SERVING__REGRESSION__INIT;
        regs[i] = r;
        regs[i].value = ((const float *)o->data)[i];
        regp[i] = &regs[i];
    }
    Tensorflow__Serving__RegressionResult r0 = TENSORFLOW__SERVING__REGRESSION_RESULT__INIT;
    *res_msg = r0;
    res_msg->n_regressions = (size_t)batch;
    res_msg->regressions = regp;
    *out = res_msg;
    return MS_OK;
}

/* Classify and Regress: one task on the request's ModelSpec. */
static ms_status single_task(srv_app *app, srv_call *call, const ProtobufCMessageDescriptor *desc,
                             int regress, const uint8_t *req, size_t n, srv_bytes *out) {
    ProtobufCMessage *msg = srv_tfs_unpack(desc, req, n);
    if (msg == NULL)
        return ms_errf(MS_EINVAL, "cannot parse %s (%zu bytes)",
                       regress ? "RegressionRequest" : "ClassificationRequest", n);
    /* Both requests are {ModelSpec model_spec = 1; Input input = 2;}. */
    const Tensorflow__Serving__ModelSpec *spec;
    const Tensorflow__Serving__Input *input;
    if (regress) {
        const Tensorflow__Serving__RegressionRequest *rq = (const void *)msg;
        spec = rq->model_spec;
        input = rq->input;
    } else {
        const Tensorflow__Serving__ClassificationRequest *rq = (const void *)msg;
        spec = rq->model_spec;
        input = rq->input;
    }
    srv_servable sv = {0};
    rt_tensor *examples = NULL, **res = NULL;
    int nres = 0;
    ex_mem mem = {0};
    ex_task task;
    ms_status st = srv_tfs_resolve(app, call, spec, &sv);
    if (st != MS_OK) goto done;
    const char *key = spec->signature_name && spec->signature_name[0] ? spec->signature_name
                                                                       : SIG_DEFAULT_KEY;
    const Tensorflow__SignatureDef *sd = NULL;
    if ((st = sig_find(rt_model_meta_graph(sv.model), key, &sd)) != MS_OK) goto done;
    if ((st = check_task(sd, key, regress, &task)) != MS_OK) goto done;
    if ((st = input_tensor(input, &examples)) != MS_OK) goto done;
    srv_req *rec = srv_call_req(call); /* phases and rows for /metrics and srv_stats */
    srv_req_phase(rec, SRV_PHASE_DECODE);
    if ((st = run_tasks(call, sv.model, &task, 1, examples, &res, &nres)) != MS_OK) goto done;
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    int64_t batch = examples->shape.dim[0];
    srv_stats_execution(spec->name, sv.version); /* Triton's execution_count (srv_stats.h) */
    srv_req_batch(rec, (int)batch);
    Tensorflow__Serving__ModelSpec ospec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    fill_spec(&ospec, &ver, spec->name, sv.version, key);
    if (regress) {
        Tensorflow__Serving__RegressionResponse resp =
            TENSORFLOW__SERVING__REGRESSION_RESPONSE__INIT;
        if ((st = regression_result(&mem, &task, res, batch, &resp.result)) != MS_OK) goto done;
        resp.model_spec = &ospec;
        st = srv_pack(&resp.base, out);
    } else {
        Tensorflow__Serving__ClassificationResponse resp =
            TENSORFLOW__SERVING__CLASSIFICATION_RESPONSE__INIT;
        if ((st = classification_result(&mem, &task, res, batch, &resp.result)) != MS_OK)
            goto done;
        resp.model_spec = &ospec;
        st = srv_pack(&resp.base, out);
    }
    srv_req_phase(rec, SRV_PHASE_SERIALIZE);
done:
    mem_free(&mem);
    free_results(res, nres);
    if (examples) rt_tensor_unref(examples);
    if (sv.model) srv_servable_release(&sv);
    protobuf_c_message_free_unpacked(msg, NULL);
    return st;
}

ms_status srv_tfs_classify(void *appv, srv_call *call, const uint8_t *req, size_t n,
                           srv_bytes *out) {
    return single_task(appv, call, &tensorflow__serving__classification_request__descriptor, 0,
                       req, n, out);
}

ms_status srv_tfs_regress(void *appv, srv_call *call, const uint8_t *req, size_t n,
                          srv_bytes *out) {
    return single_task(appv, call, &tensorflow__serving__regression_request__descriptor, 1, req,
                       n, out);
}

/* The same version choice (none, a version number or a label). */
static int same_version(const Tensorflow__Serving__ModelSpec *a,
                        const Tensorflow__Serving__ModelSpec *b) {
    if (a->version_choice_case != b->version_choice_case) return 0;
    if (a->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION)
        return (a->version ? a->version->value : 0) == (b->version ? b->version->value : 0);
    if (a->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL)
        return strcmp(a->version_label ? a->version_label : "",
                      b->version_label ? b->version_label : "") == 0;
    return 1;
}

/* TF Serving's checks of one task against the tasks before it
 * (TensorFlowMultiInferenceRunner::Infer), then check_task. */
static ms_status multi_task(const Tensorflow__MetaGraphDef *mg,
                            Tensorflow__Serving__InferenceTask *const *tasks, int i, ex_task *out) {
    static const Tensorflow__Serving__ModelSpec empty = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    const Tensorflow__Serving__ModelSpec *spec = tasks[i]->model_spec ? tasks[i]->model_spec : &empty;
    const Tensorflow__Serving__ModelSpec *first = tasks[0]->model_spec;
    if (spec->name == NULL || spec->name[0] == '\0')
        return ms_errf(MS_EINVAL, "Found ModelSpec with an empty model name.");
    if (strcmp(spec->name, first->name) != 0)
        return ms_errf(MS_EINVAL, "All ModelSpecs in a MultiInferenceRequest must access the "
                       "same model name.");
    /* TF Serving answers every task from the first task's version; a task that
     * names another version would get an answer it did not ask for. */
    if (!same_version(spec, first))
        return ms_errf(MS_EINVAL, "All ModelSpecs in a MultiInferenceRequest must access the "
                       "same model version.");
    const char *key = spec->signature_name && spec->signature_name[0] ? spec->signature_name
                                                                       : SIG_DEFAULT_KEY;
    for (int j = 0; j < i; j++)
        if (strcmp(out[j].key, key) == 0)
            return ms_errf(MS_EINVAL, "Duplicate evaluation of signature: %s", key);
    const Tensorflow__SignatureDef *sd = NULL;
    if (sig_find(mg, key, &sd) != MS_OK) {
        ms_err_clear();
        return ms_errf(MS_EINVAL, "Requested signature not found in model graph: %s", key);
    }
    const char *method = tasks[i]->method_name ? tasks[i]->method_name : "";
    int regress;
    if (strcmp(method, CLASSIFY_METHOD) == 0)
        regress = 0;
    else if (strcmp(method, REGRESS_METHOD) == 0)
        regress = 1;
    else
        return ms_errf(MS_ENOTSUP, "Unsupported signature method_name: %s", method);
    ms_status st = check_task(sd, key, regress, &out[i]);
    if (st != MS_OK) return st;
    if (i > 0 && strcmp(out[i].input_name, out[0].input_name) != 0)
        return ms_errf(MS_EINVAL, "Input tensor must be the same for all Signatures.");
    return MS_OK;
}

ms_status srv_tfs_multi_inference(void *appv, srv_call *call, const uint8_t *req, size_t n,
                                  srv_bytes *out) {
    /* Field 1 is the repeated tasks, not a model_spec: plain unpack. */
    Tensorflow__Serving__MultiInferenceRequest *rq =
        tensorflow__serving__multi_inference_request__unpack(NULL, n, req);
    if (rq == NULL) return ms_errf(MS_EINVAL, "cannot parse MultiInferenceRequest (%zu bytes)", n);
    srv_servable sv = {0};
    rt_tensor *examples = NULL, **res = NULL;
    int nres = 0, nt = (int)rq->n_tasks;
    ex_mem mem = {0};
    ex_task *tasks = NULL;
    Tensorflow__Serving__InferenceResult *results = NULL, **resultp = NULL;
    Tensorflow__Serving__ModelSpec *specs = NULL;
    Tensorflow__Serving__Int64Value ver = TENSORFLOW__SERVING__INT64_VALUE__INIT;
    /* The servable is the first task's (TF Serving's rule); no task: no model. */
    ms_status st = srv_tfs_resolve(appv, call, nt > 0 ? rq->tasks[0]->model_spec : NULL, &sv);
    if (st != MS_OK) goto done;
    tasks = calloc((size_t)nt, sizeof(*tasks));
    results = calloc((size_t)nt, sizeof(*results));
    resultp = calloc((size_t)nt, sizeof(*resultp));
    specs = calloc((size_t)nt, sizeof(*specs));
    if (!tasks || !results || !resultp || !specs) {
        st = ms_errf(MS_ENOMEM, "out of memory");
        goto done;
    }
    const Tensorflow__MetaGraphDef *mg = rt_model_meta_graph(sv.model);
    for (int i = 0; i < nt; i++)
        if ((st = multi_task(mg, rq->tasks, i, tasks)) != MS_OK) goto done;
    if ((st = input_tensor(rq->input, &examples)) != MS_OK) goto done;
    srv_req *rec = srv_call_req(call);
    srv_req_phase(rec, SRV_PHASE_DECODE);
    if ((st = run_tasks(call, sv.model, tasks, nt, examples, &res, &nres)) != MS_OK) goto done;
    srv_req_phase(rec, SRV_PHASE_COMPUTE);
    int64_t batch = examples->shape.dim[0];
    srv_stats_execution(rq->tasks[0]->model_spec->name, sv.version); /* one run for all tasks */
    srv_req_batch(rec, (int)batch);
    ver.value = sv.version;
    for (int i = 0; i < nt; i++) {
        Tensorflow__Serving__InferenceResult r0 = TENSORFLOW__SERVING__INFERENCE_RESULT__INIT;
        Tensorflow__Serving__ModelSpec s0 = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
        results[i] = r0;
        specs[i] = s0;
        fill_spec(&specs[i], &ver, rq->tasks[i]->model_spec->name, sv.version, tasks[i].key);
        results[i].model_spec = &specs[i];
        if (tasks[i].regress) {
            results[i].result_case = TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_REGRESSION_RESULT;
            st = regression_result(&mem, &tasks[i], res, batch, &results[i].regression_result);
        } else {
            results[i].result_case =
                TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_CLASSIFICATION_RESULT;
            st = classification_result(&mem, &tasks[i], res, batch,
                                       &results[i].classification_result);
        }
        if (st != MS_OK) goto done;
        resultp[i] = &results[i];
    }
    Tensorflow__Serving__MultiInferenceResponse resp =
        TENSORFLOW__SERVING__MULTI_INFERENCE_RESPONSE__INIT;
    resp.n_results = (size_t)nt;
    resp.results = resultp;
    st = srv_pack(&resp.base, out);
    srv_req_phase(rec, SRV_PHASE_SERIALIZE);
done:
    mem_free(&mem);
    free_results(res, nres);
    free(tasks);
    free(results);
    free(resultp);
    free(specs);
    if (examples) rt_tensor_unref(examples);
    if (sv.model) srv_servable_release(&sv);
    tensorflow__serving__multi_inference_request__free_unpacked(rq, NULL);
    return st;
}
