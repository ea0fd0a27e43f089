/*
 * json.h - the cJSON helpers the views and codecs share: the values the
 * tree's JSON files write for "nothing" (null, not "" or 0), and the text
 * of a view as a file holds it.
 *
 * Ownership: each json_*_or_null() returns a new item the caller owns (or
 * hands to an object); json_print() takes @obj and frees it.
 */
#ifndef SNAPFS_JSON_H
#define SNAPFS_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "lib/strbuf.h"
#include "lib/util.h"

void json_deletep(cJSON **j);
#define _cleanup_json_ _cleanup_(json_deletep)

/* A string, or null for ""; NULL without memory. */
cJSON *json_text_or_null(const char *s);
/* An RFC 3339 time (format_time()), or null for 0; NULL without memory. */
cJSON *json_time_or_null(int64_t ms);
/* Add @item (taken; NULL: out of memory) to @obj as @key: false, @item freed, if it fails. */
bool json_add(cJSON *obj, const char *key, cJSON *item);
/* Append @obj's indented text and a newline to @out, and free @obj; NULL: -ENOMEM. */
int json_print(struct strbuf *out, cJSON *obj);

#endif
