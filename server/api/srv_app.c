/* srv_app.c - the method table of every service. */
#include "srv_app.h"

#include <string.h>

#include "srv_queue.h"

/* clang-format off */
static const srv_method g_methods[] = {
    /* TensorFlow Serving */
    {"/tensorflow.serving.PredictionService/Predict", srv_tfs_predict, NULL, NULL, 1, 0},
    {"/tensorflow.serving.PredictionService/GetModelMetadata", srv_tfs_get_model_metadata, NULL, NULL, 0, 0},
    {"/tensorflow.serving.PredictionService/Classify", srv_tfs_classify, NULL, NULL, 0, 0},
    {"/tensorflow.serving.PredictionService/Regress", srv_tfs_regress, NULL, NULL, 0, 0},
    {"/tensorflow.serving.PredictionService/MultiInference", srv_tfs_multi_inference, NULL, NULL, 0, 0},
    {"/tensorflow.serving.ModelService/GetModelStatus", srv_tfs_get_model_status, NULL, NULL, 0, 0},
    /* Waits for loads: on a worker so that CQ threads stay free. */
    {"/tensorflow.serving.ModelService/HandleReloadConfigRequest", srv_tfs_reload_config, NULL, NULL, 1, 0},
    /* KServe / Open Inference Protocol v2 */
    {"/inference.GRPCInferenceService/ServerLive", srv_kserve_server_live, NULL, NULL, 0, 1},
    {"/inference.GRPCInferenceService/ServerReady", srv_kserve_server_ready, NULL, NULL, 0, 1},
    {"/inference.GRPCInferenceService/ModelReady", srv_kserve_model_ready, NULL, NULL, 0, 1},
    {"/inference.GRPCInferenceService/ServerMetadata", srv_kserve_server_metadata, NULL, NULL, 0, 0},
    {"/inference.GRPCInferenceService/ModelMetadata", srv_kserve_model_metadata, NULL, NULL, 0, 0},
    {"/inference.GRPCInferenceService/ModelInfer", srv_kserve_model_infer, NULL, NULL, 1, 0},
    /* Triton's extensions; load and unload wait for the manager: on a worker */
    {"/inference.GRPCInferenceService/ModelConfig", srv_triton_model_config, NULL, NULL, 0, 0},
    {"/inference.GRPCInferenceService/ModelStatistics", srv_triton_model_statistics, NULL, NULL, 0, 0},
    {"/inference.GRPCInferenceService/RepositoryIndex", srv_triton_repository_index, NULL, NULL, 0, 0},
    {"/inference.GRPCInferenceService/RepositoryModelLoad", srv_triton_repository_load, NULL, NULL, 1, 0},
    {"/inference.GRPCInferenceService/RepositoryModelUnload", srv_triton_repository_unload, NULL, NULL, 1, 0},
    /* grpc.health.v1: answered while draining, with NOT_SERVING */
    {"/grpc.health.v1.Health/Check", srv_health_check, NULL, NULL, 0, 1},
    {"/grpc.health.v1.Health/Watch", NULL, srv_health_watch, srv_health_watch_closed, 0, 1},
};
/* clang-format on */

const srv_method *srv_app_methods(int *n) {
    *n = (int)(sizeof(g_methods) / sizeof(g_methods[0]));
    return g_methods;
}

void srv_app_queue_key(const srv_method *m, const uint8_t *req, size_t n, char *key, size_t cap) {
    key[0] = '\0';
    if (strcmp(m->path, "/tensorflow.serving.PredictionService/Predict") == 0)
        srv_queue_key(req, n, 1, 1, 3, key, cap); /* model_spec { name, signature_name } */
    else if (strcmp(m->path, "/inference.GRPCInferenceService/ModelInfer") == 0)
        srv_queue_key(req, n, 0, 1, 0, key, cap); /* model_name */
}
