/*
 * test_durable.c - durable.c, the one durable-write helper of the file
 * store, materialize, pull and config: each mode (synced or not, replace
 * or no-replace, regular targets or any), both temp-name forms with final
 * names as long as NAME_MAX, and the pid a temp name gives gc and pull.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "unit.h"

/* Entries of the directory open as dfd whose name starts with '.'. */
static int count_dot(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] == '.' && strcmp(e->d_name, ".") &&
		    strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Write s to name under dfd through the helper with flags. */
static int put(int dfd, const char *name, const char *s, unsigned flags)
{
	wstore__durable d = { .fd = -1 };
	int rc = wstore__durable_open_flags(&d, dfd, name, 0644, flags, name);

	if (rc)
		return rc;
	if (write(d.fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		wstore__durable_abort(&d);
		return -EIO;
	}
	return wstore__durable_commit(&d, name, name);
}

/* Whether name under dfd is a regular file holding exactly s. */
static int holds(int dfd, const char *name, const char *s)
{
	char buf[64];
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf));
	fstat(fd, &st);
	close(fd);
	return S_ISREG(st.st_mode) && n == (ssize_t)strlen(s) &&
	       memcmp(buf, s, (size_t)n) == 0;
}

static void modes(int dfd)
{
	struct stat st;

	/* synced, replacing */
	CHECK_EQ_INT(put(dfd, "f", "one", 0), 0);
	CHECK(holds(dfd, "f", "one"));
	CHECK_EQ_INT(put(dfd, "f", "two", 0), 0);
	CHECK(holds(dfd, "f", "two"));
	/* not synced: published all the same */
	CHECK_EQ_INT(put(dfd, "f", "three", WSTORE__DURABLE_NOSYNC), 0);
	CHECK(holds(dfd, "f", "three"));
	/* no replace: refused over an existing file, which stays */
	CHECK_EQ_INT(put(dfd, "f", "four", WSTORE__DURABLE_NOREPLACE), -EEXIST);
	CHECK(holds(dfd, "f", "three"));
	CHECK_EQ_INT(put(dfd, "g", "new",
			 WSTORE__DURABLE_NOREPLACE | WSTORE__DURABLE_NOSYNC),
		     0);
	CHECK(holds(dfd, "g", "new"));
	/* a FIFO is refused by default, replaced with ANY_TARGET */
	CHECK_EQ_INT(mkfifoat(dfd, "p", 0600), 0);
	CHECK_EQ_INT(put(dfd, "p", "x", 0), -EEXIST);
	CHECK(fstatat(dfd, "p", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	      S_ISFIFO(st.st_mode));
	CHECK_EQ_INT(put(dfd, "p", "x", WSTORE__DURABLE_ANY_TARGET), 0);
	CHECK(holds(dfd, "p", "x"));
	/* a symlink is replaced, never followed */
	CHECK_EQ_INT(symlinkat("g", dfd, "s"), 0);
	CHECK_EQ_INT(put(dfd, "s", "mine", 0), 0);
	CHECK(holds(dfd, "s", "mine"));
	CHECK(holds(dfd, "g", "new"));
	/* and no-replace does not go through one either */
	CHECK_EQ_INT(symlinkat("nowhere", dfd, "t"), 0);
	CHECK_EQ_INT(put(dfd, "t", "x", WSTORE__DURABLE_NOREPLACE), -EEXIST);
	CHECK_EQ_INT(faccessat(dfd, "nowhere", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	/* a directory is refused in every mode */
	CHECK_EQ_INT(mkdirat(dfd, "d", 0755), 0);
	CHECK(put(dfd, "d", "x", 0) < 0);
	CHECK(put(dfd, "d", "x", WSTORE__DURABLE_ANY_TARGET) < 0);
	CHECK(put(dfd, "d", "x", WSTORE__DURABLE_KEY_TEMP) < 0);
	/* no temp file left behind by any of it */
	CHECK_EQ_INT(count_dot(dfd), 0);
}

static void names(int dfd)
{
	char longname[NAME_MAX + 1];
	wstore__durable d = { .fd = -1 };

	memset(longname, 'n', NAME_MAX);
	longname[NAME_MAX] = '\0';
	/* both forms fit whatever the final name's length */
	CHECK_EQ_INT(put(dfd, longname, "a", 0), 0);
	CHECK(holds(dfd, longname, "a"));
	CHECK_EQ_INT(put(dfd, longname, "b", WSTORE__DURABLE_KEY_TEMP), 0);
	CHECK(holds(dfd, longname, "b"));
	CHECK_EQ_INT(count_dot(dfd), 0);

	/* the writer's pid, read back as gc and pull read it */
	CHECK_EQ_INT(wstore__durable_open_flags(&d, dfd, longname, 0644,
						WSTORE__DURABLE_KEY_TEMP, "x"),
		     0);
	CHECK(strncmp(d.tmp, ".tmp-", 5) == 0 && strlen(d.tmp) <= NAME_MAX);
	CHECK_EQ_INT(wstore__tmp_writer(d.tmp, WSTORE__DURABLE_KEY_TEMP),
		     getpid());
	CHECK_EQ_INT(wstore__tmp_writer(d.tmp, 0), 0);
	CHECK_EQ_INT(count_dot(dfd), 1);
	wstore__durable_abort(&d);
	CHECK_EQ_INT(count_dot(dfd), 0);
	CHECK_EQ_INT(
		wstore__durable_open_flags(&d, dfd, longname, 0644, 0, "x"), 0);
	CHECK(strncmp(d.tmp, WSTORE__TMP_TAG, strlen(WSTORE__TMP_TAG)) == 0 &&
	      strlen(d.tmp) < 40);
	CHECK_EQ_INT(wstore__tmp_writer(d.tmp, 0), getpid());
	CHECK_EQ_INT(wstore__tmp_writer(d.tmp, WSTORE__DURABLE_KEY_TEMP), 0);
	CHECK(!wstore__tmp_is_stale(d.tmp)); /* this process is alive */
	wstore__durable_abort(&d);
	CHECK_EQ_INT(count_dot(dfd), 0);

	CHECK_EQ_INT(wstore__tmp_writer(".tmp-a-1-b-42-0123456789abcdef",
					WSTORE__DURABLE_KEY_TEMP),
		     42);
	CHECK_EQ_INT(wstore__tmp_writer(".tmp-manifest-1-1",
					WSTORE__DURABLE_KEY_TEMP),
		     0);
	CHECK_EQ_INT(wstore__tmp_writer(".tmp--0123456789abcdef",
					WSTORE__DURABLE_KEY_TEMP),
		     0);
	CHECK_EQ_INT(wstore__tmp_writer("tmp-a-42-0123456789abcdef",
					WSTORE__DURABLE_KEY_TEMP),
		     0);
	CHECK_EQ_INT(wstore__tmp_writer(".x.bin.wstore-tmp-77", 0), 77);
	CHECK_EQ_INT(wstore__tmp_writer(".wstore-tmp-77-3", 0), 77);
	CHECK_EQ_INT(wstore__tmp_writer(".wstore-tmp-77x", 0), 0);
	CHECK_EQ_INT(wstore__tmp_writer("x.wstore-tmp-77", 0), 0);
}

void test_durable(void)
{
	char *dir = unit_tmpdir(), *sub;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), gone;
	wstore__durable d = { .fd = -1 };

	CHECK(dfd >= 0);
	modes(dfd);
	names(dfd);
	/* a directory removed under the writer: -ENOENT, so that the file
	 * store walks again */
	if (asprintf(&sub, "%s/gone", dir) < 0)
		abort();
	CHECK_EQ_INT(mkdir(sub, 0755), 0);
	gone = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_EQ_INT(rmdir(sub), 0);
	CHECK_EQ_INT(wstore__durable_open_flags(&d, gone, "k", 0644,
						WSTORE__DURABLE_KEY_TEMP, "k"),
		     -ENOENT);
	CHECK_EQ_INT(d.fd, -1);
	wstore__durable_abort(&d); /* nothing to do, and harmless */
	close(gone);
	free(sub);
	close(dfd);
	unit_rmtree(dir);
	free(dir);
}
