/*
 * s3_internal.h - what s3_client.c (configuration), s3_sign.c (what a
 * request sends and signs) and s3_request.c (the handle pool, one try,
 * retries, errors) share. Not for other modules: objstore_s3.c uses
 * s3_client.h.
 *
 * struct s3_client is written once, by s3_client_open(), and read by every
 * thread after; only the pool of idle handles changes, under c->lock.
 */
#ifndef SNAPFS_S3_INTERNAL_H
#define SNAPFS_S3_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>

#include "backend/objstore/objstore.h"
#include "backend/objstore/s3_client.h"

/* Idle handles kept for reuse (each keeps its connections). */
#define POOL_MAX 16
#define BUCKET_MAX 63
#define REGION_MAX 32
#define AUTHORITY_MAX 200
#define ACCESS_KEY_MAX 128
#define SECRET_MAX 256
/* Session tokens run to about 2 KiB; headers in total stay well under libcurl's limits. */
#define S3_SESSION_TOKEN_MAX 4096

struct s3_client {
	char bucket[BUCKET_MAX + 1];
	char prefix[S3_PREFIX_MAX + 2]; /* "" or "prefix/" */
	char endpoint[AUTHORITY_MAX + 16];
	char base[2 * AUTHORITY_MAX]; /* the URL of the bucket, no trailing '/' */
	bool path_style;
	char hostport[AUTHORITY_MAX + 8]; /* for "connection refused to HOST:PORT" */
	char sigv4[REGION_MAX + 16];
	char access_key[ACCESS_KEY_MAX + 1];
	char secret[SECRET_MAX + 1];
	char token_header[S3_SESSION_TOKEN_MAX + 32]; /* "x-amz-security-token: ..." or "" */
	char url[1024];
	pthread_mutex_t lock;
	CURL *idle[POOL_MAX];
	size_t nidle;
};

/* s3_sign.c: the URL of @r, its query sorted and encoded as it is signed. */
int s3_build_url(struct s3_client *c, const struct s3_req *r, struct strbuf *url);
/* s3_sign.c: @r's headers, each signed, x-amz-content-sha256 first; -errno. */
int s3_build_headers(struct s3_client *c, const struct s3_req *r, struct curl_slist **list);

#endif
