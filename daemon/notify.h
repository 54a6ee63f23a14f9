/*
 * notify.h — systemd service notifications (sd_notify) without libsystemd, by the
 * documented datagram protocol (sd_notify(3), "systemd.exec" NOTIFY_SOCKET): one
 * AF_UNIX SOCK_DGRAM message of newline-separated KEY=VALUE assignments sent to the
 * socket named by $NOTIFY_SOCKET — a filesystem path, or an abstract socket when it
 * starts with '@'. With $NOTIFY_SOCKET unset (not run by systemd, or Type≠notify) every
 * call is a no-op that returns 0.
 *
 * What cellcastd sends, and when (Type=notify, WatchdogSec= in the unit):
 *   READY=1 + STATUS=…     once the model is loaded, the HTTP listener bound and the
 *                          consumer subscribed (cc_notify_ready)
 *   STATUS=…               from the cron, e.g. every 10 s: cells, steps/s, lag
 *   WATCHDOG=1             from the cron every cc_notify_watchdog_usec()/2 µs — only
 *                          while the event loop and the step worker make progress
 *   RELOADING=1            at SIGHUP / POST /v1/admin/reload, then READY=1 when done
 *                          (cc_notify_reloading, cc_notify_ready)
 *   STOPPING=1             first thing on SIGTERM/SIGINT (cc_notify_stopping)
 * Extra watchdog time for a long shutdown (snapshot of many cells):
 *   cc_notify_send(n, "EXTEND_TIMEOUT_USEC=30000000").
 *
 * Not thread-safe: call from the event-loop thread.
 */
#ifndef CC_DAEMON_NOTIFY_H
#define CC_DAEMON_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct CcNotify CcNotify;

/** Reads $NOTIFY_SOCKET and $WATCHDOG_USEC/$WATCHDOG_PID and opens the datagram socket.
 *  Returns 0 (also when unset: notifications disabled) or -errno for a malformed value
 *  or socket failure (message in err); *out is always usable (a disabled notifier on
 *  error). */
int cc_notify_open(CcNotify **out, char *err, size_t errlen);
void cc_notify_close(CcNotify **n);

/** 1 when notifications go somewhere. */
int cc_notify_enabled(const CcNotify *n);

/** Sends raw assignments ("READY=1\nSTATUS=..."); 0 or -errno (never blocks). */
int cc_notify_send(CcNotify *n, const char *msg);

/** printf-style STATUS= line (newlines in the text are replaced by spaces). */
int cc_notify_status(CcNotify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** READY=1 with an optional STATUS (NULL = none). */
int cc_notify_ready(CcNotify *n, const char *status);
int cc_notify_reloading(CcNotify *n);   ///< RELOADING=1 and MONOTONIC_USEC=now
int cc_notify_stopping(CcNotify *n);    ///< STOPPING=1
int cc_notify_watchdog(CcNotify *n);    ///< WATCHDOG=1

/** The watchdog period systemd expects for this process in µs (WatchdogSec=), 0 if none.
 *  Ping at half of it. */
uint64_t cc_notify_watchdog_usec(const CcNotify *n);

#endif
