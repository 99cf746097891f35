/*
 * owner.c - who owns a lock, a lease or a temp file, and whether it still
 * runs.
 *
 * Host name and pid are not enough: containers that share a host's
 * network or UTS namespace (common for GPU pods) share its host name but
 * not its PID namespace, so a pid read from a record may name nothing
 * here (kill says ESRCH although the owner runs) or an unrelated process;
 * and a pid is reused once its process has gone.  So an owner is named by
 * the kernel it runs on (the boot id, shared by every container of one
 * machine, new at each boot), its PID namespace (the inode behind
 * /proc/self/ns/pid), its pid there, and its start time (which tells a
 * reused pid apart).  The judgement:
 *
 *  - same boot id and namespace: look the pid up in /proc; absent or with
 *    another start time is DEAD, the same start time ALIVE.  (When /proc
 *    is not mounted for our own namespace, only kill(pid, 0) can be
 *    asked: no such pid is DEAD, one that exists UNKNOWN.)
 *  - another boot id or namespace: UNKNOWN, which every caller counts as
 *    alive until the record's own lease time runs out (a lease's expiry,
 *    a lock's renewed expiry, a temp file's grace).
 *  - a record without boot id (written by an older wstore): on this host,
 *    a pid that exists is ALIVE as it always was, a pid that does not is
 *    UNKNOWN (it may have run in another namespace); on another host
 *    UNKNOWN.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "owner.h"

void wstore__owner_host(char *out, size_t cap)
{
	if (!cap)
		return;
	out[0] = '\0';
	gethostname(out, cap - 1);
	out[cap - 1] = '\0';
}

int wstore__pid_gone(long pid)
{
	return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* ---- facts about this kernel and this process ---------------------------- */

static struct {
	pthread_once_t once;
	char boot_id[40];
	uint64_t pidns;
} kern = { PTHREAD_ONCE_INIT };

static void kern_read(void)
{
	struct stat st;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(kern.boot_id, sizeof(kern.boot_id), f))
			kern.boot_id[0] = '\0';
		kern.boot_id[strcspn(kern.boot_id, "\n")] = '\0';
		fclose(f);
	}
	/* the namespace of this process, whatever /proc is mounted for */
	if (stat("/proc/self/ns/pid", &st) == 0)
		kern.pidns = (uint64_t)st.st_ino;
}

/* Start time of pid as /proc shows it ("self" for this process): 0 when
 * there is no such entry, 1 when found (*out set), -1 when unreadable. */
static int proc_start(const char *pid, uint64_t *out)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? 0 : -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n == 0 ? 0 : -1;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything; the fields
	 * after its last ')' are numbered from 3; starttime is 22 */
	if (!(p = strrchr(buf, ')')))
		return -1;
	p++;
	for (int field = 3; field <= 22; field++) {
		char *end;
		unsigned long long v;

		while (*p == ' ')
			p++;
		if (field < 22) {
			p = strchr(p, ' ');
			if (!p)
				return -1;
			continue;
		}
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || end == p)
			return -1;
		*out = v;
	}
	return 1;
}

/* Whether /proc is mounted for our own PID namespace (inside
 * `unshare --pid` without --mount-proc it is the parent's). */
static int proc_is_ours(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) == (long)getpid();
}

void wstore__owner_self(wstore__owner *out)
{
	uint64_t start = 0;

	pthread_once(&kern.once, kern_read);
	memset(out, 0, sizeof(*out));
	wstore__owner_host(out->host, sizeof(out->host));
	snprintf(out->boot_id, sizeof(out->boot_id), "%s", kern.boot_id);
	out->pidns = kern.pidns;
	out->pid = (long long)getpid();
	/* /proc/self is this process even under a foreign /proc */
	if (proc_start("self", &start) == 1)
		out->start = start;
}

/* ---- judging ------------------------------------------------------------- */

/* pid of our own namespace: is it the process that started at start? */
static enum wstore__liveness judge_pid(long long pid, uint64_t start)
{
	char num[32];
	uint64_t now = 0;
	int rc;

	if (pid <= 0)
		return WSTORE__OWNER_UNKNOWN;
	if (!proc_is_ours())
		return wstore__pid_gone((long)pid) ? WSTORE__OWNER_DEAD
						   : WSTORE__OWNER_UNKNOWN;
	snprintf(num, sizeof(num), "%lld", pid);
	rc = proc_start(num, &now);
	if (rc == 0)
		return WSTORE__OWNER_DEAD;
	if (rc < 0)
		return WSTORE__OWNER_UNKNOWN;
	return now == start ? WSTORE__OWNER_ALIVE : WSTORE__OWNER_DEAD;
}

enum wstore__liveness wstore__owner_judge(const wstore__owner *o)
{
	char host[256];

	pthread_once(&kern.once, kern_read);
	if (!o->boot_id[0] || !o->pidns || !o->start) {
		/* an older wstore's record: host name and pid only */
		wstore__owner_host(host, sizeof(host));
		if (o->pid <= 0 || strcmp(o->host, host) != 0)
			return WSTORE__OWNER_UNKNOWN;
		return wstore__pid_gone((long)o->pid) ? WSTORE__OWNER_UNKNOWN
						      : WSTORE__OWNER_ALIVE;
	}
	if (!kern.boot_id[0] || !kern.pidns ||
	    strcmp(o->boot_id, kern.boot_id) != 0 || o->pidns != kern.pidns)
		return WSTORE__OWNER_UNKNOWN;
	return judge_pid(o->pid, o->start);
}

/* ---- records ------------------------------------------------------------- */

int wstore__owner_to_json(json_t *rec, const wstore__owner *o)
{
	if (json_object_set_new(rec, "host", json_string(o->host)) ||
	    json_object_set_new(rec, "pid", json_integer(o->pid)))
		return -ENOMEM;
	if (o->boot_id[0] &&
	    json_object_set_new(rec, "boot_id", json_string(o->boot_id)))
		return -ENOMEM;
	/* namespace inodes and start times fit well in a JSON integer */
	if (o->pidns && json_object_set_new(rec, "pidns",
					    json_integer((json_int_t)o->pidns)))
		return -ENOMEM;
	if (o->start && json_object_set_new(rec, "start",
					    json_integer((json_int_t)o->start)))
		return -ENOMEM;
	return 0;
}

void wstore__owner_from_json(wstore__owner *o, const json_t *rec)
{
	const char *h = json_string_value(json_object_get(rec, "host"));
	const char *b = json_string_value(json_object_get(rec, "boot_id"));
	json_int_t ns = json_integer_value(json_object_get(rec, "pidns"));
	json_int_t st = json_integer_value(json_object_get(rec, "start"));

	memset(o, 0, sizeof(*o));
	snprintf(o->host, sizeof(o->host), "%s", h ? h : "");
	snprintf(o->boot_id, sizeof(o->boot_id), "%s", b ? b : "");
	o->pid = json_integer_value(json_object_get(rec, "pid"));
	o->pidns = ns > 0 ? (uint64_t)ns : 0;
	o->start = st > 0 ? (uint64_t)st : 0;
}

enum wstore__liveness wstore__owner_judge_json(const json_t *rec)
{
	wstore__owner o;

	if (!json_is_object(rec))
		return WSTORE__OWNER_UNKNOWN;
	wstore__owner_from_json(&o, rec);
	return wstore__owner_judge(&o);
}

/* ---- tags in file names ---------------------------------------------------
 */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static uint32_t ns_hash(const char *boot_id, uint64_t pidns)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, boot_id, strlen(boot_id));

	return (uint32_t)(fnv(h, &pidns, sizeof(pidns)) & 0xffffff);
}

static uint32_t proc_hash(long long pid, uint64_t start)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, &pid, sizeof(pid));

	return (uint32_t)(fnv(h, &start, sizeof(start)) & 0xffffff);
}

void wstore__owner_tag(char out[WSTORE__OWNER_TAG_LEN + 1])
{
	wstore__owner o;

	wstore__owner_self(&o);
	snprintf(out, WSTORE__OWNER_TAG_LEN + 1, "%06" PRIx32 "%06" PRIx32,
		 ns_hash(o.boot_id, o.pidns), proc_hash(o.pid, o.start));
}

enum wstore__liveness wstore__owner_tag_judge(long pid, const char *tag)
{
	char want[WSTORE__OWNER_TAG_LEN + 1], num[32];
	uint64_t start = 0;
	int rc;

	pthread_once(&kern.once, kern_read);
	snprintf(want, sizeof(want), "%06" PRIx32,
		 ns_hash(kern.boot_id, kern.pidns));
	if (!kern.boot_id[0] || !kern.pidns || pid <= 0 ||
	    strncmp(tag, want, 6) != 0)
		return WSTORE__OWNER_UNKNOWN;
	if (!proc_is_ours())
		return wstore__pid_gone(pid) ? WSTORE__OWNER_DEAD
					     : WSTORE__OWNER_UNKNOWN;
	snprintf(num, sizeof(num), "%ld", pid);
	rc = proc_start(num, &start);
	if (rc == 0)
		return WSTORE__OWNER_DEAD;
	if (rc < 0)
		return WSTORE__OWNER_UNKNOWN;
	snprintf(want + 6, sizeof(want) - 6, "%06" PRIx32,
		 proc_hash(pid, start));
	return strncmp(tag + 6, want + 6, 6) == 0 ? WSTORE__OWNER_ALIVE
						  : WSTORE__OWNER_DEAD;
}
