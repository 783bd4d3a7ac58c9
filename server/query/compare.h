/* SPDX-License-Identifier: MIT */
/* GET /api/v1/kernels/{release}/compare (query_compare() in query-internal.h answers it; the
 * comparison itself is store/comparison.h's). */
#pragma once

#include "comparison.h"
