/*
 * s3_xml.h - just enough XML to read S3's answers: find an element and
 * decode the entities of its text.
 *
 * Why a search is enough: S3 escapes '<' and '&' in text, so a raw '<' only
 * ever starts markup and a search for "<Key>" cannot match inside a value (a
 * key named "<Key>" arrives as "&lt;Key&gt;"). S3's answers nest no element
 * inside one of the same name, use no CDATA and no namespace prefixes.
 *
 * Nothing here allocates: spans point into the caller's document, and
 * decoded text goes into the caller's fixed buffer.
 */
#ifndef SNAPFS_S3_XML_H
#define SNAPFS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A piece of a document: not NUL-terminated. */
struct xml_span {
	const char *p;
	size_t len;
};

/*
 * Find the first <@tag>...</@tag> (or <@tag/>, or <@tag attr="...">) in
 * @doc. On success @content is what lies between the tags and @doc starts
 * after the closing tag, so that repeated calls walk repeated elements.
 * false when there is none, or when it is not closed (a cut answer).
 */
bool xml_next(struct xml_span *doc, const char *tag, struct xml_span *content);

/*
 * The text of the first element @tag in @doc, entities decoded, into @out
 * (@cap bytes, NUL included). Returns its length, -ENOENT when the element
 * is missing, -ENAMETOOLONG when it does not fit, -EINVAL on a bad entity.
 */
int xml_text(struct xml_span doc, const char *tag, char *out, size_t cap);

/*
 * Decode the entities of @in into @out (@cap bytes, NUL included); errors as
 * xml_text(). A NUL in @in, raw or as an entity, is -EINVAL: the text
 * returned is a C string of the length returned.
 */
int xml_decode(struct xml_span in, char *out, size_t cap);

/* The first element @tag as a non-negative decimal number; -ENOENT or -EINVAL. */
int xml_int64(struct xml_span doc, const char *tag, int64_t *out);

#endif
