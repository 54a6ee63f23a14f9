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
 *                          consumer subscribed (ccd_notify_ready)
 *   STATUS=…               from the cron, e.g. every 10 s: cells, steps/s, lag
 *   WATCHDOG=1             from the cron every ccd_notify_watchdog_usec()/2 µs — only
 *                          while the event loop and the step worker make progress
 *   RELOADING=1            at SIGHUP / POST /v1/admin/reload, then READY=1 when done
 *                          (ccd_notify_reloading, ccd_notify_ready)
 *   STOPPING=1             first thing on SIGTERM/SIGINT (ccd_notify_stopping)
 * Extra watchdog time for a long shutdown (snapshot of many cells):
 *   ccd_notify_send(n, "EXTEND_TIMEOUT_USEC=30000000").
 *
 * Not thread-safe: call from the event-loop thread.
 */
#ifndef CCD_NOTIFY_H
#define CCD_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct CcdNotify CcdNotify;

/** Reads $NOTIFY_SOCKET and $WATCHDOG_USEC/$WATCHDOG_PID and opens the datagram socket.
 *  Returns 0 (also when unset: notifications disabled) or -errno for a malformed value
 *  or socket failure (message in err); *out is always usable (a disabled notifier on
 *  error). */
int ccd_notify_open(CcdNotify **out, char *err, size_t errlen);
void ccd_notify_close(CcdNotify **n);

/** 1 when notifications go somewhere. */
int ccd_notify_enabled(const CcdNotify *n);

/** Sends raw assignments ("READY=1\nSTATUS=..."); 0 or -errno (never blocks). */
int ccd_notify_send(CcdNotify *n, const char *msg);

/** printf-style STATUS= line (newlines in the text are replaced by spaces). */
int ccd_notify_status(CcdNotify *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** READY=1 with an optional STATUS (NULL = none). */
int ccd_notify_ready(CcdNotify *n, const char *status);
int ccd_notify_reloading(CcdNotify *n); ///< RELOADING=1 and MONOTONIC_USEC=now
int ccd_notify_stopping(CcdNotify *n);  ///< STOPPING=1
int ccd_notify_watchdog(CcdNotify *n);  ///< WATCHDOG=1

/** The watchdog period systemd expects for this process in µs (WatchdogSec=), 0 if none.
 *  Ping at half of it. */
uint64_t ccd_notify_watchdog_usec(const CcdNotify *n);

#endif
