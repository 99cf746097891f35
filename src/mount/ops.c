/*
 * ops.c - the FUSE operations (low-level libfuse3 API: it lets us pick
 * inode numbers, reply straight from cached chunk memory and tell the
 * kernel to drop what it cached): lookup, getattr, directories, open,
 * read, release, statfs.  A read of up to MAX_PIECES chunks is answered
 * from pinned chunks of the cache, with writev straight from their
 * buffers, or on zero-copy mounts handed to fuse_reply_data() as the
 * chunk files' fds, which libfuse splices (FUSE_CAP_SPLICE_WRITE) from
 * the store's page cache into /dev/fuse: no copy through the daemon.  A
 * read of more (small) chunks is read whole into one buffer.  Every read
 * is answered in full or fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "../common/clock.h"
#include "mount.h"

/* Entry and node of ino (caller holds the rwlock); -1 if unknown.  ino 1
 * with --checkpoint is the checkpoint's directory (node 0). */
static int resolve(struct wmount *m, fuse_ino_t ino, struct entry **e,
		   uint32_t *node)
{
	uint64_t eid = ino >> NODE_BITS;

	if (ino == FUSE_ROOT_ID) {
		*e = m->o.checkpoint && m->nlive ? m->live[0] : NULL;
		*node = 0;
		return 0;
	}
	if (eid >= m->ntab || !m->tab[eid])
		return -1;
	*e = m->tab[eid];
	*node = (uint32_t)(ino & 0xffffffffu);
	return *node < (*e)->nnodes ? 0 : -1;
}

static void fill_stat(struct wmount *m, const struct entry *e, uint32_t node,
		      fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_blksize = (blksize_t)m->blksize;
	if (!e) { /* the root listing of checkpoints */
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2 + (nlink_t)m->nlive;
		st->st_mtime = st->st_ctime = st->st_atime = m->started;
		return;
	}
	st->st_mtime = st->st_ctime = st->st_atime = (time_t)e->mtime;
	if (e->nodes[node].is_dir) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)e->nodes[node].size;
		st->st_blocks = (blkcnt_t)((e->nodes[node].size + 511) / 512);
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct wmount *m = fuse_req_userdata(req);
	struct fuse_entry_param ep;
	struct entry *e;
	uint32_t node;
	int64_t k = -1;

	memset(&ep, 0, sizeof(ep));
	pthread_rwlock_rdlock(&m->lock);
	if (parent == FUSE_ROOT_ID && !m->o.checkpoint) {
		e = live_find(m, name);
		k = e ? 0 : -1;
	} else if (resolve(m, parent, &e, &node) == 0 && e &&
		   e->nodes[node].is_dir) {
		k = find_kid(e, node, name, strlen(name));
	}
	if (k < 0) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	ep.ino = ino_of(e, (uint32_t)k);
	fill_stat(m, e, (uint32_t)k, ep.ino, &ep.attr);
	pthread_rwlock_unlock(&m->lock);
	ep.attr_timeout = ep.entry_timeout = m->o.refresh;
	fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	struct entry *e;
	struct stat st;
	uint32_t node;

	(void)fi;
	pthread_rwlock_rdlock(&m->lock);
	if (resolve(m, ino, &e, &node) < 0) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_stat(m, e, node, ino, &st);
	pthread_rwlock_unlock(&m->lock);
	fuse_reply_attr(req, &st, m->o.refresh);
}

struct dirbuf {
	char *p;
	size_t size;
};

static int dirbuf_add(fuse_req_t req, struct dirbuf *b, const char *name,
		      fuse_ino_t ino, int is_dir)
{
	struct stat st;
	size_t old = b->size,
	       n = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	char *np = realloc(b->p, old + n);

	if (!np)
		return -1;
	b->p = np;
	b->size += n;
	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = is_dir ? S_IFDIR : S_IFREG;
	fuse_add_direntry(req, b->p + old, n, name, &st, (off_t)b->size);
	return 0;
}

/* The whole listing is built at opendir and served in slices. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	struct dirbuf *b = calloc(1, sizeof(*b));
	struct entry *e;
	uint32_t node;
	int bad = !b;

	pthread_rwlock_rdlock(&m->lock);
	if (!bad && resolve(m, ino, &e, &node) < 0) {
		pthread_rwlock_unlock(&m->lock);
		free(b);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!bad && e && !e->nodes[node].is_dir) {
		pthread_rwlock_unlock(&m->lock);
		free(b);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	bad = bad || dirbuf_add(req, b, ".", ino, 1) ||
	      dirbuf_add(req, b, "..", FUSE_ROOT_ID, 1);
	if (!bad && !e) {
		for (size_t i = 0; i < m->nlive && !bad; i++)
			bad = dirbuf_add(req, b, m->live[i]->id,
					 ino_of(m->live[i], 0), 1);
	} else if (!bad) {
		const struct node *d = &e->nodes[node];

		for (uint32_t k = 0; k < d->nkids && !bad; k++) {
			const struct node *n = &e->nodes[d->kids[k]];

			bad = dirbuf_add(req, b, n->name, ino_of(e, d->kids[k]),
					 n->is_dir);
		}
	}
	pthread_rwlock_unlock(&m->lock);
	if (bad) {
		if (b)
			free(b->p);
		free(b);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)b;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;

	size_t n;
	char *cp;

	(void)ino;
	if (off < 0 || (size_t)off >= b->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* Replied from a copy: once the kernel has taken the reply, the
	 * reader may close the directory and RELEASEDIR free b on another
	 * thread before this thread's writev has returned (TSan saw it
	 * free the buffer the writev was still said to be reading). */
	n = b->size - (size_t)off < size ? b->size - (size_t)off : size;
	if (!(cp = malloc(n))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(cp, b->p + off, n);
	fuse_reply_buf(req, cp, n);
	free(cp);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirbuf *b = (struct dirbuf *)(uintptr_t)fi->fh;

	(void)ino;
	free(b->p);
	free(b);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req);
	const wstore_manifest *man;
	wstore_file_info info;
	struct entry *e;
	struct fh *h;
	uint32_t node;
	int32_t bid = -1;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_rwlock_rdlock(&m->lock);
	if (resolve(m, ino, &e, &node) < 0 || !e) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (e->nodes[node].is_dir) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (atomic_load(&e->draining)) {
		pthread_rwlock_unlock(&m->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	entry_get(e);
	pthread_rwlock_unlock(&m->lock);
	if ((rc = lease_open(m, e)) < 0) {
		entry_put(e);
		fuse_reply_err(req, -rc);
		return;
	}
	man = wstore_checkpoint_manifest(e->ck);
	h = calloc(1, sizeof(*h));
	rc = h ? wstore_manifest_file(&info, man, (size_t)e->nodes[node].file)
	       : -ENOMEM;
	if (rc == 0)
		rc = wstore_file_open(&h->f, e->ck, info.path);
	if (rc < 0) {
		mlog(m, LOG_ERR, "cannot open a file of '%s': %s", e->id,
		     wstore_last_error());
		free(h);
		lease_close(e);
		entry_put(e);
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	h->e = e;
	h->fidx = e->nodes[node].file;
	h->size = info.size;
	h->cs = info.chunk_size ? info.chunk_size : info.size;
	if (!h->cs)
		h->cs = 1;
	h->node = node;
	atomic_init(&h->last_ci, -1);
	atomic_init(&h->refs, 1);
	h->passthrough = pt_open(m, h, &bid);
	pthread_mutex_lock(&m->fhlock);
	h->next = m->fhs;
	if (m->fhs)
		m->fhs->prev = h;
	m->fhs = h;
	pthread_mutex_unlock(&m->fhlock);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = m->dio && !h->passthrough;
	fi->keep_cache = !m->dio && !h->passthrough;
	fi->noflush = 1;
	kio_reply_open(req, fi, h->passthrough ? bid : -1);
}

static void fh_put(struct wmount *m, struct fh *h)
{
	if (atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	pthread_mutex_lock(&m->fhlock);
	if (h->prev)
		h->prev->next = h->next;
	else
		m->fhs = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&m->fhlock);
	if (h->passthrough)
		pt_close(m, h);
	if (h->wfd >= 0)
		close(h->wfd);
	wstore_file_free(h->f);
	lease_close(h->e);
	entry_put(h->e);
	free(h);
}

/* The handles still open once the session is destroyed (no request runs
 * any more): the kernel will not release them, so they are closed here
 * with their leases and entry references. */
void fh_close_all(struct wmount *m)
{
	while (m->fhs) {
		struct fh *h = m->fhs;

		atomic_store(&h->refs, 1);
		h->passthrough = 0; /* its backing id went with the session */
		fh_put(m, h);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	fh_put(fuse_req_userdata(req), (struct fh *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Queue read-ahead when a read moves on to the next chunk. */
static void maybe_readahead(struct wmount *m, struct fh *h, uint64_t ci)
{
	long long last = atomic_exchange(&h->last_ci, (long long)ci);
	uint64_t nchunks = (h->size + h->cs - 1) / h->cs, depth;

	if (last == (long long)ci || (last != -1 && (uint64_t)last + 1 != ci))
		return;
	depth = ra_depth(m, h->cs);
	for (uint64_t k = 1; k <= depth && ci + k < nchunks; k++)
		ra_queue(m, h->e, h->fidx, ci + k);
}

/*
 * A zero-copy reply: the pieces (iov lengths, coff offsets in their
 * chunks) as buffers of the pinned slots' chunk fds, for fuse_reply_data,
 * which splices them when the kernel allows.  -EIO if a chunk file's
 * length changed since it was opened.
 */
static int fd_bufvec(struct fuse_bufvec **out, struct wmount *m,
		     struct slot **s, const struct iovec *iov,
		     const uint64_t *coff, int n)
{
	struct fuse_bufvec *bv;
	struct fuse_buf *b;

	*out = NULL;
	bv = calloc(1, sizeof(*bv) + (size_t)(n > 1 ? n - 1 : 0) * sizeof(*b));
	if (!bv)
		return -ENOMEM;
	bv->count = (size_t)n;
	b = bv->buf;
	for (int i = 0; i < n; i++) {
		struct stat st;

		/* files are replaced, never rewritten: a changed length
		 * means someone else truncated it since it was opened, and
		 * a short splice would reach the reader as zero padding */
		if (fstat(s[i]->fd, &st) < 0 ||
		    (uint64_t)st.st_size != s[i]->fdsize) {
			mlog(m, LOG_ERR,
			     "chunk %" PRIu64 " of a file of '%s' changed "
			     "size in the store while open",
			     s[i]->ci, s[i]->e->id);
			free(bv);
			return -EIO;
		}
		b[i].size = iov[i].iov_len;
		b[i].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		b[i].fd = s[i]->fd;
		b[i].pos = (off_t)(s[i]->fdoff + coff[i]);
	}
	*out = bv;
	return 0;
}

/* The errno a failed read answers with. */
static int read_errno(int err)
{
	return err == -ENOENT ? ENOENT : err == -ENOMEM ? ENOMEM : EIO;
}

/* Chunk ci of h: its first byte and its length. */
static void chunk_span(const struct fh *h, uint64_t ci, uint64_t *start,
		       uint64_t *len)
{
	*start = ci * h->cs;
	*len = h->size - *start < h->cs ? h->size - *start : h->cs;
}

/*
 * A read of [pos, end) that spans at most MAX_PIECES chunks: the chunks
 * stay pinned while the reply is written straight from them (writev of
 * their buffers, or their fds spliced on zero-copy mounts).
 */
static void read_pieces(fuse_req_t req, struct fh *h, uint64_t pos,
			uint64_t end)
{
	struct wmount *m = fuse_req_userdata(req);
	struct slot *s[MAX_PIECES];
	struct iovec iov[MAX_PIECES];
	struct fuse_bufvec *bv = NULL;
	uint64_t coff[MAX_PIECES];
	uint64_t ci0 = pos / h->cs;
	int n = 0, err = 0;

	while (pos < end && n < MAX_PIECES) {
		uint64_t ci = pos / h->cs, cstart, clen, take;

		chunk_span(h, ci, &cstart, &clen);
		take = (end < cstart + clen ? end : cstart + clen) - pos;
		s[n] = cache_get(m, h->e, h->fidx, h->f, h->cs, ci,
				 (size_t)clen, &err);
		if (!s[n])
			break;
		coff[n] = pos - cstart;
		iov[n].iov_base = s[n]->buf ? s[n]->buf + coff[n] : NULL;
		iov[n].iov_len = (size_t)take;
		n++;
		pos += take;
	}
	if (!err && atomic_load(&h->e->dead))
		err = -EIO;
	if (!err)
		maybe_readahead(m, h, ci0 + (uint64_t)(n ? n - 1 : 0));
	if (!err && m->c.zc)
		err = fd_bufvec(&bv, m, s, iov, coff, n);
	if (err)
		fuse_reply_err(req, read_errno(err));
	else if (bv)
		fuse_reply_data(req, bv, 0);
	else
		fuse_reply_iov(req, iov, n);
	free(bv);
	for (int i = 0; i < n; i++)
		cache_done(&m->c, s[i], err ? 0 : iov[i].iov_len);
}

/*
 * A read of [pos, end) that spans more chunks than a reply is written
 * from in place (small chunks): read whole with wstore_file_pread into one
 * buffer, past the chunk cache, then the checkpoint checked once as after
 * a fetch (checking after every small chunk would re-read the manifest
 * hundreds of times per request), and answered in full.  A short answer
 * is not an option: the kernel takes it for the end of the file (a short
 * read through direct I/O, zeros and SIGBUS through the page cache and
 * mmap).
 */
static void read_gather(fuse_req_t req, struct fh *h, uint64_t pos,
			uint64_t end)
{
	struct wmount *m = fuse_req_userdata(req);
	size_t total = (size_t)(end - pos), n = 0;
	char *buf = malloc(total);
	uint64_t t0 = wclock_mono_ms();
	int rc = buf ? wstore_file_pread(h->f, buf, total, pos, &n) : -ENOMEM;

	if (rc == 0 && n != total)
		rc = WSTORE_ECORRUPT;
	if (rc < 0)
		rc = entry_read_failed(m, h->e, "read", wstore_file_path(h->f),
				       rc);
	if (rc == 0)
		rc = entry_validate(m, h->e, t0);
	if (rc == 0 && atomic_load(&h->e->dead))
		rc = -EIO;
	if (rc < 0)
		fuse_reply_err(req, read_errno(rc));
	else
		fuse_reply_buf(req, buf, total);
	free(buf);
}

/*
 * A read of [pos, end) of a file the store keeps whole (h->wfd): spliced
 * from that one file, past the chunk cache (the kernel's page cache of
 * the file and its read-ahead do that job).  The fd was checked at open
 * and holds that import's bytes for good; each read confirms the
 * checkpoint is still that import (one fstat of its manifest while it
 * is), so reads fail once it is deleted or replaced, as a fetch's do.
 */
static void read_whole(fuse_req_t req, struct fh *h, uint64_t pos, uint64_t end)
{
	struct wmount *m = fuse_req_userdata(req);
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)(end - pos));
	struct stat st;
	int rc = entry_validate(m, h->e, wclock_mono_ms());

	if (rc < 0) {
		fuse_reply_err(req, read_errno(rc));
		return;
	}

	/* files are replaced, never rewritten: see fd_bufvec */
	if (fstat(h->wfd, &st) < 0 || (uint64_t)st.st_size != h->size) {
		mlog(m, LOG_ERR,
		     "a file of '%s' changed size in the store while open",
		     h->e->id);
		fuse_reply_err(req, EIO);
		return;
	}
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = h->wfd;
	bv.buf[0].pos = (off_t)pos;
	fuse_reply_data(req, &bv, 0);
}

static void read_fh(fuse_req_t req, struct fh *h, size_t size, off_t off)
{
	uint64_t pos = (uint64_t)off, end;

	if (atomic_load(&h->e->dead)) {
		fuse_reply_err(req, EIO);
		return;
	}
	if (off < 0 || pos >= h->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	end = h->size - pos < size ? h->size : pos + size;
	if (h->wfd >= 0)
		read_whole(req, h, pos, end);
	else if ((end - 1) / h->cs - pos / h->cs < MAX_PIECES)
		read_pieces(req, h, pos, end);
	else
		read_gather(req, h, pos, end);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct wmount *m = fuse_req_userdata(req); /* req ends with its reply */
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;

	(void)ino;
	atomic_fetch_add(&h->refs, 1);
	read_fh(req, h, size, off);
	fh_put(m, h);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct wmount *m = fuse_req_userdata(req);
	struct statvfs sv;
	uint64_t bytes = 0, files = 0;

	(void)ino;
	pthread_rwlock_rdlock(&m->lock);
	for (size_t i = 0; i < m->nlive; i++) {
		const wstore_manifest *man =
			wstore_checkpoint_manifest(m->live[i]->ck);

		bytes += wstore_manifest_total_size(man);
		files += m->live[i]->nnodes;
	}
	pthread_rwlock_unlock(&m->lock);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
	sv.f_files = (fsfilcnt_t)files;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops wmount_ops = {
	.init = kio_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
};
