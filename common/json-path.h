/* SPDX-License-Identifier: MIT */
/* Where in a JSON text a byte is: the path of the member being read there, so that an error of
 * the JSON parser (a byte that is not UTF-8, a lone surrogate) names the field it is in, as the
 * decoders' own errors do. */
#pragma once

#include <stddef.h>

#define JSON_PATH_MAX 192

/* The path ("intervals[0].traces[0].analysis.culprit.name", "" at the top) of the value that
 * holds byte position of text (len bytes), read as far as position; a member name being read
 * there shows as "{name}" after its object's path.  The text before position need not be
 * whole, only well formed as far as it goes (what a parser read before its error).  Returns
 * path. */
char *json_path_at(const char *text, size_t len, size_t position, char path[static JSON_PATH_MAX]);
