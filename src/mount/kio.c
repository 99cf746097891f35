/*
 * kio.c - the kernel I/O hooks: what the mount negotiates with the kernel
 * beyond libfuse's own API.
 *
 * - INIT: the connection's settings (kio_init), and the INIT reply edited
 *   on its way out (io_writev) for what libfuse 3.14 does not know.
 * - OPEN replies of files passed through to the store's file that holds
 *   them whole (pt_open, kio_reply_open).
 * - Read sizes on zero-copy mounts: the pipe a spliced reply must fit in
 *   and the kernel's request limit (zc_read_size).
 * - The kernel's read-ahead window on the mount (widen_readahead).
 * Why each is set as it is, with the measurements: docs/performance.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "../common/clock.h"
#include "mount.h"

#define KERNEL_RA_KB 16384 /* kernel read-ahead window we ask for */
/*
 * Largest read on zero-copy mounts (see zc_read_size): a spliced reply
 * (header and data) must fit in libfuse's pipe with libfuse's slack of a
 * page per piece and two more: this slack covers a reply of up to 6
 * pieces (chunks); one of more pieces (up to MAX_PIECES) does not fit, and
 * libfuse copies it through a fresh buffer instead.  Pipes grow up to
 * /proc/sys/fs/pipe-max-size (1 MiB by default) without CAP_SYS_RESOURCE.
 */
#define ZC_PIPE_SLACK (32u << 10)
#define ZC_PIPE_MAX (16u << 20) /* larger requests are no faster */
#define FUSE_PAGES_DEFAULT 256u /* the kernel's limit before 6.12's sysctl */
#define PAGE_BYTES page_bytes() /* FUSE counts max_pages in these */

static uint32_t page_bytes(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (uint32_t)p : 4096u;
}

/* Whether chunks can be served from their files (the embedded file store;
 * wstore_file_chunk_fd also refuses untrusted and write-once stores). */
int zc_capable(wstore_store *store)
{
	return (wstore_store_caps(store) & WSTORE_CAP_LOCAL_FILES) != 0;
}

/* The largest pipe this process may have, of 1 MiB (the kernel's default
 * pipe-max-size) up to ZC_PIPE_MAX; 0 if not even that. */
static uint32_t pipe_cap(void)
{
	uint32_t cap = 0;
	int p[2];

	if (pipe(p) < 0)
		return 0;
	for (uint32_t sz = ZC_PIPE_MAX; sz >= (1u << 20) && !cap; sz >>= 1)
		if (fcntl(p[0], F_SETPIPE_SZ, (int)sz) >= (int)sz)
			cap = sz;
	close(p[0]);
	close(p[1]);
	return cap;
}

/* The kernel's limit on a FUSE request, in bytes. */
static uint32_t fuse_request_cap(void)
{
	unsigned long pages = FUSE_PAGES_DEFAULT;
	FILE *f = fopen("/proc/sys/fs/fuse/max_pages_limit", "r");

	if (f) {
		if (fscanf(f, "%lu", &pages) != 1 || pages < 1)
			pages = FUSE_PAGES_DEFAULT;
		fclose(f);
	}
	if (pages > 65535) /* the INIT reply's field is 16 bits */
		pages = 65535;
	return (uint32_t)(pages * PAGE_BYTES);
}

/*
 * Read sizes on zero-copy mounts.  A direct-io read is served one request
 * at a time, each a round trip through the daemon, so larger requests go
 * faster (docs/performance.md).  The size is bounded by the pipe a
 * spliced reply must fit in and by the kernel's request limit, both
 * settings of the machine (fs.pipe-max-size, fs.fuse.max_pages_limit).
 * st_blksize, the size that cat, cp and Python's buffered files read in,
 * is the largest power of two within that (cat rounds it up to one).
 */
void zc_read_size(struct wmount *m)
{
	uint32_t pipe = pipe_cap(), req = fuse_request_cap(), r;

	m->blksize = 1u << 20;
	m->max_read = 0;
	if (!m->c.zc)
		return;
	if (pipe < (1u << 20)) { /* no splice will fit: libfuse copies */
		m->max_read = 1u << 20;
		return;
	}
	r = pipe - ZC_PIPE_SLACK;
	if (r > req)
		r = req;
	r -= r % PAGE_BYTES;
	m->max_read = r;
	for (m->blksize = 1u << 20; m->blksize > r; m->blksize >>= 1)
		;
	while (m->blksize <= r / 2)
		m->blksize <<= 1;
}

void kio_init(void *ud, struct fuse_conn_info *conn)
{
	struct wmount *m = ud;
	const char *pt_env;

	conn->max_readahead = UINT32_MAX; /* clamped to the kernel's */
	/* read-ahead requests in flight (kernel default 12) */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	/*
	 * Zero-copy mounts splice chunk files' pages into /dev/fuse.  Not
	 * SPLICE_MOVE: the kernel would steal the pages from the store's
	 * own page cache (and it is slower), so the kernel copies them into
	 * the mount's page cache.
	 */
	if (m->c.zc)
		conn->max_read = m->max_read; /* as in the mount options */
	if (m->c.zc && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/*
	 * Page cache or direct I/O.  On a store of local files direct I/O is
	 * the default where shared mmap still works with it: a first read
	 * then costs one copy (the store's page cache to the reader) instead
	 * of two plus fresh page-cache pages for a second copy of every byte,
	 * and a re-read one copy too (as fast as the mount's own page cache:
	 * docs/performance.md).  Network stores keep the kernel's page cache:
	 * there a re-read would be another fetch.
	 */
	m->dio = m->o.direct_io > 0 ||
		 (m->o.direct_io < 0 && m->c.zc && m->mmap_offered);
	/* WSTORE_MOUNT_PASSTHROUGH=0: files kept whole are spliced by the
	 * daemon instead (a file passed through keeps reading a deleted
	 * checkpoint's bytes; also how the tests reach that path as root) */
	pt_env = getenv("WSTORE_MOUNT_PASSTHROUGH");
	atomic_store(&m->pt, m->c.zc && m->pt_offered &&
				     !(pt_env && !strcmp(pt_env, "0")));
	/* libfuse replies to INIT right after this returns (io_writev) */
	m->patch_init = 1;
}

/*
 * The INIT reply, for what libfuse 3.14 does not know.  The session's I/O
 * goes through these hooks: io_read notes whether the kernel's INIT
 * request offers FUSE_DIRECT_IO_ALLOW_MMAP, io_writev edits libfuse's
 * INIT reply.  Everything else passes through untouched.
 * - Shared mmap on direct-io mounts.  The kernel refuses MAP_SHARED mmap
 *   of direct-io files (ENODEV, which breaks safetensors' loader) unless
 *   the INIT reply carries FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6, protocol
 *   7.39).
 * - Reads larger than 1 MiB (zc_read_size): libfuse asks for max_write's
 *   pages, the reply needs max_read's.
 * - Passthrough (see pt_open): FUSE_PASSTHROUGH and max_stack_depth in
 *   the INIT reply, FOPEN_PASSTHROUGH and the backing id in the reply to
 *   an OPEN that pt_open passes through (marked in tl_backing by
 *   kio_reply_open; libfuse writes the reply from the calling thread).
 */
#define ALLOW_MMAP_FLAGS2 (1u << (36 - 32)) /* FUSE_DIRECT_IO_ALLOW_MMAP */

/*
 * FUSE passthrough (Linux 6.9, protocol 7.40; Debian 12's headers and
 * libfuse 3.14 predate it, so its definitions are spelled here as in the
 * kernel's include/uapi/linux/fuse.h).  A file passed through is read by
 * the kernel straight from a backing file, at the same offsets: the FUSE
 * daemon is not asked again, and the read costs what a read of a local
 * file costs.  The backing file must hold the whole file, so only files
 * of one chunk are passed through (their chunk file is the file).
 */
#define PASSTHROUGH_FLAGS2 (1u << (37 - 32)) /* FUSE_PASSTHROUGH */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)
/* backing files may sit on one stacked filesystem (overlayfs) */
#define PT_STACK_DEPTH 2
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_IOC_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* The backing id of the OPEN reply this thread is writing, or -1. */
static __thread int32_t tl_backing = -1;

static ssize_t io_read(int fd, void *buf, size_t len, void *ud)
{
	struct wmount *m = ud;
	ssize_t n = read(fd, buf, len);
	struct fuse_in_header ih;
	struct fuse_init_in in;

	if (m->init_seen || n < (ssize_t)(sizeof(ih) + sizeof(in)))
		return n;
	memcpy(&ih, buf, sizeof(ih));
	if (ih.opcode != FUSE_INIT)
		return n;
	memcpy(&in, (const char *)buf + sizeof(ih), sizeof(in));
	m->init_seen = 1;
	m->mmap_offered =
		(in.flags & FUSE_INIT_EXT) && (in.flags2 & ALLOW_MMAP_FLAGS2);
	m->pt_offered =
		(in.flags & FUSE_INIT_EXT) && (in.flags2 & PASSTHROUGH_FLAGS2);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud)
{
	struct wmount *m = ud;
	struct fuse_out_header oh;
	struct fuse_init_out out;

	if (m->patch_init && count >= 2 && iov[0].iov_len == sizeof(oh) &&
	    iov[1].iov_len == sizeof(out)) {
		m->patch_init = 0;
		memcpy(&oh, iov[0].iov_base, sizeof(oh));
		memcpy(&out, iov[1].iov_base, sizeof(out));
		if (oh.error == 0 && m->dio && m->mmap_offered &&
		    (out.flags & FUSE_INIT_EXT))
			out.flags2 |= ALLOW_MMAP_FLAGS2;
		/* libfuse 3.14 asks for max_write's pages; reads may be
		 * larger (the kernel clamps this to its limit) */
		if (oh.error == 0 && (out.flags & FUSE_MAX_PAGES) &&
		    m->max_read / PAGE_BYTES >= out.max_pages)
			out.max_pages =
				(uint16_t)(m->max_read / PAGE_BYTES + 1);
		if (oh.error == 0 && atomic_load(&m->pt) &&
		    (out.flags & FUSE_INIT_EXT)) {
			out.flags2 |= PASSTHROUGH_FLAGS2;
			out.unused[0] = PT_STACK_DEPTH; /* max_stack_depth */
		}
		memcpy(iov[1].iov_base, &out, sizeof(out));
	}
	/* this thread's fuse_reply_open of a passed-through file */
	if (tl_backing >= 0 && count >= 2 && iov[0].iov_len == sizeof(oh) &&
	    iov[1].iov_len == sizeof(struct fuse_open_out)) {
		struct fuse_open_out oo;

		memcpy(&oo, iov[1].iov_base, sizeof(oo));
		oo.open_flags |= FOPEN_PASSTHROUGH_FLAG;
		memcpy((char *)&oo + offsetof(struct fuse_open_out, padding),
		       &tl_backing, sizeof(tl_backing)); /* backing_id */
		memcpy(iov[1].iov_base, &oo, sizeof(oo));
	}
	return writev(fd, iov, count);
}

static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
			      size_t len, unsigned int flags, void *ud)
{
	(void)ud;
	return splice(fdin, offin, fdout, offout, len, flags);
}

const struct fuse_custom_io kio_hooks = {
	.writev = io_writev,
	.read = io_read,
	.splice_send = io_splice_send,
};

/*
 * An fd of h's whole file: the store's file that holds every byte of it
 * at its own offsets (wstore_file_chunk_fd at offset 0 hands out the
 * whole file: a file the store keeps whole, or a file of one chunk),
 * checked as for a read (its length, then the manifest still the same).
 * -1 when the file is kept in chunk files, or on a failure (a delete
 * under way): the file is then read through the chunk cache, whose reads
 * fail as any read would.
 */
static int whole_fd(struct wmount *m, struct fh *h)
{
	uint64_t foff = 0, t0 = wclock_mono_ms();
	size_t len = 0;
	int fd = -1, rc;

	rc = wstore_file_chunk_fd(&fd, &foff, &len, h->f, 0);
	if (rc == WSTORE_ECHANGED) /* replaced: the entry is dead */
		entry_read_failed(m, h->e, "open", wstore_file_path(h->f), rc);
	if (rc == 0 && foff == 0 && len == h->size &&
	    entry_validate(m, h->e, t0) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/*
 * On a zero-copy mount, the file behind h when the store keeps it whole
 * (whole_fd): passed through to it on a mount that may, else kept in
 * h->wfd for the reads to splice from (one fd per open file, no chunk
 * cache).  Every open file of a node must use the same backing id (the
 * kernel refuses a second one, and a non-passthrough open of a node
 * that has one), so the node keeps it while any of its files is open.
 * 1: passed through, *id the backing id; 0: open it normally (h->wfd
 * set or -1).
 */
int pt_open(struct wmount *m, struct fh *h, int32_t *id)
{
	struct node *n = &h->e->nodes[h->node];
	struct pt_backing_map map;
	int fd, bid;

	h->wfd = -1;
	if (!m->c.zc || h->size == 0)
		return 0;
	if (!atomic_load(&m->pt)) {
		h->wfd = whole_fd(m, h);
		return 0;
	}
	pthread_mutex_lock(&m->ptlock);
	if (n->backing_refs) {
		n->backing_refs++;
		*id = n->backing;
		pthread_mutex_unlock(&m->ptlock);
		return 1;
	}
	if ((fd = whole_fd(m, h)) < 0) {
		pthread_mutex_unlock(&m->ptlock);
		return 0;
	}
	memset(&map, 0, sizeof(map));
	map.fd = fd;
	bid = ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_OPEN, &map);
	if (bid < 0) {
		/* not allowed (it needs CAP_SYS_ADMIN) or not possible
		 * here: files are served by the daemon */
		mlog(m, LOG_WARNING,
		     "FUSE passthrough refused (%s): files are served by the "
		     "daemon",
		     strerror(errno));
		atomic_store(&m->pt, 0);
		h->wfd = fd;
		pthread_mutex_unlock(&m->ptlock);
		return 0;
	}
	n->backing = bid;
	n->backing_refs = 1;
	*id = bid;
	close(fd); /* the kernel holds the file it backs with */
	pthread_mutex_unlock(&m->ptlock);
	return 1;
}

/*
 * After INIT: whether this process may register backing files (it needs
 * CAP_SYS_ADMIN), tried on a file of its own, so that the mount's first
 * line says what it will do.
 */
void pt_probe(struct wmount *m)
{
	struct pt_backing_map map;
	int fd, bid;

	if (!atomic_load(&m->pt))
		return;
	memset(&map, 0, sizeof(map));
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	map.fd = fd;
	bid = fd < 0 ? -1
		     : ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_OPEN, &map);
	if (bid >= 0) {
		uint32_t b = (uint32_t)bid;

		ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_CLOSE, &b);
	} else {
		atomic_store(&m->pt, 0);
	}
	if (fd >= 0)
		close(fd);
}

/* Drop h's reference on its node's backing id; the last closes it. */
void pt_close(struct wmount *m, struct fh *h)
{
	struct node *n = &h->e->nodes[h->node];

	pthread_mutex_lock(&m->ptlock);
	if (n->backing_refs && --n->backing_refs == 0) {
		uint32_t bid = (uint32_t)n->backing;

		if (ioctl(fuse_session_fd(m->se), PT_IOC_BACKING_CLOSE, &bid) <
			    0 &&
		    !atomic_load(&m->unmounting))
			mlog(m, LOG_WARNING,
			     "cannot close a passthrough file: %s",
			     strerror(errno));
	}
	pthread_mutex_unlock(&m->ptlock);
}

/* Undo /proc's octal escapes (\040 for a blank) in place. */
static void unescape_octal(char *s)
{
	char *p, *q;

	for (p = q = s; *p; q++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*q = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
				    (p[3] - '0'));
			p += 4;
		} else {
			*q = *p++;
		}
	}
	*q = '\0';
}

/* The device number of the wstore mount at mp (a canonical path), from
 * /proc/self/mountinfo; the last one listed there is the newest (ours).
 * Never stat() the mountpoint: the daemon must not wait on its own mount,
 * whose loop may not be (or no longer be) answering. */
static int mount_dev(const char *mp, unsigned *maj, unsigned *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[PATH_MAX * 2 + 512], dir[PATH_MAX], type[64];
	unsigned a, b;
	int found = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");

		if (!sep ||
		    sscanf(line, "%*s %*s %u:%u %*s %4095s", &a, &b, dir) !=
			    3 ||
		    sscanf(sep, " - %63s", type) != 1)
			continue;
		unescape_octal(dir);
		if (!strcmp(dir, mp) && !strcmp(type, "fuse.wstore")) {
			*maj = a;
			*min = b;
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

int wmount_mounted_at(const char *path)
{
	unsigned maj, min;

	return mount_dev(path, &maj, &min) == 0;
}

/* Widen the kernel's read-ahead on this mount (its default is 128 KiB,
 * which caps FUSE reads through the page cache at that size). */
void widen_readahead(struct wmount *m, const char *canon)
{
	unsigned maj, min;
	char path[128];
	FILE *f;

	if (!canon || mount_dev(canon, &maj, &min) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj,
		 min);
	if (!(f = fopen(path, "w")))
		return; /* not root: keep the default */
	if (fprintf(f, "%d\n", KERNEL_RA_KB) < 0 || fclose(f) != 0)
		mlog(m, LOG_WARNING, "cannot set %s", path);
}

/* Reply to an OPEN; a backing id >= 0 marks the reply as passed through
 * (io_writev edits it: libfuse writes it from this thread). */
void kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi,
		    int32_t backing)
{
	tl_backing = backing;
	fuse_reply_open(req, fi);
	tl_backing = -1;
}
