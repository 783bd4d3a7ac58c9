/* SPDX-License-Identifier: MIT */
/* The request target as the client sent it, before libmicrohttpd decodes it: encoded control
 * characters refused, and a path for routing in which a '/' inside a segment stays encoded. */
#pragma once

#include <stddef.h>

#include "summary.h"

#define FARM_PATH_ERROR_MAX 256

/* 0 when target (path and query) holds no control character, raw or percent-encoded (%00 would
 * cut a value short once decoded), no raw space (libmicrohttpd takes one into the target where
 * another parser ends the target), every '%' starts an escape, and the path and each part of
 * the query decode to UTF-8 text (text_ok()); -EINVAL with err naming the part otherwise:
 * "path", the query parameter whose value holds the fault, or "query".  -ENOMEM. */
int farm_target_check(const char *target, char err[static FARM_PATH_ERROR_MAX]);

/* The path of target for routing (allocated): escapes of unreserved characters decoded, every
 * other escape kept (uppercase), so that "/api/v1/kernels/5.10%2Frt1/verdict" keeps the release's
 * '/' inside its segment and the path can be written into links as it is.  -EINVAL for a target
 * that farm_target_check refuses. */
int farm_route_path(const char *target, char **ret);

/* Decodes one segment of a routing path (len bytes) into buf: 0, -ENOBUFS when it does not fit
 * (with its NUL), -EINVAL for a bad escape or a decoded NUL. */
int farm_segment_decode(const char *seg, size_t len, char *buf, size_t size);

/* A path segment that names a release, decoded into ret: 0, -ENOBUFS when it is longer than
 * any release name (SUMMARY_MAX_RELEASE, the schema's limit: every route takes every name the
 * schema takes), -EINVAL for a bad escape.  An empty segment is -ENOBUFS too. */
int farm_release_segment(const char *seg, size_t len, char ret[static SUMMARY_MAX_RELEASE + 1]);

/* Writes s percent-encoded as one path segment (every byte but unreserved ones): 0, or
 * -ENOBUFS. */
int farm_segment_encode(const char *s, char *buf, size_t size);
