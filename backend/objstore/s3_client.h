/*
 * s3_client.h - signed HTTP requests to one S3 bucket, the layer under
 * objstore_s3.c: configuration from the environment, a pool of libcurl
 * handles, SigV4 signing by libcurl, retries, and S3's errors as sentences.
 *
 * Configuration, read once at open, as the AWS tools read it:
 *   AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL  http(s)://host[:port]; path-style
 *       addressing (ENDPOINT/bucket/key). Unset: https://s3.REGION.amazonaws.com
 *       with virtual-hosted addressing (path-style for bucket names with dots).
 *   AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1.
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (both required), AWS_SESSION_TOKEN.
 *
 * Signing: libcurl's CURLOPT_AWS_SIGV4 ("aws:amz:REGION:s3"). libcurl 7.88
 * hashes only POSTFIELDS and signs the query as given, so every request
 * carries its own x-amz-content-sha256 (the hex SHA-256 of its body) and
 * s3_request() sorts and percent-encodes the query (RFC 3986, upper-case hex).
 *
 * Retries: a request is tried up to S3_TRIES times while it fails with a 5xx
 * answer (but 501), a timeout, a refused or broken connection; the waits
 * double from S3_BACKOFF_MS up to S3_BACKOFF_MAX_MS, each a random time in
 * [d/2, d]. A 4xx answer is final. A thread whose cancel token
 * (lib/cancel.h) says to give up has its request ended within about a
 * second and not tried again.
 *
 * Secrets: the secret key and the session token go to libcurl only. No URL,
 * log line or error message holds them; s3_client_url() is safe to show.
 *
 * Thread-safety: every function may be called from any thread at once (each
 * request borrows its own handle from the pool; idle handles keep their
 * connections open for the next request).
 */
#ifndef SNAPFS_S3_CLIENT_H
#define SNAPFS_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/strbuf.h"
#include "lib/util.h"

#define S3_TRIES 5
#define S3_BACKOFF_MS 100
#define S3_BACKOFF_MAX_MS 3000
/* S3's own limit on key length, bytes. */
#define S3_KEY_MAX 1024
/* Longest prefix in s3://bucket/prefix. */
#define S3_PREFIX_MAX 256
#define S3_ETAG_MAX 128
#define S3_CODE_MAX 64

struct s3_client;

/* Parse s3://bucket[/prefix] and the environment. Contacts nothing. */
int s3_client_open(const char *url, struct s3_client **out, struct err *e);
void s3_client_close(struct s3_client *c);

/* "s3://bucket/prefix at ENDPOINT": what users are shown. */
const char *s3_client_url(const struct s3_client *c);
/* The key prefix every object key gets: "" or "prefix/". */
const char *s3_client_prefix(const struct s3_client *c);

/* One query parameter; @value NULL sends "name=". */
struct s3_param {
	const char *name;
	const char *value;
};

/*
 * One request. The caller fills the first block and at most one answer
 * sink; s3_request() fills the results. The body is a buffer (@body) or
 * @body_len bytes of the file @body_fd from @body_off (read with pread, so
 * one fd may serve several requests at once).
 */
struct s3_req {
	const char *what;   /* for messages: "get", "upload part 3 of"... */
	const char *method; /* GET, PUT, POST, DELETE */
	const char *key;    /* the full key in the bucket; NULL for the bucket */
	const struct s3_param *params;
	size_t nparams;
	const char *range; /* a Range header value, or NULL */

	const char *body;
	int body_fd; /* -1 unless the body is a file */
	int64_t body_off;
	int64_t body_len;

	struct strbuf *out; /* a 2xx answer's body, up to the strbuf's limit */
	int out_fd;	    /* or written to this file (truncated at each try); -1: not */
	char *out_buf;	    /* or into this buffer of @out_cap bytes */
	size_t out_cap;
	bool xml_answer; /* S3 may answer 200 with an <Error> body (CompleteMultipartUpload) */

	long status;		/* the last HTTP status, 0 without an answer */
	int64_t out_len;	/* bytes of the answer's body delivered */
	char etag[S3_ETAG_MAX]; /* the ETag header, quotes included */
	char code[S3_CODE_MAX]; /* S3's error code of a failed request, or "" */
};

/* A request with no parameters, no body and no sink, for the caller to add to. */
static inline struct s3_req s3_req_make(const char *what, const char *method, const char *key)
{
	return (struct s3_req){
	    .what = what, .method = method, .key = key, .body_fd = -1, .out_fd = -1};
}

/*
 * Run @r, retrying as above. 0 for a 2xx answer. -ENOENT for a 404 whose
 * code is NoSuchKey (or a 404 without a body); -EFBIG when the answer did
 * not fit its sink; -EIO for anything else. Every failure fills @e with a
 * sentence naming the request, the object and the reason: S3's code and
 * message, or "connection refused to HOST:PORT".
 */
int s3_request(struct s3_client *c, struct s3_req *r, struct err *e);

#endif
