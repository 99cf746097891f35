/*
 * cmd_mount.c - wstore mount and wstore umount: the command line, the
 * daemon dance and unmounting.  The filesystem itself is fuse_ops.c.
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
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fuse_ops.h"

static const char help[] =
	"usage: wstore mount MOUNTPOINT [--checkpoint ID] [--cache-size SIZE]\n"
	"                    [--foreground|-f] [--direct-io] [--refresh SECONDS]\n"
	"                    [--threads N] [--allow-other]\n"
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
	"  --direct-io         bypass the kernel page cache (fastest for one\n"
	"                      sequential pass; no mmap on kernels before 6.6)\n"
	"  --refresh SECONDS   re-read the store's index this often (default 2)\n"
	"  --threads N         FUSE worker threads (default 8; 1 = single)\n"
	"  --allow-other       let other users read the mount\n"
	"\n"
	"Unmount with 'wstore umount MOUNTPOINT' or SIGTERM to the daemon.\n";

static const char umount_help[] =
	"usage: wstore umount MOUNTPOINT\n"
	"\n"
	"Unmount a 'wstore mount'; the daemon serving it exits.\n";

struct daemon_pipe {
	int fd;
};

/* Mount is visible: release the waiting parent and the terminal. */
static void on_ready(void *ctx)
{
	struct daemon_pipe *dp = ctx;
	int null = open("/dev/null", O_RDWR);
	char ok = 0;

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
	if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st))
		return WEXITSTATUS(st);
	return EXIT_ERR;
}

static int parse_refresh(double *out, const char *v)
{
	char *end;
	double d = strtod(v, &end);

	if (!*v || *end || !(d >= 0.1 && d <= 3600))
		return cli_usage_error(
			"invalid --refresh '%s': expected seconds from 0.1 to 3600",
			v);
	*out = d;
	return 0;
}

static int parse_mount_args(struct wmount_opts *o, const char **mp, int argc,
			    char **argv)
{
	static const struct option opts[] = {
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "cache-size", required_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "direct-io", no_argument, NULL, 'D' },
		{ "refresh", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "allow-other", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	uint32_t n;
	int ch;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":fh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (wstore_validate_checkpoint_id(optarg) < 0)
				return cli_usage_error("%s",
						       wstore_last_error());
			o->checkpoint = optarg;
			break;
		case 'C':
			if (wstore_parse_size(&o->cache_size, optarg) < 0)
				return cli_usage_error(
					"invalid --cache-size '%s'", optarg);
			break;
		case 'f': o->foreground = 1; break;
		case 'D': o->direct_io = 1; break;
		case 'r':
			if (parse_refresh(&o->refresh, optarg))
				return EXIT_USAGE;
			break;
		case 't':
			if (cli_parse_count(&n, "--threads", optarg))
				return EXIT_USAGE;
			o->threads = n;
			break;
		case 'a': o->allow_other = 1; break;
		case 'h': cli_print_help(help); return -1;
		default: return cli_bad_option(ch, argv, "mount");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("'mount' needs exactly one mountpoint");
	*mp = argv[optind];
	return 0;
}

/* Open the store, build the tree, mount and serve (in the child when
 * daemonizing; dp->fd < 0 in the foreground). */
static int mount_and_serve(struct cli *c, const struct wmount_opts *o,
			   const char *mp, struct daemon_pipe *dp)
{
	wstore_store *s = NULL;
	struct wmount *m = NULL;
	int rc;

	if (cli_open_store(c, &s))
		return EXIT_ERR;
	if (wmount_new(&m, s, o) < 0) {
		wstore_free(s);
		return EXIT_ERR;
	}
	rc = wmount_run(m, mp, on_ready, dp);
	wmount_free(m);
	wstore_free(s);
	return rc ? EXIT_ERR : EXIT_OK;
}

int cmd_mount(struct cli *c, int argc, char **argv)
{
	struct wmount_opts o = { NULL, (uint64_t)1 << 30, 2.0, 8, 0, 0, 0 };
	struct daemon_pipe dp = { -1 };
	const char *mp = NULL;
	struct stat st;
	int rc, fds[2];
	pid_t pid;

	if ((rc = parse_mount_args(&o, &mp, argc, argv)))
		return rc < 0 ? EXIT_OK : rc;
	if (stat(mp, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "wstore: mountpoint '%s' is not a directory\n",
			mp);
		return EXIT_ERR;
	}
	if (o.foreground)
		return mount_and_serve(c, &o, mp, &dp);
	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		perror("wstore: cannot start the mount daemon");
		return EXIT_ERR;
	}
	if (pid > 0) {
		close(fds[1]);
		return wait_child(pid, fds[0]);
	}
	close(fds[0]);
	setsid();
	dp.fd = fds[1];
	rc = mount_and_serve(c, &o, mp, &dp);
	_exit(rc);
}

/* Is mp (a canonical path) a wstore mount?  /proc/self/mounts escapes
 * blanks and backslashes as \ooo. */
static int is_wstore_mount(const char *mp)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char line[PATH_MAX * 2], dir[PATH_MAX], type[64];
	int found = 0;

	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p, *q;

		if (sscanf(line, "%*s %4095s %63s", dir, type) != 2)
			continue;
		for (p = q = dir; *p; q++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' &&
			    p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
			    p[3] <= '7') {
				*q = (char)((p[1] - '0') * 64 +
					    (p[2] - '0') * 8 + (p[3] - '0'));
				p += 4;
			} else {
				*q = *p++;
			}
		}
		*q = '\0';
		found = !strcmp(dir, mp) && !strcmp(type, "fuse.wstore");
	}
	fclose(f);
	return found;
}

int cmd_umount(struct cli *c, int argc, char **argv)
{
	char rp[PATH_MAX];
	const char *mp;
	pid_t pid;
	int st;

	(void)c;
	if (cli_wants_help(argc, argv)) {
		cli_print_help(umount_help);
		return EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '-')
		return cli_usage_error("'umount' needs exactly one mountpoint");
	mp = argv[1];
	if (!realpath(mp, rp)) {
		fprintf(stderr, "wstore: cannot resolve '%s': %s\n", mp,
			strerror(errno));
		return EXIT_ERR;
	}
	if (is_wstore_mount(rp) == 0) {
		fprintf(stderr, "wstore: '%s' is not a wstore mount\n", mp);
		return EXIT_ERR;
	}
	if (geteuid() == 0) {
		if (umount2(rp, 0) == 0)
			return EXIT_OK;
		fprintf(stderr, "wstore: cannot unmount '%s': %s\n", mp,
			errno == EBUSY ? "it is busy (files open or a process "
					 "inside it)"
				       : strerror(errno));
		return EXIT_ERR;
	}
	if ((pid = fork()) == 0) {
		execlp("fusermount3", "fusermount3", "-u", "--", rp,
		       (char *)NULL);
		fprintf(stderr, "wstore: cannot run fusermount3: %s\n",
			strerror(errno));
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		fprintf(stderr, "wstore: cannot unmount '%s'\n", mp);
		return EXIT_ERR;
	}
	return EXIT_OK;
}
