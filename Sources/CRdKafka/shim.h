#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

/* Swift cannot call C variadic functions: pushes `cnt` errors, in order, onto one mock broker's error stack
   for `api_key` (no extra round-trip time). Returns the first error the mock reports, if any. */
static inline rd_kafka_resp_err_t maidian_mock_broker_push_request_errors(rd_kafka_mock_cluster_t *mcluster,
                                                                          int32_t broker_id, int16_t api_key,
                                                                          size_t cnt,
                                                                          const rd_kafka_resp_err_t *errors) {
    for (size_t i = 0; i < cnt; i++) {
        rd_kafka_resp_err_t err =
            rd_kafka_mock_broker_push_request_error_rtts(mcluster, broker_id, api_key, 1, errors[i], 0);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return err;
    }
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}
