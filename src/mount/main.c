/*
 * main.c - wstore-mount, the FUSE daemon behind `wstore mount` (which
 * execs it with the same arguments and the resolved configuration in
 * WSTORE_<KEY> environment variables): the command line and the daemon
 * dance.  The filesystem itself is behind fuse_ops.h.  Like the CLI it uses
 * only the public API.
 *
 * Daemon mode forks first and mounts in the child, whose stderr is still
 * the terminal: the parent waits on a pipe and exits 0 only once the
 * mount is visible, or with the child's status after it printed why it
 * failed.  Forking before anything starts threads keeps backends that
 * run threads of their own (mooncake) working in the child.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wstore/wstore.h>

#include "../common/frontend.h"
#include "../common/notify.h"
#include "fuse_ops.h"

static const char help[] =
	"usage: wstore mount MOUNTPOINT [--checkpoint ID] [--cache-size SIZE]\n"
	"                    [--foreground|-f] [--direct-io|--page-cache]\n"
	"                    [--refresh SECONDS]"
	" [--threads N] [--allow-other]\n"
	"                    [--log-file PATH]\n"
	"\n"
	"Mount the store read-only: one directory per READY checkpoint, or with\n"
	"--checkpoint the files of that one at the mount root.  Reads fetch only\n"
	"the chunks they touch (a bounded cache of whole chunks, read-ahead for\n"
	"sequential reads); chunk lengths are checked, whole-file SHA-256 is\n"
	"not: use 'wstore model verify' for that.\n"
	"\n"
	"  --checkpoint ID     show only this checkpoint, at the root\n"
	"  --cache-size SIZE   chunk cache size (default 1GiB)\n"
	"  -f, --foreground    stay in the foreground, log to stderr\n"
	"  --log-file PATH     once mounted, log to PATH (appended) instead of\n"
	"                      syslog or stderr\n"
	"  --direct-io         bypass the kernel page cache (no shared mmap on\n"
	"                      kernels before 6.6)\n"
	"  --page-cache        serve files through the kernel page cache\n"
	"                      (default: direct I/O on the embedded file store\n"
	"                      where mmap works with it, else page cache)\n"
	"  --refresh SECONDS   re-read the store's index this often (default 2)\n"
	"  --threads N         FUSE worker threads (default 8; 1 = single)\n"
	"  --allow-other       let other users read the mount\n"
	"\n"
	"Unmount with 'wstore umount MOUNTPOINT' or SIGTERM to the daemon.\n";

struct daemon_pipe {
	int fd;
};

/* Mount is visible: release the waiting parent and the terminal. */
static void on_ready(void *ctx)
{
	struct daemon_pipe *dp = ctx;
	int null = open("/dev/null", O_RDWR);
	char ok = 0;

	wstore_notify("READY=1"); /* a Type=notify unit: mounted now */
	if (dp->fd < 0)
		return;
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	if (write(dp->fd, &ok, 1) != 1) {
		/* the parent is gone; nothing to tell */
	}
	close(dp->fd);
	dp->fd = -1;
}

/* Parent side: wait for "mounted" or the child's exit. */
static int wait_child(pid_t pid, int fd)
{
	char b;
	ssize_t n;
	int st;

	do
		n = read(fd, &b, 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n == 1)
		return EXIT_OK;
	if (waitpid(pid, &st, 0) != pid) {
		wfront_err("lost the mount daemon: %s", strerror(errno));
		return EXIT_ERR;
	}
	/* its own failures say why on this stderr (shared until then) */
	if (WIFEXITED(st) &&
	    (WEXITSTATUS(st) == EXIT_ERR || WEXITSTATUS(st) == EXIT_USAGE))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		wfront_err("the mount daemon was killed by signal %d "
			   "before the mount was up",
			   WTERMSIG(st));
	else
		wfront_err("the mount daemon exited with status %d "
			   "before the mount was up",
			   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return EXIT_ERR;
}

static int parse_mount_args(struct wmount_opts *o, const char **mp,
			    const char **log, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "cache-size", required_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "direct-io", no_argument, NULL, 'D' },
		{ "page-cache", no_argument, NULL, 'P' },
		{ "refresh", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "allow-other", no_argument, NULL, 'a' },
		{ "log-file", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":fh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (wstore_validate_checkpoint_id(optarg) < 0)
				return wfront_usage_error("%s",
							  wstore_last_error());
			o->checkpoint = optarg;
			break;
		case 'C':
			if (wstore_parse_size(&o->cache_size, optarg) < 0)
				return wfront_usage_error(
					"invalid --cache-size '%s'", optarg);
			break;
		case 'f': o->foreground = 1; break;
		case 'D':
		case 'P':
			if (o->direct_io == (ch == 'D' ? 0 : 1))
				return wfront_usage_error(
					"--direct-io and --page-cache "
					"exclude each other");
			o->direct_io = ch == 'D';
			break;
		case 'r':
			if (wfront_parse_number(&o->refresh, "--refresh",
						optarg, 0.1, 3600, "seconds"))
				return EXIT_USAGE;
			break;
		case 't':
			if (wfront_parse_count(&o->threads, "--threads",
					       optarg))
				return EXIT_USAGE;
			break;
		case 'a': o->allow_other = 1; break;
		case 'L':
			if (!*optarg)
				return wfront_usage_error(
					"--log-file needs a path");
			*log = optarg;
			break;
		case 'h': fputs(help, stdout); return -1;
		default: return wfront_bad_option(ch, argv, "mount", opts);
		}
	}
	if (optind + 1 != argc)
		return wfront_usage_error(
			"'mount' needs exactly one mountpoint");
	*mp = argv[optind];
	return 0;
}

/* Open the store, build the tree, mount and serve (in the child when
 * daemonizing; dp->fd < 0 in the foreground). */
static int mount_and_serve(const wstore_config *cfg,
			   const struct wmount_opts *o, const char *mp,
			   struct daemon_pipe *dp)
{
	wstore_store *s = NULL;
	struct wmount *m = NULL;
	int rc;

	/* before any thread starts, the store's own included */
	wfront_hold_stop_signals();
	if (wstore_open_flags(&s, cfg, WSTORE_OPEN_READONLY) < 0) {
		wfront_err("%s", wstore_last_error());
		return EXIT_ERR;
	}
	if (wmount_new(&m, s, o) < 0) {
		wstore_free(s);
		return EXIT_ERR;
	}
	rc = wmount_run(m, mp, on_ready, dp);
	wmount_free(m);
	wstore_free(s);
	return rc ? EXIT_ERR : EXIT_OK;
}

static int run(const wstore_config *cfg, int argc, char **argv)
{
	struct wmount_opts o = {
		NULL, (uint64_t)1 << 30, 2.0, 8, -1, 0, 0, -1
	};
	struct daemon_pipe dp = { -1 };
	const char *mp = NULL, *log = NULL;
	char canon[PATH_MAX];
	struct stat st;
	int rc, fds[2];
	pid_t pid;

	if ((rc = parse_mount_args(&o, &mp, &log, argc, argv)))
		return rc < 0 ? EXIT_OK : rc;
	if (stat(mp, &st) < 0 || !S_ISDIR(st.st_mode)) {
		wfront_err("mountpoint '%s' is not a directory", mp);
		return EXIT_ERR;
	}
	/* a second daemon on one path would hide the first (the check and
	 * the mount are not one step: two starts at once may still both
	 * mount) */
	if (realpath(mp, canon) && wmount_mounted_at(canon)) {
		wfront_err("'%s' is already a wstore mount (unmount it "
			   "first: wstore umount %s)",
			   mp, mp);
		return EXIT_ERR;
	}
	if (log &&
	    (o.log_fd = open(
		     log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
		     0644)) < 0) {
		wfront_err("cannot open log file '%s': %s", log,
			   strerror(errno));
		return EXIT_ERR;
	}
	if (o.foreground)
		return mount_and_serve(cfg, &o, mp, &dp);
	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		wfront_err("cannot start the mount daemon: %s",
			   strerror(errno));
		return EXIT_ERR;
	}
	if (pid > 0) {
		close(fds[1]);
		return wait_child(pid, fds[0]);
	}
	close(fds[0]);
	setsid();
	dp.fd = fds[1];
	rc = mount_and_serve(cfg, &o, mp, &dp);
	_exit(rc);
}

int main(int argc, char **argv)
{
	wstore_config *cfg = NULL;
	int rc;

	if (wfront_env_config(&cfg))
		return EXIT_ERR;
	rc = run(cfg, argc, argv);
	wstore_config_free(cfg);
	return rc;
}
