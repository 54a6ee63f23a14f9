/* config.c — the one configuration table of cellcastd and everything it drives: YAML
 * parsing with key/file/line/column errors, --set overrides, bounds, the JSON view and the
 * commented default file. See config.h. */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "cc_common.h"
#include "cc_engine.h"
#include "utf8.h"

#define OFF(f) offsetof(CcdConfig, f)
/* A default the library names (a #define'd integer) as the table's text, so the daemon and
 * the tools that mirror it (cellcast anomaly-eval) cannot drift apart. */
#define LIB_DEFAULT(n) LIB_DEFAULT_TEXT(n)
#define LIB_DEFAULT_TEXT(n) #n
#define NB 0, 0 /* no bounds */

/* clang-format off */
/* The rows before the alerts.* keys of cc_anomaly_keys(), which go in between. */
static const CcdConfigDef head_rows[] = {
{"model.path", CCD_CFG_STRING, OFF(model_path), "models/default.safetensors", NB, NULL, 1,
 "cellcast-tx/3 (or tx/2) weight file (safetensors). Relative paths are taken from the working "
 "directory; one that does not exist there is looked up under $CELLCAST_HOME, then in the "
 "installed data directory (/usr/share/cellcast, also by its file name alone: the default "
 "finds the installed default model when systemd runs the daemon). Its features (KPI names) are the names the field mapping maps to."},
{"model.source", CCD_CFG_ENUM, OFF(model_source), "file", NB, "file|kafka", 0,
 "file = serve model.path (pinned: the learner off). kafka = follow `cellcast learn` "
 "(docs/learning.md): models published on kafka.models_topic are checked, written to "
 "model.learned_path and swapped in; model.path serves until the first one arrives, and the "
 "learned file is served at the next start."},
{"model.learned_path", CCD_CFG_STRING, OFF(model_learned_path), "auto", NB, NULL, 0,
 "Where model.source kafka keeps the model in service (its record in <path>.json). \"auto\" "
 "= $STATE_DIRECTORY/learned.safetensors, or ./cellcast-learned.safetensors."},
{"model.max_bytes", CCD_CFG_INT64, OFF(model_max_bytes), "67108864", 1024, 4294967296, NULL, 0,
 "A model published on kafka.models_topic larger than this is refused (counted)."},
{"model.first_model_hours", CCD_CFG_DOUBLE, OFF(model_first_model_hours), "24", 0, 8760, NULL, 0,
 "The learner's rule (cellcast learn --first-model-hours): its first model comes after this "
 "many hours of data. With model.source kafka and no learned model yet, GET /v1/model and "
 "the dashboard say when (data time): learning.first_model_expected_at."},
{"model.rollback", CCD_CFG_BOOL, OFF(model_rollback), "true", NB, NULL, 0,
 "model.source kafka: after a swap to a model of the same KPIs and step, watch its live "
 "MASE against one-day seasonal naive (matured forecasts, pooled over cells) and swap back "
 "to the previous model (<model.learned_path>.prev) when it is worse than the previous "
 "model's before the swap by more than model.rollback_margin."},
{"model.rollback_window_steps", CCD_CFG_INT, OFF(model_rollback_window_steps), "0", 0, 1000000, NULL, 0,
 "The live MASE's window, in target steps of data (0 = a day of the model's steps): the "
 "previous model's last window before a swap (grown back, never before its own swap, until "
 "it holds model.rollback_min_forecasts) and the new one's from the swap (growing until it "
 "spans this and holds the minimum). The watch keeps 7 windows: 48 x KPIs + 32 bytes a step."},
{"model.rollback_min_forecasts", CCD_CFG_INT, OFF(model_rollback_min_forecasts), "200", 1, 1000000000, NULL, 0,
 "Matured forecasts (one-step and horizon-end, per KPI, over cells) each side needs to be "
 "compared; the windows grow until they hold it. The previous model never had it since its "
 "swap: not watched; the new model has not gathered it in 7 windows: not judged (both kept, "
 "said with the counts in /v1/model)."},
{"model.rollback_margin", CCD_CFG_DOUBLE, OFF(model_rollback_margin), "0.1", 0, 100, NULL, 0,
 "A new model whose live MASE is above (1 + margin) x the previous model's is rolled back."},
{"kafka.models_topic", CCD_CFG_STRING, OFF(kafka_models_topic), "auto", NB, NULL, 0,
 "Compacted topic the learner publishes models to (proto/model_record.md), read from its "
 "beginning by every member with model.source kafka. \"auto\" = <first KPI topic>.models."},

{"kafka.brokers", CCD_CFG_STRING, OFF(kafka_brokers), "embedded", NB, NULL, 0,
 "Bootstrap servers (host:port,...), or \"embedded\": start librdkafka's mock cluster "
 "in-process on loopback, create the topics and log its address for kcat."},
{"kafka.group_id", CCD_CFG_STRING, OFF(kafka_group_id), "cellcastd", NB, NULL, 0,
 "Consumer group. Several daemons in one group share the partitions (and so the cells)."},
{"kafka.topics", CCD_CFG_LIST, OFF(kafka_topics), "kpis", NB, NULL, 0,
 "KPI topics to subscribe to. Messages follow proto/kpi.schema.json."},
{"kafka.alert_topic", CCD_CFG_STRING, OFF(kafka_alert_topic), "alerts", NB, NULL, 0,
 "Topic for alert transitions (created on the embedded broker)."},
{"kafka.dead_letter_topic", CCD_CFG_STRING, OFF(kafka_dead_letter_topic), "", NB, NULL, 0,
 "Invalid messages are forwarded here with the reason in a header; empty = off."},
{"kafka.state_topic", CCD_CFG_STRING, OFF(kafka_state_topic), "auto", NB, NULL, 0,
 "Compacted topic of per-cell state (docs/operations.md, \"Several instances\"): written "
 "for a partition's cells at every checkpoint (snapshot.interval_s) and when the partition "
 "is revoked, read when it is assigned, so that cells keep their history and alert state "
 "when they change member. Same partition count as the KPI topic. \"auto\" = "
 "<first KPI topic>.state; \"\" = off (cells of a moved partition start cold)."},
{"kafka.embedded_partitions", CCD_CFG_INT, OFF(kafka_embedded_partitions), "4", 1, 256, NULL, 0,
 "Partitions of each topic created on the embedded broker."},
{"kafka.embedded_port", CCD_CFG_INT, OFF(kafka_embedded_port), "0", 0, 65535, NULL, 0,
 "A stable bootstrap address for the embedded broker, 127.0.0.1:<port>, the same across "
 "restarts (its own port changes at every start); 0 = none. Its data does not survive a "
 "restart either way: it is in memory, for demos and tests."},
{"kafka.max_poll_messages", CCD_CFG_INT, OFF(kafka_max_poll_messages), "200", 1, 1000000, NULL, 0,
 "Messages taken from the consumer per poll (one ingest batch id). Each poll is decoded "
 "and applied in one go on the event loop, so this bounds how long HTTP waits behind "
 "ingest (200 x ~10-40 us)."},
{"kafka.rewind_on_assign_s", CCD_CFG_INT64, OFF(kafka_rewind_on_assign_s), "0", 0, 31536000, NULL, 0,
 "On a partition assignment, re-read the partition from this many seconds (of message "
 "timestamps) back to rebuild its cells' windows; 0 = start at the committed offset "
 "(replayed steps a cell already has are dropped as duplicates)."},
{"kafka.properties", CCD_CFG_MAP, OFF(kafka_properties), "", NB, NULL, 0,
 "Any librdkafka property, passed through as is (e.g. security.protocol, "
 "queued.max.messages.kbytes). GET /v1/config and --print-config show the values of "
 "known-safe properties only (client.id, security.protocol, sasl.mechanism, timeouts, "
 "sizes...); every other value (ssl.key.pem, sasl.password, sasl.oauthbearer.config, ...) "
 "is shown as \"(redacted)\"."},

{"kafka.client_id", CCD_CFG_STRING, OFF(kafka_client_id), "", NB, NULL, 0,
 "This member's Kafka client.id (broker logs, quotas, GET /v1/cluster); empty = "
 "kafka.properties.client.id if set, else cellcastd-<cluster.instance or host name>-<HTTP "
 "port>, so that the members of a group can be told apart. Also the key of this member's "
 "record on the members topic: keep it unique in the group."},
{"kafka.group_instance_id", CCD_CFG_STRING, OFF(kafka_group_instance_id), "", NB, NULL, 0,
 "Static membership (group.instance.id): a member that restarts within the session "
 "timeout gets its partitions back without a rebalance; a member that crashes keeps them, "
 "unserved, until the timeout. Empty = cluster.instance when set, else dynamic membership "
 "(every restart rebalances). Must be unique in the group."},
{"kafka.partitioner", CCD_CFG_ENUM, OFF(kafka_partitioner), "murmur2_random", NB,
 "murmur2_random|murmur2|consistent_random|consistent|fnv1a_random|fnv1a", 0,
 "The partitioner of the producers of the KPI topic (cell id as key): cellcastd uses it to "
 "find the partition, hence the member, of a cell it does not hold (307 redirects), and "
 "for its own producers (demo feed, alerts). murmur2_random is what Java clients do; "
 "librdkafka's own default is consistent_random."},

{"http.bind", CCD_CFG_STRING, OFF(http_bind), "127.0.0.1", NB, NULL, 0,
 "Address of the HTTP API. Loopback by default: put a proxy in front to expose it."},
{"http.port", CCD_CFG_INT, OFF(http_port), "8080", 0, 65535, NULL, 0,
 "TCP port of the HTTP API (0 = any free port, logged)."},
{"http.advertise", CCD_CFG_STRING, OFF(http_advertise), "", NB, NULL, 0,
 "Base URL other members and clients use to reach this daemon (redirects to the member "
 "that serves a cell, GET /v1/cluster): http:// or https://, a host and an optional port, "
 "no path; empty = http://<http.bind, or the host name when bound to a wildcard "
 "address>:<HTTP port>."},
{"http.max_body_bytes", CCD_CFG_INT64, OFF(http_max_body_bytes), "1048576", 64, 1073741824, NULL, 1,
 "Largest request body (POST /v1/kpis); larger is refused with 413."},
{"http.max_headers_bytes", CCD_CFG_INT64, OFF(http_max_headers_bytes), "16384", 256, 1048576, NULL, 0,
 "Largest request header block."},
{"http.max_connections", CCD_CFG_INT, OFF(http_max_connections), "1024", 1, 100000, NULL, 1,
 "Concurrent client connections, counted from accept to close (idle ones too); a "
 "connection beyond it is closed at once (cellcast_http_connections_refused_total). When "
 "accept fails for want of descriptors, accepting pauses for 250 ms."},
{"http.timeout_s", CCD_CFG_INT, OFF(http_timeout_s), "30", 1, 3600, NULL, 0,
 "Read/write timeout of a client connection, seconds."},
{"http.header_timeout_s", CCD_CFG_INT, OFF(http_header_timeout_s), "10", 1, 3600, NULL, 0,
 "Seconds a client has, from accept (or from the end of its previous reply), to send a "
 "whole request head (request line and headers), as nginx's client_header_timeout: a "
 "connection that trickles its head slower is closed "
 "(cellcast_http_header_timeouts_total). http.timeout_s bounds each read only."},
{"http.max_read_values", CCD_CFG_INT64, OFF(http_max_read_values), "200000", 1000, 100000000, NULL, 1,
 "Values one series read may ask for (GET /v1/history, /v1/cells/{id}/history, "
 "/v1/cells/{id}/forecasts): cells x steps served (after since/until and max_points) x "
 "KPIs. A request over it is refused with 413 naming the limit "
 "(cellcast_http_reads_refused_total{reason=\"max_read_values\"})."},
{"http.post_kpis", CCD_CFG_ENUM, OFF(http_post_kpis), "token", NB, "off|token|open", 1,
 "Who may POST /v1/kpis (KPI messages without Kafka; each new cell id costs memory): off "
 "(403), token (Authorization: Bearer <admin.token>; 403 while admin.token is empty), "
 "open (anyone who reaches the port)."},
{"http.cors_origins", CCD_CFG_LIST, OFF(http_cors_origins), "", NB, NULL, 1,
 "Origins allowed to call the API from a browser (CORS): replies to a request whose Origin "
 "is listed carry Access-Control-Allow-Origin, and OPTIONS preflights are answered; \"*\" "
 "allows any origin; empty = off (no CORS header, OPTIONS gets 405)."},

{"engine.threads", CCD_CFG_INT, OFF(engine_threads), "1", 0, 256, NULL, 0,
 "Threads the worker uses to step one batch (its own included; 0 = online cores). The "
 "event loop (HTTP, Kafka) runs on a thread of its own besides."},
{"engine.kv_type", CCD_CFG_ENUM, OFF(engine_kv_type), "f16", NB, "f32|f16|bf16", 0,
 "Element type of the KV caches: f16 halves their memory for a negligible error."},
{"engine.max_batch_cells", CCD_CFG_INT, OFF(engine_max_batch_cells), "512", 1, 65536, NULL, 0,
 "Cells per internal engine chunk (bounds its scratch memory)."},
{"engine.keep_attention", CCD_CFG_BOOL, OFF(engine_keep_attention), "true", NB, NULL, 0,
 "Keep each cell's last attention weights for GET /v1/cells/{id}/attention (~5 KB/cell)."},
{"engine.worker_nice", CCD_CFG_INT, OFF(engine_worker_nice), "5", 0, 19, NULL, 0,
 "Nice increment of the thread that steps the engine: when the CPU is short, the event "
 "loop (HTTP, Kafka) goes first and ingest slows down instead of the API."},
{"engine.blas_coretype", CCD_CFG_STRING, OFF(engine_blas_coretype), "auto", NB, NULL, 0,
 "OpenBLAS kernel set: auto (SkylakeX kernels on AVX-512 CPUs), native, or a core name. "
 "The environment variable OPENBLAS_CORETYPE wins."},

{"limits.max_cells", CCD_CFG_INT64, OFF(limits_max_cells), "200000", 1, 100000000, NULL, 1,
 "Resident cells at most. A new cell beyond it evicts the least recently updated idle "
 "cell (its history is dropped; it restarts cold if it comes back)."},
{"limits.kv_budget_mb", CCD_CFG_INT64, OFF(limits_kv_budget_mb), "0", 0, 16777216, NULL, 1,
 "Memory budget of the cells (rings, KV caches, long histories of history.depth), MiB: "
 "resident cells at most = budget / the most one cell takes (GET /v1/info "
 "cells.bytes_per_cell); reaching it evicts like max_cells does (checked as cells come and "
 "once a second as histories grow). 0 = half of the memory available at start (the smaller "
 "of MemAvailable and the cgroup's limit minus usage); the value in effect is GET /v1/config "
 "limits.kv_budget_effective_mb."},

{"ingest.gap_policy", CCD_CFG_ENUM, OFF(ingest_gap_policy), "impute", NB, "impute|restart", 1,
 "A cell that skips steps: impute = fill up to max_gap missing steps with the last values "
 "(counted as imputed and flagged), and restart the sequence after a longer gap; "
 "restart = always restart the sequence (cold start) after a gap."},
{"ingest.max_gap", CCD_CFG_INT, OFF(ingest_max_gap), LIB_DEFAULT(CC_GAP_IMPUTE_STEPS), 0, 1000, NULL, 1,
 "Longest gap (missing steps) that is imputed; a longer one restarts the cell's sequence, "
 "which then goes unscored for alerts.warmup_steps steps (docs/operations.md, Gaps)."},
{"ingest.outage_hold_steps", CCD_CFG_INT, OFF(ingest_outage_hold_steps), LIB_DEFAULT(CC_ANOMALY_OUTAGE_HOLD_STEPS), 0, 1000000, NULL, 1,
 "While a cell is in an outage (every KPI exactly 0 where zero is not normal for one: the "
 "all_zero alert's judgement) its model is fed the cell's last values instead of the zeros, "
 "for at most this many steps of one outage (then the zeros are the new normal); the alerts "
 "and the history still get the zeros. Counted in cellcast_ingest_outage_held_steps_total. "
 "0 = off (the zeros enter the model's normalisation window)."},
{"ingest.batch_steps", CCD_CFG_INT, OFF(ingest_batch_steps), "8192", 1, 1000000, NULL, 1,
 "Micro-batching: a batch is stepped when this many cell-steps are pending..."},
{"ingest.batch_ms", CCD_CFG_INT, OFF(ingest_batch_ms), "20", 0, 60000, NULL, 1,
 "...or when the oldest pending step has waited this long (ms)."},
{"ingest.max_message_bytes", CCD_CFG_INT64, OFF(ingest_max_message_bytes), "1048576", 16, 67108864, NULL, 1,
 "A KPI message larger than this is invalid (reason \"oversize\")."},
{"ingest.max_future_s", CCD_CFG_INT64, OFF(ingest_max_future_s), "900", 0, 3153600000, NULL, 1,
 "A record stamped more than this many seconds after the wall clock is refused (counted in "
 "cellcast_ingest_out_of_range_total{reason=\"future_ts\"}, dead-lettered): one bogus "
 "far-future time would otherwise reset its cell and make every real record after it late. "
 "With demo.enabled the demo's simulated clock (ahead of the wall clock) is the reference."},
{"ingest.max_past_s", CCD_CFG_INT64, OFF(ingest_max_past_s), "0", 0, 3153600000, NULL, 1,
 "A record stamped more than this many seconds before the wall clock is refused the same "
 "way (reason \"past_ts\"); 0 = no bound (replays and backfills of old history; a cell "
 "drops what is older than its newest step as late anyway)."},
{"ingest.cell_field", CCD_CFG_STRING, OFF(ingest_cell_field), "cell", NB, NULL, 1,
 "Message field holding the cell id (a string of [A-Za-z0-9._:/-], or an integer)."},
{"ingest.time_field", CCD_CFG_STRING, OFF(ingest_time_field), "ts", NB, NULL, 1,
 "Message field holding the time: RFC 3339, or unix seconds / milliseconds."},
{"ingest.kpis_field", CCD_CFG_STRING, OFF(ingest_kpis_field), "kpis", NB, NULL, 1,
 "Message field holding an object of KPI values; a record without it carries its KPIs "
 "at the top level."},
{"ingest.labels", CCD_CFG_MAP, OFF(ingest_labels), "", NB, NULL, 1,
 "A cell's labels from fields of its KPI messages, label -> message field: `site: site_id`, "
 "`region: region`, any other label (at most 16; read at a record's top level; a string of "
 "1..64 bytes or an integer; others refused and counted). The topology file's value wins "
 "where it gives one (docs/operations.md, Topology). Empty: labels from the file only."},
{"ingest.align", CCD_CFG_ENUM, OFF(ingest_align), "floor", NB, "floor|nearest|exact", 1,
 "Step of a timestamp: floor = the step containing it (PM counters stamped with the start "
 "of their period), nearest = the closest step, exact = only multiples of the step length."},
{"ingest.fields", CCD_CFG_MAP, OFF(ingest_fields), "", NB, NULL, 1,
 "Field mapping, message field -> model feature, with an optional scale applied to the "
 "value: `dl_prb_usage_pct: \"prb_dl*0.01\"`. Empty: fields named like the model's "
 "features map to them with scale 1."},

{"forecast.level", CCD_CFG_DOUBLE, OFF(forecast_level), "0.8", 0.01, 0.999, NULL, 1,
 "Default central level of forecast intervals (?level= overrides per request)."},
{"forecast.interval_adapt", CCD_CFG_BOOL, OFF(forecast_interval_adapt), "true", NB, NULL, 1,
 "Online calibration of the served intervals (daemon/interval.h; on by default, the served "
 "interval of shared/spec/model.md, issue 31): per cell, KPI "
 "and horizon step a scale of the sd (a level per KPI and a step profile), moved by every "
 "matured forecast toward a 0.2 miss rate of the P10-P90 interval it was served with; "
 "lo/hi become mean +- z x sd x scale (each point gains interval_scale; sd stays the "
 "model's). false = the file's static mean +- z x sd. ~40 KiB per cell (8 KPIs, horizon 24), "
 "counted in limits.kv_budget_mb. A cell's record (snapshot, state topic) keeps its "
 "scales across a restart or a hand-over; turning it on starts them at 1. "
 "Alerts are not affected."},
{"forecast.interval_adapt_rate", CCD_CFG_DOUBLE, OFF(forecast_interval_adapt_rate), "0", 0, 1, NULL, 1,
 "Rate of forecast.interval_adapt: the step of the log-scale per step of data. 0 = "
 "min(0.05, 4/horizon), the fastest that does not overshoot with the horizon's feedback "
 "delay (lib/cc_online_calib.h). A changed rate keeps the scales."},

{"history.depth", CCD_CFG_STRING, OFF(history_depth), "7d", NB, NULL, 0,
 "Long history kept per cell beyond the model's window, for GET /v1/cells/{id}/history and "
 "/forecasts: a duration (s, m, h, d or w suffix; a bare number is seconds), rounded up to "
 "whole model steps: the observed KPIs and the one-step and horizon-end forecasts of each "
 "step, 4 + 16 x KPIs bytes per step (132 B for 8 KPIs: 92 KB per cell for 7 days of "
 "15-minute steps), allocated 16 steps at a time as a cell's history grows and counted in "
 "limits.kv_budget_mb. 0 = none: history is the model's window only, no past forecasts."},

{"demo.enabled", CCD_CFG_BOOL, OFF(demo_enabled), "false", NB, NULL, 0,
 "Built-in synthetic feed: produces KPI messages into demo.topic through the real Kafka "
 "path (embedded broker or not), so a fresh install shows live forecasts."},
{"demo.cells", CCD_CFG_INT, OFF(demo_cells), "16", 1, 1000000, NULL, 0,
 "Number of synthetic cells."},
{"demo.speedup", CCD_CFG_DOUBLE, OFF(demo_speedup), "600", 1, 1e7, NULL, 0,
 "Simulated seconds per real second (600: an hourly step every 6 s)."},
{"demo.backfill_steps", CCD_CFG_INT, OFF(demo_backfill_steps), "400", 0, 100000, NULL, 0,
 "History produced at start so that forecasts exist at once."},
{"demo.seed", CCD_CFG_INT, OFF(demo_seed), "1", 0, 2147483647, NULL, 0,
 "Seed of the synthetic generator (deterministic per cell and step)."},
{"demo.topic", CCD_CFG_STRING, OFF(demo_topic), "kpis", NB, NULL, 0,
 "Topic the demo produces to (one of kafka.topics to see it consumed)."},
{"demo.cell_prefix", CCD_CFG_STRING, OFF(demo_cell_prefix), "demo-", NB, NULL, 0,
 "Cell ids are this prefix and a number."},

};
static const CcdConfigDef tail_rows[] = {
{"alerts.kpis", CCD_CFG_MAP, OFF(alerts_kpis), "", NB, NULL, 1,
 "Per-KPI overrides as \"<kpi>.<field>\": value, with field enabled (true/false), "
 "direction (both/up/down), warn_z, crit_z, sd_floor, min, max (physical bounds, checked "
 "when min < max), stuck_steps (-1 = never stuck), zero_normal (auto = learnt from the "
 "KPI's zero share, see zero_normal_rate; true = zero is normal, no all_zero alert for it; "
 "false = never learnt), lik_over, novelty_tol or shape (auto = shape novelty where "
 "shape_w is on; false = not for this KPI); e.g. \"prb.max\": \"100\". KPI names "
 "are the model's features. Scoring rules: docs/operations.md section 5."},

{"topology.path", CCD_CFG_STRING, OFF(topology_path), "", NB, NULL, 1,
 "Topology file: CSV with a header naming the columns cell (required), site, region, "
 "sector, neighbours (';'-separated cell ids), lat, lon, and any other column as a label "
 "of that name; one line per cell (daemon/topology.h). Its labels go into every alert "
 "(\"labels\"), filter GET /v1/cells and group alerts into incidents. Read again at each "
 "reload; a file that does not parse keeps the previous one (cellcast_topology_errors_total). "
 "Empty: no topology (every cell its own group)."},
{"incidents.group_by", CCD_CFG_ENUM, OFF(incidents_group_by), "site", NB, "site|region", 1,
 "The label whose cells' overlapping alerts become one incident (docs/operations.md, "
 "Incidents); a cell without it is grouped by the other label, else alone."},
{"incidents.keep", CCD_CFG_INT, OFF(incidents_keep), "1000", 1, 100000, NULL, 0,
 "Resolved incidents kept for GET /v1/incidents (the open ones are always there)."},
{"incidents.evidence_cells", CCD_CFG_INT, OFF(incidents_evidence_cells), "2", 0, 1000000, NULL, 1,
 "Cells together as evidence (docs/design/site-evidence.md): this many cells of one site "
 "(region) past incidents.evidence_frac of their bars at one step, on one KPI in one "
 "direction (or all_zero, or missing), open the site's incident before any of them fires; a "
 "lone cell needs its own alert (1 counts as 2). 0 = off (every member an alert)."},
{"incidents.evidence_share", CCD_CFG_DOUBLE, OFF(incidents_evidence_share), "0", 0, 1, NULL, 1,
 "Or this share of the site's cells in the topology, when that is more cells (0: "
 "incidents.evidence_cells alone)."},
{"incidents.evidence_frac", CCD_CFG_DOUBLE, OFF(incidents_evidence_frac), "0.5", 0.05, 1, NULL, 1,
 "The share of its bar a cell's evidence must reach to count (cc_anomaly_cell_evidence: "
 "|z| / warning bar, a CUSUM sum / its h, all_zero's run / zero_steps, the silence / "
 "missing_after_s)."},
{"incidents.cell_persist_steps", CCD_CFG_INT, OFF(incidents_cell_persist_steps), "2", 0, 10000, NULL, 1,
 "Paging rule (docs/design/incident-paging.md): with no incident of its site open, a lone "
 "cell's alert opens one only if critical, a cell outage (all_zero, missing of the whole "
 "cell), or persistent: an anomaly whose cell is past incidents.cell_persist_frac of a KPI's "
 "bar at this many steps (its firing step counts), another alert still firing this many "
 "steps after it fired. An alert of a second cell of the site, or the evidence rule, opens "
 "the site's incident at once. The others stay alerts "
 "(cellcast_incidents_alerts_total{outcome=\"below_paging\"}) and join their site's "
 "incident if one opens while they fire. 0 = every alert opens an incident."},
{"incidents.cell_persist_frac", CCD_CFG_DOUBLE, OFF(incidents_cell_persist_frac), "0.5", 0.05, 1, NULL, 1,
 "The share of its bar (cc_anomaly_cell_evidence) a held anomaly's cell must reach on a KPI "
 "at a step for the step to count toward incidents.cell_persist_steps."},
{"incidents.cell_persist_own_kpi", CCD_CFG_BOOL, OFF(incidents_cell_persist_own_kpi), "true", NB, NULL, 1,
 "Paging rule: a held anomaly persists by its cell's evidence on the alert's own KPI (its "
 "deviation persisting), not on another KPI's "
 "(cellcast_incidents_persist_other_kpi_total). false = any KPI of the cell."},
{"incidents.resolve_hold_steps", CCD_CFG_INT, OFF(incidents_resolve_hold_steps), "6", 0, 10000, NULL, 1,
 "Resolve hold: an incident whose last alert resolved stays open, resolving, for this many "
 "data steps; an alert of its site (region, or its lone cell) that fires meanwhile joins it "
 "again (no new incident, no new page). At the hold's end it resolves with end_time = when its "
 "last alert resolved, so Kafka, GET /v1/incidents and Alertmanager see the resolution this "
 "many steps late (the last alert's resolution is an update: firing, no firing alert). "
 "Default 6 (1.5 h at 15-minute steps): a transport loss's missing-data alerts resolve when "
 "the site's rows return, and its restart transient or a load burst 0-6 steps later opened a "
 "second incident for 3.5-4 % of site outages on the synthetic fleet, 0-0.15 % with 6 (what "
 "is left: new events of the site 7-9 steps after; docs/results.md); a new problem of the "
 "site within the hold pages no more. 0 = it resolves with its last "
 "alert."},
{"incidents.profile_persist_steps", CCD_CFG_INT, OFF(incidents_profile_persist_steps), "24", 0, 10000, NULL, 1,
 "Paging rule for an anomaly the seasonal profile's CUSUM alone fired (the forecast's z, "
 "its CUSUM and the other rules not over at its firing step): with no incident of its site "
 "open it opens one only when its cell's evidence without the profile's sum (the "
 "forecast's z and CUSUM) is past incidents.cell_persist_frac at "
 "incidents.cell_persist_steps steps, or once it has fired this many steps, or turns "
 "critical, or another cell of the site or the evidence rule opens the site's incident; it "
 "joins an open incident at once. The alert itself fires as any (API, Kafka, "
 "Alertmanager). 0 = as any anomaly (its cell's evidence, the profile's sum included)."},
{"incidents.site_forecast", CCD_CFG_BOOL, OFF(incidents_site_forecast), "true", NB, NULL, 1,
 "Paging rule: a held anomaly the seasonal profile's CUSUM alone fired (under "
 "incidents.profile_persist_steps) is no cell of the two cells that open their site's "
 "incident at once; it waits for its forecast's own evidence as alone "
 "(cellcast_incidents_pair_refused_total). false = it is."},
{"incidents.stuck_persist_steps", CCD_CFG_INT, OFF(incidents_stuck_persist_steps), "24", 0, 10000, NULL, 1,
 "Paging rule: a lone cell's stuck alert opens an incident at incidents.cell_persist_steps "
 "only while another alert of its cell is held (several KPIs frozen at once: a cell outage); "
 "alone (one flat KPI, as a quiet KPI is at night) once it has fired this many steps "
 "(cellcast_incidents_stuck_alerts_total). 0 = as any alert."},
{"incidents.evidence_forecast", CCD_CFG_BOOL, OFF(incidents_evidence_forecast), "true", NB, NULL, 1,
 "Evidence rule: with no incident of its site open, a cell counts on a KPI's class only by "
 "its forecast's own share (the z and the forecast CUSUM, not the seasonal profile's sum, "
 "which drains for hours after a slow wobble); it joins an open incident on its whole share. "
 "false = its whole share (cellcast_incidents_evidence_total{what=\"refused\"}: the steps "
 "a class had the cells, too few by this or incidents.evidence_missing_steps)."},
{"incidents.evidence_missing_steps", CCD_CFG_INT, OFF(incidents_evidence_missing_steps), "2", 0, 10000, NULL, 1,
 "Evidence rule: with no incident of its site open, a cell counts on the missing-data class "
 "only once its silence was past incidents.evidence_frac of the bar at this many consecutive "
 "steps (one late or missing row is 1.5-2 steps of silence). 0 or 1 = at once."},
{"incidents.site_same_kpi", CCD_CFG_BOOL, OFF(incidents_site_same_kpi), "true", NB, NULL, 1,
 "Paging rule: two cells' held alerts open their site's incident at once only when they are "
 "on the same KPI (or both of the whole cell); otherwise each waits for its own evidence. "
 "false = any two cells of the site."},
{"incidents.topic", CCD_CFG_STRING, OFF(incidents_topic), "auto", NB, NULL, 0,
 "Kafka topic of incident transitions (proto/incident.schema.json; key: the incident id). "
 "auto = <kafka.alert_topic>.incidents (none when kafka.alert_topic is empty); empty = not "
 "produced (GET /v1/incidents only)."},

{"silences.path", CCD_CFG_STRING, OFF(silences_path), "auto", NB, NULL, 0,
 "File of the silences (POST /v1/silences; daemon/silences.h), rewritten at each change and "
 "read at start, so that they survive a restart (and written when another member's arrive "
 "through silences.topic). auto = <snapshot.path>.silences (in memory "
 "only when snapshots are off); \"\" = in memory only."},
{"silences.topic", CCD_CFG_STRING, OFF(silences_topic), "auto", NB, NULL, 0,
 "Kafka topic (compacted; key: the silence id) through which the members share the API's "
 "silences: each member produces the silences it adds or expires and applies the others' "
 "(the later updatedAt wins; hostile records refused and counted, "
 "cellcast_silences_topic_records_total). auto = <kafka.topics' first>.silences (none "
 "without Kafka); \"\" = not shared (each member its own)."},
{"silences.file", CCD_CFG_STRING, OFF(silences_file), "", NB, NULL, 1,
 "The configuration's silences and maintenance windows: a JSON file {\"silences\": [...]}, each "
 "as the body of POST /v1/silences (matchers, startsAt, endsAt, recurrence, maintenance, "
 "comment; startsAt default always) with an \"id\" of its own. The same on every member "
 "that shares the configuration, with or without Kafka. Read at start and at each reload (a "
 "file that does not parse stops the start or refuses the reload, naming the entry); "
 "read-only through the API (ids cfg-<id>). Empty: none."},

{"alertmanager.urls", CCD_CFG_LIST, OFF(alertmanager_urls), "", NB, NULL, 0,
 "Alertmanagers to send incidents to (http://host:port[/path]; POST <url>/api/v2/alerts; "
 "daemon/alertmanager.h): each receives every incident, firing (resent every resend_s) and "
 "resolved. Empty = off."},
{"alertmanager.send_cell_alerts", CCD_CFG_BOOL, OFF(alertmanager_send_cell_alerts), "false", NB, NULL, 0,
 "Also send each cell alert (alertname CellcastAlert), not only the incidents."},
{"alertmanager.resend_s", CCD_CFG_INT, OFF(alertmanager_resend_s), "60", 1, 3600, NULL, 0,
 "Seconds between resends of the firing alerts; their endsAt is 4 periods ahead, so "
 "Alertmanager resolves them by itself when the daemon stops sending."},
{"alertmanager.timeout_s", CCD_CFG_INT, OFF(alertmanager_timeout_s), "10", 1, 300, NULL, 0,
 "Connect and response timeout of a POST to Alertmanager."},
{"alertmanager.retries", CCD_CFG_INT, OFF(alertmanager_retries), "5", 0, 100, NULL, 0,
 "Retries of a failed POST (backoff 1 s, doubling, at most 60 s) before its alerts are dropped."},
{"alertmanager.queue_max", CCD_CFG_INT, OFF(alertmanager_queue_max), "10000", 1, 10000000, NULL, 0,
 "Alerts waiting per Alertmanager; beyond, the oldest requests are dropped (counted)."},

{"snapshot.path", CCD_CFG_STRING, OFF(snapshot_path), "auto", NB, NULL, 0,
 "State snapshot file (per-cell rings and alert state; written atomically at shutdown and "
 "every interval_s, restored at start). Beside it, <path>.alerts journals the last alert "
 "transition produced per cell. \"auto\" = $STATE_DIRECTORY/state.snap when systemd gives "
 "a state directory, else off; \"\" = off. With snapshots on, Kafka offsets are committed "
 "only up to the newest snapshot, so a crash loses no step."},
{"snapshot.interval_s", CCD_CFG_INT, OFF(snapshot_interval_s), "60", 0, 86400, NULL, 1,
 "Seconds between periodic snapshots (0 = only at shutdown). Also bounds how much a "
 "restart after a crash re-reads from Kafka."},

{"cluster.instance", CCD_CFG_STRING, OFF(cluster_instance), "", NB, NULL, 0,
 "Name of this member that survives restarts (e.g. cellcast-2); the default of "
 "kafka.group_instance_id and part of the default kafka.client_id. Empty = none."},
{"cluster.members_topic", CCD_CFG_STRING, OFF(cluster_members_topic), "", NB, NULL, 0,
 "Compacted topic where each member publishes its address and partitions, keyed by "
 "client id (a heartbeat every cluster.heartbeat_ms, a tombstone when it stops); every "
 "member reads it to redirect requests for cells it does not hold. Empty = "
 "<first kafka.topics>.members."},
{"cluster.heartbeat_ms", CCD_CFG_INT, OFF(cluster_heartbeat_ms), "2000", 100, 60000, NULL, 0,
 "How often a member republishes its record (and at once when its partitions change); a "
 "record older than 5 heartbeats is ignored (the member is considered gone)."},

{"admin.token", CCD_CFG_STRING, OFF(admin_token), "", NB, NULL, 1,
 "Bearer token of the admin routes (POST /v1/admin/reload: Authorization: Bearer "
 "<token>); empty = admin routes disabled (403). Redacted in GET /v1/config."},

{"log.level", CCD_CFG_ENUM, OFF(log_level), "info", NB, "error|warn|info|debug", 1,
 "Least severe level written to stderr."},
};

/* What conf/cellcast.yaml says of the alerts.* keys, where it says more than the library's
 * doc line (which a key of cc_anomaly_keys() without an entry here gets). Documentation
 * only: the keys, types, bounds and defaults are the library's. */
static const struct {
    const char *key, *doc;
} alert_docs[] = {
{"warn_z",
 "Warning threshold on |z|."},
{"crit_z",
 "Critical threshold on |z|."},
{"min_kpis",
 "KPIs over threshold for a step to be over."},
{"window_n",
 "The n of k-of-n: steps in the window."},
{"warn_k",
 "Over steps in the window to fire."},
{"crit_k",
 "Critical steps in the window to fire critical."},
{"resolve_m",
 "Consecutive clear steps to resolve."},
{"cooldown_steps",
 "Steps after a resolution before a new anomaly alert."},
{"cooldown_crit",
 "1: the cooldown holds back warnings only; a window with crit_k critical steps (|z| past "
 "crit_z) fires through it. 0: the cooldown holds back every new anomaly alert."},
{"sd_floor_rel",
 "Floor of the forecast sd relative to |forecast mean|."},
{"sd_floor_scale",
 "Floor of the forecast sd relative to the KPI's normalisation scale."},
{"interval_z",
 "Half-width in sd of the interval in alerts."},
{"warmup_steps",
 "Forecasts of a cell with fewer steps of history than this are not scored (cold-start "
 "forecasts see a patch or two of context); 0 = score from the first forecast."},
{"lag_steps",
 "Also score against the forecast made this many steps earlier; -1 = the model's horizon "
 "(the oldest forecast of each step), 0 = off."},
{"cusum_k",
 "Sustained deviations: reference value in |z| of each KPI's two-sided CUSUM of its "
 "(lagged) z, clipped at cusum_k + 1 per step."},
{"cusum_h",
 "A KPI is also over (warning) while its CUSUM is at least this: at least cusum_h steps of "
 "|z| >= cusum_k + 1, or more steps nearer cusum_k; catches shifts and drifts whose |z| "
 "stays below warn_z. 0 = off."},
{"profile_k",
 "Slow drifts and long shifts, which every forecast follows: reference value in |z| of a "
 "second CUSUM per KPI, on the deviation from the KPI's usual value at this time of day "
 "(a seasonal profile, weekdays and weekends apart), clipped at profile_k + 1 per step."},
{"profile_h",
 "A KPI is also over (warning) while its profile CUSUM is at least this. 0 = no profile."},
{"profile_fa_weeks",
 "Each KPI's profile CUSUM threshold rises from profile_h to where its own excursions in "
 "normal operation (a generalised Pareto tail fitted to their peaks past profile_h / 2) "
 "would cross once per this many weeks: a KPI whose residuals from its usual value stay "
 "alike for hours gets a higher threshold; never lower than profile_h. 0 = off."},
{"profile_unit_s",
 "Steps shorter than this count for that fraction of a step in the profile CUSUM: a "
 "deviation from the usual value lasts minutes, and short steps would count it many "
 "times over (2-minute steps: 2/5 each)."},
{"profile_bin_s",
 "Width of the profile's time-of-day bins in seconds; must divide 86400. Changing it "
 "restarts every cell's profile."},
{"profile_days",
 "Time constant of each profile bin, in days of its type (weekday or weekend)."},
{"profile_min_days",
 "Days of data a profile bin needs before the profile is scored there."},
{"profile_utc_offset_s",
 "The cells' local time minus UTC in seconds (e.g. 3600 for CET), for the profile's time "
 "of day and weekends."},
{"stuck_steps",
 "Equal consecutive values of a varying KPI for a stuck alert."},
{"stuck_min_change_rate",
 "Change rate a KPI needs to count as varying."},
{"change_rate_steps",
 "Time constant of the change rate in steps."},
{"stuck_run_factor",
 "A stuck run must also be this many times the longest recent normal run."},
{"stuck_memory_steps",
 "Time constant of the longest recent run, steps."},
{"zero_steps",
 "Steps of all KPIs exactly 0 for an all_zero alert; 0 = the steps of 12 minutes, at least 2 "
 "(6 at 2-minute steps, 2 at hourly ones)."},
{"missing_after_s",
 "Seconds without a step for a missing alert; 0 = 3 steps."},
{"dq_resolve_steps",
 "Clear steps to resolve a data-quality alert."},
{"dq_grace_steps",
 "Steps a KPI stays unscored after its data-quality alert."},
};
/* clang-format on */
#define N_HEAD (int)(sizeof head_rows / sizeof head_rows[0])
#define N_TAIL (int)(sizeof tail_rows / sizeof tail_rows[0])

static CcdConfigDef *table;
static int table_len;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The shortest text of v that reads back as v (the default as the YAML file shows it). */
static void shortest_double(double v, char *buf, size_t len)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, len, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* One alerts.<key> row from the library's key: its bounds, its default, and its doc: ours
 * (alert_docs) or the library's line (capitalised, without the "(default ...)" the row's
 * default already says). */
static void alert_row(CcdConfigDef *d, const CcAnomalyKey *k, const CcAnomalySettings *def,
                      char *name, char *defv, char *doc)
{
    const char *v = (const char *)def + k->offset;
    snprintf(name, 64, "alerts.%s", k->name);
    switch (k->type) {
    case CC_AKEY_INT:
        snprintf(defv, 32, "%d", *(const int *)v);
        d->type = CCD_CFG_INT;
        break;
    case CC_AKEY_INT64:
        snprintf(defv, 32, "%lld", (long long)*(const int64_t *)v);
        d->type = CCD_CFG_INT64;
        break;
    case CC_AKEY_DOUBLE:
        shortest_double(*(const double *)v, defv, 32);
        d->type = CCD_CFG_DOUBLE;
        break;
    }
    d->doc = NULL;
    for (size_t i = 0; i < sizeof alert_docs / sizeof alert_docs[0]; i++)
        if (!strcmp(alert_docs[i].key, k->name))
            d->doc = alert_docs[i].doc;
    if (!d->doc) {
        snprintf(doc, 256, "%s", k->doc);
        char *tail = strstr(doc, " (default ");
        if (tail)
            *tail = 0;
        doc[0] = (char)toupper((unsigned char)doc[0]);
        strncat(doc, ".", 255 - strlen(doc));
        d->doc = doc;
    }
    d->name = name;
    d->offset = offsetof(CcdConfig, alerts) + k->offset;
    d->def = defv;
    d->min = k->lo;
    d->max = k->hi;
    d->enums = NULL;
    d->reloadable = 1;
}

/* Built once: the table lives as long as the process (never freed). */
static void build_table(void)
{
    int nk;
    const CcAnomalyKey *keys = cc_anomaly_keys(&nk);
    CcAnomalySettings def;
    cc_anomaly_default_settings(&def);
    CcdConfigDef *t = calloc((size_t)(N_HEAD + nk + N_TAIL), sizeof *t);
    char *text = calloc((size_t)nk, 64 + 32 + 256);
    if (!t || !text) {
        free(t);
        free(text);
        return;
    }
    memcpy(t, head_rows, sizeof head_rows);
    for (int i = 0; i < nk; i++) {
        char *row = text + (size_t)i * (64 + 32 + 256);
        alert_row(&t[N_HEAD + i], &keys[i], &def, row, row + 64, row + 96);
    }
    memcpy(t + N_HEAD + nk, tail_rows, sizeof tail_rows);
    table = t;
    table_len = N_HEAD + nk + N_TAIL;
}

const CcdConfigDef *ccd_config_defs(int *n)
{
    pthread_once(&table_once, build_table);
    *n = table_len;
    return table;
}

int ccd_config_field_target(const char *value, size_t *feature_len, double *scale, char *err,
                            size_t errlen)
{
    const char *star = strchr(value, '*');
    *feature_len = star ? (size_t)(star - value) : strlen(value);
    *scale = 1;
    if (!*value || star == value)
        return cc_errf(err, errlen, -EINVAL, "expected \"feature\" or \"feature*scale\"");
    if (star) {
        char *end;
        *scale = strtod(star + 1, &end);
        if (*end || !isfinite(*scale) || *scale == 0)
            return cc_errf(err, errlen, -EINVAL, "bad scale '%s'", star + 1);
    }
    return 0;
}

const CcdConfigDef *ccd_config_find(const char *name)
{
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++)
        if (!strcmp(defs[i].name, name))
            return &defs[i];
    return NULL;
}

/* A section exists when some key starts with "name.". */
static int is_section(const char *name)
{
    size_t n = strlen(name);
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++)
        if (!strncmp(defs[i].name, name, n) && defs[i].name[n] == '.')
            return 1;
    return 0;
}

#define FIELD(c, d, T) ((T *)((char *)(c) + (d)->offset))

static void list_free(CcdStrList *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static void map_free(CcdStrMap *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->items[i].key);
        free(m->items[i].value);
    }
    free(m->items);
    m->items = NULL;
    m->n = 0;
}

static int list_add(CcdStrList *l, const char *s, size_t len)
{
    char **items = realloc(l->items, (size_t)(l->n + 1) * sizeof *items);
    if (!items)
        return -ENOMEM;
    l->items = items;
    if (!(items[l->n] = strndup(s, len)))
        return -ENOMEM;
    l->n++;
    return 0;
}

/* Appends key: value (no check for an existing key: map_dedupe). The array grows by
 * doubling: its capacity is 4, then the power of two at or above n. */
static int map_append(CcdStrMap *m, const char *key, const char *value)
{
    if (m->n < 4 ? !m->items : !(m->n & (m->n - 1))) {
        CcdKv *items = realloc(m->items, (size_t)(m->n < 4 ? 4 : 2 * m->n) * sizeof *items);
        if (!items)
            return -ENOMEM;
        m->items = items;
    }
    CcdKv *items = m->items;
    items[m->n].key = strdup(key);
    items[m->n].value = strdup(value);
    if (!items[m->n].key || !items[m->n].value) {
        free(items[m->n].key);
        free(items[m->n].value);
        return -ENOMEM;
    }
    m->n++;
    return 0;
}

static int kv_index_cmp(const void *a, const void *b, void *arg)
{
    const CcdKv *items = arg;
    int ia = *(const int *)a, ib = *(const int *)b, c = strcmp(items[ia].key, items[ib].key);
    return c ? c : (ia > ib) - (ia < ib);
}

/* A key given more than once keeps its first place and its last value (a YAML mapping of n
 * keys: n log n, where looking each key up on insertion was n^2). */
static int map_dedupe(CcdStrMap *m)
{
    int *idx = malloc((size_t)m->n * sizeof *idx + 1);
    if (!idx)
        return -ENOMEM;
    for (int i = 0; i < m->n; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)m->n, sizeof *idx, kv_index_cmp, m->items);
    for (int i = 0, j; i < m->n; i = j) {
        for (j = i + 1; j < m->n && !strcmp(m->items[idx[i]].key, m->items[idx[j]].key); j++)
            ;
        if (j - i > 1) { /* idx[i] is the first place, idx[j - 1] the last value */
            CcdKv *first = &m->items[idx[i]], *last = &m->items[idx[j - 1]];
            free(first->value);
            first->value = last->value;
            last->value = NULL;
            for (int k = i + 1; k < j; k++) {
                free(m->items[idx[k]].key);
                free(m->items[idx[k]].value);
                m->items[idx[k]].key = NULL;
            }
        }
    }
    free(idx);
    int n = 0;
    for (int i = 0; i < m->n; i++)
        if (m->items[i].key)
            m->items[n++] = m->items[i];
    m->n = n;
    return 0;
}

static int map_put(CcdStrMap *m, const char *key, const char *value)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->items[i].key, key)) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(m->items[i].value);
            m->items[i].value = v;
            return 0;
        }
    return map_append(m, key, value);
}

const char *ccd_strmap_get(const CcdStrMap *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->items[i].key, key))
            return m->items[i].value;
    return NULL;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const t[] = {"true", "yes", "on", "1"}, *const f[] = {"false", "no", "off",
                                                                             "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, t[i]))
            return *out = 1, 0;
        if (!strcasecmp(s, f[i]))
            return *out = 0, 0;
    }
    return -EINVAL;
}

static int enum_index(const char *enums, const char *s)
{
    int idx = 0;
    size_t n = strlen(s);
    for (const char *p = enums; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, s, n))
            return idx;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

/* The idx-th name of an enum, copied into buf. */
static const char *enum_name(const char *enums, int idx, char *buf, size_t len)
{
    const char *p = enums;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p)
        return "?";
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n >= len)
        n = len - 1;
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}

/* Sets a scalar (or, for lists, a comma-separated list) from text; message in err. */
static int set_value(CcdConfig *c, const CcdConfigDef *d, const char *s, char *err, size_t errlen)
{
    char *end = NULL;
    switch (d->type) {
    case CCD_CFG_BOOL:
        if (parse_bool(s, FIELD(c, d, int)))
            return cc_errf(err, errlen, -EINVAL, "expected true or false, got '%s'", s);
        return 0;
    case CCD_CFG_INT:
    case CCD_CFG_INT64: {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (!*s || *end || errno)
            return cc_errf(err, errlen, -EINVAL, "expected an integer, got '%s'", s);
        if ((double)v < d->min || (double)v > d->max)
            return cc_errf(err, errlen, -EINVAL, "%lld is out of range [%.0f, %.0f]", v, d->min,
                           d->max);
        if (d->type == CCD_CFG_INT)
            *FIELD(c, d, int) = (int)v;
        else
            *FIELD(c, d, int64_t) = v;
        return 0;
    }
    case CCD_CFG_DOUBLE: {
        errno = 0;
        double v = strtod(s, &end);
        if (!*s || *end || errno || !isfinite(v))
            return cc_errf(err, errlen, -EINVAL, "expected a number, got '%s'", s);
        if (v < d->min || v > d->max)
            return cc_errf(err, errlen, -EINVAL, "%g is out of range [%g, %g]", v, d->min, d->max);
        *FIELD(c, d, double) = v;
        return 0;
    }
    case CCD_CFG_STRING: {
        char *v = strdup(s);
        if (!v)
            return cc_errf(err, errlen, -ENOMEM, "out of memory");
        free(*FIELD(c, d, char *));
        *FIELD(c, d, char *) = v;
        return 0;
    }
    case CCD_CFG_ENUM: {
        int i = enum_index(d->enums, s);
        if (i < 0)
            return cc_errf(err, errlen, -EINVAL, "expected one of %s, got '%s'", d->enums, s);
        *FIELD(c, d, int) = i;
        return 0;
    }
    case CCD_CFG_LIST: {
        CcdStrList *l = FIELD(c, d, CcdStrList);
        list_free(l);
        for (const char *p = s; *p;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            while (len && (*p == ' '))
                p++, len--;
            while (len && p[len - 1] == ' ')
                len--;
            if (len && list_add(l, p, len))
                return cc_errf(err, errlen, -ENOMEM, "out of memory");
            if (!comma)
                break;
            p = comma + 1;
        }
        return 0;
    }
    case CCD_CFG_MAP:
        return cc_errf(err, errlen, -EINVAL, "is a mapping: set its entries as %s.KEY=VALUE",
                       d->name);
    }
    return -EINVAL;
}

int ccd_config_init(CcdConfig *c)
{
    memset(c, 0, sizeof *c);
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    if (!defs)
        return -ENOMEM; /* the table could not be built */
    for (int i = 0; i < n_defs; i++) {
        const CcdConfigDef *d = &defs[i];
        if (d->type == CCD_CFG_MAP)
            continue;
        if (set_value(c, d, d->def, NULL, 0)) {
            ccd_config_free(c);
            return -ENOMEM;
        }
    }
    return 0;
}

void ccd_config_free(CcdConfig *c)
{
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++) {
        const CcdConfigDef *d = &defs[i];
        if (d->type == CCD_CFG_STRING) {
            free(*FIELD(c, d, char *));
            *FIELD(c, d, char *) = NULL;
        } else if (d->type == CCD_CFG_LIST) {
            list_free(FIELD(c, d, CcdStrList));
        } else if (d->type == CCD_CFG_MAP) {
            map_free(FIELD(c, d, CcdStrMap));
        }
    }
}

/* ---- YAML ---- */

typedef struct Walk {
    CcdConfig *c;
    yaml_document_t *doc;
    const char *file;
    char *err;
    size_t errlen;
} Walk;

static int at(Walk *w, const yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int at(Walk *w, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return cc_errf(w->err, w->errlen, -EINVAL, "%s:%zu:%zu: key '%s': %s", w->file,
                   n->start_mark.line + 1, n->start_mark.column + 1, key, what);
}

static const char *scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int walk_mapping(Walk *w, yaml_node_t *map, const char *prefix)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(w->doc, p->value);
        const char *k = scalar(kn);
        char full[256];
        if (!k)
            return at(w, kn, prefix[0] ? prefix : "(top)", "keys must be plain strings");
        snprintf(full, sizeof full, "%s%s%s", prefix, prefix[0] ? "." : "", k);
        const CcdConfigDef *d = ccd_config_find(full);
        if (!d) {
            if (is_section(full)) {
                if (vn->type == YAML_SCALAR_NODE &&
                    (!*scalar(vn) || !strcmp(scalar(vn), "~") || !strcmp(scalar(vn), "null")))
                    continue; /* an empty section */
                if (vn->type != YAML_MAPPING_NODE)
                    return at(w, vn, full, "is a section: expected a mapping");
                int rc = walk_mapping(w, vn, full);
                if (rc)
                    return rc;
                continue;
            }
            return at(w, kn, full, "unknown key");
        }
        char msg[384];
        if (d->type == CCD_CFG_MAP) {
            CcdStrMap *m = FIELD(w->c, d, CcdStrMap);
            if (vn->type == YAML_SCALAR_NODE &&
                (!*scalar(vn) || !strcmp(scalar(vn), "~") || !strcmp(scalar(vn), "null"))) {
                map_free(m);
                continue;
            }
            if (vn->type != YAML_MAPPING_NODE)
                return at(w, vn, full, "expected a mapping of key: value");
            map_free(m);
            for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top;
                 q++) {
                yaml_node_t *mk = yaml_document_get_node(w->doc, q->key);
                yaml_node_t *mv = yaml_document_get_node(w->doc, q->value);
                if (!scalar(mk) || !scalar(mv))
                    return at(w, scalar(mk) ? mv : mk, full, "entries must be scalar key: value");
                if (map_append(m, scalar(mk), scalar(mv)))
                    return at(w, mv, full, "out of memory");
            }
            if (map_dedupe(m))
                return at(w, vn, full, "out of memory");
        } else if (d->type == CCD_CFG_LIST) {
            CcdStrList *l = FIELD(w->c, d, CcdStrList);
            if (vn->type == YAML_SCALAR_NODE) {
                if (set_value(w->c, d, scalar(vn), msg, sizeof msg))
                    return at(w, vn, full, "%s", msg);
                continue;
            }
            if (vn->type != YAML_SEQUENCE_NODE)
                return at(w, vn, full, "expected a list");
            list_free(l);
            for (yaml_node_item_t *it = vn->data.sequence.items.start;
                 it < vn->data.sequence.items.top; it++) {
                yaml_node_t *in = yaml_document_get_node(w->doc, *it);
                if (!scalar(in))
                    return at(w, in, full, "list items must be strings");
                if (list_add(l, scalar(in), strlen(scalar(in))))
                    return at(w, in, full, "out of memory");
            }
        } else {
            if (vn->type != YAML_SCALAR_NODE)
                return at(w, vn, full, "expected a single value, got a %s",
                          vn->type == YAML_MAPPING_NODE ? "mapping" : "list");
            if (set_value(w->c, d, scalar(vn), msg, sizeof msg))
                return at(w, vn, full, "%s", msg);
        }
    }
    return 0;
}

int ccd_config_load_string(CcdConfig *c, const char *yaml, size_t len, const char *name, char *err,
                           size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = 0, have_doc = 0;
    if (!yaml_parser_initialize(&parser))
        return cc_errf(err, errlen, -ENOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = cc_errf(err, errlen, -EINVAL, "%s:%zu:%zu: YAML syntax: %s%s%s", name,
                     parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "error", parser.context ? " " : "",
                     parser.context ? parser.context : "");
        goto done;
    }
    have_doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        goto done; /* empty file: all defaults */
    if (root->type == YAML_SCALAR_NODE && !*scalar(root))
        goto done;
    if (root->type != YAML_MAPPING_NODE) {
        rc =
            cc_errf(err, errlen, -EINVAL, "%s:%zu:%zu: the top level must be a mapping of sections",
                    name, root->start_mark.line + 1, root->start_mark.column + 1);
        goto done;
    }
    Walk w = {c, &doc, name, err, errlen};
    rc = walk_mapping(&w, root, "");
done:
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int ccd_config_load_file(CcdConfig *c, const char *path, char *err, size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    long len;
    int rc;
    if (fd < 0)
        return cc_errf(err, errlen, -EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return cc_errf(err, errlen, -EINVAL, "%s: %s", path,
                       S_ISDIR(st.st_mode) ? "is a directory, not a configuration file"
                                           : "not a regular file");
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return cc_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    }
    if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        rc = cc_errf(err, errlen, -EIO, "%s: cannot read", path);
        goto done;
    }
    if (!(buf = malloc((size_t)len + 1))) {
        rc = cc_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        rc = cc_errf(err, errlen, -EIO, "%s: short read", path);
        goto done;
    }
    buf[len] = 0;
    rc = ccd_config_load_string(c, buf, (size_t)len, path, err, errlen);
done:
    free(buf);
    fclose(f);
    return rc;
}

int ccd_config_set(CcdConfig *c, const char *assignment, char *err, size_t errlen)
{
    const char *eq = strchr(assignment, '=');
    char key[256], msg[384];
    if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof key)
        return cc_errf(err, errlen, -EINVAL, "--set %s: expected key=value", assignment);
    memcpy(key, assignment, (size_t)(eq - assignment));
    key[eq - assignment] = 0;
    const CcdConfigDef *d = ccd_config_find(key);
    if (!d) {
        /* map entry: the longest map key that is a prefix */
        int n_defs;
        const CcdConfigDef *defs = ccd_config_defs(&n_defs);
        for (int i = 0; i < n_defs; i++) {
            const CcdConfigDef *m = &defs[i];
            size_t n = strlen(m->name);
            if (m->type == CCD_CFG_MAP && !strncmp(key, m->name, n) && key[n] == '.' &&
                key[n + 1]) {
                if (map_put(FIELD(c, m, CcdStrMap), key + n + 1, eq + 1))
                    return cc_errf(err, errlen, -ENOMEM, "--set %s: out of memory", key);
                return 0;
            }
        }
        return cc_errf(err, errlen, -EINVAL, "--set %s: unknown key", key);
    }
    if (set_value(c, d, eq + 1, msg, sizeof msg))
        return cc_errf(err, errlen, -EINVAL, "--set %s: %s", key, msg);
    return 0;
}

/* http.bind: an IPv4 or IPv6 address, or a name that resolves (999.1.1.1 is neither). */
static int check_bind(const char *host, char *err, size_t errlen)
{
    unsigned char a[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1)
        return 0;
    if (host[strspn(host, "0123456789.")] && !strchr(host, ':')) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_PASSIVE}, *res = NULL;
        int e = getaddrinfo(host, NULL, &hints, &res);
        if (!e) {
            freeaddrinfo(res);
            return 0;
        }
        return cc_errf(err, errlen, -EINVAL, "key 'http.bind': cannot resolve '%s': %s", host,
                       gai_strerror(e));
    }
    return cc_errf(err, errlen, -EINVAL, "key 'http.bind': '%s' is not an IP address", host);
}

int ccd_topic_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 249 || !strcmp(s, ".") || !strcmp(s, ".."))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* A topic name of key `key` (empty allowed where it means off or a default, as `keyword`
 * where the key has one); 0 or -EINVAL naming the key. */
static int check_topic(const char *key, const char *name, int empty_ok, const char *keyword,
                       char *err, size_t errlen)
{
    if (!name || !*name) {
        if (empty_ok)
            return 0;
        return cc_errf(err, errlen, -EINVAL, "key '%s': a topic name is needed", key);
    }
    if ((keyword && !strcmp(name, keyword)) || ccd_topic_name_valid(name))
        return 0;
    return cc_errf(err, errlen, -EINVAL,
                   "key '%s': '%.64s%s' is not a Kafka topic name (1..249 of [a-zA-Z0-9._-], not "
                   "\".\" or \"..\")",
                   key, name, strlen(name) > 64 ? "..." : "");
}

int ccd_http_address_valid(const char *s)
{
    size_t n = strncmp(s, "http://", 7) ? strncmp(s, "https://", 8) ? 0 : 8 : 7;
    if (!n)
        return 0;
    s += n;
    if (*s == '[') { /* an IPv6 literal */
        const char *e = s + 1;
        while (isxdigit((unsigned char)*e) || *e == ':' || *e == '.')
            e++;
        if (*e != ']' || e == s + 1)
            return 0;
        s = e + 1;
    } else {
        const char *e = s;
        while (isalnum((unsigned char)*e) || *e == '.' || *e == '-' || *e == '_')
            e++;
        if (e == s)
            return 0;
        s = e;
    }
    if (!*s)
        return 1;
    if (*s++ != ':')
        return 0; /* a path, query, userinfo, space or control character */
    long port = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*s) && digits < 6; s++, digits++)
        port = port * 10 + (*s - '0');
    return !*s && digits && port >= 1 && port <= 65535;
}

/* http.advertise: empty, or a base URL ccd_http_address_valid takes (it goes into
 * redirects' Location and the members topic as is). */
static int check_advertise(const char *a, char *err, size_t errlen)
{
    if (!a || !*a || ccd_http_address_valid(a))
        return 0;
    return cc_errf(err, errlen, -EINVAL,
                   "key 'http.advertise': '%.128s' is not an http:// or https:// URL with a host "
                   "and an optional port, nothing after (no path; e.g. "
                   "http://cellcast-2.example:8080)",
                   a);
}

int ccd_snapshot_path_check(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!path || !*path || lstat(path, &st))
        return 0; /* none yet: made at the first snapshot */
    if (S_ISLNK(st.st_mode) && stat(path, &st))
        return 0; /* a dangling link: rename replaces the link, not its target */
    if (!S_ISREG(st.st_mode))
        return cc_errf(err, errlen, -EINVAL,
                       "key 'snapshot.path': '%s' exists and is not a regular file (%s): a "
                       "snapshot replaces it",
                       path,
                       S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file");
    return 0;
}

int ccd_config_validate(const CcdConfig *c, char *err, size_t errlen)
{
    static const struct {
        const char *key;
        size_t off;
        int empty_ok;
        const char *keyword;
    } topics[] = {{"kafka.alert_topic", OFF(kafka_alert_topic), 0, NULL},
                  {"kafka.dead_letter_topic", OFF(kafka_dead_letter_topic), 1, NULL},
                  {"kafka.state_topic", OFF(kafka_state_topic), 1, "auto"},
                  {"cluster.members_topic", OFF(cluster_members_topic), 1, NULL}};
    if (c->http_bind && check_bind(c->http_bind, err, errlen))
        return -EINVAL;
    if (check_advertise(c->http_advertise, err, errlen))
        return -EINVAL;
    if (!c->kafka_topics.n)
        return cc_errf(err, errlen, -EINVAL, "key 'kafka.topics': at least one topic is needed");
    for (int i = 0; i < c->kafka_topics.n; i++)
        if (check_topic("kafka.topics", c->kafka_topics.items[i], 0, NULL, err, errlen))
            return -EINVAL;
    for (size_t i = 0; i < sizeof topics / sizeof *topics; i++)
        if (check_topic(topics[i].key, *(char *const *)((const char *)c + topics[i].off),
                        topics[i].empty_ok, topics[i].keyword, err, errlen))
            return -EINVAL;
    if (c->demo_enabled && check_topic("demo.topic", c->demo_topic, 1, NULL, err, errlen))
        return -EINVAL;
    if (!c->model_path || !*c->model_path)
        return cc_errf(err, errlen, -EINVAL, "key 'model.path': a model file is needed");
    if (c->demo_enabled && (!c->demo_topic || !*c->demo_topic))
        return cc_errf(err, errlen, -EINVAL, "key 'demo.topic': the demo needs a topic");
    if (c->ingest_labels.n > 16)
        return cc_errf(err, errlen, -EINVAL, "key 'ingest.labels': %d labels, at most 16",
                       c->ingest_labels.n);
    for (int i = 0; i < c->ingest_labels.n; i++) {
        const char *name = c->ingest_labels.items[i].key, *field = c->ingest_labels.items[i].value;
        static const char *const not_labels[] = {"cell", "neighbours", "lat", "lon"};
        for (size_t k = 0; k < sizeof not_labels / sizeof *not_labels; k++)
            if (!strcmp(name, not_labels[k]))
                return cc_errf(err, errlen, -EINVAL,
                               "key 'ingest.labels.%s': %s is not a label (a topology column)",
                               name, name);
        if (!name[0] || strlen(name) > 64 ||
            strspn(name, "abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(name))
            return cc_errf(err, errlen, -EINVAL,
                           "key 'ingest.labels.%s': a label name is 1..64 of [A-Za-z0-9_-]", name);
        if (!field || !field[0] || strlen(field) > 64)
            return cc_errf(err, errlen, -EINVAL,
                           "key 'ingest.labels.%s': the message field must be 1..64 bytes", name);
    }
    for (int i = 0; i < c->ingest_fields.n; i++) {
        char msg[128];
        size_t len;
        double scale;
        if (ccd_config_field_target(c->ingest_fields.items[i].value, &len, &scale, msg, sizeof msg))
            return cc_errf(err, errlen, -EINVAL, "key 'ingest.fields.%s': %s",
                           c->ingest_fields.items[i].key, msg);
    }
    return 0;
}

static int is_secret(const char *key)
{
    return strstr(key, "password") || strstr(key, "secret") || strstr(key, "token");
}

/* librdkafka properties shown in GET /v1/config and --print-config: names that carry no
 * credential or key (an allow-list: ssl.key.pem, sasl.oauthbearer.config, ssl.keystore.*,
 * sasl.kerberos.keytab and every property added later are redacted). */
static const char *const kafka_shown[] = {"acks",
                                          "allow.auto.create.topics",
                                          "api.version.request",
                                          "auto.commit.interval.ms",
                                          "auto.offset.reset",
                                          "bootstrap.servers",
                                          "broker.address.family",
                                          "broker.version.fallback",
                                          "check.crcs",
                                          "client.id",
                                          "client.rack",
                                          "compression.codec",
                                          "compression.type",
                                          "connections.max.idle.ms",
                                          "debug",
                                          "enable.auto.commit",
                                          "enable.auto.offset.store",
                                          "enable.idempotence",
                                          "enable.partition.eof",
                                          "enable.ssl.certificate.verification",
                                          "group.instance.id",
                                          "group.protocol",
                                          "heartbeat.interval.ms",
                                          "isolation.level",
                                          "linger.ms",
                                          "log_level",
                                          "log.queue",
                                          "max.in.flight",
                                          "max.in.flight.requests.per.connection",
                                          "max.poll.interval.ms",
                                          "message.max.bytes",
                                          "message.send.max.retries",
                                          "message.timeout.ms",
                                          "metadata.broker.list",
                                          "metadata.max.age.ms",
                                          "partition.assignment.strategy",
                                          "receive.message.max.bytes",
                                          "request.timeout.ms",
                                          "retries",
                                          "retry.backoff.max.ms",
                                          "retry.backoff.ms",
                                          "sasl.kerberos.service.name",
                                          "sasl.mechanism",
                                          "sasl.mechanisms",
                                          "sasl.username",
                                          "security.protocol",
                                          "session.timeout.ms",
                                          "ssl.ca.location",
                                          "ssl.certificate.location",
                                          "ssl.cipher.suites",
                                          "ssl.curves.list",
                                          "ssl.endpoint.identification.algorithm",
                                          "ssl.key.location",
                                          "ssl.sigalgs.list",
                                          "statistics.interval.ms",
                                          "topic.metadata.refresh.interval.ms"};
/* whole families of tunables (sizes, times, counts) */
static const char *const kafka_shown_prefix[] = {
    "batch.", "fetch.", "queue.buffering.", "queued.", "reconnect.", "socket.", "topic.metadata."};

/* Whether the value of key `key` of row d (the row's own value: key NULL) is redacted. */
static int redacted(const CcdConfigDef *d, const char *key)
{
    if (!key || d->offset != OFF(kafka_properties))
        return is_secret(key ? key : d->name);
    for (size_t i = 0; i < sizeof kafka_shown / sizeof *kafka_shown; i++)
        if (!strcmp(key, kafka_shown[i]))
            return 0;
    for (size_t i = 0; i < sizeof kafka_shown_prefix / sizeof *kafka_shown_prefix; i++)
        if (!strncmp(key, kafka_shown_prefix[i], strlen(kafka_shown_prefix[i])))
            return 0;
    return 1;
}

static json_t *value_json(const CcdConfig *c, const CcdConfigDef *d)
{
    char buf[64];
    switch (d->type) {
    case CCD_CFG_BOOL: return json_boolean(*FIELD(c, d, int));
    case CCD_CFG_INT: return json_integer(*FIELD(c, d, int));
    case CCD_CFG_INT64: return json_integer(*FIELD(c, d, int64_t));
    case CCD_CFG_DOUBLE: return json_real(*FIELD(c, d, double));
    case CCD_CFG_STRING:
        if (redacted(d, NULL) && *FIELD(c, d, char *) && **FIELD(c, d, char *))
            return json_string("(redacted)");
        /* the operator's bytes (--set; YAML is UTF-8): not always UTF-8, which json_string
         * refuses (NULL: the setting dropped from GET /v1/config) */
        return ccd_json_text(*FIELD(c, d, char *) ? *FIELD(c, d, char *) : "", NULL);
    case CCD_CFG_ENUM: return json_string(enum_name(d->enums, *FIELD(c, d, int), buf, sizeof buf));
    case CCD_CFG_LIST: {
        json_t *a = json_array();
        const CcdStrList *l = FIELD(c, d, CcdStrList);
        for (int i = 0; i < l->n; i++)
            json_array_append_new(a, ccd_json_text(l->items[i], NULL));
        return a;
    }
    case CCD_CFG_MAP: {
        json_t *o = json_object();
        const CcdStrMap *m = FIELD(c, d, CcdStrMap);
        for (int i = 0; i < m->n; i++)
            json_object_set_new(
                o, m->items[i].key,
                ccd_json_text(redacted(d, m->items[i].key) ? "(redacted)" : m->items[i].value,
                              NULL));
        return o;
    }
    }
    return json_null();
}

json_t *ccd_config_to_json(const CcdConfig *c)
{
    json_t *root = json_object();
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++) {
        const CcdConfigDef *d = &defs[i];
        const char *dot = strchr(d->name, '.');
        char section[64];
        snprintf(section, sizeof section, "%.*s", (int)(dot - d->name), d->name);
        json_t *s = json_object_get(root, section);
        if (!s) {
            s = json_object();
            json_object_set_new(root, section, s);
        }
        json_object_set_new(s, dot + 1, value_json(c, d));
    }
    return root;
}

static void yaml_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* Wraps text as `indent# ...` comment lines of at most ~90 columns. */
static void comment(FILE *out, const char *indent, const char *text)
{
    const int width = 86;
    while (*text) {
        int n = (int)strlen(text);
        if (n > width) {
            n = width;
            while (n > 20 && text[n] != ' ')
                n--;
        }
        fprintf(out, "%s# %.*s\n", indent, n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

int ccd_config_write_yaml(const CcdConfig *c, FILE *out)
{
    char prev[64] = "", buf[64];
    fprintf(out, "# cellcastd configuration (generated from the daemon's config table by\n"
                 "# `cellcastd --print-default-config`; every key is shown with its default).\n"
                 "# Override any key on the command line: cellcastd -c FILE --set http.port=9090\n"
                 "# Check a file without starting: cellcastd -c FILE --check-config\n");
    int n_defs;
    const CcdConfigDef *defs = ccd_config_defs(&n_defs);
    for (int i = 0; i < n_defs; i++) {
        const CcdConfigDef *d = &defs[i];
        const char *dot = strchr(d->name, '.');
        char section[64];
        snprintf(section, sizeof section, "%.*s", (int)(dot - d->name), d->name);
        if (strcmp(section, prev)) {
            fprintf(out, "\n%s:\n", section);
            snprintf(prev, sizeof prev, "%s", section);
        } else {
            fputc('\n', out);
        }
        comment(out, "  ", d->doc);
        char meta[320];
        int m = 0;
        if (d->type == CCD_CFG_ENUM)
            m += snprintf(meta + m, sizeof meta - (size_t)m, "one of %s; ", d->enums);
        if (d->type == CCD_CFG_INT || d->type == CCD_CFG_INT64)
            m +=
                snprintf(meta + m, sizeof meta - (size_t)m, "range [%.0f, %.0f]; ", d->min, d->max);
        if (d->type == CCD_CFG_DOUBLE)
            m += snprintf(meta + m, sizeof meta - (size_t)m, "range [%g, %g]; ", d->min, d->max);
        if (d->type == CCD_CFG_MAP)
            m += snprintf(meta + m, sizeof meta - (size_t)m, "default {}; ");
        else if (d->type == CCD_CFG_STRING)
            m += snprintf(meta + m, sizeof meta - (size_t)m, "default \"%s\"; ", d->def);
        else
            m += snprintf(meta + m, sizeof meta - (size_t)m, "default %s; ", d->def);
        snprintf(meta + m, sizeof meta - (size_t)m, "%s",
                 d->reloadable ? "reloadable" : "needs a restart");
        fprintf(out, "  # (%s)\n", meta);
        fprintf(out, "  %s:", dot + 1);
        switch (d->type) {
        case CCD_CFG_BOOL: fprintf(out, " %s\n", *FIELD(c, d, int) ? "true" : "false"); break;
        case CCD_CFG_INT: fprintf(out, " %d\n", *FIELD(c, d, int)); break;
        case CCD_CFG_INT64: fprintf(out, " %lld\n", (long long)*FIELD(c, d, int64_t)); break;
        case CCD_CFG_DOUBLE:
            shortest_double(*FIELD(c, d, double), buf, sizeof buf);
            fprintf(out, " %s\n", buf);
            break;
        case CCD_CFG_STRING:
            fputc(' ', out);
            yaml_quoted(out, !*FIELD(c, d, char *)                        ? ""
                             : **FIELD(c, d, char *) && redacted(d, NULL) ? "(redacted)"
                                                                          : *FIELD(c, d, char *));
            fputc('\n', out);
            break;
        case CCD_CFG_ENUM:
            fprintf(out, " %s\n", enum_name(d->enums, *FIELD(c, d, int), buf, sizeof buf));
            break;
        case CCD_CFG_LIST: {
            const CcdStrList *l = FIELD(c, d, CcdStrList);
            fputs(" [", out);
            for (int j = 0; j < l->n; j++) {
                if (j)
                    fputs(", ", out);
                yaml_quoted(out, l->items[j]);
            }
            fputs("]\n", out);
            break;
        }
        case CCD_CFG_MAP: {
            const CcdStrMap *mp = FIELD(c, d, CcdStrMap);
            if (!mp->n) {
                fputs(" {}\n", out);
                break;
            }
            fputc('\n', out);
            for (int j = 0; j < mp->n; j++) {
                fprintf(out, "    ");
                yaml_quoted(out, mp->items[j].key);
                fputs(": ", out);
                yaml_quoted(out, redacted(d, mp->items[j].key) ? "(redacted)" : mp->items[j].value);
                fputc('\n', out);
            }
            break;
        }
        }
    }
    return ferror(out) ? -EIO : 0;
}

int ccd_config_read(CcdConfig *c, const char *path, const char *const *sets, int n_sets, char *err,
                    size_t errlen)
{
    int rc;
    if ((rc = ccd_config_init(c)))
        return cc_errf(err, errlen, rc, "out of memory");
    if (path && (rc = ccd_config_load_file(c, path, err, errlen)))
        return rc;
    for (int i = 0; i < n_sets; i++)
        if ((rc = ccd_config_set(c, sets[i], err, errlen)))
            return rc;
    return 0;
}

void ccd_config_incidents_topic(const CcdConfig *c, char *buf, size_t n)
{
    const char *t = c->incidents_topic;
    if (t && strcmp(t, "auto"))
        snprintf(buf, n, "%s", t);
    else if (c->kafka_alert_topic && *c->kafka_alert_topic)
        snprintf(buf, n, "%s.incidents", c->kafka_alert_topic);
    else
        buf[0] = 0; /* no alert topic: no incidents topic either */
}
