/*
 * kafka_rebalance.c — the rebalance callback: what the host is told it owns (the hooks
 * on_assign, on_handover, on_lost, on_revoke), whatever the assignment protocol.
 *
 * Several members (issue 14, handover.c): a revoke that is not a loss is announced first
 * (on_handover: the host steps what it consumed, hands the state over and acks) and the
 * stored offsets are committed before the callback returns. A LOST assignment (session
 * expired, e.g. the brokers were away) is not a revoke for the host: the partitions stay
 * `held` (on_lost), the lag is unknown (-1 inside, absent from /metrics), and the next
 * assignment releases those that went elsewhere and announces again those that came back.
 */
#include "kafka_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls hook per topic with the partitions of that topic in list l. */
static void call_per_topic(CcdKafka *k, rd_kafka_topic_partition_list_t *l,
                           void (*hook)(void *, const char *, const int32_t *, int))
{
    if (!hook || !l->cnt)
        return;
    int32_t *parts = malloc((size_t)l->cnt * sizeof *parts);
    if (!parts) {
        CCD_LOG(CC_LOG_ERROR, "kafka", "out of memory in rebalance");
        abort(); /* daemon policy: log and exit on OOM; losing a rebalance is worse */
    }
    for (int i = 0; i < l->cnt; i++) {
        const char *t = l->elems[i].topic;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(l->elems[j].topic, t);
        if (seen)
            continue;
        int n = 0;
        for (int j = i; j < l->cnt; j++)
            if (!strcmp(l->elems[j].topic, t))
                parts[n++] = l->elems[j].partition;
        hook(k->hooks.cookie, t, parts, n);
    }
    free(parts);
}

static void list_remove(rd_kafka_topic_partition_list_t *from,
                        const rd_kafka_topic_partition_list_t *what)
{
    for (int i = 0; i < what->cnt; i++)
        rd_kafka_topic_partition_list_del(from, what->elems[i].topic, what->elems[i].partition);
}

/* Elements of a that are not in b (a new list). */
static rd_kafka_topic_partition_list_t *list_minus(const rd_kafka_topic_partition_list_t *a,
                                                   const rd_kafka_topic_partition_list_t *b)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(a->cnt ? a->cnt : 1);
    for (int i = 0; i < a->cnt; i++)
        if (!rd_kafka_topic_partition_list_find(b, a->elems[i].topic, a->elems[i].partition))
            rd_kafka_topic_partition_list_add(l, a->elems[i].topic, a->elems[i].partition);
    return l;
}

/* Elements of a that are also in b (a new list). */
static rd_kafka_topic_partition_list_t *list_common(const rd_kafka_topic_partition_list_t *a,
                                                    const rd_kafka_topic_partition_list_t *b)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(a->cnt ? a->cnt : 1);
    for (int i = 0; i < a->cnt; i++)
        if (rd_kafka_topic_partition_list_find(b, a->elems[i].topic, a->elems[i].partition))
            rd_kafka_topic_partition_list_add(l, a->elems[i].topic, a->elems[i].partition);
    return l;
}

/* How long a commit inside the callback may wait: 5 s, less what is left of ccd_kafka_close's
 * deadline; 0 once librdkafka's close has begun (a commit reaching a group marked terminated
 * aborts in librdkafka: rd_kafka_cgrp_terminated asserts no commit is in flight). */
static int commit_budget_ms(const CcdKafka *k)
{
    if (k->group_closing)
        return 0;
    if (!k->close_deadline)
        return 5000;
    int64_t left_ms = (k->close_deadline - cc_now_ns()) / 1000000;
    return left_ms <= 0 ? 0 : left_ms < 5000 ? (int)left_ms : 5000;
}

/* Tells the host that it no longer owns `parts` (on_revoke) and forgets them. */
void kafka_release(CcdKafka *k, rd_kafka_topic_partition_list_t *parts)
{
    call_per_topic(k, parts, k->hooks.on_revoke);
    if (parts == k->held) {
        rd_kafka_topic_partition_list_destroy(k->held);
        k->held = rd_kafka_topic_partition_list_new(16);
    } else {
        list_remove(k->held, parts);
    }
}

/*
 * The hooks always see incremental changes of ownership, whatever the protocol: with the
 * eager protocol librdkafka revokes everything on every rebalance and assigns the new set
 * right after; the revoke is held back until that assign and then only the partitions
 * that really moved away are revoked, and only the new ones assigned — so the cells of a
 * partition that stays with this member stay warm. A revoke at close, a lost assignment
 * or a rebalance error is passed on at once; an assignment while the consumer leaves the
 * group at close (kafka_consumer_leave) is answered — librdkafka waits for it — but not
 * passed on. The protocol is the configured one (k->coop), never asked of librdkafka. Offsets of
 * pending batches are forgotten at every revoke (the partitions restart from their committed
 * offsets; the host drops the steps it already has).
 */
void kafka_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    CcdKafka *k = opaque;
    int coop = k->coop; /* not rd_kafka_rebalance_protocol(): see kafka_open_consumer */
    rd_kafka_error_t *e = NULL;
    rd_kafka_resp_err_t re = 0;

    k->st.rebalances++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && k->consumer_closing) {
        /* Leaving the group (kafka_consumer_leave): librdkafka waits for this answer before
         * it goes on to the revoke; the host is not told (no takeover at shutdown), and the
         * partitions are paused — what is fetched would be dropped anyway. */
        for (int i = 0; i < parts->cnt; i++)
            parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
        if (coop)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            re = rd_kafka_assign(rk, parts);
        for (int i = 0; i < parts->cnt; i++)
            if (!rd_kafka_topic_partition_list_find(k->assigned, parts->elems[i].topic,
                                                    parts->elems[i].partition))
                rd_kafka_topic_partition_list_add(k->assigned, parts->elems[i].topic,
                                                  parts->elems[i].partition);
        rd_kafka_pause_partitions(rk, parts);
        CCD_LOG(CC_LOG_INFO, "kafka",
                "%d partition(s) assigned while leaving the group: answered, not taken over",
                parts->cnt);
    } else if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++) {
            parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID; /* committed, or the reset */
            parts->elems[i].opaque = NULL;
        }
        if (!coop || k->lost) { /* the deferred revoke: what this member does not get back */
            rd_kafka_topic_partition_list_t *gone = list_minus(k->held, parts);
            if (coop) /* what stayed assigned through the loss is not gone either */
                list_remove(gone, k->assigned);
            kafka_release(k, gone);
            rd_kafka_topic_partition_list_destroy(gone);
        }
        /* After a loss another member may have owned a partition meanwhile: every
         * partition assigned back is announced again (the host restores the newer state). */
        rd_kafka_topic_partition_list_t *none = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_t *fresh = list_minus(parts, k->lost ? none : k->held);
        rd_kafka_topic_partition_list_destroy(none);
        k->lost = 0;
        k->assigning = parts;
        k->rewinds = 0;
        call_per_topic(k, fresh, k->hooks.on_assign);
        k->assigning = NULL;
        for (int i = 0; i < fresh->cnt; i++)
            if (!rd_kafka_topic_partition_list_find(k->held, fresh->elems[i].topic,
                                                    fresh->elems[i].partition))
                rd_kafka_topic_partition_list_add(k->held, fresh->elems[i].topic,
                                                  fresh->elems[i].partition);
        if (k->rewinds)
            kafka_resolve_rewinds(k, parts);
        if (coop)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            re = rd_kafka_assign(rk, parts);
        for (int i = 0; i < parts->cnt; i++)
            rd_kafka_topic_partition_list_add(k->assigned, parts->elems[i].topic,
                                              parts->elems[i].partition);
        if (k->paused)
            rd_kafka_pause_partitions(rk, parts);
        CCD_LOG(CC_LOG_INFO, "kafka", "%d partition(s) assigned (%s), %d new, %d held", parts->cnt,
                coop ? "cooperative" : "eager", fresh->cnt, k->assigned->cnt);
        rd_kafka_topic_partition_list_destroy(fresh);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        int lost = rd_kafka_assignment_lost(rk);
        if (lost) {
            /* Not released: the cells stay the host's until an assignment says where the
             * partitions went (a broker outage must not cost the state of every cell). */
            k->lost = 1;
            k->st.losses++;
            call_per_topic(k, parts, k->hooks.on_lost);
        } else {
            /* An orderly give-up: the host hands the state over and acks what it stepped;
             * commit it now, while the generation is still ours (the next owner starts at
             * the committed offsets, consistent with the state it reads). While leaving,
             * only what the host holds (an assignment answered at close was not taken). */
            rd_kafka_topic_partition_list_t *mine =
                k->consumer_closing ? list_common(parts, k->held) : NULL;
            call_per_topic(k, mine ? mine : parts, k->hooks.on_handover);
            int budget = commit_budget_ms(k);
            if (k->hooks.on_handover && budget > 0)
                kafka_commit_bounded(k, budget);
            if (mine)
                rd_kafka_topic_partition_list_destroy(mine);
        }
        if (!lost && coop && k->consumer_closing) {
            rd_kafka_topic_partition_list_t *mine = list_common(parts, k->held);
            kafka_release(k, mine);
            rd_kafka_topic_partition_list_destroy(mine);
        } else if (!lost && (coop || k->consumer_closing)) {
            kafka_release(k, coop ? parts : k->held);
        }
        for (int i = 0; i < parts->cnt; i++)
            kafka_batches_forget(k, parts->elems[i].topic, parts->elems[i].partition);
        if (coop) {
            e = rd_kafka_incremental_unassign(rk, parts);
            list_remove(k->assigned, parts);
        } else {
            re = rd_kafka_assign(rk, NULL);
            rd_kafka_topic_partition_list_destroy(k->assigned);
            k->assigned = rd_kafka_topic_partition_list_new(16);
        }
        CCD_LOG(CC_LOG_INFO, "kafka", "%d partition(s) revoked%s, %d held", parts->cnt,
                lost ? " (lost)" : "", k->assigned->cnt);
    } else {
        CCD_LOG(CC_LOG_ERROR, "kafka", "rebalance error: %s", rd_kafka_err2str(err));
        kafka_release(k, k->held);
        for (int i = 0; i < k->assigned->cnt; i++)
            kafka_batches_forget(k, k->assigned->elems[i].topic, k->assigned->elems[i].partition);
        re = rd_kafka_assign(rk, NULL);
        rd_kafka_topic_partition_list_destroy(k->assigned);
        k->assigned = rd_kafka_topic_partition_list_new(16);
    }
    if (e) {
        CCD_LOG(CC_LOG_ERROR, "kafka", "incremental (un)assign: %s", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    if (re)
        CCD_LOG(CC_LOG_ERROR, "kafka", "(un)assign: %s", rd_kafka_err2str(re));
    k->st.assigned_partitions = k->assigned->cnt;
}

int ccd_kafka_owned_partitions(const CcdKafka *k, CcdKafkaOwned *out, int max)
{
    for (int i = 0; i < k->held->cnt && i < max; i++) {
        const rd_kafka_topic_partition_t *tp = &k->held->elems[i];
        out[i] = (CcdKafkaOwned){
            tp->topic, tp->partition,
            !!rd_kafka_topic_partition_list_find(k->assigned, tp->topic, tp->partition)};
    }
    return k->held->cnt;
}

int ccd_kafka_assignment(const CcdKafka *k, const char *topic, int32_t *parts, int max)
{
    int n = 0;
    for (int i = 0; i < k->assigned->cnt; i++)
        if (!strcmp(k->assigned->elems[i].topic, topic)) {
            if (n < max)
                parts[n] = k->assigned->elems[i].partition;
            n++;
        }
    return n;
}

void ccd_kafka_membership(const CcdKafka *k, char *member_id, size_t id_len, char *protocol,
                          size_t protocol_len)
{
    char *id = rd_kafka_memberid(k->rk);
    snprintf(member_id, id_len, "%s", id ? id : "");
    if (id)
        rd_kafka_mem_free(k->rk, id);
    const char *p = rd_kafka_rebalance_protocol(k->rk);
    snprintf(protocol, protocol_len, "%s", p ? p : "NONE");
}
