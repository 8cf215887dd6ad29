/* kn_cpu_str.h - helpers of the CPU string kernels (kn_cpu_str.c,
 * kn_cpu_regex.c, kn_cpu_unique.c): string outputs whose bytes are checked
 * against the request's budget before they are allocated.
 *
 * The executor charges no string output to the request's budget (their size
 * is only known once computed), so a kernel whose output can grow past its
 * inputs (a join broadcast against a long scalar, a substring of a
 * broadcast, a regex replacement) checks here first: kn__str_output checks
 * the rt_str array, kn__str_own the bytes, each with the message of the
 * budget naming the node. Internal to kernels/cpu.
 */
#ifndef KN_CPU_STR_H
#define KN_CPU_STR_H

#include <stdint.h>

#include "kn_backend.h"

/* MS_EINVAL naming the node unless t is a DT_STRING tensor; `what` names it
 * ("input", "sep"). */
ms_status kn__need_str(const kn_node *n, const rt_tensor *t, const char *what);

/* New DT_STRING output `idx` of `shape` (all elements empty), after checking
 * its rt_str array against ctx's budget. */
ms_status kn__str_output(kn_ctx *ctx, const kn_node *n, int idx, const rt_shape *shape,
                         rt_tensor **out);

/* Gives string tensor t bytes of its own: each element's len is its final
 * length; an element whose data is non-NULL is copied from there, one whose
 * data is NULL gets room the caller then fills (data points at it). The sum
 * of the lengths is checked against ctx's budget before the one allocation,
 * which becomes t->strbuf. */
ms_status kn__str_own(kn_ctx *ctx, const kn_node *n, rt_tensor *t);

/* Temporary memory charged to ctx's budget: kn__tmp_take allocates `bytes`
 * (at least 1) after taking them from the budget; kn__tmp_give frees and
 * gives them back. `what` names the temporary in the refusal. */
ms_status kn__tmp_take(kn_ctx *ctx, const kn_node *n, uint64_t bytes, const char *what, void **p);
void kn__tmp_give(kn_ctx *ctx, uint64_t bytes, void *p);

#endif /* KN_CPU_STR_H */
