/*
 * owner.h - who owns a record (owner.c): the one place that says whether
 * the process that wrote a lock, a lease or a temp file name still runs.
 *
 * Owns: the owner fields of lock and lease records and the liveness
 * judgement of locks, leases, gc and the temp files of the file store and
 * of pull.
 */
#ifndef WSTORE_OWNER_H
#define WSTORE_OWNER_H

#include <stddef.h>

/* This host's name (gethostname), always terminated. */
void wstore__owner_host(char *out, size_t cap);

/* 1 when pid names no process that we can see (kill(pid, 0) fails with
 * ESRCH), 0 otherwise (alive, or not ours to signal). */
int wstore__pid_gone(long pid);

/* 1 when a record written by pid on host ran on this host and that
 * process is gone; 0 when it may live (another host, or pid alive). */
int wstore__owner_gone(const char *host, long long pid);

#endif
