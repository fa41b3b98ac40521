/* gen.c: librdkafka's built-in partitioners over the key set, for testdata/compat/kafka.
 *
 * 1. Calls each rd_kafka_msg_partitioner_<name> function of the installed librdkafka directly
 *    for every key of keys.txt and every partition count, and writes librdkafka-<name>.txt.
 *    The *_random functions need a topic handle (they ask it whether the partition they drew
 *    is available); a producer with no brokers gives one.  A placement that differs over 64
 *    calls is written "*" (random).
 * 2. Cross-checks through the front door: a producer on librdkafka's own mock cluster
 *    (test.mock.num.brokers, listening on 127.0.0.1), one topic per partitioner and count
 *    with the topic property partitioner=<name>, every key produced with RD_KAFKA_PARTITION_UA;
 *    the delivery reports must name the partition the direct call gave, for every key whose
 *    direct placement is not random.  It also produces a NULL key, and reports where it went.
 *
 * Usage: gen KEYS_TXT OUT_DIR VERSION_TEXT
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t (*partitioner_fn)(const rd_kafka_topic_t *, const void *, size_t, int32_t,
                                  void *, void *);

static const struct {
        const char *name;
        partitioner_fn fn;
} parts[] = {
    {"consistent", rd_kafka_msg_partitioner_consistent},
    {"consistent_random", rd_kafka_msg_partitioner_consistent_random},
    {"murmur2", rd_kafka_msg_partitioner_murmur2},
    {"murmur2_random", rd_kafka_msg_partitioner_murmur2_random},
    {"fnv1a", rd_kafka_msg_partitioner_fnv1a},
    {"fnv1a_random", rd_kafka_msg_partitioner_fnv1a_random},
};
#define NPARTS (sizeof(parts) / sizeof(parts[0]))

static const int32_t counts[] = {1, 2, 3, 7, 12, 64, 1000, 2147483647};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define LIVE_COUNTS 7 /* the mock cluster gets every count but the last */

#define MAXKEYS 4096
static char *keys[MAXKEYS];
static size_t keylens[MAXKEYS];
static int nkeys;

/* placed[p][c][k]: the direct call's answer, -1 for random; key index nkeys is the NULL key. */
static int64_t placed[NPARTS][NCOUNTS][MAXKEYS + 1];

static void die(const char *what) {
        fprintf(stderr, "gen: %s\n", what);
        exit(1);
}

static int hexval(int c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        die("keys.txt: bad hex");
        return 0;
}

static void read_keys(const char *path) {
        FILE *f = fopen(path, "r");
        static char line[1 << 16];
        if (!f) die("cannot open keys.txt");
        while (fgets(line, sizeof line, f)) {
                size_t n = strcspn(line, "\r\n");
                line[n] = 0;
                if (n == 0 || line[0] == '#') continue;
                if (nkeys == MAXKEYS) die("too many keys");
                if (strcmp(line, "-") == 0) {
                        keys[nkeys] = malloc(1);
                        keylens[nkeys++] = 0;
                        continue;
                }
                keys[nkeys] = malloc(n / 2 + 1);
                for (size_t i = 0; i < n / 2; i++)
                        keys[nkeys][i] = (char)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
                keylens[nkeys++] = n / 2;
        }
        fclose(f);
}

/* direct places key k (k == nkeys: the NULL key) with partitioner p over counts[c]. */
static int64_t direct(rd_kafka_topic_t *rkt, size_t p, size_t c, int k) {
        const void *key = k < nkeys ? keys[k] : NULL;
        size_t len = k < nkeys ? keylens[k] : 0;
        int32_t first = parts[p].fn(rkt, key, len, counts[c], NULL, NULL);
        if (first < 0 || first >= counts[c]) die("partition out of range");
        for (int i = 0; i < 64; i++)
                if (parts[p].fn(rkt, key, len, counts[c], NULL, NULL) != first) return -1;
        return first;
}

static int live_wrong, live_checked, live_sent;
static size_t live_p, live_c;
static int32_t null_partition;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        int k = (int)(intptr_t)m->_private;
        (void)rk, (void)opaque;
        if (m->err) {
                fprintf(stderr, "gen: delivery of key %d: %s\n", k, rd_kafka_err2str(m->err));
                live_wrong++;
                return;
        }
        if (k == nkeys) {
                null_partition = m->partition;
                return;
        }
        int64_t want = placed[live_p][live_c][k];
        if (want < 0) return;
        live_checked++;
        if (m->partition != want) {
                if (live_wrong < 5)
                        fprintf(stderr, "gen: %s/%d key %d: produced to %" PRId32 ", direct call %" PRId64 "\n",
                                parts[live_p].name, counts[live_c], k, m->partition, want);
                live_wrong++;
        }
}

int main(int argc, char **argv) {
        char errstr[512], path[4096];
        if (argc != 4) die("usage: gen KEYS_TXT OUT_DIR VERSION_TEXT");
        read_keys(argv[1]);

        /* 1. direct calls */
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
        if (!rk) die(errstr);
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, "t", NULL);
        if (!rkt) die("rd_kafka_topic_new");
        for (size_t p = 0; p < NPARTS; p++)
                for (size_t c = 0; c < NCOUNTS; c++)
                        for (int k = 0; k <= nkeys; k++) placed[p][c][k] = direct(rkt, p, c, k);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);

        /* 2. the front door, on the mock cluster */
        conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", errstr, sizeof errstr) ||
            rd_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof errstr))
                die(errstr);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
        if (!rk) die(errstr);
        rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(rk);
        if (!mc) die("no mock cluster");
        for (live_p = 0; live_p < NPARTS; live_p++) {
                for (live_c = 0; live_c < LIVE_COUNTS; live_c++) {
                        char topic[128];
                        snprintf(topic, sizeof topic, "%s-%d", parts[live_p].name, counts[live_c]);
                        if (rd_kafka_mock_topic_create(mc, topic, counts[live_c], 1)) die("mock topic");
                        rd_kafka_topic_conf_t *tc = rd_kafka_topic_conf_new();
                        if (rd_kafka_topic_conf_set(tc, "partitioner", parts[live_p].name, errstr, sizeof errstr))
                                die(errstr);
                        rkt = rd_kafka_topic_new(rk, topic, tc);
                        if (!rkt) die("rd_kafka_topic_new");
                        for (int k = 0; k <= nkeys; k++) {
                                const void *key = k < nkeys ? keys[k] : NULL;
                                size_t len = k < nkeys ? keylens[k] : 0;
                                while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, "v", 1,
                                                        key, len, (void *)(intptr_t)k) == -1) {
                                        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                                die(rd_kafka_err2str(rd_kafka_last_error()));
                                        rd_kafka_poll(rk, 10);
                                }
                                live_sent++;
                        }
                        if (rd_kafka_flush(rk, 60000)) die("flush timed out");
                        /* a NULL key goes to the partitioner itself, unless it is a *_random one:
                         * then to the topic's sticky partition (rd_kafka_msg_partitioner,
                         * rdkafka_msg.c), which the direct call cannot show */
                        if (placed[live_p][live_c][nkeys] >= 0 && null_partition != placed[live_p][live_c][nkeys])
                                die("the NULL key was produced elsewhere than the direct call says");
                        rd_kafka_topic_destroy(rkt);
                }
        }
        rd_kafka_destroy(rk);
        fprintf(stderr, "gen: front door: %d messages produced, %d placements compared, %d wrong\n",
                live_sent, live_checked, live_wrong);
        if (live_wrong) die("the front door disagrees with the direct calls");

        /* 3. the vector files */
        for (size_t p = 0; p < NPARTS; p++) {
                snprintf(path, sizeof path, "%s/librdkafka-%s.txt", argv[2], parts[p].name);
                FILE *f = fopen(path, "w");
                if (!f) die("cannot write");
                fprintf(f, "# system: %s, partitioner=%s\n", argv[3], parts[p].name);
                fprintf(f, "# front door: rd_kafka_msg_partitioner_%s called directly (64 times a key: \"*\" where "
                           "answers differed); cross-checked by rd_kafka_produce on librdkafka's mock cluster for "
                           "every count but the last\n", parts[p].name);
                fprintf(f, "# partitions:");
                for (size_t c = 0; c < NCOUNTS; c++) fprintf(f, " %d", counts[c]);
                fprintf(f, "\n# null key (key NULL, called directly and produced; \"*\": random or sticky):");
                for (size_t c = 0; c < NCOUNTS; c++) {
                        if (placed[p][c][nkeys] < 0) fprintf(f, " *");
                        else fprintf(f, " %" PRId64, placed[p][c][nkeys]);
                }
                fprintf(f, "\n");
                for (int k = 0; k < nkeys; k++) {
                        fprintf(f, "%d", k);
                        for (size_t c = 0; c < NCOUNTS; c++) {
                                if (placed[p][c][k] < 0) fprintf(f, " *");
                                else fprintf(f, " %" PRId64, placed[p][c][k]);
                        }
                        fprintf(f, "\n");
                }
                fclose(f);
        }
        return 0;
}
