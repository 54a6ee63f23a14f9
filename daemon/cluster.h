/*
 * cluster.h — several cellcastd in one consumer group (docs/operations.md, "Several
 * instances"): this member's identity, the members topic, and finding the member that
 * serves a cell.
 *
 * Identity: every member gets a distinct Kafka client.id (default
 * cellcastd-<cluster.instance or host name>-<HTTP port>), optionally a group.instance.id
 * (static membership), and an HTTP base URL (http.advertise).
 *
 * Membership: each member publishes one record on a compacted topic (cluster.members_topic,
 * default <first KPI topic>.members) keyed by its client id: its address, its group member
 * id and the partitions of the KPI topic it holds, at once when they change and every
 * cluster.heartbeat_ms; a tombstone when it stops. Every member reads the whole topic (a
 * plain assign from the beginning, no group) and keeps the records younger than 5
 * heartbeats. Why a topic and not the group's own metadata (rd_kafka_list_groups /
 * DescribeGroups): the group protocol carries no HTTP address, librdkafka's consumer sets
 * no user data we could put one in, and librdkafka's mock cluster (the embedded broker, the
 * tests) does not implement ListGroups/DescribeGroups ("Required feature not supported by
 * broker", librdkafka 2.0.2).
 *
 * Routing: a cell's partition is computed from its id with the producers' partitioner
 * (kafka.partitioner); the owner of that partition is this member if its live assignment
 * holds it, else the newest fresh record that claims it. A request for a cell this daemon
 * does not hold answers 307 to the owner, 503 when nobody owns the partition now, 404 when
 * this member owns it (the cell has not been seen). A member never redirects for a
 * partition its own assignment holds, so two members cannot send a request back and forth
 * once their assignments have settled. With several KPI topics the first one's partitions
 * decide: a member cannot know which topic a cell it does not hold arrives on, and the range
 * assignor gives partition p of every topic to one member when the topics have the same
 * partition count (docs/operations.md, "Finding a cell"); a member whose topics are
 * assigned otherwise logs a warning (check_copartitioned).
 *
 * Threads: the loop thread only (cron and HTTP handlers).
 */
#ifndef CCD_CLUSTER_H
#define CCD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "kafka.h"

typedef struct CcdCluster CcdCluster;
typedef struct CcdReq CcdReq;

/** kafka.partitioner, in the order of its enum in the config table. */
enum CcdPartitioner {
    CCD_PART_MURMUR2_RANDOM,
    CCD_PART_MURMUR2,
    CCD_PART_CONSISTENT_RANDOM,
    CCD_PART_CONSISTENT,
    CCD_PART_FNV1A_RANDOM,
    CCD_PART_FNV1A,
    CCD_PART_COUNT
};

/** librdkafka's name of partitioner p (its `partitioner` property), NULL out of range. */
const char *ccd_partitioner_name(int p);

/** Partition of a non-empty key among n > 0 partitions, exactly as a librdkafka producer
 *  configured with partitioner p places a message with that key; -1 on bad arguments. */
int32_t ccd_partition_of_key(int p, const void *key, size_t len, int32_t n);

typedef struct CcdClusterIdentity {
    char client_id[256];         ///< kafka.client_id, or derived
    char group_instance_id[256]; ///< "" = dynamic membership
    char advertise[512];         ///< base URL, no trailing slash
} CcdClusterIdentity;

/** This member's identity from the configuration and the HTTP port actually bound (empty
 *  keys derived, see the config table). 0 or -EINVAL (a value too long). */
int ccd_cluster_identity(const CcdConfig *cfg, int http_port, CcdClusterIdentity *id, char *err,
                         size_t errlen);

/** cluster.members_topic, or its default <first kafka.topics>.members, into buf. */
void ccd_cluster_members_topic(const CcdConfig *cfg, char *buf, size_t len);

/** Creates the module and points ks->props / ks->producer_props at copies that add
 *  client.id, group.instance.id (consumer) and the partitioner (producer); the copies live
 *  until ccd_cluster_close. Call before ccd_kafka_open. 0 or -errno. */
int ccd_cluster_open(CcdCluster **out, const CcdConfig *cfg, int http_port, CcdKafkaSettings *ks,
                     char *err, size_t errlen);

/** After ccd_kafka_open: opens the members topic's producer and reader on k's bootstrap
 *  servers and publishes this member's first record. 0 or -errno. */
int ccd_cluster_start(CcdCluster *c, CcdKafka *k, char *err, size_t errlen);

/** From the cron (every tick): reads member records, republishes this member's when its
 *  partitions changed or a heartbeat is due, refreshes the KPI topic's partition count. */
void ccd_cluster_cron(CcdCluster *c);

/** Takes one record as read from the members topic (value NULL = tombstone); bad records
 *  (malformed JSON or fields, a client_id other than the key, an address that
 *  ccd_http_address_valid (config.h) refuses, a ts_ms more than CCD_CLUSTER_MAX_SKEW_MS ahead of
 *  the wall clock) are counted, logged with the reason and ignored. 0 or -EINVAL (-ENOMEM).
 *  Exposed for the tests. */
int ccd_cluster_record(CcdCluster *c, const char *key, size_t key_len, const void *value,
                       size_t len);

/** How far ahead of this member's wall clock a record's ts_ms may be (ms): members' clocks
 *  agree to within seconds (NTP); a record further ahead is refused (it would stay fresh
 *  for as long as it is ahead and win every claim). */
#define CCD_CLUSTER_MAX_SKEW_MS 30000

typedef struct CcdClusterStats {
    uint64_t records;        ///< read from the members topic
    uint64_t invalid;        ///< refused (malformed, bad address, future ts_ms, key mismatch)
    uint64_t dropped;        ///< valid but not kept (table full, out of memory)
    uint64_t publish_errors; ///< this member's records not published
} CcdClusterStats;

/** The counters of the members topic (all 0 for c NULL). */
void ccd_cluster_stats(const CcdCluster *c, CcdClusterStats *st);

enum CcdOwner { CCD_OWNER_SELF, CCD_OWNER_OTHER, CCD_OWNER_UNKNOWN, CCD_OWNER_ALONE };

/** Who serves `cell`: *partition gets its partition of the KPI topic (-1 when the
 *  partition count is not known yet), *address the owner's base URL for CCD_OWNER_OTHER.
 *  CCD_OWNER_ALONE: no owner known and no other member seen (a daemon alone in its group,
 *  e.g. still joining: it answers as a single daemon does). */
enum CcdOwner ccd_cluster_owner(CcdCluster *c, const char *cell, int32_t *partition,
                                const char **address);

typedef struct CcdClusterInfo {
    const char *topic, *group_id, *partitioner, *advertise;
} CcdClusterInfo;

/** Names for messages (valid until ccd_cluster_close). */
CcdClusterInfo ccd_cluster_info(const CcdCluster *c);

/** GET /v1/cluster's document (see proto/openapi.yaml). */
json_t *ccd_cluster_json(CcdCluster *c);

/** Publishes a tombstone for this member's record (bounded by timeout_ms) and closes.
 *  Call before ccd_kafka_close. */
void ccd_cluster_close(CcdCluster **c, int timeout_ms);

/* cluster_http.c */

/** For a per-cell route whose cell this daemon does not hold: 0 when it should answer as
 *  today (404: this member owns the cell's partition, or no cluster), else the status it
 *  filled (307 with Location to the owner, same path and query; 503 with Retry-After when
 *  no member owns the partition now). */
int ccd_cluster_redirect(CcdReq *r);

/** GET /v1/cluster (?cell=ID adds where that cell lives). */
int ccd_h_cluster(CcdReq *r);

#endif
