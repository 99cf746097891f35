/*
 * test_tar.c - the tar of bundles (tar.c): a header read back as written,
 * with a pax header for a name over 100 bytes and a size over 8 GiB; the
 * end-of-archive marker; a damaged checksum, a global pax header and a
 * stream cut short refused; the kind of each other entry type named.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tar.h"
#include "unit.h"

/* A memfd holding n bytes of data, at offset 0. */
static int mem_of(const void *data, size_t n)
{
	int fd = memfd_create("tar", MFD_CLOEXEC);

	CHECK(fd >= 0);
	CHECK(write(fd, data, n) == (ssize_t)n);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* Read the first entry of n bytes of data: tar_next's code, *e filled. */
static int first(const char *data, size_t n, wstore__tar_entry *e)
{
	wstore__tar_in t;
	int fd = mem_of(data, n), rc;

	CHECK_EQ_INT(wstore__tar_in_init(&t, fd, "the test stream"), 0);
	rc = wstore__tar_next(&t, e);
	wstore__tar_in_free(&t);
	close(fd);
	return rc;
}

void test_tar_headers(void)
{
	char long_name[301], h[3 * 512 + 4096], buf[8 * 512];
	wstore__tar_entry e;
	size_t n = 0;

	memset(long_name, 'n', 300);
	long_name[300] = '\0';
	long_name[150] = '/';
	/* a plain ustar header */
	CHECK_EQ_INT(wstore__tar_header(h, sizeof(h), &n, "a/b.bin", 12345,
					1700000000),
		     0);
	CHECK_EQ_INT((int)n, 512);
	CHECK_EQ_INT(first(h, n, &e), 1);
	CHECK(e.name && !strcmp(e.name, "a/b.bin"));
	CHECK(e.size == 12345 && e.type == '0');
	free(e.name);
	/* pax: a long name and a size over 8 GiB */
	CHECK_EQ_INT(
		wstore__tar_header(h, sizeof(h), &n, long_name, 10ull << 30, 0),
		0);
	CHECK(n > 512 && n % 512 == 0);
	CHECK_EQ_INT(first(h, n, &e), 1);
	CHECK(e.name && !strcmp(e.name, long_name));
	CHECK(e.size == 10ull << 30);
	free(e.name);
	/* the end-of-archive marker */
	memset(buf, 0, sizeof(buf));
	CHECK_EQ_INT(first(buf, 1024, &e), 0);
	/* one zero block, then the end of the stream: truncated */
	CHECK_EQ_INT(first(buf, 512, &e), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "is truncated") != NULL);
	/* a damaged checksum */
	wstore__tar_header(h, sizeof(h), &n, "x", 1, 0);
	h[0] = 'y';
	CHECK_EQ_INT(first(h, n, &e), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "no valid tar header") != NULL);
	/* a header cut short */
	wstore__tar_header(h, sizeof(h), &n, "x", 1, 0);
	CHECK_EQ_INT(first(h, 100, &e), WSTORE_EINVAL);
	/* a global pax header: the type byte changed, the checksum fixed */
	wstore__tar_header(h, sizeof(h), &n, long_name, 1, 0);
	h[156] = 'g';
	{
		unsigned sum = 0;

		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += (unsigned char)h[i];
		snprintf(h + 148, 8, "%06o", sum);
	}
	CHECK_EQ_INT(first(h, n, &e), WSTORE_EINVAL);
	CHECK(strstr(wstore_last_error(), "global pax header") != NULL);
	/* a symlink is read and named for the caller to refuse */
	wstore__tar_header(h, sizeof(h), &n, "l", 0, 0);
	h[156] = '2';
	{
		unsigned sum = 0;

		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += (unsigned char)h[i];
		snprintf(h + 148, 8, "%06o", sum);
	}
	CHECK_EQ_INT(first(h, n, &e), 1);
	CHECK(e.kind && !strcmp(e.kind, "symbolic link"));
	free(e.name);
	CHECK_EQ_INT((int)wstore__tar_pad(1), 511);
	CHECK_EQ_INT((int)wstore__tar_pad(512), 0);
}
