/*
 * ingest.h — KPI messages in, from Kafka or POST /v1/kpis, to the engine and back.
 *
 * A KPI's walk, Kafka to forecast to alert, through the modules in this order (this
 * module's hooks connect them; none calls back up the walk):
 *
 *   1. kafka.c      ccd_kafka_poll (loop thread, from ccd_ingest_poll) hands each message of a
 *                   poll to the host's on_message, in ingest.c;
 *   2. ingest       ccd_ingest_message, in ingest.c: cc_kpi_decode turns it into records;
 *   3. cells.c      ccd_cells_ingest applies the ingest rules (cells.h) and appends the
 *                   steps to the open batch; when the batch is due, ccd_sched_maybe_flush
 *                   has the table seal it (on_seal → ccd_cells_seal);
 *   4. scheduler.c  the worker runs cc_engine_step per round (run_batch) and calls
 *                   on_stepped for each stepped cell;
 *   5. publish.c    ccd_publish_stepped copies the forecast and the step's expectation for
 *                   the HTTP handlers;
 *   6. alerts.c     ccd_alerts_on_stepped scores the step; transitions wait in its queue.
 *
 * The way back is one path too: the worker wakes the loop, which completes the batch and
 * calls on_batch_done: ccd_cells_unbusy, ccd_state_ack (→ ccd_kafka_ack now, or with the
 * next snapshot: state.h) so offsets are stored only after the steps that consumed them
 * (at-least-once; duplicates on redelivery are dropped by the (cell, step) rule), then
 * ccd_alerts_flush (→ ccd_kafka_produce of the transitions) and the HTTP requests that
 * waited for a busy cell. POST /v1/kpis enters at 2 (api.c h_post_kpis).
 *
 * Loop thread, but for on_stepped (the worker).
 */
#ifndef CCD_INGEST_H
#define CCD_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "cellcastd.h"

/** A valid record of the last message refused for its time (ingest.max_future_s /
 *  ingest.max_past_s): its element, whether ahead (1) or behind (0) the clock, its time
 *  and how far it is off (seconds). */
typedef struct CcdTsRefusal {
    int element, future;
    int64_t ts, off_s;
} CcdTsRefusal;

/** The records of the last ccd_ingest_message refused for their time (valid until the
 *  next call; loop thread); returns their number. */
int ccd_ingest_ts_refusals(const CcdTsRefusal **out);

/** Decodes one KPI message and applies its records (Kafka and POST /v1/kpis). topic -1 =
 *  HTTP. Fills *batch_out with the decoder's view (valid until the next call) if given.
 *  Returns 0, -ENOSPC (table full) or -ENOMEM. */
int ccd_ingest_message(Ccd *d, const void *buf, size_t len, int topic, int32_t partition,
                       CcKpiBatch *batch_out);

/** (Re)builds the KPI decoder (settings.h: ingest.*); on failure the previous decoder
 *  stays. 0 or -errno with a message. */
int ccd_reopen_decoder(Ccd *d, const CcKpiSettings *ks, char *err, size_t errlen);

/** The scheduler's hooks: seal (the cell table), on_stepped (publish, alerts), on_done
 *  (the way back). */
void ccd_ingest_sched_hooks(Ccd *d, CcdSchedSettings *ss);

/** Opens the Kafka module with the hooks above and watches its consumer. */
int ccd_ingest_open_kafka(Ccd *d, const CcdKafkaSettings *ks, char *err, size_t errlen);

/** One poll of at most kafka.max_poll_messages (from the consumer's fd and the cron). */
void ccd_ingest_poll(Ccd *d);

/** Pending cell-steps beyond which ingestion pauses (4 × batch_steps). */
int ccd_backpressure(const Ccd *d);

/** Pauses Kafka above ccd_backpressure pending steps, resumes below half (cron). */
void ccd_ingest_backpressure(Ccd *d);

/** Acks Kafka batches that produced nothing to step (all duplicates or invalid). */
void ccd_ingest_ack_idle(Ccd *d);

#endif
