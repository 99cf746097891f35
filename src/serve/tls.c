/*
 * tls.c - HTTPS for `wstore serve`: the certificate and key files are read
 * and checked once, before the server listens, so that each thing an
 * operator can get wrong is one line naming the file and the problem
 * rather than a handshake failure on the first client.
 *
 * libmicrohttpd does the TLS (with GnuTLS, which Debian's libmicrohttpd12
 * is built with); it takes the PEM texts from memory
 * (MHD_OPTION_HTTPS_MEM_CERT / _MEM_KEY).  The checks use GnuTLS itself,
 * the library libmicrohttpd hands them to: the certificate file must hold
 * PEM certificates (the server's first, then any intermediates), and the
 * key must load together with them (GNUTLS_E_CERTIFICATE_KEY_MISMATCH
 * when it belongs to another certificate).  An expired certificate, or
 * one not yet valid, is served with a warning: clients refuse it, which
 * the operator learns from the warning rather than from them.
 *
 * The files are read once: a renewed certificate takes a restart (the
 * drain on SIGTERM lets downloads in flight finish; behind a load
 * balancer, one node at a time).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "../common/frontend.h"
#include "http.h"

/* A PEM file larger than this is not a certificate chain or a key. */
#define PEM_MAX (1u << 20)

static int tls_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int tls_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	wfront_verr(fmt, ap);
	va_end(ap);
	return -1;
}

/* The whole of file what ("--tls-cert", ...) as a NUL-terminated string. */
static char *read_text(const char *path, const char *what)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;
	int e;

	if (!f) {
		tls_err("%s: cannot read '%s': %s", what, path,
			strerror(errno));
		return NULL;
	}
	if (!(buf = malloc(PEM_MAX + 1))) {
		fclose(f);
		tls_err("%s: out of memory", what);
		return NULL;
	}
	n = fread(buf, 1, PEM_MAX + 1, f);
	e = ferror(f) ? errno : 0;
	fclose(f);
	if (e || n > PEM_MAX || n == 0) {
		if (e)
			tls_err("%s: cannot read '%s': %s", what, path,
				strerror(e));
		else
			tls_err("%s: '%s' is %s", what, path,
				n ? "larger than 1 MiB: not a PEM file"
				  : "empty");
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	if (strlen(buf) != n) {
		tls_err("%s: '%s' is not a PEM file (it holds NUL bytes)", what,
			path);
		free(buf);
		return NULL;
	}
	return buf;
}

static void show_time(char *out, size_t cap, time_t t)
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, cap, "%lld", (long long)t);
}

/* The certificates of the chain in t->cert: at least one, PEM. */
static int check_cert(const struct wserve_tls *t)
{
	gnutls_datum_t d = { (unsigned char *)t->cert,
			     (unsigned)strlen(t->cert) };
	gnutls_x509_crt_t *list = NULL;
	unsigned n = 0, i;
	time_t now = time(NULL), from, until;
	char when[64];
	int rc;

	rc = gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM,
					  0);
	if (rc == GNUTLS_E_NO_CERTIFICATE_FOUND || (rc >= 0 && n == 0))
		return tls_err("--tls-cert: '%s' holds no PEM certificate "
			       "(no BEGIN CERTIFICATE block)",
			       t->cert_file);
	if (rc < 0)
		return tls_err("--tls-cert: '%s' holds no valid PEM "
			       "certificate: %s",
			       t->cert_file, gnutls_strerror(rc));
	from = gnutls_x509_crt_get_activation_time(list[0]);
	until = gnutls_x509_crt_get_expiration_time(list[0]);
	if (until != (time_t)-1 && until < now) {
		show_time(when, sizeof(when), until);
		fprintf(stderr,
			"wstore serve: warning: the certificate in '%s' "
			"expired on %s: clients will refuse it\n",
			t->cert_file, when);
	} else if (from != (time_t)-1 && from > now) {
		show_time(when, sizeof(when), from);
		fprintf(stderr,
			"wstore serve: warning: the certificate in '%s' is "
			"not valid before %s: clients will refuse it\n",
			t->cert_file, when);
	}
	for (i = 0; i < n; i++)
		gnutls_x509_crt_deinit(list[i]);
	gnutls_free(list);
	return 0;
}

/* The key in t->key: readable (decrypted with the password if any) and
 * the one of the first certificate. */
static int check_key(const struct wserve_tls *t)
{
	gnutls_certificate_credentials_t cred;
	gnutls_datum_t c = { (unsigned char *)t->cert,
			     (unsigned)strlen(t->cert) },
		       k = { (unsigned char *)t->key,
			     (unsigned)strlen(t->key) };
	int rc;

	if (gnutls_certificate_allocate_credentials(&cred) < 0)
		return tls_err("--tls-key: out of memory");
	rc = gnutls_certificate_set_x509_key_mem2(
		cred, &c, &k, GNUTLS_X509_FMT_PEM, t->password, 0);
	gnutls_certificate_free_credentials(cred);
	if (rc >= 0)
		return 0;
	if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
		return tls_err("--tls-key: the key in '%s' does not match the "
			       "certificate in '%s'",
			       t->key_file, t->cert_file);
	if (rc == GNUTLS_E_DECRYPTION_FAILED && !t->password)
		return tls_err("--tls-key: cannot use the key in '%s': it is "
			       "encrypted (give --tls-key-password-file)",
			       t->key_file);
	if (rc == GNUTLS_E_DECRYPTION_FAILED)
		return tls_err("--tls-key: cannot decrypt the key in '%s' "
			       "with the password given (wrong password?)",
			       t->key_file);
	if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE ||
	    rc == GNUTLS_E_BASE64_DECODING_ERROR)
		return tls_err("--tls-key: '%s' holds no PEM private key (no "
			       "BEGIN ... PRIVATE KEY block)",
			       t->key_file);
	return tls_err("--tls-key: cannot use the key in '%s': %s", t->key_file,
		       gnutls_strerror(rc));
}

/* The password: the file's first line. */
static int read_password(struct wserve_tls *t, const char *path)
{
	size_t n;

	if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_KEY_PASSWORD) != MHD_YES)
		return tls_err("--tls-key-password-file: this libmicrohttpd "
			       "cannot decrypt keys: give an unencrypted key");
	if (!(t->password = read_text(path, "--tls-key-password-file")))
		return -1;
	n = strcspn(t->password, "\r\n");
	t->password[n] = '\0';
	if (!n)
		return tls_err("--tls-key-password-file: the first line of "
			       "'%s' is empty",
			       path);
	return 0;
}

int wtls_load(struct wserve_tls *t, const struct wserve_options *o)
{
	memset(t, 0, sizeof(*t));
	if (!o->tls_cert)
		return 0;
	t->cert_file = o->tls_cert;
	t->key_file = o->tls_key;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return tls_err("--tls-cert: this libmicrohttpd was built "
			       "without TLS support (GnuTLS): serve HTTPS "
			       "through a proxy, or install a libmicrohttpd "
			       "with TLS");
	if (!(t->cert = read_text(o->tls_cert, "--tls-cert")) ||
	    !(t->key = read_text(o->tls_key, "--tls-key")) ||
	    (o->tls_key_password_file &&
	     read_password(t, o->tls_key_password_file)) ||
	    check_cert(t) || check_key(t)) {
		wtls_free(t);
		return -1;
	}
	t->on = 1;
	return 0;
}

void wtls_free(struct wserve_tls *t)
{
	free(t->cert);
	if (t->key)
		/* the key's bytes do not outlive their use */
		gnutls_memset(t->key, 0, strlen(t->key));
	free(t->key);
	if (t->password)
		gnutls_memset(t->password, 0, strlen(t->password));
	free(t->password);
	memset(t, 0, sizeof(*t));
}
