/*
 * cmd_umount.c - wstore umount: unmount a wstore mount (umount2 as root,
 * else fusermount3).  Needs no FUSE library, so it is built with or
 * without the mount daemon.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const char umount_help[] =
	"usage: wstore umount MOUNTPOINT\n"
	"\n"
	"Unmount a 'wstore mount'; the daemon serving it exits.\n";

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
		return wfront_usage_error(
			"'umount' needs exactly one mountpoint");
	mp = argv[1];
	if (!realpath(mp, rp)) {
		wfront_err("cannot resolve '%s': %s", mp, strerror(errno));
		return EXIT_ERR;
	}
	if (is_wstore_mount(rp) == 0) {
		wfront_err("'%s' is not a wstore mount", mp);
		return EXIT_ERR;
	}
	if (geteuid() == 0) {
		if (umount2(rp, 0) == 0)
			return EXIT_OK;
		wfront_err("cannot unmount '%s': %s", mp,
			   errno == EBUSY
				   ? "it is busy (files open or a process "
				     "inside it)"
				   : strerror(errno));
		return EXIT_ERR;
	}
	if ((pid = fork()) == 0) {
		execlp("fusermount3", "fusermount3", "-u", "--", rp,
		       (char *)NULL);
		wfront_err("cannot run fusermount3: %s", strerror(errno));
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		wfront_err("cannot unmount '%s'", mp);
		return EXIT_ERR;
	}
	return EXIT_OK;
}
