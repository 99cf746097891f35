/*
 * readbench.c - read every file of a checkpoint through the public read
 * API (wstore_file_pread) into one reused buffer, as an engine's loader
 * would; used by `make bench` next to `cat > /dev/null`.  The buffer is
 * 2 MiB aligned and asks for transparent huge pages, as an engine's
 * staging memory would be: 4 KiB first-touch faults of a plain 8 MiB
 * malloc (2048 of them) were the process's largest cost after the reads.
 *   wstore-readbench STORE_URL CHECKPOINT_ID [BLOCK_BYTES (default 8 MiB)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <wstore/read.h>
#include <wstore/wstore.h>

static int fail(const char *what)
{
	fprintf(stderr, "readbench: %s: %s\n", what, wstore_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	size_t block = argc > 3 ? strtoull(argv[3], NULL, 0) : 8u << 20;
	wstore_store *s = NULL;
	wstore_checkpoint *ck = NULL;
	const wstore_manifest *m;
	uint64_t total = 0;
	char *buf;

	if (argc < 3) {
		fprintf(stderr, "usage: wstore-readbench STORE ID [BLOCK]\n");
		return 2;
	}
	if (posix_memalign((void **)&buf, (size_t)2 << 20, block))
		buf = NULL;
	if (buf)
		madvise(buf, block, MADV_HUGEPAGE);
	if (!buf || wstore_open_url(&s, argv[1]) < 0)
		return fail("open store");
	if (wstore_checkpoint_open(&ck, s, argv[2]) < 0)
		return fail("open checkpoint");
	m = wstore_checkpoint_manifest(ck);
	for (size_t i = 0; i < wstore_manifest_file_count(m); i++) {
		wstore_file_info fi;
		wstore_file *f = NULL;

		wstore_manifest_file(&fi, m, i);
		if (wstore_file_open(&f, ck, fi.path) < 0)
			return fail(fi.path);
		for (uint64_t off = 0; off < fi.size;) {
			size_t n = 0;

			if (wstore_file_pread(f, buf, block, off, &n) < 0)
				return fail(fi.path);
			if (n == 0)
				break;
			off += n;
			total += n;
		}
		wstore_file_free(f);
	}
	printf("%llu\n", (unsigned long long)total);
	wstore_checkpoint_free(ck);
	wstore_free(s);
	free(buf);
	return 0;
}
