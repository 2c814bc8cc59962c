/* test_oip_json.c -- the JSON answers of the other calls written as their
 * messages (oip_json_encode, from the generated descriptors), read back
 * with protobuf-c; and the small requests (codec/oip.h). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/oip_shared.h"

/* j (text) as message m, then unpacked with desc (free it with
 * protobuf_c_message_free_unpacked). */
static ProtobufCMessage *roundtrip(enum oip_message m, const char *text,
                                   const ProtobufCMessageDescriptor *desc)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    unsigned char *b;
    size_t len;
    struct failure e = {0};
    cr_assert_eq(oip_json_encode(m, j, &b, &len, &e), 0, "%s", e.msg);
    json_decref(j);
    ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, b);
    cr_assert_not_null(msg, "%zu bytes do not unpack", len);
    free(b);
    return msg;
}

Test(oip, a_model_config_answer_becomes_a_model_config_response)
{
    ProtobufCMessage *msg = roundtrip(
        OIP_MODEL_CONFIG_RESPONSE,
        "{\"config\": {\"name\": \"bert\", \"platform\": \"attention\", \"backend\": "
        "\"attention\", \"max_batch_size\": 0, \"input\": [{\"name\": \"query\", \"data_type\": "
        "\"TYPE_FP32\", \"dims\": [-1, 8], \"optional\": false}, {\"name\": \"sequence_id\", "
        "\"data_type\": \"TYPE_STRING\", \"dims\": [-1], \"optional\": true}], \"output\": "
        "[{\"name\": \"output\", \"data_type\": 11, \"dims\": [-1, 8]}], \"sequence_batching\": "
        "{\"max_sequence_idle_microseconds\": \"60000000\"}, \"parameters\": {\"k\": "
        "{\"string_value\": \"v\"}, \"num_heads\": {\"string_value\": \"2\"}}, \"unknown\": "
        "[1, {\"x\": 2}], \"version_policy\": null}}",
        &inference__model_config_response__descriptor);
    const Inference__ModelConfig *c = ((Inference__ModelConfigResponse *)msg)->config;
    cr_assert_not_null(c);
    cr_expect_str_eq(c->name, "bert");
    cr_expect_str_eq(c->backend, "attention");
    cr_assert_eq(c->n_input, 2);
    cr_expect_str_eq(c->input[0]->name, "query");
    cr_expect_eq(c->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
    cr_assert_eq(c->input[0]->n_dims, 2);
    cr_expect(c->input[0]->dims[0] == -1 && c->input[0]->dims[1] == 8);
    cr_expect_eq(c->input[1]->data_type, INFERENCE__DATA_TYPE__TYPE_STRING);
    cr_expect(c->input[1]->optional);
    cr_assert_eq(c->n_output, 1);
    cr_expect_eq(c->output[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32, "by number");
    cr_assert_eq(c->scheduling_choice_case,
                 INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING);
    cr_expect_eq(c->sequence_batching->max_sequence_idle_microseconds, 60000000);
    cr_assert_eq(c->n_parameters, 2);
    cr_expect_str_eq(c->parameters[0]->key, "k");
    cr_expect_str_eq(c->parameters[0]->value->string_value, "v");
    cr_expect_str_eq(c->parameters[1]->value->string_value, "2");
    protobuf_c_message_free_unpacked(msg, NULL);
}

Test(oip, metadata_statistics_and_the_index_become_their_messages)
{
    ProtobufCMessage *msg = roundtrip(
        OIP_MODEL_METADATA_RESPONSE,
        "{\"name\": \"m\", \"versions\": [\"1\"], \"platform\": \"attention\", \"inputs\": "
        "[{\"name\": \"query\", \"datatype\": \"FP32\", \"shape\": [-1, -1, 8]}], \"outputs\": [], "
        "\"properties\": {\"a\": \"b\"}, \"parameters\": {\"num_heads\": 2}}",
        &inference__model_metadata_response__descriptor);
    const Inference__ModelMetadataResponse *md = (void *)msg;
    cr_expect_str_eq(md->versions[0], "1");
    cr_assert_eq(md->n_inputs, 1);
    cr_expect_eq(md->inputs[0]->n_shape, 3);
    cr_expect_eq(md->inputs[0]->shape[0], -1);
    cr_expect_eq(md->n_outputs, 0);
    cr_assert_eq(md->n_properties, 1);
    cr_expect_str_eq(md->properties[0]->value, "b");
    protobuf_c_message_free_unpacked(msg, NULL);

    msg = roundtrip(OIP_MODEL_STATISTICS_RESPONSE,
                    "{\"model_stats\": [{\"name\": \"m\", \"version\": \"1\", \"last_inference\": "
                    "\"18446744073709551615\", \"inference_count\": 3, \"inference_stats\": "
                    "{\"success\": {\"count\": 3, \"ns\": 1200}}, \"batch_stats\": []}]}",
                    &inference__model_statistics_response__descriptor);
    const Inference__ModelStatisticsResponse *ms = (void *)msg;
    cr_assert_eq(ms->n_model_stats, 1);
    cr_expect_eq(ms->model_stats[0]->last_inference, UINT64_MAX);
    cr_expect_eq(ms->model_stats[0]->inference_count, 3);
    cr_expect_eq(ms->model_stats[0]->inference_stats->success->ns, 1200);
    protobuf_c_message_free_unpacked(msg, NULL);

    msg = roundtrip(OIP_SERVER_METADATA_RESPONSE,
                    "{\"name\": \"s\", \"version\": \"2\", \"extensions\": [\"a\", \"b\"]}",
                    &inference__server_metadata_response__descriptor);
    const Inference__ServerMetadataResponse *sm = (void *)msg;
    cr_assert_eq(sm->n_extensions, 2);
    cr_expect_str_eq(sm->extensions[1], "b");
    protobuf_c_message_free_unpacked(msg, NULL);

    msg = roundtrip(OIP_SERVER_READY_RESPONSE, "{\"ready\": true}",
                    &inference__server_ready_response__descriptor);
    cr_expect(((Inference__ServerReadyResponse *)msg)->ready);
    protobuf_c_message_free_unpacked(msg, NULL);

    unsigned char *b = (unsigned char *)"x";
    size_t len = 9;
    struct failure e = {0};
    json_t *empty = json_object();
    cr_expect_eq(oip_json_encode(OIP_REPOSITORY_MODEL_LOAD_RESPONSE, empty, &b, &len, &e), 0);
    cr_expect_null(b, "an empty message");
    cr_expect_eq(len, 0);
    json_decref(empty);
}

Test(oip, json_that_does_not_fit_the_message_is_an_internal_error)
{
    const char *bad[] = {"{\"config\": {\"input\": [{\"data_type\": \"TYPE_FP33\"}]}}",
                         "{\"config\": {\"max_batch_size\": 4294967296}}",
                         "{\"config\": {\"input\": {\"name\": \"x\"}}}",
                         "{\"config\": {\"name\": 5}}"};
    const char *want[] = {"data_type names no value", "max_batch_size is out of range",
                          "input is an object", "name is not a string"};
    for (int i = 0; i < 4; i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        unsigned char *b;
        size_t len;
        struct failure e = {0};
        cr_expect_eq(oip_json_encode(OIP_MODEL_CONFIG_RESPONSE, j, &b, &len, &e), -1, "%s",
                     bad[i]);
        cr_expect_eq(e.code, ERR_INTERNAL);
        cr_expect(strstr(e.msg, want[i]), "%s: %s", bad[i], e.msg);
        json_decref(j);
    }
}

Test(oip, the_small_requests_are_read)
{
    Inference__ModelReadyRequest q = INFERENCE__MODEL_READY_REQUEST__INIT;
    q.name = "bert", q.version = "1";
    unsigned char b[512];
    size_t len = inference__model_ready_request__pack(&q, b);
    char name[128], version[32];
    struct failure e = {0};
    cr_assert_eq(oip_name_version(b, len, name, sizeof name, version, sizeof version, &e), 0);
    cr_expect_str_eq(name, "bert");
    cr_expect_str_eq(version, "1");
    q.version = "123456789012345678901234567890123";
    len = inference__model_ready_request__pack(&q, b);
    cr_expect_eq(oip_name_version(b, len, name, sizeof name, version, sizeof version, &e), -1);
    cr_expect_eq(e.code, ERR_NOT_FOUND, "%s", e.msg);

    Inference__RepositoryIndexRequest ri = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
    ri.ready = 1;
    len = inference__repository_index_request__pack(&ri, b);
    int ready = 0;
    cr_assert_eq(oip_repository_index(b, len, &ready, &e), 0);
    cr_expect_eq(ready, 1);

    Inference__RepositoryModelUnloadRequest u = INFERENCE__REPOSITORY_MODEL_UNLOAD_REQUEST__INIT;
    Inference__ModelRepositoryParameter pv[3] = {
        INFERENCE__MODEL_REPOSITORY_PARAMETER__INIT, INFERENCE__MODEL_REPOSITORY_PARAMETER__INIT,
        INFERENCE__MODEL_REPOSITORY_PARAMETER__INIT};
    pv[0].parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    pv[0].string_param = "{}";
    pv[1].parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM;
    pv[1].bytes_param = (ProtobufCBinaryData){3, (uint8_t *)"abc"};
    Inference__RepositoryModelUnloadRequest__ParametersEntry pe[3], *pp[3];
    const char *keys[] = {"config", "file:1/model.safetensors", "empty"};
    for (int i = 0; i < 3; i++) {
        pe[i] = (Inference__RepositoryModelUnloadRequest__ParametersEntry)
            INFERENCE__REPOSITORY_MODEL_UNLOAD_REQUEST__PARAMETERS_ENTRY__INIT;
        pe[i].key = (char *)keys[i], pe[i].value = &pv[i], pp[i] = &pe[i];
    }
    u.model_name = "bert", u.parameters = pp, u.n_parameters = 2;
    len = inference__repository_model_unload_request__pack(&u, b);
    char *body;
    size_t blen;
    cr_assert_eq(oip_repository_model(b, len, name, sizeof name, &body, &blen, &e), 0, "%s",
                 e.msg);
    cr_expect_str_eq(name, "bert");
    cr_expect_str_eq(body, "{\"parameters\":{\"config\":\"{}\",\"file:1/model.safetensors\":"
                           "\"YWJj\"}}");
    cr_expect_eq(blen, strlen(body));
    free(body);

    u.n_parameters = 3; /* "empty" has no value */
    len = inference__repository_model_unload_request__pack(&u, b);
    cr_expect_eq(oip_repository_model(b, len, name, sizeof name, &body, &blen, &e), -1);
    cr_expect_str_eq(e.msg, "parameter 'empty' has no value: set bool_param, int64_param, "
                            "string_param or bytes_param");
    u.n_parameters = 0, u.model_name = "";
    len = inference__repository_model_unload_request__pack(&u, b);
    cr_expect_eq(oip_repository_model(b, len, name, sizeof name, &body, &blen, &e), -1);
    cr_expect_str_eq(e.msg, "model_name is required");
    u.model_name = "bert";
    len = inference__repository_model_unload_request__pack(&u, b);
    cr_assert_eq(oip_repository_model(b, len, name, sizeof name, &body, &blen, &e), 0);
    cr_expect_str_eq(body, "{}");
    free(body);
}
