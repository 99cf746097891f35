/*
 * session.c - the mount's life: building it (wmount_new), the FUSE
 * session, signals and the stopper thread, the run loop (wmount_run),
 * tearing down (wmount_free), and the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/frontend.h"
#include "mount.h"

/* One line of the log file: UTC time, program and pid, the message. */
static void log_line(int fd, const char *msg, unsigned skipped)
{
	char line[1200], when[32];
	int64_t ms = wclock_wall_ms();
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	int n;

	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%03dZ wstore-mount[%d]: %s%s\n",
		     when, (int)(ms % 1000), (int)getpid(), msg,
		     skipped ? " (and earlier messages suppressed)" : "");
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	/* one write per line (O_APPEND): lines of several threads and
	 * daemons sharing the file do not mix */
	if (n > 0 && write(fd, line, (size_t)n) < 0) {
		/* nowhere left to say it */
	}
}

/*
 * Messages go to stderr until the mount is up (the starter's terminal in
 * daemon mode), and to the log file as well if there is one; once up, to
 * the log file if there is one, else to syslog (daemon) or stderr
 * (foreground).  Warnings and errors at most one a second, so that a dead
 * backend cannot flood the log.
 */
void mlog(struct wmount *m, int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	uint64_t t = wclock_mono_ms();
	unsigned skipped;

	pthread_mutex_lock(&m->loglock);
	if (prio <= LOG_WARNING && m->lastlog > 0 && t - m->lastlog < 1000) {
		m->suppressed++;
		pthread_mutex_unlock(&m->loglock);
		return;
	}
	if (prio <= LOG_WARNING)
		m->lastlog = t;
	skipped = m->suppressed;
	m->suppressed = 0;
	pthread_mutex_unlock(&m->loglock);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m->o.log_fd >= 0)
		log_line(m->o.log_fd, msg, skipped);
	if (m->to_file) {
		/* the log file only */
	} else if (m->daemonized) {
		syslog(prio, "%s%s", msg,
		       skipped ? " (and earlier messages suppressed)" : "");
	} else {
		fprintf(stderr, "wstore mount: %s\n", msg);
		if (skipped)
			fprintf(stderr,
				"wstore mount: (%u messages suppressed)\n",
				skipped);
	}
}

int wmount_new(struct wmount **out, wstore_store *store,
	       const struct wmount_opts *o)
{
	struct wmount *m = calloc(1, sizeof(*m));
	int rc;

	*out = NULL;
	if (!m) {
		wfront_err("out of memory");
		return -ENOMEM;
	}
	m->s = store;
	m->o = *o;
	m->uid = getuid();
	m->gid = getgid();
	m->started = time(NULL);
	pthread_rwlock_init(&m->lock, NULL);
	pthread_mutex_init(&m->rlock, NULL);
	pthread_mutex_init(&m->loglock, NULL);
	pthread_mutex_init(&m->ptlock, NULL);
	pthread_mutex_init(&m->fhlock, NULL);
	/* refresh_main waits on it with monotonic deadlines */
	wclock_cond_init(&m->rcond);
	m->ntab = 1; /* eid 0 would give inode 0..; never used */
	m->captab = 64;
	m->tab = calloc(m->captab, sizeof(*m->tab));
	if (!m->tab || cache_init(m) < 0) {
		wfront_err("out of memory");
		wmount_free(m);
		return -ENOMEM;
	}
	zc_read_size(m);
	if ((rc = tree_refresh(m)) < 0) {
		wmount_free(m);
		return rc;
	}
	if (o->checkpoint && m->nlive == 0) {
		wstore_checkpoint *ck = NULL;

		/* say why: absent, FAILED, unreadable */
		rc = wstore_checkpoint_open(&ck, store, o->checkpoint);
		wstore_checkpoint_free(ck);
		wfront_err("%s",
			   rc < 0 && *wstore_last_error()
				   ? wstore_last_error()
				   : "checkpoint is not in the store's index");
		wmount_free(m);
		return rc < 0 ? rc : WSTORE_ENOTFOUND;
	}
	*out = m;
	return 0;
}

static int make_session(struct wmount *m)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char opts[256], mr[32] = "";

	if (m->c.zc)
		snprintf(mr, sizeof(mr), ",max_read=%" PRIu32, m->max_read);
	snprintf(opts, sizeof(opts),
		 "ro,fsname=wstore,subtype=wstore,default_permissions%s%s",
		 m->o.allow_other ? ",allow_other" : "", mr);
	if (fuse_opt_add_arg(&args, "wstore") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, opts) ||
	    /* libfuse's trace of every request, for debugging */
	    (getenv("WSTORE_FUSE_DEBUG") && fuse_opt_add_arg(&args, "-d"))) {
		fuse_opt_free_args(&args);
		return -ENOMEM;
	}
	m->se = fuse_session_new(&args, &wmount_ops, sizeof(wmount_ops), m);
	fuse_opt_free_args(&args);
	return m->se ? 0 : -EINVAL;
}

/*
 * Stopping on SIGINT, SIGTERM, SIGHUP.  libfuse's own handlers only set
 * the session's exit flag, and its loops test that flag and then block
 * (sem_wait, or read on /dev/fuse) until a signal interrupts them: a
 * signal handled between the test and the block is lost, and the daemon
 * never unmounts (docs/performance.md tells when that was seen).  So no
 * handler runs at all: the three signals stay blocked in every thread
 * (main.c blocks them before any starts, and threads inherit the mask),
 * the stopper thread takes them with sigwait, sets the exit flag, then
 * interrupts the loop's thread with SIGUSR2 (a handler that does nothing,
 * without SA_RESTART), again every KICK_MS, until the loop has returned.
 */
#define KICK_MS 20 /* the stopper kicks the loop this often */

static void on_wake_signal(int sig)
{
	(void)sig; /* only interrupts a blocking call */
}

/*
 * How many of the first kicks to leave out, as if they came before the
 * loop blocked and were lost: WSTORE_MOUNT_TEST_LOSE_KICKS, for the test
 * that the stopper keeps kicking (0 unless set).
 */
static unsigned lost_kicks(void)
{
	const char *v = getenv("WSTORE_MOUNT_TEST_LOSE_KICKS");
	unsigned long n;
	char *end;

	if (!v || !*v)
		return 0;
	n = strtoul(v, &end, 10);
	return *end || n > 1000 ? 0 : (unsigned)n;
}

static void *stop_main(void *arg)
{
	struct wmount *m = arg;
	struct timespec dl;
	unsigned lose = lost_kicks();
	sigset_t set;
	int sig;

	wfront_stop_signals(&set);
	sigwait(&set, &sig);
	pthread_mutex_lock(&m->rlock);
	if (!m->loop_done)
		fuse_session_exit(m->se);
	while (!m->loop_done) {
		if (lose > 0)
			lose--; /* a kick that came too early (tests) */
		else
			pthread_kill(m->looper, SIGUSR2);
		/* rcond runs on the monotonic clock: so must the deadline
		 * (a realtime one lies decades ahead, and the loop would be
		 * kicked once) */
		dl = wclock_deadline_in(KICK_MS);
		wclock_cond_wait_until(&m->rcond, &m->rlock, &dl);
	}
	pthread_mutex_unlock(&m->rlock);
	return NULL;
}

/* Block the stop signals here too (threads started later inherit that),
 * set the wake-up handler and start the stopper; -1 if that fails. */
static int stop_setup(struct wmount *m)
{
	struct sigaction sa;

	wfront_hold_stop_signals();
	m->looper = pthread_self();
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_wake_signal;
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&m->stopper, NULL, stop_main, m) != 0)
		return -1;
	m->stopping = 1;
	return 0;
}

/* After the loop: end the stopper.  The stop signals stay blocked until
 * the daemon exits: one that comes now has nothing left to stop. */
static void stop_teardown(struct wmount *m)
{
	pthread_mutex_lock(&m->rlock);
	m->loop_done = 1;
	pthread_cond_broadcast(&m->rcond);
	pthread_mutex_unlock(&m->rlock);
	if (m->stopping) {
		/* taken by its sigwait, if no signal was */
		pthread_kill(m->stopper, SIGTERM);
		pthread_join(m->stopper, NULL);
		m->stopping = 0;
	}
}

/*
 * Answer the kernel's INIT (always its first request) before the mount is
 * reported ready, so that the I/O mode it settles is known then and the
 * first access does not wait for the loop to start.  Interrupted by a stop
 * signal (the stopper sets the exit flag), the loop then returns at once.
 */
static void serve_init(struct wmount *m)
{
	struct fuse_buf fbuf;
	int res;

	memset(&fbuf, 0, sizeof(fbuf));
	while (!fuse_session_exited(m->se)) {
		res = fuse_session_receive_buf(m->se, &fbuf);
		if (res == -EINTR)
			continue;
		if (res > 0)
			fuse_session_process_buf(m->se, &fbuf);
		break;
	}
	free(fbuf.mem);
	pt_probe(m);
}

static int serve(struct wmount *m)
{
	struct fuse_loop_config *lc;
	int rc;

	if (m->o.threads <= 1)
		return fuse_session_loop(m->se);
	if (!(lc = fuse_loop_cfg_create()))
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, m->o.threads);
	fuse_loop_cfg_set_idle_threads(lc, m->o.threads);
	rc = fuse_session_loop_mt(m->se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

int wmount_run(struct wmount *m, const char *mountpoint,
	       void (*ready)(void *ctx), void *ctx)
{
	char canon[PATH_MAX];
	int rc;

	/* before mounting: resolving the path afterwards would ask the mount */
	if (!realpath(mountpoint, canon))
		canon[0] = '\0';
	if (make_session(m) < 0) {
		wfront_err("cannot set up the FUSE session");
		return 1;
	}
	if (stop_setup(m) < 0) {
		wfront_err("cannot install signal handlers: %s",
			   strerror(errno));
		stop_teardown(m);
		return 1;
	}
	if (fuse_session_mount(m->se, mountpoint) < 0) {
		wfront_err("cannot mount on '%s' (see the message above)",
			   mountpoint);
		stop_teardown(m);
		return 1;
	}
	/* on the mounted fd: fuse_session_custom_io only swaps the I/O */
	if (fuse_session_custom_io(m->se, &kio_hooks, fuse_session_fd(m->se)) <
	    0)
		mlog(m, LOG_WARNING,
		     "cannot hook the session's I/O: shared mmap of files "
		     "will fail with --direct-io, reads stay at 1 MiB");
	widen_readahead(m, canon[0] ? canon : NULL);
	serve_init(m);
	mlog(m, LOG_INFO, "mounted %zu checkpoint%s on '%s' (%s%s)", m->nlive,
	     m->nlive == 1 ? "" : "s", mountpoint,
	     m->dio ? "direct I/O" : "page cache",
	     !m->c.zc		   ? ""
	     : atomic_load(&m->pt) ? ", chunk files spliced, files of one "
				     "chunk passed through, as every file "
				     "kept whole"
				   : ", chunk files spliced");
	if (ready) {
		ready(ctx);
		if (m->o.log_fd >= 0) {
			m->to_file = 1;
		} else if (!m->o.foreground) {
			openlog("wstore-mount", LOG_PID, LOG_DAEMON);
			m->daemonized = 1;
		}
	}
	cache_start(m);
	if (pthread_create(&m->refresher, NULL, refresh_main, m) == 0)
		m->refreshing = 1;
	rc = serve(m);
	stop_teardown(m);
	/* Unmount before joining: closing the session's fd aborts whatever
	 * the kernel still has pending on the mount, so no thread can stay
	 * blocked on it once the loop no longer answers. */
	pthread_mutex_lock(&m->rlock);
	m->rstop = 1;
	pthread_cond_broadcast(&m->rcond);
	pthread_mutex_unlock(&m->rlock);
	atomic_store(&m->unmounting, 1);
	fuse_session_unmount(m->se);
	if (m->refreshing)
		pthread_join(m->refresher, NULL);
	m->refreshing = 0;
	cache_stop(m);
	mlog(m, LOG_INFO, "unmounted '%s'", mountpoint);
	return rc < 0 ? 1 : 0;
}

void wmount_free(struct wmount *m)
{
	if (!m)
		return;
	if (m->se)
		fuse_session_destroy(m->se);
	m->se = NULL;
	fh_close_all(m);
	/* Draining entries first: they are no longer in live[], and a live
	 * entry's last reference may go below, so tab[] must not be read
	 * after that. */
	for (uint32_t i = 0; i < m->ntab; i++)
		if (m->tab[i] && atomic_load(&m->tab[i]->draining))
			entry_put(m->tab[i]);
	for (size_t i = 0; i < m->nlive; i++)
		entry_put(m->live[i]);
	free(m->live);
	free(m->tab);
	cache_free(&m->c);
	pthread_cond_destroy(&m->rcond);
	pthread_mutex_destroy(&m->loglock);
	pthread_mutex_destroy(&m->ptlock);
	pthread_mutex_destroy(&m->fhlock);
	pthread_mutex_destroy(&m->rlock);
	pthread_rwlock_destroy(&m->lock);
	if (m->daemonized)
		closelog();
	free(m);
}
