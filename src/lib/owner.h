/*
 * owner.h - who owns a record (owner.c): the one identity that locks,
 * leases and temp names carry, and the one judgement of whether the
 * process it names still runs.
 *
 * Owns: the owner fields of lock and lease records ("host", "pid",
 * "boot_id", "pidns", "start") and the liveness answer for locks, leases,
 * gc and the temp files of the file store and of pull.  Read owner.c's
 * opening comment for why host name and pid are not enough.
 */
#ifndef WSTORE_OWNER_H
#define WSTORE_OWNER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * A process, named so that any other process can tell whether it still
 * runs: the kernel it ran on (boot id), its PID namespace (the inode of
 * /proc/self/ns/pid), its pid there and its start time (clock ticks after
 * boot, field 22 of /proc/<pid>/stat, which tells a reused pid apart).
 * Empty or 0 fields are unknown (a record of an older wstore).
 */
typedef struct wstore__owner {
	char host[256];
	char boot_id[40];
	uint64_t pidns;
	long long pid;
	uint64_t start;
} wstore__owner;

/* The three answers. UNKNOWN counts as alive until the record's own lease
 * time runs out. */
enum wstore__liveness {
	WSTORE__OWNER_DEAD = 0,
	WSTORE__OWNER_ALIVE = 1,
	WSTORE__OWNER_UNKNOWN = 2,
};

/* This process (after a fork, the child's own identity). */
void wstore__owner_self(wstore__owner *out);

/* Is the process o names still running? */
enum wstore__liveness wstore__owner_judge(const wstore__owner *o);

/* Add o's fields to the JSON object rec ("host", "pid", and "boot_id",
 * "pidns", "start" when known); 0 or -ENOMEM. */
int wstore__owner_to_json(json_t *rec, const wstore__owner *o);
/* o from a record's fields; absent ones are left empty (unknown). */
void wstore__owner_from_json(wstore__owner *o, const json_t *rec);

/* The judgement of a record read from a store, in one call: the owner
 * fields of rec judged; a NULL or non-object rec is UNKNOWN. */
enum wstore__liveness wstore__owner_judge_json(const json_t *rec);

/*
 * Owner tags: the identity squeezed into a temp file name (durable.c),
 * 12 hex digits: 6 of a hash of boot id and namespace, 6 of a hash of pid
 * and start time.  wstore__owner_tag_judge(pid, tag) is ALIVE when the
 * process pid of this namespace has that start time, DEAD when the tag
 * was made in this kernel and namespace and pid is free or another
 * process, UNKNOWN when it was made elsewhere.
 */
#define WSTORE__OWNER_TAG_LEN 12
void wstore__owner_tag(char out[WSTORE__OWNER_TAG_LEN + 1]);
enum wstore__liveness wstore__owner_tag_judge(long pid, const char *tag);

/* This host's name (gethostname), always terminated. */
void wstore__owner_host(char *out, size_t cap);

/* 1 when pid names no process that we can see (kill(pid, 0) fails with
 * ESRCH), 0 otherwise (alive, or not ours to signal). */
int wstore__pid_gone(long pid);

#endif
